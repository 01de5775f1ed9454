//===- PxShardingLoss.cpp - the vocabulary-parallel cross entropy ---------===//
//
// Megatron-LM's parallel cross entropy under upstream's SPMD passes. An
// output layer split by classes (its product split by columns: the LM
// head's vocabulary) leaves each model rank a block of the scores; these
// models take the loss on that block instead of gathering [N, V] scores:
//  - px.softmax_cross_entropy_loss is partitioned into the block's
//    log-softmax, whose maximum and sum of exponentials are all-reduced
//    over the split's axes ([N, 1] each), then px.nll_loss `block of` the
//    grid (a label in another block adds nothing) and the sum of the
//    partial losses;
//  - px.softmax_cross_entropy_loss_grad is local: the block of the
//    gradient, whose one-hot is 1 only where the label falls in the block.
// Only the class dimension is split, evenly, and without class weights.
//
// Scores split by lines instead (a convolution's rows under domain
// parallelism: [N, C, H, W] scores of every pixel) are taken on the block
// too: each rank's lines' losses, their sum all-reduced over the split's
// axes, and a mean's denominator counted over every block (the lines whose
// label is not ignore_index, all-reduced); the gradient is the block's,
// its scale 1 / that count (PxLossCount.h: with class weights, the
// lines' weights). Anything else is gathered first.
//
//===----------------------------------------------------------------------===//

#include "parallax/Dialect/Px/PxDialect.h"

#include "PxShardingModel.h"

#include "parallax/Dialect/Px/PxLossCount.h"

using namespace parallax::px;
using namespace parallax::px::sharding;

namespace {

/// Loops are the scores' dimensions, all parallel: operands and results
/// index them as scores [N, C, D...], labels [N, D...], weights [C], the
/// loss [] (sum, mean) or [N, D...] (none).
struct LossMaps {
  Value scores;
  bool weights, perLine;

  SmallVector<AffineMap> operator()(MLIRContext *ctx, bool gradient) const {
    int64_t rank = cast<RankedTensorType>(scores.getType()).getRank();
    SmallVector<AffineExpr> line;
    for (int64_t d = 0; d < rank; ++d)
      if (d != 1)
        line.push_back(getAffineDimExpr(d, ctx));
    AffineMap id = AffineMap::getMultiDimIdentityMap(rank, ctx);
    AffineMap lineMap = AffineMap::get(rank, 0, line, ctx);
    AffineMap loss = perLine ? lineMap : AffineMap::get(rank, 0, {}, ctx);
    AffineMap classes = AffineMap::get(rank, 0, {getAffineDimExpr(1, ctx)}, ctx);
    // forward (scores, labels, weights?) -> (loss, log_prob);
    // gradient (dloss, log_prob, labels, weights?) -> dscores.
    SmallVector<AffineMap> maps;
    if (gradient)
      maps.append({loss, id, lineMap});
    else
      maps.append({id, lineMap});
    if (weights)
      maps.push_back(classes);
    if (gradient)
      maps.push_back(id);
    else
      maps.append({loss, id});
    return maps;
  }
};

LossMaps mapsOf(Operation *op) {
  if (auto f = dyn_cast<SoftmaxCrossEntropyLossOp>(op))
    return {f.getScores(), (bool)f.getWeights(), f.getReduction() == "none"};
  auto g = cast<SoftmaxCrossEntropyLossGradOp>(op);
  return {g.getLogProb(), (bool)g.getWeights(), g.getReduction() == "none"};
}
/// The grid axes that split the classes of a partitioned instance (none:
/// computed whole).
SmallVector<GridAxis> classAxes(const Sharding &scores) {
  if (!scores || scores.getSplitAxes().size() < 2)
    return {};
  ArrayRef<GridAxis> axes = scores.getSplitAxes()[1].asArrayRef();
  return SmallVector<GridAxis>(axes.begin(), axes.end());
}

/// The grid axes that split the lines (every dimension but the classes).
SmallVector<GridAxis> lineAxes(const Sharding &scores) {
  SmallVector<GridAxis> out;
  if (!scores)
    return out;
  for (auto [d, axes] : llvm::enumerate(scores.getSplitAxes()))
    if (d != 1)
      out.append(axes.asArrayRef().begin(), axes.asArrayRef().end());
  return out;
}

template <typename Op>
struct ClassBlockSharding : public PxShardingModel<ClassBlockSharding<Op>, Op> {
  static constexpr bool kGradient = std::is_same_v<Op, SoftmaxCrossEntropyLossGradOp>;

