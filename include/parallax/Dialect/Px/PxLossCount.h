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
/// With neither, the labels' number, a constant.
mlir::Value countedLabels(mlir::OpBuilder &b, mlir::Location loc, mlir::Value labels,
                          std::optional<int64_t> ignoreIndex, mlir::Value weights,
                          mlir::Type elementType);

/// Whether a loss of `elementType` may become a sum and a count in that
/// type: f32 and f64. The kernels add a mean's terms in double; an f16
/// sum or count overflows from 65504 (bf16 counts exactly only to 256).
bool countsExactly(mlir::Type elementType);

/// `numerator` / `count` where `count` is not 0, else 0: a gradient's
/// scale, zero where the whole batch has nothing to count, as the kernels'
/// mean gives (a scale of infinity would make 0 x inf = NaN gradients).
mlir::Value quotientOrZero(mlir::OpBuilder &b, mlir::Location loc, mlir::Value numerator,
                             mlir::Value count);

} // namespace parallax::px

#endif // PARALLAX_DIALECT_PX_PXLOSSCOUNT_H
