//===- OnnxMathConverters.cpp - elementwise math, logic, reductions -------===//
//
// ONNX operators that are elementwise functions, boolean logic or
// reductions beyond the basic ones in OnnxNodeConverters.cpp. Most become
// one px op; the rest are compositions of px ops (an activation written
// with exp and where, ReduceL2 as sqrt of a sum of squares), whose
// gradients px-autodiff then derives from the parts. Compositions keep
// every intermediate finite wherever the function is (Elu's exponential
// never sees a positive x), so that no gradient multiplies 0 by infinity.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "parallax/Dialect/Px/PxShapes.h"

#include <cmath>

using namespace mlir;
using namespace parallax;
using namespace parallax::detail;

namespace {

/// The reduced axes of a Reduce* node with an `axes` attribute (opset < 18):
/// all of them when absent, normalised.
std::vector<int64_t> reducedAxes(std::vector<int64_t> axes, int64_t rank) {
  if (axes.empty())
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  for (int64_t &a : axes)
    if (auto n = px::normalizeAxis(a, rank))
      a = *n;
  return axes;
}

} // namespace

llvm::Expected<bool> GraphImporter::convertMath(const onnx::NodeProto &node) {
  const std::string &op = node.op_type();
  Composer c(*this, node);
  auto elem = [](Value v) { return Composer::typeOf(v).getElementType(); };

  // One px op of the input's type.
  auto unary = [&](auto tag) -> llvm::Expected<bool> {
    using OpTy = decltype(tag);
    if (auto err = checkAttributes(node, {}))
      return std::move(err);
    return c.done(c.unary<OpTy>(c.in(0)));
  };
  if (op == "Sin") return unary(px::SinOp());
  if (op == "Cos") return unary(px::CosOp());
  if (op == "Tan") return unary(px::TanOp());
  if (op == "Asin") return unary(px::AsinOp());
  if (op == "Acos") return unary(px::AcosOp());
  if (op == "Atan") return unary(px::AtanOp());
  if (op == "Sinh") return unary(px::SinhOp());
  if (op == "Cosh") return unary(px::CoshOp());
  if (op == "Asinh") return unary(px::AsinhOp());
  if (op == "Acosh") return unary(px::AcoshOp());
  if (op == "Atanh") return unary(px::AtanhOp());
  if (op == "Floor") return unary(px::FloorOp());
  if (op == "Ceil") return unary(px::CeilOp());
  if (op == "Round") return unary(px::RoundOp());
  if (op == "Sign") return unary(px::SignOp());

  if (op == "Mod") {
    if (auto err = checkAttributes(node, {"fmod"}))
      return std::move(err);
    SmallVector<NamedAttribute> attrs;
    if (attrInt(node, "fmod", 0))
      attrs.push_back(named("fmod", b.getUnitAttr()));
    return c.done(c.make<px::ModOp>({c.in(0), c.in(1)}, attrs));
  }

  // Activations, as compositions.
  if (op == "Softplus") { // max(x, 0) + log(1 + exp(-|x|)): no overflow
    if (auto err = checkAttributes(node, {}))
      return std::move(err);
    Value x = c.in(0);
    if (!x)
      return c.takeError();
    Value one = c.scalar(1.0, elem(x));
    Value tail = c.unary<px::LogOp>(
        c.add(one, c.unary<px::ExpOp>(c.unary<px::NegOp>(c.unary<px::AbsOp>(x)))));
    return c.done(c.add(c.unary<px::ReluOp>(x), tail));
  }
  if (op == "Softsign") {
    if (auto err = checkAttributes(node, {}))
      return std::move(err);
    Value x = c.in(0);
    if (!x)
      return c.takeError();
    return c.done(c.div(x, c.add(c.scalar(1.0, elem(x)), c.unary<px::AbsOp>(x))));
  }
  if (op == "Elu" || op == "Selu" || op == "Celu") {
    // alpha (e^min(x, 0) / alpha) - 1) for x < 0, x otherwise; Selu scales
    // by gamma, Celu divides the exponent by alpha.
    if (auto err = checkAttributes(node, op == "Selu"
                                             ? std::initializer_list<const char *>{"alpha", "gamma"}
                                             : std::initializer_list<const char *>{"alpha"}))
      return std::move(err);
    double alpha = attrFloat(node, "alpha", op == "Selu" ? 1.67326319217681884765625f : 1.0f);
    double gamma = attrFloat(node, "gamma", 1.05070102214813232421875f);
    Value x = c.in(0);
    if (!x)
      return c.takeError();
    Type t = elem(x);
    Value zero = c.scalar(0.0, t);
    Value neg = c.min(x, zero);
    if (op == "Celu")
      neg = c.mul(neg, c.scalar(1.0 / alpha, t));
    Value negative = c.mul(c.scalar(alpha, t),
                           c.sub(c.unary<px::ExpOp>(neg), c.scalar(1.0, t)));
    Value y = op == "Celu" ? c.add(c.unary<px::ReluOp>(x), negative)
                           : c.where(c.greater(x, zero), x, negative);
    if (op == "Selu")
      y = c.mul(y, c.scalar(gamma, t));
    return c.done(y);
  }
  if (op == "HardSigmoid" || op == "HardSwish") {
    if (auto err = checkAttributes(
            node, op == "HardSigmoid" ? std::initializer_list<const char *>{"alpha", "beta"}
                                      : std::initializer_list<const char *>{}))
      return std::move(err);
    double alpha = op == "HardSwish" ? 1.0 / 6.0 : attrFloat(node, "alpha", 0.2f);
    double beta = op == "HardSwish" ? 0.5 : attrFloat(node, "beta", 0.5f);
    Value x = c.in(0);
    if (!x)
      return c.takeError();
    Type t = elem(x);
    Value h = c.make<px::ClipOp>(
        {c.add(c.mul(x, c.scalar(alpha, t)), c.scalar(beta, t))},
        {named("min", b.getF64FloatAttr(0.0)), named("max", b.getF64FloatAttr(1.0))},
        x.getType());
    return c.done(op == "HardSwish" ? c.mul(x, h) : h);
  }
  if (op == "ThresholdedRelu") {
    if (auto err = checkAttributes(node, {"alpha"}))
      return std::move(err);
    Value x = c.in(0);
    if (!x)
      return c.takeError();
    Type t = elem(x);
    return c.done(c.where(c.greater(x, c.scalar(attrFloat(node, "alpha", 1.0f), t)),
                          x, c.scalar(0.0, t)));
  }
  if (op == "Shrink") {
    if (auto err = checkAttributes(node, {"bias", "lambd"}))
      return std::move(err);
    Value x = c.in(0);
    if (!x)
      return c.takeError();
    Type t = elem(x);
    double bias = attrFloat(node, "bias", 0.0f), lambd = attrFloat(node, "lambd", 0.5f);
    Value lo = c.where(c.less(x, c.scalar(-lambd, t)), c.add(x, c.scalar(bias, t)),
                       c.scalar(0.0, t));
    return c.done(c.where(c.greater(x, c.scalar(lambd, t)),
                          c.sub(x, c.scalar(bias, t)), lo));
  }
  if (op == "PRelu") {
    if (auto err = checkAttributes(node, {}))
      return std::move(err);
    Value x = c.in(0), slope = c.in(1);
    if (!x || !slope)
      return c.takeError();
    return c.done(c.where(c.less(x, c.scalar(0.0, elem(x))), c.mul(slope, x), x));
  }

  // Logic and comparisons.
  if (op == "And" || op == "Or" || op == "Xor" || op == "GreaterOrEqual" ||
      op == "LessOrEqual") {
    if (auto err = checkAttributes(node, {}))
      return std::move(err);
    Value a = c.in(0), bv = c.in(1);
    if (!a || !bv)
      return c.takeError();
    Type i1 = b.getI1Type();
    if (op == "And")
      return c.done(c.where(a, bv, c.scalar(0.0, i1)));
    if (op == "Or")
      return c.done(c.where(a, c.scalar(1.0, i1), bv));
    if (op == "Xor")
      return c.done(c.unary<px::NotOp>(c.equal(a, bv)));
    Value strict = op == "GreaterOrEqual" ? c.greater(a, bv) : c.less(a, bv);
    return c.done(c.where(strict, c.scalar(1.0, i1), c.equal(a, bv)));
  }
  if (op == "IsNaN") {
    if (auto err = checkAttributes(node, {}))
      return std::move(err);
    Value x = c.in(0);
    return c.done(c.unary<px::NotOp>(c.equal(x, x)));
  }
  if (op == "IsInf") {
    if (auto err = checkAttributes(node, {"detect_negative", "detect_positive"}))
      return std::move(err);
    Value x = c.in(0);
    if (!x)
      return c.takeError();
    bool negative = attrInt(node, "detect_negative", 1) != 0;
    bool positive = attrInt(node, "detect_positive", 1) != 0;
    Type t = elem(x), i1 = b.getI1Type();
    Value inf = c.scalar(INFINITY, t);
    Value y;
    if (positive && negative)
      y = c.equal(c.unary<px::AbsOp>(x), inf);
    else if (positive)
      y = c.equal(x, inf);
    else if (negative)
      y = c.equal(x, c.scalar(-INFINITY, t));
    else
      y = c.expand(c.scalar(0.0, i1), Composer::typeOf(x).getShape());
    return c.done(y);
  }

  // Variadic sums.
  if (op == "Sum" || op == "Mean") {
    if (auto err = checkAttributes(node, {}))
      return std::move(err);
    Value acc = c.in(0);
    for (int i = 1; i < node.input_size(); ++i)
      acc = c.add(acc, c.in(i));
    if (op == "Mean" && node.input_size() > 1 && acc)
      acc = c.div(acc, c.scalar(node.input_size(), elem(acc)));
    return c.done(acc);
  }

  if (op == "CastLike") {
    if (auto err = checkAttributes(node, {"saturate"}))
      return std::move(err);
    Value x = c.in(0), like = c.in(1);
    if (!x || !like)
      return c.takeError();
    return c.done(c.cast(x, elem(like)));
  }

  // Reductions with an `axes` attribute (until opset 18).
  if (op == "ReduceMin" || op == "ReduceProd" || op == "ReduceL1" ||
      op == "ReduceL2" || op == "ReduceLogSum" || op == "ReduceLogSumExp" ||
      op == "ReduceSumSquare") {
    if (auto err = checkAttributes(node, {"axes", "keepdims"}))
      return std::move(err);
    Value x = c.in(0);
    if (!x)
      return c.takeError();
    bool keepdims = attrInt(node, "keepdims", 1) != 0;
    std::vector<int64_t> axes =
        reducedAxes(attrInts(node, "axes"), Composer::typeOf(x).getRank());
    if (op == "ReduceMin")
      return c.done(c.reduce<px::ReduceMinOp>(x, axes, keepdims));
    if (op == "ReduceProd")
      return c.done(c.reduce<px::ReduceProdOp>(x, axes, keepdims));
    if (op == "ReduceL1")
      return c.done(c.reduce<px::ReduceSumOp>(c.unary<px::AbsOp>(x), axes, keepdims));
    if (op == "ReduceSumSquare")
      return c.done(c.reduce<px::ReduceSumOp>(c.mul(x, x), axes, keepdims));
    if (op == "ReduceL2")
      return c.done(c.unary<px::SqrtOp>(
          c.reduce<px::ReduceSumOp>(c.mul(x, x), axes, keepdims)));
    if (op == "ReduceLogSum")
      return c.done(
          c.unary<px::LogOp>(c.reduce<px::ReduceSumOp>(x, axes, keepdims)));
    // log(sum(exp(x - m))) + m with m the maximum: no overflow.
    Value m = c.reduce<px::ReduceMaxOp>(x, axes, /*keepdims=*/true);
    Value s = c.reduce<px::ReduceSumOp>(c.unary<px::ExpOp>(c.sub(x, m)), axes, true);
    Value y = c.add(c.unary<px::LogOp>(s), m);
    if (!keepdims && y) {
      SmallVector<int64_t> shape;
      auto xs = Composer::typeOf(x).getShape();
      for (int64_t d = 0; d < (int64_t)xs.size(); ++d)
        if (!llvm::is_contained(axes, d))
          shape.push_back(xs[d]);
      y = c.reshape(y, shape);
    }
    return c.done(y);
  }

  if (op == "ArgMax" || op == "ArgMin") {
    if (auto err = checkAttributes(node, {"axis", "keepdims", "select_last_index"}))
      return std::move(err);
    SmallVector<NamedAttribute> attrs{
        named("axis", b.getI64IntegerAttr(attrInt(node, "axis", 0))),
        named("keepdims", b.getBoolAttr(attrInt(node, "keepdims", 1) != 0))};
    if (attrInt(node, "select_last_index", 0))
      attrs.push_back(named("select_last_index", b.getUnitAttr()));
    Value x = c.in(0);
    return c.done(op == "ArgMax" ? c.make<px::ArgMaxOp>({x}, attrs)
                                 : c.make<px::ArgMinOp>({x}, attrs));
  }

  if (op == "Hardmax") { // one-hot of the first maximum along axis
    if (auto err = checkAttributes(node, {"axis"}))
      return std::move(err);
    Value x = c.in(0);
    if (!x)
      return c.takeError();
    auto shape = Composer::typeOf(x).getShape();
    auto axis = px::normalizeAxis(attrInt(node, "axis", -1), shape.size());
    if (!axis)
      return nodeError(node, "axis is out of range");
    Value arg = c.make<px::ArgMaxOp>(
        {x}, {named("axis", b.getI64IntegerAttr(*axis)),
              named("keepdims", b.getBoolAttr(true))});
    SmallVector<int64_t> iotaShape(shape.size(), 1);
    iotaShape[*axis] = shape[*axis];
    SmallVector<double> iota;
    for (int64_t i = 0; i < shape[*axis]; ++i)
      iota.push_back(i);
    Value hit = c.equal(c.constant(iotaShape, b.getI64Type(), iota), arg);
    Type t = elem(x);
    return c.done(c.where(hit, c.scalar(1.0, t), c.scalar(0.0, t)));
  }

  if (op == "TopK") {
    if (auto err = checkAttributes(node, {"axis", "largest", "sorted"}))
      return std::move(err);
    auto k = constInput(node, 1, "K", /*required=*/true);
    if (!k)
      return k.takeError();
    if ((*k)->size() != 1)
      return nodeError(node, "K must have one element");
    Operation *topk = c.makeOp<px::TopKOp>(
        {c.in(0)}, {named("k", b.getI64IntegerAttr(toInt64((*k)->values[0]))),
                    named("axis", b.getI64IntegerAttr(attrInt(node, "axis", -1))),
                    named("largest", b.getBoolAttr(attrInt(node, "largest", 1) != 0))});
    if (!topk)
      return c.takeError();
    c.define(1, topk->getResult(1));
    return c.done(topk->getResult(0));
  }

  if (op == "CumSum") {
    if (auto err = checkAttributes(node, {"exclusive", "reverse"}))
      return std::move(err);
    auto axis = constInput(node, 1, "axis", /*required=*/true);
    if (!axis)
      return axis.takeError();
    if ((*axis)->size() != 1)
      return nodeError(node, "axis must have one element");
    SmallVector<NamedAttribute> attrs{
        named("axis", b.getI64IntegerAttr(toInt64((*axis)->values[0])))};
    if (attrInt(node, "exclusive", 0))
      attrs.push_back(named("exclusive", b.getUnitAttr()));
    if (attrInt(node, "reverse", 0))
      attrs.push_back(named("reverse", b.getUnitAttr()));
    Value x = c.in(0);
    return c.done(x ? c.make<px::CumSumOp>({x}, attrs, x.getType()) : Value());
  }

  return false;
}
