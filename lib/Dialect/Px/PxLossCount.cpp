//===- PxLossCount.cpp - what a mean loss divides by ----------------------===//

#include "parallax/Dialect/Px/PxLossCount.h"

#include "parallax/Dialect/Px/PxDialect.h"

#include "llvm/ADT/Sequence.h"

using namespace mlir;

Value parallax::px::scalarConstant(OpBuilder &b, Location loc, Type elementType, double value) {
  auto type = RankedTensorType::get({}, elementType);
  Attribute v = isa<FloatType>(elementType)
                    ? Attribute(b.getFloatAttr(elementType, value))
                    : Attribute(b.getIntegerAttr(elementType, (int64_t)value));
  return ConstantOp::create(b, loc, DenseElementsAttr::get(type, v)).getResult();
}

Value parallax::px::countedLabels(OpBuilder &b, Location loc, Value labels,
                                  std::optional<int64_t> ignoreIndex, Value weights,
                                  Type elementType) {
  auto labelType = cast<RankedTensorType>(labels.getType());
  if (!ignoreIndex && !weights)
    return scalarConstant(b, loc, elementType, (double)labelType.getNumElements());
  Value ignored;
  if (ignoreIndex)
    ignored = EqualOp::create(
                  b, loc, labels,
                  scalarConstant(b, loc, labelType.getElementType(), (double)*ignoreIndex))
                  .getResult();
  Value each;
  if (weights) {
    // An ignored label may name no class (-100): look up class 0 instead.
    Value classes = ignored ? WhereOp::create(b, loc, ignored,
                                              scalarConstant(b, loc, labelType.getElementType(), 0),
                                              labels)
                                  .getResult()
                            : labels;
    auto type = RankedTensorType::get(
        labelType.getShape(), cast<RankedTensorType>(weights.getType()).getElementType());
    each = GatherOp::create(b, loc, type, weights, classes, b.getI64IntegerAttr(0)).getResult();
  } else {
    each = scalarConstant(b, loc, elementType, 1.0);
  }
  Value counts = ignored ? WhereOp::create(b, loc, ignored, scalarConstant(b, loc, elementType, 0.0),
                                           each)
                               .getResult()
                         : each;
  SmallVector<int64_t> all = llvm::to_vector(llvm::seq<int64_t>(0, labelType.getRank()));
  SmallVector<NamedAttribute> attrs{b.getNamedAttr("axes", b.getDenseI64ArrayAttr(all)),
                                    b.getNamedAttr("keepdims", b.getBoolAttr(false))};
  return ReduceSumOp::create(b, loc, ValueRange{counts}, attrs).getResult();
}
