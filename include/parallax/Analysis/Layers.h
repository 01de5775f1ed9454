//===- Layers.h - the layers of a px step, as the grid model sees them -*- C++ -*-===//
//
// Every product with a trainable weight (px.gemm, px.matmul, px.conv whose
// weight is a trainable px.variable) is one layer of the SPAA'18 cost model
// (GridCost.h), in step order, with the batch its shapes carry.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_ANALYSIS_LAYERS_H
#define PARALLAX_ANALYSIS_LAYERS_H

#include "parallax/Analysis/GridCost.h"

#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Dialect/Px/PxShardingInterface.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <vector>

namespace parallax {

/// The ops the loss is computed from (the forward pass), px-sync's
/// all-reduce of the loss left out.
llvm::DenseSet<mlir::Operation *> forwardOps(mlir::func::FuncOp func);

/// The trainable variable `v` reads, through reshapes and transposes (a
/// linear layer's x W^T is a matmul of the transposed weight), or null.
px::VariableOp trainableWeightOf(mlir::Value v);

/// A layer op's trainable weight, as layersOf names the layer: a px.gemm's
/// B, a px.matmul's right operand, a px.conv's weight (read through
/// reshapes and transposes); null for any other op.
px::VariableOp layerWeightOf(mlir::Operation *op);

/// A layer's weight as px-shard-model splits it over the model axis: a
/// px.gemm's B (without trans_a), a px.matmul's rank-2 right operand, or a
/// px.conv's weight with one group (a grouped convolution's channels are
/// tied group by group, and no sharding model splits them), each a
/// trainable variable read through transposes; and where its output
/// features (or channels) and input features are. Null for any other op.
struct SplittableWeight {
  mlir::Value value;
  int64_t outDim = 0, inDim = 0;
  explicit operator bool() const { return (bool)value; }
};
SplittableWeight splittableWeightOf(mlir::Operation *op);

/// A batched px.matmul of two computed activations, neither a layer's
/// weight: attention's scores (queries times keys) and context.
bool isActivationProduct(mlir::Operation *op);

/// Whether `user` is a px.gather of rows of `table` (its data, axis 0).
bool isRowGatherOf(mlir::Operation *user, mlir::Value table);

/// Ops that run on a block of channels, features or heads when their input
/// is split so (px's sharding models carry the split through them):
/// one-result element-wise ops, batch norm, pooling and grouped (depthwise)
/// convolutions, and a transformer
/// block's reshapes, transposes, softmax, dropout and products of two
/// activations. Any other op (a layer norm, a loss) runs whole, its split
/// input gathered.
bool followsChannelSplit(mlir::Operation *op);

/// The operand through which an op that follows a split (above) carries
/// it: the first operand of the result's shape (an activation, where a
/// bias add may list its broadcast bias first), else the first.
mlir::Value splitCarrierOf(mlir::Operation *op);

/// Where a layer's features are, for a split of them to follow: the
/// dimension of its output that a split by output features divides (a
/// product's last, a convolution's channels), and the dimension of its
/// data operand that a split by input features reads (the product's
/// contracted one, the channels). nullopt for any other op.
std::optional<int64_t> outputFeatureDim(mlir::Operation *layer);
std::optional<int64_t> inputFeatureDim(mlir::Operation *layer);

/// The dimension of `op`'s result that holds the split its operand `from`
/// has in dimension `dim`, for an op that follows a split; nullopt where
/// the split does not survive it (a softmax over it, a reshape that merges
/// it into another dimension, a product that sums it).
std::optional<int64_t> carriedSplitDim(mlir::Operation *op, mlir::Value from, int64_t dim);

/// Whether a split of `layer`'s output features reaches `consumer`'s input
/// features along `chain` (the ops between them, from the layer on):
/// Megatron's pairing of a column-split layer with a row-split one. Where
/// it does, the greatest common divisor of the sizes the split dimension
/// has on the way (the heads of a [B, T, H, D] reshape among them, a
/// grouped convolution's groups): the split survives on `ranks` model ranks
/// only if they divide it.
std::optional<int64_t> carriedFeatures(mlir::Operation *layer,
                                       llvm::ArrayRef<mlir::Operation *> chain,
                                       mlir::Operation *consumer);
/// The same up to the end of `chain`: the dimension the split is on there
/// and the sizes' divisor, or nullopt where it does not survive.
struct CarriedSplit {
  int64_t dim, sizes;
};
std::optional<CarriedSplit> featuresAlong(mlir::Operation *layer,
                                          llvm::ArrayRef<mlir::Operation *> chain);

/// The dimension of `op`'s operand `operand` that a split of its result's
/// dimension `dim` reads (an element-wise op's operands aligned at the
/// trailing dimensions, a product's rows, columns and batch dimensions),
/// nullopt where the operand has none (a broadcast, the summed dimension).
std::optional<int64_t> operandDimOf(mlir::Operation *op, mlir::Value operand, int64_t dim);
inline bool featuresReach(mlir::Operation *layer, llvm::ArrayRef<mlir::Operation *> chain,
                          mlir::Operation *consumer, int64_t ranks = 1) {
  std::optional<int64_t> sizes = carriedFeatures(layer, chain, consumer);
  return sizes && ranks > 0 && *sizes % ranks == 0;
}


/// The layers of `module`'s step function. A weight read through a reshape
/// or a transpose counts; a product of two computed values (attention scores) has no
/// weight and is left out.
std::vector<grid::Layer> layersOf(mlir::ModuleOp module);

/// `parallax-opt --grid-costs`: every Pr x Pc grid of `ranks` ranks with
/// its predicted bytes, time and memory per rank, the cheapest marked, and
/// the cheapest grid's layers one by one.
void printGridReport(const std::vector<grid::Layer> &layers, int64_t ranks,
                     const grid::Machine &machine, llvm::raw_ostream &os);

} // namespace parallax

#endif // PARALLAX_ANALYSIS_LAYERS_H
