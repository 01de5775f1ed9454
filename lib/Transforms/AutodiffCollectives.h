//===- AutodiffCollectives.h - adjoints of px collectives ------*- C++ -*-===//
//
// px-autodiff's rules for the collectives a model (or a pass before it)
// writes in the forward pass. The step's objective is the sum over ranks of
// their seeded losses: px-autodiff seeds each rank's loss with 1/N and px-sync
// sums the gradients over the batch axes. So a rank's gradient of a value is
// its share of the objective's, and each rule is its collective's adjoint as
// a linear map over all the group's values: an all-gather's is a
// reduce-scatter, a sum all-reduce's is a sum all-reduce, an all-to-all's the
// all-to-all back, a halo exchange's a halo reduce.
//
// A model-axis group is refused: its ranks share one loss, which the sum over
// ranks would count Pr times (px-shard-model, which runs after px-autodiff,
// places the model axis's collectives and their adjoints itself).
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_TRANSFORMS_AUTODIFFCOLLECTIVES_H
#define PARALLAX_TRANSFORMS_AUTODIFFCOLLECTIVES_H

#include "mlir/IR/Builders.h"
#include "mlir/Support/LLVM.h"

namespace parallax {

/// Whether `op` is a px collective with a rule here.
bool isDifferentiableCollective(mlir::Operation *op);

/// The gradient of the data input of `op` (a px collective that
/// isDifferentiableCollective accepts) given its result's gradient `dy`,
/// built at `b`'s insertion point. Fails, with an error on `op`, for a
/// reduction without a rule (product) or a group over the model axis.
mlir::FailureOr<mlir::Value> collectiveAdjoint(mlir::OpBuilder &b, mlir::Operation *op,
                                               mlir::Value dy);

} // namespace parallax

#endif // PARALLAX_TRANSFORMS_AUTODIFFCOLLECTIVES_H
