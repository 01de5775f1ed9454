//===- PxShardingGather.cpp - shard models of row-gathered tables ---------===//
//
// Megatron-LM's vocabulary-parallel embedding under upstream's SPMD passes.
// px.gather on axis 0 is a loop nest over its result's dimensions and the
// table's rows v, summed: out[i, h] = sum_v (ids[i] == v) table[v, h]. A
// table split by rows splits v, so each rank's gather is a partial sum
// (the rows it holds, zeros for the others) that partition all-reduces, as
// a product's split k. The backward pass needs no collective on that axis:
// the gradient of a row block is the rows of the whole gradient whose ids
// fall in the block (px.make_sparse_grad `block of` the same group), and
// px.gradient follows its variable even with a row-sparse gradient, which
// no sharding annotation can carry.
//
//===----------------------------------------------------------------------===//

#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Dialect/Px/PxShapes.h"

#include "PxShardingModel.h"

using namespace parallax::px;
using namespace parallax::px::sharding;

namespace {

using utils::IteratorType;

/// Loops (result dimensions..., v): the result's dimensions are parallel,
/// the table's row v a sum.
struct GatherSharding : public PxShardingModel<GatherSharding, parallax::px::GatherOp> {
  SmallVector<IteratorType> getLoopIteratorTypes(Operation *op) const {
    auto out = cast<RankedTensorType>(op->getResult(0).getType());
    SmallVector<IteratorType> it(out.getRank(), IteratorType::parallel);
    it.push_back(IteratorType::reduction);
    return it;
  }
  SmallVector<ReductionKind> getReductionLoopIteratorKinds(Operation *) const {
    return {ReductionKind::Sum};
  }
  /// data (v, h...), indices (i...), result (i..., h...). Another axis, or a
  /// gather already of a block, is not described (computed whole).
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    auto gather = cast<parallax::px::GatherOp>(op);
    auto data = gather.getData().getType();
    if (gather.getGrid() || normalizeAxis((int64_t)gather.getAxis(), data.getRank()) != 0)
      return {};
    MLIRContext *ctx = op->getContext();
    int64_t ids = gather.getIndices().getType().getRank();
    int64_t out = gather.getType().getRank(), loops = out + 1;
    SmallVector<AffineExpr> table{getAffineDimExpr(out, ctx)};
    for (int64_t d = ids; d < out; ++d)
      table.push_back(getAffineDimExpr(d, ctx));
    SmallVector<AffineExpr> index, result;
    for (int64_t d = 0; d < ids; ++d)
      index.push_back(getAffineDimExpr(d, ctx));
    for (int64_t d = 0; d < out; ++d)
      result.push_back(getAffineDimExpr(d, ctx));
    return {AffineMap::get(loops, 0, table, ctx), AffineMap::get(loops, 0, index, ctx),
            AffineMap::get(loops, 0, result, ctx)};
  }

  /// A split v: the gather of this rank's rows (`block of` the axes that
  /// split them), then the sum over those axes.
  LogicalResult finishPartition(Operation *op, ArrayRef<Sharding> operandShardings,
                                ArrayRef<Sharding> resultShardings, IRMapping &partitionMap,
                                OpBuilder &builder) const {
    if (getIndexingMaps(op).empty() || !resultShardings[0])
      return success();
    SmallVector<GridAxis> rows = reductionAxes(op, operandShardings, resultShardings);
    if (rows.empty())
      return success();
    Value local = partitionMap.lookup(op->getResult(0));
    auto block = local.getDefiningOp<parallax::px::GatherOp>();
    block.setGridAttr(resultShardings[0].getGridAttr());
    block.setGridAxesAttr(GridAxesAttr::get(op->getContext(), rows));
    partitionMap.map(op->getResult(0),
                     shard::AllReduceOp::create(builder, op->getLoc(), local,
                                                resultShardings[0].getGrid(), rows,
                                                ReductionKind::Sum)
                         .getResult());
    return success();
  }
};

/// How the variable whose gradient `grad` is was annotated for its
/// px.gradient (null when it was not): a row-sparse value carries no
/// sharding of its own.
Sharding variableSharding(Value grad) {
  for (Operation *user : grad.getUsers())
    if (auto g = dyn_cast<GradientOp>(user))
      if (auto s = g.getVariable().getDefiningOp<ShardOp>())
        return Sharding(s.getSharding());
  return Sharding();
}

