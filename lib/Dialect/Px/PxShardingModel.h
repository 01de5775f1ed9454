//===- PxShardingModel.h - what the px shard models share -------*- C++ -*-===//
//
// Private to lib/Dialect/Px: the common part of the px ops' ShardingInterface
// models (PxShardingInterface.cpp, PxShardingConv.cpp, PxShardingGather.cpp,
// PxShardingHeads.cpp, PxShardingLoss.cpp, PxShardingNorm.cpp),
// and the hooks by which the convolution, normalization and pooling models
// and the row-block (embedding) models are attached.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_LIB_DIALECT_PX_PXSHARDINGMODEL_H
#define PARALLAX_LIB_DIALECT_PX_PXSHARDINGMODEL_H

#include "parallax/Dialect/Px/PxDialect.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterfaceImpl.h"
#include "mlir/IR/IRMapping.h"

namespace parallax::px::sharding {

using namespace mlir;
using namespace mlir::shard;
using utils::IteratorType;

/// Parallel iterators, one per dimension of `v`.
inline SmallVector<IteratorType> parallelOver(Value v) {
  return SmallVector<IteratorType>(cast<RankedTensorType>(v.getType()).getRank(),
                                   IteratorType::parallel);
}

inline bool replicated(const Sharding &s) {
  return !s || llvm::all_of(s.getSplitAxes(), [](GridAxesAttr a) { return a.empty(); });
}

/// Clones `op` on its partitioned operands after checking the shardings the
/// passes chose: a result without one (an unused value), or any split of an
/// instance the model cannot describe (no indexing maps), is an error
/// naming the op rather than a crash in upstream's partition.
inline LogicalResult partitionAsIs(Operation *op, ArrayRef<Value> partitionedOperands,
                            ArrayRef<Sharding> operandShardings,
                            ArrayRef<Sharding> resultShardings, IRMapping &partitionMap,
                            SymbolTableCollection &symbolTable, OpBuilder &builder) {
  if (cast<ShardingInterface>(op).getIndexingMaps().empty() &&
      !(llvm::all_of(operandShardings, replicated) &&
        llvm::all_of(resultShardings, replicated)))
    return op->emitOpError("cannot be split: its sharding model does not describe "
                           "this instance (a size-1 broadcast, or batch dimensions "
                           "that broadcast)");
  // A result propagation left alone (unused, as batch norm's saved
  // statistics can be) is whole.
  FlatSymbolRefAttr grid;
  for (ArrayRef<Sharding> list : {operandShardings, resultShardings})
    for (const Sharding &sh : list)
      if (sh && !grid)
        grid = sh.getGridAttr();
  if (!grid) {
    Operation *clone = builder.clone(*op, partitionMap);
    for (auto [from, to] : llvm::zip(op->getResults(), clone->getResults()))
      partitionMap.map(from, to);
    return success();
  }
  SmallVector<Sharding, 2> results(resultShardings.begin(), resultShardings.end());
  for (auto [i, r] : llvm::enumerate(results))
    if (!r && isa<RankedTensorType>(op->getResult(i).getType()))
      r = Sharding::get(grid, {});
  partitionTriviallyShardableOperation(*op, partitionedOperands, operandShardings, results,
                                       partitionMap, symbolTable, builder);
  return success();
}

/// The px models' common part: an instance the model cannot describe (no
/// indexing maps) is offered whole (every operand and result replicated),
/// so propagation reshards around it instead of failing.
template <typename Derived, typename Op>
struct PxShardingModel : public ShardingInterface::ExternalModel<Derived, Op> {
  bool described(Operation *op) const {
    return !static_cast<const Derived *>(this)->getIndexingMaps(op).empty();
  }

  FailureOr<ShardingOption> getShardingOption(Operation *op,
                                              ArrayRef<Sharding> operandShardings,
                                              ArrayRef<Sharding> resultShardings) const {
    if (described(op))
      return shard::detail::defaultGetShardingOption(op, operandShardings, resultShardings);
    for (ArrayRef<Sharding> list : {operandShardings, resultShardings})
      for (const Sharding &sh : list)
        if (sh)
          return ShardingOption(
              ShardingArray(static_cast<const Derived *>(this)->getLoopIteratorTypes(op).size()),
              sh.getGridAttr());
    return ShardingOption::makeEmpty();
  }

  FailureOr<std::vector<Sharding>> getShardingAnnotations(Operation *op,
                                                          const ShardingOption &option) const {
    if (described(op))
      return shard::detail::defaultGetShardingAnnotations(op, option);
    std::vector<Sharding> all;
    for (Type t : llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes()))
      all.push_back(isa<RankedTensorType>(t) ? Sharding::get(option.grid, {}) : Sharding());
    return all;
  }

