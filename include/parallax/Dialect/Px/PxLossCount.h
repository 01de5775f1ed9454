//===- PxLossCount.h - what a mean loss divides by -------------*- C++ -*-===//
//
// A cross entropy's mean divides its lines' sum by their count: the lines
// whose label is not ignore_index, each weighted by its class's weight
// where there are class weights. Split over ranks (a model rank's block of
// rows, a batch rank's samples), the whole tensor's count is the sum of the
// blocks' counts; these build one block's.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_DIALECT_PX_PXLOSSCOUNT_H
#define PARALLAX_DIALECT_PX_PXLOSSCOUNT_H

#include "mlir/IR/Builders.h"

#include <optional>

namespace parallax::px {

/// The count a mean over `labels` divides by, as a scalar tensor of
/// `elementType`: the labels that are not `ignoreIndex` (all of them
/// without one), each counting its class's weight in `weights` (1 without).
mlir::Value countedLabels(mlir::OpBuilder &b, mlir::Location loc, mlir::Value labels,
                          std::optional<int64_t> ignoreIndex, mlir::Value weights,
                          mlir::Type elementType);

/// A scalar tensor of `elementType` holding `value`.
mlir::Value scalarConstant(mlir::OpBuilder &b, mlir::Location loc, mlir::Type elementType,
                           double value);

} // namespace parallax::px

#endif // PARALLAX_DIALECT_PX_PXLOSSCOUNT_H