/// Its rows and values are read whole; its result is the gradient of the
/// block of rows its variable was split into.
struct MakeSparseGradSharding
    : public PxShardingModel<MakeSparseGradSharding, MakeSparseGradOp> {
  SmallVector<IteratorType> getLoopIteratorTypes(Operation *op) const {
    return SmallVector<IteratorType>(
        cast<MakeSparseGradOp>(op).getValues().getType().getRank(), IteratorType::parallel);
  }
  SmallVector<AffineMap> getIndexingMaps(Operation *) const { return {}; }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings, IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable, OpBuilder &builder) const {
    Sharding s = variableSharding(op->getResult(0));
    if (replicated(s))
      return partitionAsIs(op, partitionedOperands, operandShardings, resultShardings,
                           partitionMap, symbolTable, builder);
    ArrayRef<GridAxesAttr> split = s.getSplitAxes();
    if (llvm::any_of(split.drop_front(), [](GridAxesAttr a) { return !a.empty(); }) ||
        !s.getStaticHaloSizes().empty() || !s.getStaticShardedDimsOffsets().empty())
      return op->emitOpError("cannot be split: its variable is split other than "
                             "evenly by rows (")
             << s << ")";
    auto whole = cast<SparseGradType>(op->getResult(0).getType());
    auto block = cast<RankedTensorType>(shardType(
        whole.getDenseType(), getGrid(op, s.getGridAttr(), symbolTable), s));
    auto local = MakeSparseGradOp::create(
        builder, op->getLoc(), SparseGradType::get(op->getContext(), whole.getRows(), block),
        partitionedOperands[0], partitionedOperands[1], s.getGridAttr(), split.front());
    partitionMap.map(op->getResult(0), local.getOutput());
    return success();
  }
};

/// A dense gradient has its variable's sharding (upstream's default rules
/// on identity maps); with a row-sparse one only the variable is annotated,
/// and the update is of whatever block the variable is.
struct GradientSharding : public PxShardingModel<GradientSharding, GradientOp> {
  using Base = PxShardingModel<GradientSharding, GradientOp>;

  static bool sparse(Operation *op) {
    return isa<SparseGradType>(cast<GradientOp>(op).getGrad().getType());
  }
  SmallVector<IteratorType> getLoopIteratorTypes(Operation *op) const {
    return SmallVector<IteratorType>(
        cast<GradientOp>(op).getVariable().getType().getRank(), IteratorType::parallel);
  }
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    auto g = cast<GradientOp>(op);
    if (g.getGrad().getType() != g.getVariable().getType())
      return {};
    auto id = AffineMap::getMultiDimIdentityMap(g.getVariable().getType().getRank(),
                                                op->getContext());
    return {id, id};
  }

  FailureOr<ShardingOption> getShardingOption(Operation *op,
                                              ArrayRef<Sharding> operandShardings,
                                              ArrayRef<Sharding> resultShardings) const {
    if (!sparse(op))
      return Base::getShardingOption(op, operandShardings, resultShardings);
    const Sharding &var = operandShardings[0];
    if (!var)
      return ShardingOption::makeEmpty();
    ShardingArray loops(getLoopIteratorTypes(op).size());
    for (auto [d, axes] : llvm::enumerate(var.getSplitAxes()))
      if (d < loops.size())
        loops[d].assign(axes.asArrayRef().begin(), axes.asArrayRef().end());
    return ShardingOption(loops, var.getGridAttr());
  }

  FailureOr<std::vector<Sharding>> getShardingAnnotations(Operation *op,
                                                          const ShardingOption &option) const {
    if (!sparse(op))
      return Base::getShardingAnnotations(op, option);
    return std::vector<Sharding>{variableShardingOf(op, option), Sharding()};
  }

  LogicalResult addShardingAnnotations(Operation *op, OpBuilder &b,
                                       const ShardingOption &option) const {
    if (!sparse(op))
      return Base::addShardingAnnotations(op, b, option);
    maybeInsertSourceShardingAnnotation(variableShardingOf(op, option), op->getOpOperand(0), b);
    return success();
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings, IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable, OpBuilder &builder) const {
    if (!sparse(op))
      return Base::partition(op, partitionedOperands, operandShardings, resultShardings,
                             partitionMap, symbolTable, builder);
    builder.clone(*op, partitionMap);
    return success();
  }

private:
  static Sharding variableShardingOf(Operation *op, const ShardingOption &option) {
    SmallVector<GridAxesAttr> axes;
    for (const auto &loop : option.shardingArray)
      axes.push_back(GridAxesAttr::get(op->getContext(), loop));
    while (!axes.empty() && axes.back().empty())
      axes.pop_back();
    return Sharding::get(option.grid, axes);
  }
};

} // namespace

void parallax::px::sharding::attachRowBlockModels(MLIRContext *ctx) {
  parallax::px::GatherOp::attachInterface<GatherSharding>(*ctx);
  MakeSparseGradOp::attachInterface<MakeSparseGradSharding>(*ctx);
  GradientOp::attachInterface<GradientSharding>(*ctx);
}
