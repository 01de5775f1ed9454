//===- PxOpUtils.h - helpers shared by the px op files ---------*- C++ -*-===//
//
// Internal to lib/Dialect/Px: the shape-rule helpers PxOps.cpp defines and
// the verifiers of the training ops (PxTrainingOps.cpp) reuse, so a gradient
// op is checked against exactly the window rule of its forward op.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_LIB_DIALECT_PX_PXOPUTILS_H
#define PARALLAX_LIB_DIALECT_PX_PXOPUTILS_H

#include "parallax/Dialect/Px/PxShapes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Value.h"

#include <optional>
#include <string>

namespace parallax::px::detail {

/// The parser infers result types before the verifier has checked the
/// attributes, so a shape rule must not read an attribute that is missing or
/// of the wrong kind (the adaptor's accessors cast unchecked): the adaptor's
/// generated verify() checks them first.
template <typename AdaptorT>
mlir::LogicalResult verifyAttributes(mlir::MLIRContext *ctx,
                                     std::optional<mlir::Location> loc,
                                     AdaptorT &adaptor) {
  if (loc)
    return adaptor.verify(*loc);
  mlir::ScopedDiagnosticHandler silence(
      ctx, [](mlir::Diagnostic &) { return mlir::success(); });
  return adaptor.verify(mlir::UnknownLoc::get(ctx));
}

/// A string attribute's value, or `dflt` when it is absent (default-valued
/// attributes are not yet populated when the parser infers result types).
llvm::StringRef strOr(mlir::StringAttr attr, llvm::StringRef dflt);

/// The ranked tensor type of `v`, or an error naming `what`.
mlir::FailureOr<mlir::RankedTensorType>
ranked(std::optional<mlir::Location> loc, mlir::Value v, llvm::StringRef what);

/// The axis attribute `attr` (or `dflt`) made non-negative for `rank`, or
/// an error when it is out of range.
mlir::FailureOr<int64_t> axisFor(std::optional<mlir::Location> loc,
                                 mlir::IntegerAttr attr, int64_t dflt, int64_t rank);

/// Verifies the grid reference and axes of `op` (the grid exists and is
/// static, each axis is one of its axes, once); returns the number of ranks
/// in each process group over those axes (all of them when empty).
mlir::FailureOr<int64_t> verifyGroup(mlir::Operation *op, mlir::FlatSymbolRefAttr grid,
                                     llvm::ArrayRef<int16_t> axes,
                                     mlir::SymbolTableCollection &symbols);

/// A shape as text for messages ("8x20").
std::string fmt(llvm::ArrayRef<int64_t> shape);

/// Output shape [N, channels, out...] of a conv/pool window over `x`, with
/// the window attributes checked.
mlir::FailureOr<Shape>
windowShape(std::optional<mlir::Location> loc, mlir::RankedTensorType x,
            int64_t channels, llvm::ArrayRef<int64_t> kernel,
            llvm::ArrayRef<int64_t> strides, llvm::ArrayRef<int64_t> pads,
            llvm::ArrayRef<int64_t> dilations, bool ceilMode);

/// Result shape of px.pad on `input` (mode and pads checked).
mlir::FailureOr<Shape> padShape(std::optional<mlir::Location> loc,
                                mlir::RankedTensorType input,
                                llvm::ArrayRef<int64_t> pads,
                                llvm::StringRef mode);

/// A loss op on a block of the classes (nll_loss, the softmax cross
/// entropy's gradient): `block of` a grid names its grid_axes, and class
/// weights, indexed by the whole tensor's class, are not taken.
inline mlir::LogicalResult verifyClassBlock(mlir::Operation *op, bool grid, bool gridAxes,
                                            mlir::Value weights) {
  if (grid != gridAxes)
    return op->emitOpError("a block of a grid names its grid_axes, and only a block does");
  if (grid && weights)
    return op->emitOpError("a block of the classes takes no class weights");
  return mlir::success();
}

} // namespace parallax::px::detail

#endif // PARALLAX_LIB_DIALECT_PX_PXOPUTILS_H
