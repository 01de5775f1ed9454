//===- PxShardingInterface.h - upstream shard models of px ops -*- C++ -*-===//
//
// The px ops' models of MLIR's ShardingInterface, so that the upstream
// `sharding-propagation` and `shard-partition` passes work on px IR:
// element-wise ops follow their operands (broadcast dimensions excepted),
// px.gemm and px.matmul are (m, n, k) iteration spaces whose k is a sum,
// convolutions (samples, output channels, summed input channels), batch
// norm and pooling are per channel (lib/Dialect/Px/PxShardingConv.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_DIALECT_PX_PXSHARDINGINTERFACE_H
#define PARALLAX_DIALECT_PX_PXSHARDINGINTERFACE_H

#include <cstdint>
#include <optional>

namespace mlir {
class DialectRegistry;
class Operation;
} // namespace mlir

namespace parallax::px {

void registerShardingInterfaceModels(mlir::DialectRegistry &registry);

/// Domain parallelism (SPAA'18): the rows a convolution-like op (px.conv and
/// its gradients, the pools and theirs) needs from its neighbours when the
/// first spatial dimension of its tensors is split into equal consecutive
/// blocks, `lo` rows above a block and `hi` below. None where such a split
/// does not map each input block onto one output block: input rows other
/// than stride x output rows, a window that skips more rows than a stride
/// leaves, a grouped convolution, or an average pool that divides by the
/// real rows of a padded window.
struct Halo {
  int64_t lo = 0, hi = 0;
};
std::optional<Halo> domainHalo(mlir::Operation *op);

/// Whether an op's rows (`inRows` in, `outRows` out, `halo` rows from its
/// neighbours) split into `ranks` equal blocks for domain parallelism:
/// both divide and the halos fit in one input block.
bool rowsSplitInto(int64_t inRows, int64_t outRows, Halo halo, int64_t ranks);

/// Whether `op` is a grouped px.conv (ResNeXt's, or MobileNet's depthwise
/// one: a group per channel): a split of its channels into whole groups
/// runs on the rank's block with no collective (a split through a group
/// computes it whole).
bool isGroupedConv(mlir::Operation *op);

} // namespace parallax::px

#endif // PARALLAX_DIALECT_PX_PXSHARDINGINTERFACE_H
