// Unit tests for the importer's compile-time evaluation of ONNX shape
// computations (lib/Importer/ConstantEvaluator.h).

#include "ConstantEvaluator.h"

#include <gtest/gtest.h>

using namespace parallax::detail;
using onnx::TensorProto;

namespace {

ConstTensor ints(std::vector<int64_t> shape, std::vector<double> values) {
  return ConstTensor{TensorProto::INT64, std::move(shape), std::move(values)};
}

onnx::NodeProto node(const std::string &op,
                     std::vector<std::pair<std::string, int64_t>> attrs = {}) {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.add_output("out");
  for (auto &[name, value] : attrs) {
    auto *a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
  }
  return n;
}

ConstTensor eval(const onnx::NodeProto &n,
                 std::vector<std::optional<ConstTensor>> inputs) {
  auto out = evaluateNode(n, inputs);
  EXPECT_TRUE(static_cast<bool>(out)) << llvm::toString(out.takeError());
  return out->at(0);
}

} // namespace

TEST(ConstantEvaluator, ShapeGatherUnsqueezeConcatChain) {
  // The chain PyTorch emits for x.view(batch, -1): Shape(x)[0], unsqueezed,
  // concatenated with [-1].
  ConstTensor shape = ints({3}, {8, 20, 256});
  ConstTensor batch = eval(node("Gather", {{"axis", 0}}), {shape, ints({}, {0})});
  EXPECT_EQ(batch.shape, std::vector<int64_t>{});
  EXPECT_EQ(batch.values, std::vector<double>{8});
  ConstTensor unsq = eval(node("Unsqueeze"), {batch, ints({1}, {0})});
  EXPECT_EQ(unsq.shape, std::vector<int64_t>{1});
  ConstTensor cat = eval(node("Concat", {{"axis", 0}}), {unsq, ints({1}, {-1})});
  EXPECT_EQ(cat.values, (std::vector<double>{8, -1}));
}

TEST(ConstantEvaluator, RangeAndCast) {
  ConstTensor r = eval(node("Range"), {ints({}, {0}), ints({}, {5}), ints({}, {2})});
  EXPECT_EQ(r.values, (std::vector<double>{0, 2, 4}));
  onnx::NodeProto cast = node("Cast", {{"to", TensorProto::FLOAT}});
  ConstTensor f = eval(cast, {ints({2}, {3, 4})});
  EXPECT_EQ(f.dtype, TensorProto::FLOAT);
  EXPECT_EQ(f.values, (std::vector<double>{3, 4}));
}

TEST(ConstantEvaluator, SliceClampsAndSteps) {
  ConstTensor x = ints({6}, {0, 1, 2, 3, 4, 5});
  // x[1:INT64_MAX:2]
  ConstTensor s = eval(node("Slice"), {x, ints({1}, {1}), ints({1}, {9.0e18}),
                                       ints({1}, {0}), ints({1}, {2})});
  EXPECT_EQ(s.values, (std::vector<double>{1, 3, 5}));
  // x[-1::-2]  (ends far below the start)
  ConstTensor r = eval(node("Slice"), {x, ints({1}, {-1}), ints({1}, {-9.0e18}),
                                       ints({1}, {0}), ints({1}, {-2})});
  EXPECT_EQ(r.values, (std::vector<double>{5, 3, 1}));
}

TEST(ConstantEvaluator, ReshapeCopiesZeroAndInfersMinusOne) {
  ConstTensor x = ints({2, 3}, {0, 1, 2, 3, 4, 5});
  ConstTensor r = eval(node("Reshape"), {x, ints({2}, {0, -1})});
  EXPECT_EQ(r.shape, (std::vector<int64_t>{2, 3}));
  ConstTensor flat = eval(node("Reshape"), {x, ints({1}, {-1})});
  EXPECT_EQ(flat.shape, std::vector<int64_t>{6});
}

TEST(ConstantEvaluator, BroadcastingArithmeticAndCompare) {
  ConstTensor a = ints({2, 1}, {1, 2});
  ConstTensor b = ints({3}, {10, 20, 30});
  ConstTensor sum = eval(node("Add"), {a, b});
  EXPECT_EQ(sum.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(sum.values, (std::vector<double>{11, 21, 31, 12, 22, 32}));
  ConstTensor lt = eval(node("Less"), {a, ints({}, {2})});
  EXPECT_EQ(lt.dtype, TensorProto::BOOL);
  EXPECT_EQ(lt.values, (std::vector<double>{1, 0}));
  // Integer division truncates toward zero, as in C and ONNX.
  ConstTensor q = eval(node("Div"), {ints({2}, {7, -7}), ints({}, {2})});
  EXPECT_EQ(q.values, (std::vector<double>{3, -3}));
}

TEST(ConstantEvaluator, ErrorsAreReportedNotCrashed) {
  auto oob = evaluateNode(node("Gather", {{"axis", 0}}),
                          {ints({3}, {1, 2, 3}), ints({}, {7})});
  ASSERT_FALSE(static_cast<bool>(oob));
  EXPECT_NE(llvm::toString(oob.takeError()).find("out of range"),
            std::string::npos);
  auto zero = evaluateNode(node("Div"), {ints({1}, {1}), ints({1}, {0})});
  ASSERT_FALSE(static_cast<bool>(zero));
  EXPECT_NE(llvm::toString(zero.takeError()).find("division by zero"),
            std::string::npos);
}

TEST(ConstantEvaluator, ReadsRawAndTypedTensorData) {
  TensorProto t;
  t.set_data_type(TensorProto::INT64);
  t.add_dims(2);
  int64_t raw[2] = {-3, 42};
  t.set_raw_data(reinterpret_cast<const char *>(raw), sizeof(raw));
  auto v = readTensor(t);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->values, (std::vector<double>{-3, 42}));

  TensorProto f;
  f.set_data_type(TensorProto::FLOAT);
  f.add_dims(1);
  f.add_float_data(0.5f);
  EXPECT_EQ(readTensor(f)->values, std::vector<double>{0.5});

  TensorProto big;
  big.set_data_type(TensorProto::FLOAT);
  big.add_dims(kMaxFoldedElements + 1);
  EXPECT_FALSE(readTensor(big).has_value());
}

