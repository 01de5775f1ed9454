// Tests of the Shape kernels: transpose, concat, expand, slice and
// slice_grad, against naive index arithmetic written here.
#include "KernelTestCases.h"

#include <numeric>

using namespace parallax::rt;
using namespace parallax::rt::test;
using namespace parallax::rt::test::cases;

namespace {

std::vector<int64_t> unravel(int64_t flat, const Shape &s) {
  std::vector<int64_t> idx(s.size());
  for (int64_t d = (int64_t)s.size() - 1; d >= 0; --d) {
    idx[d] = flat % s[d];
    flat /= s[d];
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t> &idx, const Shape &s) {
  int64_t flat = 0;
  for (size_t d = 0; d < s.size(); ++d)
    flat = flat * s[d] + idx[d];
  return flat;
}

void checkTranspose(DType t, const Shape &in, const Shape &perm, int threads = 1) {
  SCOPED_TRACE(std::string(nameOf(t)) + " " + ::testing::PrintToString(in) + " perm " +
               ::testing::PrintToString(perm));
  Shape out = transposedShape({in, perm});
  TestTensor x(t, in, distinct(t, numel(in))), y(t, out);
  ExecEnv env;
  env.threads = threads;
  runKernel("transpose", {&x}, {&y}, {{"perm", perm}}, env);
  std::vector<double> expected(numel(out));
  for (int64_t o = 0; o < numel(out); ++o) {
    std::vector<int64_t> oi = unravel(o, out), ii(in.size());
    for (size_t i = 0; i < in.size(); ++i)
      ii[perm[i]] = oi[i];
    expected[o] = x.get(ravel(ii, in));
  }
  ASSERT_EQ(y.values(), expected);
}

TEST(ShapeTranspose, AllTypesAndPaths) {
  for (DType t : kAllTypes)
    for (const TransposeCase &c : kTransposeCases)
      checkTranspose(t, c.in, c.perm);
  for (int threads : {2, 4})
    for (const auto &[t, c] : kLargeTransposeCases)
      checkTranspose(t, c.in, c.perm, threads);
}

TEST(ShapeTranspose, Errors) {
  TestTensor x(DType::F32, {2, 3}), y(DType::F32, {3, 2}), z(DType::F32, {2, 3});
  EXPECT_NE(kernelError("transpose", {&x}, {&y}).find("'perm'"), std::string::npos);
  EXPECT_NE(kernelError("transpose", {&x}, {&y}, {{"perm", {0}}}).find("entries"),
            std::string::npos);
  EXPECT_NE(kernelError("transpose", {&x}, {&y}, {{"perm", {1, 1}}}).find("not a permutation"),
            std::string::npos);
  EXPECT_NE(kernelError("transpose", {&x}, {&y}, {{"perm", {0, 2}}}).find("not a permutation"),
            std::string::npos);
  EXPECT_NE(kernelError("transpose", {&x}, {&z}, {{"perm", {1, 0}}}).find("should be [3, 2]"),
            std::string::npos);
  TestTensor yi(DType::I32, {3, 2});
  EXPECT_NE(kernelError("transpose", {&x}, {&yi}, {{"perm", {1, 0}}}).find("must be f32"),
            std::string::npos);
}

void checkConcat(DType t, const std::vector<Shape> &ins, int64_t axis, int threads = 1) {
  SCOPED_TRACE(std::string(nameOf(t)) + " axis " + std::to_string(axis));
  int64_t rank = ins[0].size();
  int64_t a = axis < 0 ? axis + rank : axis;
  Shape out = concatShape(ins, axis);
  std::vector<TestTensor> xs = concatInputs(t, ins);
  TestTensor y(t, out);
  ExecEnv env;
  env.threads = threads;
  runKernel("concat", pointersTo(xs), {&y}, {{"axis", axis}}, env);
  std::vector<double> expected(numel(out));
  for (int64_t o = 0; o < numel(out); ++o) {
    std::vector<int64_t> idx = unravel(o, out);
    size_t k = 0;
    while (idx[a] >= ins[k][a])
      idx[a] -= ins[k++][a];
    expected[o] = xs[k].get(ravel(idx, ins[k]));
  }
  ASSERT_EQ(y.values(), expected);
}

TEST(ShapeConcat, AxesAndTypes) {
  for (DType t : kAllTypes)
    for (const ConcatCase &c : kConcatCases)
      checkConcat(t, c.ins, c.axis);
  checkConcat(DType::F32, {{400, 64}, {400, 200}}, 1, 4);
}

TEST(ShapeConcat, Errors) {
  TestTensor a(DType::F32, {2, 3}), b(DType::F32, {3, 3}), y(DType::F32, {5, 3});
  EXPECT_NE(kernelError("concat", {&a, &b}, {&y}, {{"axis", 1}}).find("does not match"),
            std::string::npos);
  EXPECT_NE(kernelError("concat", {&a, &b}, {&y}, {{"axis", 2}}).find("out of range"),
            std::string::npos);
  EXPECT_NE(kernelError("concat", {&a, &b}, {&y}).find("'axis'"), std::string::npos);
  TestTensor y6(DType::F32, {6, 3});
  EXPECT_NE(kernelError("concat", {&a, &b}, {&y6}, {{"axis", 0}}).find("add up"),
            std::string::npos);
  TestTensor bi(DType::I32, {3, 3});
  EXPECT_NE(kernelError("concat", {&a, &bi}, {&y}, {{"axis", 0}}).find("must be f32"),
            std::string::npos);
}

void checkExpand(DType t, const Shape &in, const Shape &out, int threads = 1) {
  SCOPED_TRACE(std::string(nameOf(t)) + " " + ::testing::PrintToString(in) + " -> " +
               ::testing::PrintToString(out));
  TestTensor x(t, in, distinct(t, numel(in))), y(t, out);
  ExecEnv env;
  env.threads = threads;
  runKernel("expand", {&x}, {&y}, nlohmann::json::object(), env);
  std::vector<double> expected(numel(out));
  for (int64_t o = 0; o < numel(out); ++o) {
    std::vector<int64_t> oi = unravel(o, out), ii(in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      size_t od = i + out.size() - in.size();
      ii[i] = in[i] == 1 ? 0 : oi[od];
    }
    expected[o] = x.get(ravel(ii, in));
  }
  ASSERT_EQ(y.values(), expected);
}

TEST(ShapeExpand, Broadcasts) {
  for (DType t : kAllTypes)
    for (const auto &[in, out] : kExpandCases)
      checkExpand(t, in, out);
  checkExpand(DType::F32, {1, 300, 1}, {8, 300, 64}, 4);
}

TEST(ShapeExpand, Errors) {
  TestTensor x(DType::F32, {3}), y(DType::F32, {4, 2}), z(DType::F32, {3, 4});
  EXPECT_NE(kernelError("expand", {&x}, {&y}).find("does not broadcast"), std::string::npos);
  EXPECT_NE(kernelError("expand", {&z}, {&x}).find("higher rank"), std::string::npos);
}

/// The flat index into the input of element `o` of a slice's output.
int64_t sliceSourceOf(int64_t o, const SliceCase &c) {
  std::vector<int64_t> idx = unravel(o, c.out);
  for (size_t d = 0; d < idx.size(); ++d)
    idx[d] = c.starts[d] + idx[d] * c.steps[d];
  return ravel(idx, c.in);
}

TEST(ShapeSlice, StridedAndNegativeSteps) {
  for (DType t : kAllTypes) {
    for (const SliceCase &c : kSliceCases) {
      SCOPED_TRACE(std::string(nameOf(t)) + " " + ::testing::PrintToString(c.in) + " starts " +
                   ::testing::PrintToString(c.starts) + " steps " +
                   ::testing::PrintToString(c.steps));
      TestTensor x(t, c.in, distinct(t, numel(c.in))), y(t, c.out);
      runKernel("slice", {&x}, {&y}, {{"starts", c.starts}, {"steps", c.steps}});
      std::vector<double> expected(numel(c.out));
      for (int64_t o = 0; o < numel(c.out); ++o)
        expected[o] = x.get(sliceSourceOf(o, c));
      ASSERT_EQ(y.values(), expected);
    }
  }
}

TEST(ShapeSlice, GradScattersIntoZeros) {
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::Bool}) {
    for (const SliceCase &c : kSliceCases) {
      SCOPED_TRACE(std::string(nameOf(t)) + " " + ::testing::PrintToString(c.in) + " starts " +
                   ::testing::PrintToString(c.starts));
      TestTensor dy(t, c.out, distinct(t, numel(c.out)));
      TestTensor dx(t, c.in, std::vector<double>(numel(c.in), 1)); // garbage: must be zeroed
      runKernel("slice_grad", {&dy}, {&dx}, {{"starts", c.starts}, {"steps", c.steps}});
      std::vector<double> expected(numel(c.in), 0.0);
      for (int64_t o = 0; o < numel(c.out); ++o)
        expected[sliceSourceOf(o, c)] = dy.get(o);
      ASSERT_EQ(dx.values(), expected);
    }
  }
}

