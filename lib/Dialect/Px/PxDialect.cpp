//===- PxDialect.cpp - px dialect registration ----------------------------===//

#include "parallax/Dialect/Px/PxDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace parallax::px;

#include "parallax/Dialect/Px/PxDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "parallax/Dialect/Px/PxAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "parallax/Dialect/Px/PxTypes.cpp.inc"

void PxDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "parallax/Dialect/Px/PxAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "parallax/Dialect/Px/PxTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "parallax/Dialect/Px/PxOps.cpp.inc"
      >();
}

func::FuncOp parallax::getEntryFunction(ModuleOp module) {
  func::FuncOp found;
  module.walk([&](func::FuncOp f) {
    if (!found && f->hasAttr("px.loss"))
      found = f;
  });
  if (!found)
    found = module.lookupSymbol<func::FuncOp>("main");
  return found;
}

std::string parallax::locationName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().getValue() + ":" + llvm::Twine(file.getLine()) +
            ":" + llvm::Twine(file.getColumn()))
        .str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (std::string s = locationName(inner); !s.empty())
        return s;
  return "";
}

Operation *PxDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                          Type type, Location loc) {
  // Both kinds of px.constant value: a literal, or a reference to an
  // initializer of the source model (what px.constant folds to).
  if (!isa<ElementsAttr, OnnxInitializerAttr>(value) ||
      cast<TypedAttr>(value).getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, value);
}

//===----------------------------------------------------------------------===//
// SparseGradType
//===----------------------------------------------------------------------===//

LogicalResult
SparseGradType::verify(function_ref<InFlightDiagnostic()> emitError,
                       int64_t rows, RankedTensorType denseType) {
  if (rows < 0)
    return emitError() << "sparse gradient row count must be >= 0, got "
                       << rows;
  if (!denseType || denseType.getRank() < 1 || !denseType.hasStaticShape())
    return emitError()
           << "sparse gradient needs a static dense type of rank >= 1";
  return success();
}

RankedTensorType SparseGradType::getValuesType() const {
  SmallVector<int64_t> shape{getRows()};
  llvm::append_range(shape, getDenseType().getShape().drop_front());
  return RankedTensorType::get(shape, getDenseType().getElementType());
}

RankedTensorType SparseGradType::getIndicesType() const {
  return RankedTensorType::get({getRows()},
                               IntegerType::get(getContext(), 64));
}