  LogicalResult addShardingAnnotations(Operation *op, OpBuilder &b,
                                       const ShardingOption &option) const {
    if (described(op))
      return shard::detail::defaultAddShardingAnnotations(op, b, option);
    Sharding whole = Sharding::get(option.grid, {});
    for (OpResult r : op->getResults())
      if (isa<RankedTensorType>(r.getType()))
        maybeInsertTargetShardingAnnotation(whole, r, b);
    for (OpOperand &o : op->getOpOperands())
      if (isa<RankedTensorType>(o.get().getType()))
        maybeInsertSourceShardingAnnotation(whole, o, b);
    return success();
  }

  /// The op on its local operands (what most models need), then what the
  /// model adds to it (finishPartition).
  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings, IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable, OpBuilder &builder) const {
    if (failed(partitionAsIs(op, partitionedOperands, operandShardings, resultShardings,
                             partitionMap, symbolTable, builder)))
      return failure();
    return static_cast<const Derived *>(this)->finishPartition(op, operandShardings,
                                                               resultShardings, partitionMap,
                                                               builder);
  }

  /// After the op is cloned on its local operands (`partitionMap` maps its
  /// results to the clone's): a model's collectives of partial sums, or the
  /// attributes that tell a block's kernel where it lies. Nothing here.
  LogicalResult finishPartition(Operation *op, ArrayRef<Sharding> operandShardings,
                                ArrayRef<Sharding> resultShardings, IRMapping &partitionMap,
                                OpBuilder &builder) const {
    return success();
  }
};

/// The ranks of `axes` of the grid `gridName` names from `op` (0 when it
/// cannot be found): what a split over those axes must divide.
inline int64_t ranksOn(Operation *op, FlatSymbolRefAttr gridName, ArrayRef<GridAxis> axes) {
  SymbolTableCollection symbols;
  GridOp grid = getGridOrNull(op, gridName, symbols);
  return grid ? collectiveProcessGroupSize(axes, grid) : 0;
}

/// The grid axes that split the op's reduction loops (a product's k, a
/// convolution's input channels).
inline SmallVector<GridAxis> reductionAxes(Operation *op, ArrayRef<Sharding> operandShardings,
                                    ArrayRef<Sharding> resultShardings) {
  auto sharding = cast<ShardingInterface>(op);
  ShardingArray axes = getGridAxisAssignmentForLoopIterators(
      operandShardings, resultShardings, sharding.getLoopIteratorTypes(),
      sharding.getIndexingMaps());
  return getReductionGridAxes(sharding.getLoopIteratorTypes(), axes);
}

/// Attaches the models of px.conv, its gradients, px.batch_norm, the pools
/// and their gradients (PxShardingConv.cpp); the generic models leave
/// those ops alone (hasConvolutionModel).
void attachConvolutionModels(MLIRContext *ctx);
template <typename Op>
constexpr bool hasConvolutionModel =
    llvm::is_one_of<Op, ConvOp, ConvGradInputOp, ConvGradFilterOp, BatchNormOp,
                    BatchNormGradOp, MaxPoolOp, AveragePoolOp, MaxPoolGradOp,
                    AvgPoolGradOp>::value;

/// Attaches the models that carry a split of heads or features through a
/// transformer block (PxShardingHeads.cpp): px.reshape, softmax and
/// log-softmax with their gradients, px.dropout and px.dropout_grad.
void attachHeadModels(MLIRContext *ctx);
template <typename Op>
constexpr bool hasHeadModel =
    llvm::is_one_of<Op, ReshapeOp, SoftmaxOp, LogSoftmaxOp, SoftmaxGradOp, LogSoftmaxGradOp,
                    DropoutOp, DropoutGradOp>::value;

/// Attaches the vocabulary-parallel cross entropy's models
/// (PxShardingLoss.cpp): px.softmax_cross_entropy_loss and its gradient on
/// a block of the classes.
void attachLossModels(MLIRContext *ctx);
template <typename Op>
constexpr bool hasLossModel =
    llvm::is_one_of<Op, SoftmaxCrossEntropyLossOp, SoftmaxCrossEntropyLossGradOp>::value;

/// Attaches the models of px.layer_norm and its gradient
/// (PxShardingNorm.cpp): parallel over the rows, the normalized dimensions
/// whole.
void attachNormModels(MLIRContext *ctx);
template <typename Op>
constexpr bool hasNormModel = llvm::is_one_of<Op, LayerNormOp, LayerNormGradOp>::value;

/// Attaches the models of the row-block ops (PxShardingGather.cpp):
/// px.gather (a table split by rows is a vocabulary-parallel embedding),
/// px.make_sparse_grad and px.gradient.
void attachRowBlockModels(MLIRContext *ctx);

} // namespace parallax::px::sharding

#endif // PARALLAX_LIB_DIALECT_PX_PXSHARDINGMODEL_H
