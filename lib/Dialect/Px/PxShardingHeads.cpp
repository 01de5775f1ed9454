//===- PxShardingHeads.cpp - shard models that carry a head split ---------===//
//
// Megatron-LM's tensor-parallel attention and feed-forward block under
// upstream's SPMD passes: the query, key and value projections split by
// output features and the output projection by input features leave the
// ops between them on a block of heads (or of the hidden features), with
// no collective, where these models let the split through:
//  - px.reshape moves a split between the leading dimensions of the groups
//    it merges or factors ([B, T, H*D] <-> [B, T, H, D] keeps a block of
//    H); any other split is gathered before it;
//  - softmax, log-softmax and their gradients are parallel over every
//    dimension but their axis;
//  - px.dropout and px.dropout_grad are element-wise; a dropout on a block
//    numbers its random stream over the whole tensor (`block of` the grid,
//    `split_dim`), so the masks are those of one rank.
//
//===----------------------------------------------------------------------===//

#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Dialect/Px/PxShapes.h"

#include "PxShardingModel.h"

using namespace parallax::px;
using namespace parallax::px::sharding;

namespace {

/// Identity maps for every operand and result (all of one shape).
SmallVector<AffineMap> identityMaps(Operation *op) {
  auto t = cast<RankedTensorType>(op->getResult(0).getType());
  for (Type u : llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes()))
    if (cast<RankedTensorType>(u).getShape() != t.getShape())
      return {};
  return SmallVector<AffineMap>(op->getNumOperands() + op->getNumResults(),
                                AffineMap::getMultiDimIdentityMap(t.getRank(), op->getContext()));
}

/// The dimension a softmax-like op normalizes along.
int64_t axisOf(Operation *op) {
  auto rank = cast<RankedTensorType>(op->getResult(0).getType()).getRank();
  int64_t axis = cast<IntegerAttr>(op->getAttr("axis")).getInt();
  return normalizeAxis(axis, rank).value_or(rank);
}

/// Softmax, log-softmax and their gradients: parallel over every dimension
/// but the axis, which a rank must hold whole (the split is gathered).
template <typename Op>
struct AxisSharding : public PxShardingModel<AxisSharding<Op>, Op> {
  SmallVector<IteratorType> getLoopIteratorTypes(Operation *op) const {
    return parallelOver(op->getResult(0));
  }
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const { return identityMaps(op); }
  FailureOr<ShardingOption> getShardingOption(Operation *op, ArrayRef<Sharding> operands,
                                              ArrayRef<Sharding> results) const {
    FailureOr<ShardingOption> option =
        PxShardingModel<AxisSharding<Op>, Op>::getShardingOption(op, operands, results);
    if (succeeded(option) && !option->empty && this->described(op) &&
        (size_t)axisOf(op) < option->shardingArray.size())
      option->shardingArray[axisOf(op)].clear();
    return option;
  }
};

/// dropout(x) -> (y, mask) and dropout_grad(dy, mask) -> dx: element-wise.
/// A dropout splits one dimension at most (its stream is numbered for one).
template <typename Op>
struct DropoutSharding : public PxShardingModel<DropoutSharding<Op>, Op> {
  SmallVector<IteratorType> getLoopIteratorTypes(Operation *op) const {
    return parallelOver(op->getResult(0));
  }
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    if (auto d = dyn_cast<DropoutOp>(op); d && d.getGrid())
      return {}; // already a block
    return identityMaps(op);
  }
  FailureOr<ShardingOption> getShardingOption(Operation *op, ArrayRef<Sharding> operands,
                                              ArrayRef<Sharding> results) const {
    FailureOr<ShardingOption> option =
        PxShardingModel<DropoutSharding<Op>, Op>::getShardingOption(op, operands, results);
    if (succeeded(option) && !option->empty && isa<DropoutOp>(op)) {
      // The kernel finds its block from its place in the group of the
      // split's axes, which counts them in the grid's order.
      bool split = false;
      for (SmallVector<GridAxis> &axes : option->shardingArray) {
        if (split || !llvm::is_sorted(axes))
          axes.clear();
        split |= !axes.empty();
      }
    }
    return option;
  }
  LogicalResult finishPartition(Operation *op, ArrayRef<Sharding> operandShardings,
                                ArrayRef<Sharding> resultShardings, IRMapping &partitionMap,
                                OpBuilder &builder) const {
    auto dropout = dyn_cast<DropoutOp>(op);
    if (!dropout || !resultShardings[0] || replicated(resultShardings[0]))
      return success();
    auto block = cast<DropoutOp>(partitionMap.lookup(op->getResult(0)).getDefiningOp());
    for (auto [dim, axes] : llvm::enumerate(resultShardings[0].getSplitAxes())) {
      if (axes.empty())
        continue;
      block.setGridAttr(resultShardings[0].getGridAttr());
      block.setGridAxesAttr(axes);
      block.setSplitDim((uint64_t)dim);
      break;
    }
    return success();
  }
};

/// Trailing unsplit dimensions dropped, as upstream writes its shardings.
Sharding shardingOf(FlatSymbolRefAttr grid, SmallVector<SmallVector<GridAxis>> axes) {
  while (!axes.empty() && axes.back().empty())
    axes.pop_back();
  SmallVector<GridAxesAttr> attrs;
  for (const SmallVector<GridAxis> &a : axes)
    attrs.push_back(GridAxesAttr::get(grid.getContext(), a));
  return Sharding::get(grid, attrs);
}