TEST(ShapeSlice, LargeParallel) {
  Shape in = {64, 512}, out = {32, 200};
  TestTensor x(DType::F32, in, distinct(DType::F32, numel(in))), y(DType::F32, out);
  ExecEnv env;
  env.threads = 4;
  runKernel("slice", {&x}, {&y}, {{"starts", {63, 10}}, {"steps", {-2, 2}}}, env);
  for (int64_t i = 0; i < 32; ++i)
    for (int64_t j = 0; j < 200; ++j)
      ASSERT_EQ(y.get(i * 200 + j), x.get((63 - 2 * i) * 512 + 10 + 2 * j));
}

TEST(ShapeSlice, Errors) {
  TestTensor x(DType::F32, {10}), y(DType::F32, {4});
  auto err = [&](nlohmann::json attrs, TestTensor &out) {
    return kernelError("slice", {&x}, {&out}, std::move(attrs));
  };
  EXPECT_NE(err({{"starts", {8}}, {"steps", {1}}}, y).find("outside [0, 10)"), std::string::npos);
  EXPECT_NE(err({{"starts", {2}}, {"steps", {-1}}}, y).find("outside [0, 10)"), std::string::npos);
  EXPECT_NE(err({{"starts", {-1}}, {"steps", {1}}}, y).find("outside"), std::string::npos);
  EXPECT_NE(err({{"starts", {0}}, {"steps", {0}}}, y).find("step of dimension 0 is 0"),
            std::string::npos);
  EXPECT_NE(err({{"starts", {0, 0}}, {"steps", {1, 1}}}, y).find("one entry per dimension"),
            std::string::npos);
  EXPECT_NE(err({{"starts", {0}}, {"steps", {4611686018427387904}}}, y).find("outside"),
            std::string::npos);
  EXPECT_NE(err({{"steps", {1}}}, y).find("'starts'"), std::string::npos);
  TestTensor y2(DType::F32, {2, 2});
  EXPECT_NE(err({{"starts", {0}}, {"steps", {1}}}, y2).find("rank"), std::string::npos);
  TestTensor dy(DType::F32, {4}), dx(DType::F32, {10});
  EXPECT_NE(kernelError("slice_grad", {&dy}, {&dx}, {{"starts", {9}}, {"steps", {2}}})
                .find("outside [0, 10)"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// pad, pad_grad
//===----------------------------------------------------------------------===//

/// numpy.pad's source index of output position `o` of one dimension.
int64_t padSource(int64_t o, int64_t n, int64_t begin, const std::string &mode) {
  int64_t i = o - begin;
  if (i >= 0 && i < n)
    return i;
  if (mode == "constant")
    return -1;
  if (mode == "edge")
    return i < 0 ? 0 : n - 1;
  return i < 0 ? -i : 2 * (n - 1) - i; // reflect
}

/// The flat index into the input of what element `o` of the padded output
/// holds, or -1 for the fill value.
int64_t padSourceOf(int64_t o, const Shape &out, const PadCase &c, const std::string &mode) {
  std::vector<int64_t> idx = unravel(o, out);
  bool filled = false;
  for (size_t d = 0; d < c.in.size(); ++d) {
    idx[d] = padSource(idx[d], c.in[d], c.pads[d], mode);
    filled |= idx[d] < 0;
  }
  return filled ? -1 : ravel(idx, c.in);
}

TEST(ShapePad, ModesAndTypes) {
  for (const char *mode : {"constant", "reflect", "edge"})
    for (DType t : {DType::F32, DType::F64, DType::I64, DType::I8, DType::Bool})
      for (const PadCase &c : kPadCases) {
        SCOPED_TRACE(std::string(mode) + " " + nameOf(t) + " " +
                     ::testing::PrintToString(c.in) + " pads " +
                     ::testing::PrintToString(c.pads));
        Shape out = paddedShape(c);
        TestTensor x(t, c.in, distinct(t, numel(c.in))), y(t, out);
        const double fill = t == DType::Bool ? 1 : 7;
        ExecEnv env;
        env.threads = 2;
        runKernel("pad", {&x}, {&y}, {{"pads", c.pads}, {"mode", mode}, {"value", fill}}, env);
        std::vector<double> expected(numel(out));
        for (int64_t o = 0; o < numel(out); ++o) {
          int64_t src = padSourceOf(o, out, c, mode);
          expected[o] = src < 0 ? fill : x.get(src);
        }
        ASSERT_EQ(y.values(), expected);
      }
}

TEST(ShapePad, GradAddsBackToTheSource) {
  for (const char *mode : {"constant", "reflect", "edge"})
    for (const PadCase &c : kPadCases)
      for (int threads : {1, 3}) {
        SCOPED_TRACE(std::string(mode) + " " + ::testing::PrintToString(c.in) + " pads " +
                     ::testing::PrintToString(c.pads));
        Shape out = paddedShape(c);
        TestTensor dy(DType::F64, out, distinct(DType::F64, numel(out)));
        TestTensor dx(DType::F64, c.in, std::vector<double>(numel(c.in), 5)); // must be zeroed
        ExecEnv env;
        env.threads = threads;
        runKernel("pad_grad", {&dy}, {&dx}, {{"pads", c.pads}, {"mode", mode}}, env);
        std::vector<double> expected(numel(c.in), 0.0);
        for (int64_t o = 0; o < numel(out); ++o) {
          int64_t src = padSourceOf(o, out, c, mode);
          if (src >= 0)
            expected[src] += dy.get(o);
        }
        expectNear(dx.values(), expected, 1e-12, 1e-12);
      }
}

TEST(ShapePad, Errors) {
  TestTensor x(DType::F32, {3}), y(DType::F32, {9});
  EXPECT_NE(kernelError("pad", {&x}, {&y}, {{"pads", {3, 3}}, {"mode", "reflect"}})
                .find("must be smaller than its size 3"),
            std::string::npos);
  EXPECT_NE(kernelError("pad", {&x}, {&y}, {{"pads", {3, 3}}, {"mode", "wrap"}})
                .find("mode must be constant, reflect or edge"),
            std::string::npos);
  EXPECT_NE(kernelError("pad", {&x}, {&y}, {{"pads", {3, 2}}}).find("should be 8"),
            std::string::npos);
  EXPECT_NE(kernelError("pad", {&x}, {&y}, {{"pads", {3}}}).find("needs 2 pads"),
            std::string::npos);
}

} // namespace