  SmallVector<IteratorType> getLoopIteratorTypes(Operation *op) const {
    return parallelOver(mapsOf(op).scores);
  }
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    if constexpr (kGradient) {
      if (cast<Op>(op).getGrid())
        return {}; // already a block
    }
    return mapsOf(op)(op->getContext(), kGradient);
  }

  /// The classes split evenly and without class weights, or else any of
  /// the lines' dimensions evenly (a domain-split image's rows), a mean in
  /// f32 or f64 only (countsExactly); never both.
  FailureOr<ShardingOption> getShardingOption(Operation *op, ArrayRef<Sharding> operands,
                                              ArrayRef<Sharding> results) const {
    FailureOr<ShardingOption> option =
        PxShardingModel<ClassBlockSharding<Op>, Op>::getShardingOption(op, operands, results);
    if (failed(option) || option->empty || !this->described(op))
      return option;
    LossMaps maps = mapsOf(op);
    auto scores = cast<RankedTensorType>(maps.scores.getType());
    auto divides = [&](size_t d, ArrayRef<GridAxis> axes) {
      int64_t ranks = ranksOn(op, option->grid, axes);
      return ranks >= 1 && !ShapedType::isDynamic(scores.getDimSize(d)) &&
             scores.getDimSize(d) % ranks == 0;
    };
    bool classes = false;
    for (auto [d, axes] : llvm::enumerate(option->shardingArray)) {
      if (d != 1 || axes.empty())
        continue;
      if (maps.weights || !divides(d, axes))
        axes.clear();
      classes = !axes.empty();
    }
    // Only a mean counts its lines (in the loss's type).
    bool lines = countsExactly(scores.getElementType()) || reductionOf(op) != "mean";
    for (auto [d, axes] : llvm::enumerate(option->shardingArray))
      if (d != 1 && (classes || !lines || !divides(d, axes)))
        axes.clear();
    return option;
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings, IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable, OpBuilder &builder) const {
    const Sharding &scores = operandShardings[kGradient ? 1 : 0];
    SmallVector<GridAxis> axes = this->described(op) ? classAxes(scores) : SmallVector<GridAxis>{};
    if (axes.empty()) {
      SmallVector<GridAxis> lines =
          this->described(op) ? lineAxes(scores) : SmallVector<GridAxis>{};
      if (lines.empty() || reductionOf(op) == "none")
        return partitionAsIs(op, partitionedOperands, operandShardings, resultShardings,
                             partitionMap, symbolTable, builder);
      return partitionLines(cast<Op>(op), partitionedOperands, operandShardings,
                            resultShardings, scores,
                            GridAxesAttr::get(op->getContext(), lines), partitionMap,
                            symbolTable, builder);
    }
    auto axesAttr = GridAxesAttr::get(op->getContext(), axes);
    if constexpr (kGradient) {
      if (failed(partitionAsIs(op, partitionedOperands, operandShardings, resultShardings,
                               partitionMap, symbolTable, builder)))
        return failure();
      auto block = cast<Op>(partitionMap.lookup(op->getResult(0)).getDefiningOp());
      block.setGridAttr(scores.getGridAttr());
      block.setGridAxesAttr(axesAttr);
      return success();
    } else {
      return partitionForward(cast<Op>(op), partitionedOperands, scores, axesAttr,
                              partitionMap, builder);
    }
  }

private:
  static StringRef reductionOf(Operation *op) {
    return cast<Op>(op).getReduction();
  }

