//===- PxLossCount.cpp - what a mean loss divides by ----------------------===//

#include "parallax/Dialect/Px/PxLossCount.h"

#include "parallax/Dialect/Px/PxDialect.h"

#include "llvm/ADT/Sequence.h"

using namespace mlir;

namespace {
Value scalar(OpBuilder &b, Location loc, Type elementType, double value) {
  return parallax::splatConstant(b, loc, RankedTensorType::get({}, elementType), value);
}
} // namespace

bool parallax::px::countsExactly(Type elementType) {
  return elementType.isF32() || elementType.isF64();
}

Value parallax::px::quotientOrZero(OpBuilder &b, Location loc, Value numerator, Value count) {
  Type elem = cast<RankedTensorType>(count.getType()).getElementType();
  Value zero = scalar(b, loc, elem, 0.0);
  Value none = EqualOp::create(b, loc, count, zero).getResult();
  Value quotient = DivOp::create(b, loc, numerator, count).getResult();
  return WhereOp::create(b, loc, none, zero, quotient).getResult();
}

Value parallax::px::countedLabels(OpBuilder &b, Location loc, Value labels,
                                  std::optional<int64_t> ignoreIndex, Value weights,
                                  Type elementType) {
  auto labelType = cast<RankedTensorType>(labels.getType());
  if (!ignoreIndex && !weights)
    return scalar(b, loc, elementType, (double)labelType.getNumElements());
  Value ignored;
  if (ignoreIndex)
    ignored = EqualOp::create(
                  b, loc, labels,
                  scalar(b, loc, labelType.getElementType(), (double)*ignoreIndex))
                  .getResult();
  Value each;
  if (weights) {
    // An ignored label may name no class (-100): look up class 0 instead.
    Value classes = ignored ? WhereOp::create(b, loc, ignored,
                                              scalar(b, loc, labelType.getElementType(), 0),
                                              labels)
                                  .getResult()
                            : labels;
    auto type = RankedTensorType::get(
        labelType.getShape(), cast<RankedTensorType>(weights.getType()).getElementType());
    each = GatherOp::create(b, loc, type, weights, classes, b.getI64IntegerAttr(0)).getResult();
  } else {
    each = scalar(b, loc, elementType, 1.0);
  }
  Value counts = ignored ? WhereOp::create(b, loc, ignored, scalar(b, loc, elementType, 0.0),
                                           each)
                               .getResult()
                         : each;
  SmallVector<int64_t> all = llvm::to_vector(llvm::seq<int64_t>(0, labelType.getRank()));
  SmallVector<NamedAttribute> attrs{b.getNamedAttr("axes", b.getDenseI64ArrayAttr(all)),
                                    b.getNamedAttr("keepdims", b.getBoolAttr(false))};
  return ReduceSumOp::create(b, loc, ValueRange{counts}, attrs).getResult();
}
