//===- PxBuilder.cpp - terse construction of px ops in passes -------------===//

#include "PxBuilder.h"

#include "parallax/Dialect/Px/PxShapes.h"

using namespace mlir;

namespace parallax {

Value PxBuilder::splat(double value, RankedTensorType type) {
  return splatConstant(b, loc, type, value);
}

Value PxBuilder::scalar(double value, Type elem) {
  return splat(value, RankedTensorType::get({}, elem));
}

Value PxBuilder::indexVector(ArrayRef<int64_t> values) {
  auto type = RankedTensorType::get({(int64_t)values.size()}, b.getI64Type());
  return px::ConstantOp::create(b, loc, type,
                                DenseElementsAttr::get(type, values));
}

Value PxBuilder::add(Value x, Value y) { return inferred<px::AddOp>({x, y}); }
Value PxBuilder::sub(Value x, Value y) { return inferred<px::SubOp>({x, y}); }
Value PxBuilder::mul(Value x, Value y) { return inferred<px::MulOp>({x, y}); }
Value PxBuilder::div(Value x, Value y) { return inferred<px::DivOp>({x, y}); }
Value PxBuilder::pow(Value x, Value y) { return inferred<px::PowOp>({x, y}); }
Value PxBuilder::greater(Value x, Value y) {
  return inferred<px::GreaterOp>({x, y});
}
Value PxBuilder::less(Value x, Value y) { return inferred<px::LessOp>({x, y}); }
Value PxBuilder::equal(Value x, Value y) { return inferred<px::EqualOp>({x, y}); }
Value PxBuilder::where(Value c, Value x, Value y) {
  return inferred<px::WhereOp>({c, x, y});
}
Value PxBuilder::matmul(Value x, Value y) {
  return inferred<px::MatMulOp>({x, y});
}

Value PxBuilder::gemm(Value x, Value y, bool transX, bool transY,
                      double alpha) {
  SmallVector<NamedAttribute> attrs;
  if (alpha != 1.0)
    attrs.push_back(named("alpha", b.getF32FloatAttr(alpha)));
  if (transX)
    attrs.push_back(named("trans_a", b.getUnitAttr()));
  if (transY)
    attrs.push_back(named("trans_b", b.getUnitAttr()));
  return inferred<px::GemmOp>({x, y}, attrs);
}

Value PxBuilder::neg(Value x) {
  return px::NegOp::create(b, loc, x.getType(), x);
}
Value PxBuilder::exp(Value x) {
  return px::ExpOp::create(b, loc, x.getType(), x);
}
Value PxBuilder::log(Value x) {
  return px::LogOp::create(b, loc, x.getType(), x);
}

Value PxBuilder::scale(Value x, double factor) {
  if (factor == 1.0)
    return x;
  return mul(x, scalar(factor, typeOf(x).getElementType()));
}

Value PxBuilder::cast(Value x, Type elem) {
  auto type = typeOf(x);
  if (type.getElementType() == elem)
    return x;
  return px::CastOp::create(b, loc, RankedTensorType::get(type.getShape(), elem),
                            x);
}

Value PxBuilder::reshape(Value x, ArrayRef<int64_t> shape) {
  auto type = typeOf(x);
  if (type.getShape() == shape)
    return x;
  return px::ReshapeOp::create(
      b, loc, RankedTensorType::get(shape, type.getElementType()), x);
}

Value PxBuilder::transpose(Value x, ArrayRef<int64_t> perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i)
    identity &= perm[i] == (int64_t)i;
  if (identity)
    return x;
  return inferred<px::TransposeOp>(
      {x}, {named("perm", b.getDenseI64ArrayAttr(perm))});
}

Value PxBuilder::transposeLast2(Value x) {
  int64_t rank = typeOf(x).getRank();
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d)
    perm.push_back(d);
  std::swap(perm[rank - 2], perm[rank - 1]);
  return transpose(x, perm);
}

Value PxBuilder::reduceSum(Value x, ArrayRef<int64_t> axes, bool keepdims) {
  if (axes.empty())
    return x;
  return inferred<px::ReduceSumOp>(
      {x}, {named("axes", b.getDenseI64ArrayAttr(axes)),
            named("keepdims", b.getBoolAttr(keepdims))});
}

Value PxBuilder::expand(Value x, ArrayRef<int64_t> shape) {
  auto type = typeOf(x);
  if (type.getShape() == shape)
    return x;
  return px::ExpandOp::create(
      b, loc, RankedTensorType::get(shape, type.getElementType()), x);
}

Value PxBuilder::concat(ValueRange inputs, int64_t axis) {
  if (inputs.size() == 1)
    return inputs.front();
  return inferred<px::ConcatOp>(inputs,
                                {named("axis", b.getI64IntegerAttr(axis))});
}

Value PxBuilder::slice(Value x, ArrayRef<int64_t> starts,
                       ArrayRef<int64_t> steps, ArrayRef<int64_t> shape) {
  auto type = typeOf(x);
  return px::SliceOp::create(
      b, loc, RankedTensorType::get(shape, type.getElementType()), x,
      b.getDenseI64ArrayAttr(starts), b.getDenseI64ArrayAttr(steps));
}

Value PxBuilder::unbroadcast(Value g, RankedTensorType target) {
  auto type = typeOf(g);
  if (type.getShape() == target.getShape())
    return g;
  int64_t extra = type.getRank() - target.getRank();
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (d < extra ||
        (target.getDimSize(d - extra) == 1 && type.getDimSize(d) != 1))
      axes.push_back(d);
  Value summed = reduceSum(g, axes, /*keepdims=*/true);
  return reshape(summed, target.getShape());
}

} // namespace parallax
