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

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace parallax::px {

void registerShardingInterfaceModels(mlir::DialectRegistry &registry);

} // namespace parallax::px

#endif // PARALLAX_DIALECT_PX_PXSHARDINGINTERFACE_H
