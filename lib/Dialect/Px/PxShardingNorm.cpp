//===- PxShardingNorm.cpp - layer normalization on a block of rows --------===//
//
// px.layer_norm and its gradient normalize each row (the dimensions from
// `axis` on) alone, so they are parallel over the leading dimensions: a
// block of rows (tokens) needs nothing from the other ranks, as Megatron-LM's
// sequence parallelism runs its layer norms. The normalized dimensions stay
// whole; a sharding that splits them is answered by gathering them. The
// scale's and bias's gradients sum over the rows: on a block of rows each
// rank's are partial sums, all-reduced over the axes that split the rows
// (MLIR 22's shardings carry no partial state).
//
//===----------------------------------------------------------------------===//

#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Dialect/Px/PxShapes.h"

#include "PxShardingModel.h"

using namespace parallax::px;
using namespace parallax::px::sharding;

namespace {

/// The loops of a layer norm over x of rank r normalized from `axis`: x's
/// dimensions (the leading ones may be split), then one loop per size-1
/// dimension of `mean` and of `inv_std_dev`, which no split reaches.
struct RowLoops {
  int64_t rank, axis;

  int64_t count() const { return rank + 2 * (rank - axis); }
  /// Loops [from, to) as a map over all the loops.
  AffineMap dims(int64_t from, int64_t to, MLIRContext *ctx) const {
    SmallVector<AffineExpr> e;
    for (int64_t d = from; d < to; ++d)
      e.push_back(getAffineDimExpr(d, ctx));
    return AffineMap::get(count(), 0, e, ctx);
  }
  /// The rows, then the k-th statistic's own size-1 loops.
  AffineMap statistic(int64_t k, MLIRContext *ctx) const {
    SmallVector<AffineExpr> e;
    for (int64_t d = 0; d < axis; ++d)
      e.push_back(getAffineDimExpr(d, ctx));
    for (int64_t d = 0; d < rank - axis; ++d)
      e.push_back(getAffineDimExpr(rank + k * (rank - axis) + d, ctx));
    return AffineMap::get(count(), 0, e, ctx);
  }
  AffineMap whole(MLIRContext *ctx) const { return dims(0, rank, ctx); }
  AffineMap row(MLIRContext *ctx) const { return dims(axis, rank, ctx); }
};

/// The loops of `op` (a layer norm or its gradient) where it has rows (it
/// normalizes from an axis >= 1) and its scale has the normalized shape
/// (the importer's form), or none: then it runs whole.
std::optional<RowLoops> rowLoopsOf(Operation *op) {
  auto x = cast<RankedTensorType>(op->getOperand(isa<LayerNormGradOp>(op) ? 1 : 0).getType());
  int64_t axisAttr = cast<IntegerAttr>(op->getAttr("axis")).getInt();
  std::optional<int64_t> axis = normalizeAxis(axisAttr, x.getRank());
  if (!axis || *axis < 1 || *axis >= x.getRank())
    return std::nullopt;
  Value scale = op->getOperand(isa<LayerNormGradOp>(op) ? 2 : 1);
  if (cast<RankedTensorType>(scale.getType()).getShape() != x.getShape().drop_front(*axis))
    return std::nullopt;
  return RowLoops{x.getRank(), *axis};
}

template <typename Op>
struct RowNormSharding : public PxShardingModel<RowNormSharding<Op>, Op> {
  SmallVector<IteratorType> getLoopIteratorTypes(Operation *op) const {
    std::optional<RowLoops> l = rowLoopsOf(op);
    return SmallVector<IteratorType>(l ? l->count() : parallelOver(op->getResult(0)).size(),
                                     IteratorType::parallel);
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    std::optional<RowLoops> l = rowLoopsOf(op);
    if (!l)
      return {};
    MLIRContext *ctx = op->getContext();
    if (auto ln = dyn_cast<LayerNormOp>(op)) {
      // (x, scale, bias?) -> (y, mean, inv_std_dev)
      SmallVector<AffineMap> maps{l->whole(ctx), l->row(ctx)};
      if (ln.getBias()) {
        if (ln.getBias().getType() != ln.getScale().getType())
          return {};
        maps.push_back(l->row(ctx));
      }
      maps.append({l->whole(ctx), l->statistic(0, ctx), l->statistic(1, ctx)});
      return maps;
    }
    // (dy, x, scale, mean, inv_std_dev) -> (dx, dscale, dbias)
    return {l->whole(ctx),        l->whole(ctx),        l->row(ctx), l->statistic(0, ctx),
            l->statistic(1, ctx), l->whole(ctx),        l->row(ctx), l->row(ctx)};
  }

  /// Only the rows may be split.
  FailureOr<ShardingOption> getShardingOption(Operation *op, ArrayRef<Sharding> operands,
                                              ArrayRef<Sharding> results) const {
    FailureOr<ShardingOption> option =
        PxShardingModel<RowNormSharding<Op>, Op>::getShardingOption(op, operands, results);
    std::optional<RowLoops> l = rowLoopsOf(op);
    if (succeeded(option) && !option->empty && l && this->described(op))
      for (int64_t d = l->axis; d < (int64_t)option->shardingArray.size(); ++d)
        option->shardingArray[d].clear();
    return option;
  }

  LogicalResult finishPartition(Operation *op, ArrayRef<Sharding> operandShardings,
                                ArrayRef<Sharding> resultShardings, IRMapping &partitionMap,
                                OpBuilder &builder) const {
    auto grad = dyn_cast<LayerNormGradOp>(op);
    std::optional<RowLoops> l = rowLoopsOf(op);
    if (!grad || !l || !resultShardings[0] || !this->described(op))
      return success();
    ShardingArray loops = getGridAxisAssignmentForLoopIterators(
        operandShardings, resultShardings, getLoopIteratorTypes(op), getIndexingMaps(op));
    SmallVector<GridAxis> rows;
    for (int64_t d = 0; d < l->axis && d < (int64_t)loops.size(); ++d)
      llvm::append_range(rows, loops[d]);
    if (rows.empty())
      return success();
    llvm::sort(rows);
    for (Value partial : {Value(grad.getDscale()), Value(grad.getDbias())})
      partitionMap.map(partial,
                       shard::AllReduceOp::create(builder, op->getLoc(),
                                                  partitionMap.lookup(partial),
                                                  resultShardings[0].getGrid(), rows,
                                                  ReductionKind::Sum)
                           .getResult());
    return success();
  }
};

} // namespace

void parallax::px::sharding::attachNormModels(MLIRContext *ctx) {
  LayerNormOp::attachInterface<RowNormSharding<LayerNormOp>>(*ctx);
  LayerNormGradOp::attachInterface<RowNormSharding<LayerNormGradOp>>(*ctx);
}