  /// The loss of a block of lines (reduction sum or mean): forward, the
  /// block's sum all-reduced over `axes`, divided for a mean by the lines
  /// every block counts; backward, the block's gradient of that sum scaled
  /// by 1 / the same count.
  static LogicalResult partitionLines(Op op, ArrayRef<Value> local,
                                      ArrayRef<Sharding> operandShardings,
                                      ArrayRef<Sharding> resultShardings, const Sharding &scores,
                                      GridAxesAttr axes, IRMapping &partitionMap,
                                      SymbolTableCollection &symbolTable, OpBuilder &b) {
    Location loc = op.getLoc();
    bool mean = op.getReduction() == "mean";
    Value labels = local[kGradient ? 2 : 1];
    Value weights = op.getWeights() ? local[kGradient ? 3 : 2] : Value();
    Type element = cast<RankedTensorType>(op->getResult(0).getType()).getElementType();
    // The blocks' counts summed; without ignore_index or weights, the
    // whole tensor's lines (a constant, no collective).
    auto count = [&]() -> Value {
      if (!op.getIgnoreIndex() && !weights)
        return countedLabels(b, loc, op.getLabels(), std::nullopt, Value(), element);
      return shard::AllReduceOp::create(
                 b, loc, countedLabels(b, loc, labels, op.getIgnoreIndex(), weights, element),
                 scores.getGrid(), axes.asArrayRef(), ReductionKind::Sum)
          .getResult();
    };
    Value scale; // dloss / count, before the block's gradient
    if constexpr (kGradient) {
      if (mean)
        scale = quotientOrZero(b, loc, local[0], count());
    }
    if (failed(partitionAsIs(op, local, operandShardings, resultShardings, partitionMap,
                             symbolTable, b)))
      return failure();
    auto block = cast<Op>(partitionMap.lookup(op->getResult(0)).getDefiningOp());
    block.setReduction("sum");
    if constexpr (kGradient) {
      if (scale)
        block.getDlossMutable().assign(scale);
    } else {
      Value sum = shard::AllReduceOp::create(b, loc, block.getLoss(), scores.getGrid(),
                                             axes.asArrayRef(), ReductionKind::Sum)
                      .getResult();
      partitionMap.map(op.getLoss(), mean ? DivOp::create(b, loc, sum, count()).getResult() : sum);
    }
    return success();
  }

  /// log_prob = x - m - log(sum exp(x - m)) with the maximum m and the sum
  /// all-reduced over the class axes; the loss the sum of the blocks'
  /// px.nll_loss.
  static LogicalResult partitionForward(SoftmaxCrossEntropyLossOp op, ArrayRef<Value> local,
                                        const Sharding &scores, GridAxesAttr axes,
                                        IRMapping &partitionMap, OpBuilder &b) {
    Location loc = op.getLoc();
    FlatSymbolRefAttr grid = scores.getGridAttr();
    auto allReduce = [&](Value v, ReductionKind kind) {
      return shard::AllReduceOp::create(b, loc, v, scores.getGrid(), axes.asArrayRef(), kind)
          .getResult();
    };
    SmallVector<NamedAttribute> overClasses{b.getNamedAttr("axes", b.getDenseI64ArrayAttr({1})),
                                            b.getNamedAttr("keepdims", b.getBoolAttr(true))};
    Value x = local[0];
    Value max = allReduce(ReduceMaxOp::create(b, loc, ValueRange{x}, overClasses).getResult(),
                          ReductionKind::Max);
    Value shifted = SubOp::create(b, loc, x, max).getResult();
    Value exps = ExpOp::create(b, loc, shifted).getResult();
    Value sum = allReduce(ReduceSumOp::create(b, loc, ValueRange{exps}, overClasses).getResult(),
                          ReductionKind::Sum);
    Value logProb = SubOp::create(b, loc, shifted, LogOp::create(b, loc, sum).getResult())
                        .getResult();
    SmallVector<NamedAttribute> nll{b.getNamedAttr("reduction", op.getReductionAttr()),
                                    b.getNamedAttr("grid", grid),
                                    b.getNamedAttr("grid_axes", axes)};
    if (op.getIgnoreIndexAttr())
      nll.push_back(b.getNamedAttr("ignore_index", op.getIgnoreIndexAttr()));
    // A padded vocabulary's real classes (px-pad-vocabulary).
    if (auto classes = getAttr<PxDialect::ClassesAttrHelper>(op))
      nll.push_back(b.getNamedAttr(PxDialect::ClassesAttrHelper(b.getContext()).getName(),
                                   classes));
    Value partial =
        NegativeLogLikelihoodLossOp::create(b, loc, ValueRange{logProb, local[1]}, nll)
            .getResult();
    partitionMap.map(op.getLoss(), allReduce(partial, ReductionKind::Sum));
    partitionMap.map(op.getLogProb(), logProb);
    return success();
  }
};

} // namespace

void parallax::px::sharding::attachLossModels(MLIRContext *ctx) {
  SoftmaxCrossEntropyLossOp::attachInterface<ClassBlockSharding<SoftmaxCrossEntropyLossOp>>(
      *ctx);
  SoftmaxCrossEntropyLossGradOp::attachInterface<
      ClassBlockSharding<SoftmaxCrossEntropyLossGradOp>>(*ctx);
}
