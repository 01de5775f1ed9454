//===- BatchDimension.h - where a step's samples lie in each value --*- C++ -*-===//
//
// Data parallelism splits a step's samples over the ranks. That is only
// right when the graph treats them independently: every op keeps each
// sample's elements apart from the others' (a matmul over the features, a
// convolution over the image), and only the loss (a mean) and batch
// normalisation (whose statistics are synchronized) combine them. This
// analysis follows the samples of the batched inputs (dimension 0) through
// the step function, op by op, and says where they lie in every value, or
// which op combines them and how. A static export of a PyTorch model
// (torch.onnx.export without dynamic_axes) needs it to split its batch; a
// dynamic one uses it to give dropout its per-sample random streams.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_ANALYSIS_BATCHDIMENSION_H
#define PARALLAX_ANALYSIS_BATCHDIMENSION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/Error.h"

namespace parallax {

/// Where the samples lie in one value: along dimension `axis`, each sample
/// owning `inner` consecutive indices of it, so that dimension is
/// outer * batch * inner long (a [B*T, H] reshape of [B, T, H] has axis 0,
/// inner T; a [T, B, H] transpose of it axis 1, inner 1).
struct BatchPlacement {
  int64_t axis = 0;
  int64_t inner = 1;
  bool operator==(const BatchPlacement &o) const {
    return axis == o.axis && inner == o.inner;
  }
};

struct BatchLayout {
  /// Samples per step in the analysed function.
  int64_t batch = 0;
  /// Every value that holds samples, and where.
  llvm::DenseMap<mlir::Value, BatchPlacement> batched;
  /// Values that do not come from the samples but are as long as they are
  /// along a dimension and the same for every sample there (a constant
  /// repeated for every sample, an expand of one row): they shrink with the
  /// batch like the samples would.
  llvm::DenseMap<mlir::Value, BatchPlacement> uniform;
  /// Operands that are the batch size (or its inverse, `inverse`): a sum
  /// over the samples divided by it is a mean. They become the per-rank
  /// batch with it.
  struct BatchSizeOperand {
    mlir::Operation *op;
    unsigned index;
    bool inverse;
  };
  llvm::SmallVector<BatchSizeOperand> batchSizeOperands;

  /// Elements between consecutive samples of `value` (inner times the
  /// dimensions after the axis), or 0 if it holds no samples.
  int64_t sampleStride(mlir::Value value) const;
};

/// Follows `batch` samples along dimension 0 of `inputs` through `func`.
/// Fails with a message naming the op (its ONNX node) that combines
/// samples, and how: a matmul contracting over them, a softmax across them,
/// a reshape that splits them, a reduction other than the loss's mean (or a
/// sum divided by the batch size), ...
llvm::Expected<BatchLayout> analyzeBatch(mlir::func::FuncOp func,
                                         llvm::ArrayRef<mlir::Operation *> inputs,
                                         int64_t batch);

} // namespace parallax

#endif // PARALLAX_ANALYSIS_BATCHDIMENSION_H