/// px.reshape: loops are the output's dimensions. A split it cannot carry
/// (a dimension inside a group, or blocks the shapes do not divide into)
/// is left for propagation to gather.
struct ReshapeSharding : public ShardingInterface::ExternalModel<ReshapeSharding, ReshapeOp> {
  SmallVector<IteratorType> getLoopIteratorTypes(Operation *op) const {
    return parallelOver(op->getResult(0));
  }
  SmallVector<AffineMap> getIndexingMaps(Operation *) const { return {}; }

  /// Whether the block of output dimension `outDim` over `axes` is a block
  /// of the input's matching dimension.
  static std::optional<int64_t> carried(ReshapeOp op, const Regrouping &g, int64_t outDim,
                                        FlatSymbolRefAttr grid, ArrayRef<GridAxis> axes) {
    std::optional<int64_t> inDim = g.inputDimOf(outDim);
    int64_t ranks = ranksOn(op, grid, axes);
    if (!inDim || ranks < 1 || op.getType().getDimSize(outDim) % ranks != 0 ||
        op.getInput().getType().getDimSize(*inDim) % ranks != 0)
      return std::nullopt;
    return inDim;
  }

  FailureOr<ShardingOption> getShardingOption(Operation *op, ArrayRef<Sharding> operands,
                                              ArrayRef<Sharding> results) const {
    auto reshape = cast<ReshapeOp>(op);
    std::optional<Regrouping> g =
        Regrouping::of(reshape.getInput().getType().getShape(), reshape.getType().getShape());
    FlatSymbolRefAttr grid;
    for (const Sharding &s : llvm::concat<const Sharding>(results, operands))
      if (s && !grid)
        grid = s.getGridAttr();
    if (!grid)
      return ShardingOption::makeEmpty();
    ShardingOption option(ShardingArray(reshape.getType().getRank()), grid);
    if (!g)
      return option;
    llvm::SmallDenseSet<GridAxis> used;
    auto take = [&](int64_t outDim, ArrayRef<GridAxis> axes) {
      if (axes.empty() || !option.shardingArray[outDim].empty() ||
          llvm::any_of(axes, [&](GridAxis a) { return used.contains(a); }) ||
          !carried(reshape, *g, outDim, grid, axes))
        return;
      option.shardingArray[outDim].assign(axes.begin(), axes.end());
      used.insert(axes.begin(), axes.end());
    };
    if (!results.empty() && results[0] && results[0].getGridAttr() == grid)
      for (auto [d, axes] : llvm::enumerate(results[0].getSplitAxes()))
        take((int64_t)d, axes.asArrayRef());
    if (!operands.empty() && operands[0] && operands[0].getGridAttr() == grid)
      for (auto [d, axes] : llvm::enumerate(operands[0].getSplitAxes()))
        if (std::optional<int64_t> outDim = g->outputDimOf((int64_t)d))
          take(*outDim, axes.asArrayRef());
    return option;
  }

  FailureOr<std::vector<Sharding>> getShardingAnnotations(Operation *op,
                                                          const ShardingOption &option) const {
    auto reshape = cast<ReshapeOp>(op);
    std::optional<Regrouping> g =
        Regrouping::of(reshape.getInput().getType().getShape(), reshape.getType().getShape());
    SmallVector<SmallVector<GridAxis>> in(reshape.getInput().getType().getRank()),
        out(reshape.getType().getRank());
    for (auto [d, axes] : llvm::enumerate(option.shardingArray)) {
      if (axes.empty() || !g)
        continue;
      std::optional<int64_t> inDim = g->inputDimOf((int64_t)d);
      if (!inDim)
        return failure();
      in[*inDim] = axes;
      out[d] = axes;
    }
    return std::vector<Sharding>{shardingOf(option.grid, in), shardingOf(option.grid, out)};
  }

  LogicalResult addShardingAnnotations(Operation *op, OpBuilder &b,
                                       const ShardingOption &option) const {
    FailureOr<std::vector<Sharding>> s = getShardingAnnotations(op, option);
    if (failed(s))
      return failure();
    maybeInsertTargetShardingAnnotation((*s)[1], op->getResult(0), b);
    maybeInsertSourceShardingAnnotation((*s)[0], op->getOpOperand(0), b);
    return success();
  }

  /// The reshape of the local block to the output's block shape.
  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings, IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable, OpBuilder &builder) const {
    auto reshape = cast<ReshapeOp>(op);
    RankedTensorType type = reshape.getType();
    if (resultShardings[0] && !replicated(resultShardings[0])) {
      GridOp grid = getGrid(op, resultShardings[0].getGridAttr(), symbolTable);
      type = cast<RankedTensorType>(shardType(type, grid, resultShardings[0]));
    }
    auto local = ReshapeOp::create(builder, op->getLoc(), type, partitionedOperands[0]);
    if (local.getInput().getType().getNumElements() != type.getNumElements())
      return op->emitOpError("cannot be split: its input block holds ")
             << local.getInput().getType().getNumElements() << " elements, its output block "
             << type.getNumElements();
    partitionMap.map(op->getResult(0), local.getOutput());
    return success();
  }
};

} // namespace

void parallax::px::sharding::attachHeadModels(MLIRContext *ctx) {
  SoftmaxOp::attachInterface<AxisSharding<SoftmaxOp>>(*ctx);
  LogSoftmaxOp::attachInterface<AxisSharding<LogSoftmaxOp>>(*ctx);
  SoftmaxGradOp::attachInterface<AxisSharding<SoftmaxGradOp>>(*ctx);
  LogSoftmaxGradOp::attachInterface<AxisSharding<LogSoftmaxGradOp>>(*ctx);
  DropoutOp::attachInterface<DropoutSharding<DropoutOp>>(*ctx);
  DropoutGradOp::attachInterface<DropoutSharding<DropoutGradOp>>(*ctx);
  ReshapeOp::attachInterface<ReshapeSharding>(*ctx);
}
