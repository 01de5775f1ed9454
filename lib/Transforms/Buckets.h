//===- Buckets.h - all-reduce buckets as the plan fuses them ---*- C++ -*-===//
//
// The px.all_reduce ops sharing a `bucket` id run as one collective over
// one buffer (an all-reduce without an id is a bucket of its own). The
// layout passes decide per bucket; this is how they all see one.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_LIB_TRANSFORMS_BUCKETS_H
#define PARALLAX_LIB_TRANSFORMS_BUCKETS_H

#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Runtime/Grid.h"

#include "llvm/ADT/SmallVector.h"

#include <vector>

namespace parallax {

/// The buckets of `block`, ordered by their first member, each member in
/// block order (the order of the fused collective's tensors).
std::vector<llvm::SmallVector<px::AllReduceOp>> bucketsOf(mlir::Block &block);

/// Numbers `block`'s buckets in the order they are issued (their first
/// member's place), as the runtime and the layout passes expect.
void renumberBucketsInIssueOrder(mlir::Block &block);

/// Bytes of a tensor of `type`.
int64_t bytesOf(mlir::RankedTensorType type);
inline int64_t bytesOf(mlir::Value v) {
  return bytesOf(mlir::cast<mlir::RankedTensorType>(v.getType()));
}

/// The grid `op` names (its shard.grid's shape; empty if there is none)
/// and the axes it acts over, resolved as the plan's kernels are.
rt::KernelGrid gridOf(mlir::Operation *op, mlir::FlatSymbolRefAttr grid,
                      llvm::ArrayRef<int16_t> axes);

} // namespace parallax

#endif // PARALLAX_LIB_TRANSFORMS_BUCKETS_H