TEST(ConstantEvaluator, NumelIsShapeThenReduceProd) {
  // y.numel() in a dynamic export: ReduceProd(Shape(y)), keepdims = 0.
  ConstTensor n = eval(node("ReduceProd", {{"keepdims", 0}}), {ints({3}, {8, 20, 256})});
  EXPECT_EQ(n.shape, std::vector<int64_t>{});
  EXPECT_EQ(n.values, std::vector<double>{8 * 20 * 256});
  // Over one axis, kept: [[1, 2, 3], [4, 5, 6]] -> [[6], [120]].
  onnx::NodeProto rows = node("ReduceProd");
  auto *axes = rows.add_attribute();
  axes->set_name("axes");
  axes->set_type(onnx::AttributeProto::INTS);
  axes->add_ints(-1);
  ConstTensor p = eval(rows, {ints({2, 3}, {1, 2, 3, 4, 5, 6})});
  EXPECT_EQ(p.shape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(p.values, (std::vector<double>{6, 120}));
  // ReduceSum takes its axes as an input; no axes with noop is the input.
  ConstTensor s = eval(node("ReduceSum", {{"keepdims", 0}}),
                       {ints({2, 3}, {1, 2, 3, 4, 5, 6}), ints({1}, {0})});
  EXPECT_EQ(s.values, (std::vector<double>{5, 7, 9}));
  ConstTensor same = eval(node("ReduceSum", {{"noop_with_empty_axes", 1}}),
                          {ints({2}, {3, 4}), std::nullopt});
  EXPECT_EQ(same.values, (std::vector<double>{3, 4}));
}

TEST(ConstantEvaluator, TransposeAndTrilu) {
  // torch's reflection pads build their pads with a transpose of constants.
  ConstTensor t = eval(node("Transpose"), {ints({2, 3}, {1, 2, 3, 4, 5, 6})});
  EXPECT_EQ(t.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(t.values, (std::vector<double>{1, 4, 2, 5, 3, 6}));
  // torch.triu(x, diagonal=1) of a 3x3: the strict upper triangle.
  ConstTensor x = ints({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  ConstTensor u = eval(node("Trilu"), {x, ints({}, {1})});
  EXPECT_EQ(u.values, (std::vector<double>{0, 2, 3, 0, 0, 6, 0, 0, 0}));
  ConstTensor l = eval(node("Trilu", {{"upper", 0}}), {x, std::nullopt});
  EXPECT_EQ(l.values, (std::vector<double>{1, 0, 0, 4, 5, 0, 7, 8, 9}));
}

TEST(ConstantEvaluator, ModRoundingAndLogic) {
  ConstTensor a = ints({4}, {7, -7, 7, -7}), b = ints({4}, {3, 3, -3, -3});
  EXPECT_EQ(eval(node("Mod"), {a, b}).values, (std::vector<double>{1, 2, -2, -1}));
  EXPECT_EQ(eval(node("Mod", {{"fmod", 1}}), {a, b}).values,
            (std::vector<double>{1, -1, 1, -1}));
  ConstTensor f{TensorProto::FLOAT, {3}, {-1.5, 0.5, 2.5}};
  EXPECT_EQ(eval(node("Ceil"), {f}).values, (std::vector<double>{-1, 1, 3}));
  EXPECT_EQ(eval(node("Round"), {f}).values, (std::vector<double>{-2, 0, 2}));
  ConstTensor p{TensorProto::BOOL, {2}, {1, 0}}, q{TensorProto::BOOL, {2}, {1, 1}};
  EXPECT_EQ(eval(node("Xor"), {p, q}).values, (std::vector<double>{0, 1}));
  EXPECT_EQ(eval(node("GreaterOrEqual"), {a, b}).values, (std::vector<double>{1, 0, 1, 0}));
  EXPECT_EQ(eval(node("LessOrEqual"), {a, a}).values, (std::vector<double>{1, 1, 1, 1}));
}
