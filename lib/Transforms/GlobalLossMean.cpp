//===- GlobalLossMean.cpp - a mean loss over the whole batch's count ------===//
//
// Data parallelism averages the ranks' mean losses, which is the whole
// batch's mean only where every rank's lines count the same. A cross
// entropy with ignored labels (padding) or class weights is rewritten to
// its sum over the whole batch's count, the count all-reduced over the
// batch axes before px-autodiff differentiates it (only labels and constant
// class weights feed the count, so nothing differentiates through the
// all-reduce). Every use of the loss sees the rewritten value: another
// output computed from it is this rank's share, as the loss is before
// px-sync averages it.
//
//===----------------------------------------------------------------------===//

#include "parallax/Transforms/Passes.h"

#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Dialect/Px/PxLossCount.h"
#include "parallax/Transforms/Cluster.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace parallax {
#define GEN_PASS_DEF_PXGLOBALLOSSMEAN
#include "parallax/Transforms/Passes.h.inc"
} // namespace parallax

using namespace mlir;
using namespace parallax;

namespace {

/// `loss` (a cross entropy or a negative log likelihood) with reduction
/// mean over lines that may count unequally, as sum * (ranks / count).
template <typename Loss>
void rewrite(Loss loss, Value labels, Value weights, shard::GridOp grid,
             ArrayRef<int16_t> batchAxes, int64_t ranks) {
  Value sum = loss.getLoss();
  auto type = cast<RankedTensorType>(sum.getType());
  if (loss.getReduction() != "mean" || (!loss.getIgnoreIndex() && !weights) ||
      !px::countsExactly(type.getElementType()))
    return;
  // The count as soon as its labels (and weights) are: its all-reduce can
  // then run while the forward pass does.
  OpBuilder b(loss);
  Operation *after = nullptr;
  for (Value v : {labels, weights})
    if (Operation *def = v ? v.getDefiningOp() : nullptr)
      if (!after || after->isBeforeInBlock(def))
        after = def;
  if (after && after->getBlock() == loss->getBlock())
    b.setInsertionPointAfter(after);
  else
    b.setInsertionPointToStart(loss->getBlock());
  Location loc = loss.getLoc();
  Value local = px::countedLabels(b, loc, labels, loss.getIgnoreIndex(), weights,
                                  type.getElementType());
  Value count = px::AllReduceOp::create(
      b, loc, type, FlatSymbolRefAttr::get(grid.getSymNameAttr()),
      b.getDenseI16ArrayAttr(batchAxes), local,
      shard::ReductionKindAttr::get(b.getContext(), shard::ReductionKind::Sum), IntegerAttr());
  loss.setReduction("sum");
  b.setInsertionPointAfter(loss);
  Value scale = px::quotientOrZero(
      b, loc, splatConstant(b, loc, RankedTensorType::get({}, type.getElementType()), (double)ranks),
      count);
  auto mean = px::MulOp::create(b, loc, sum, scale);
  sum.replaceAllUsesExcept(mean.getOutput(), mean);
}

struct GlobalLossMeanPass : parallax::impl::PxGlobalLossMeanBase<GlobalLossMeanPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    ClusterModel cluster = ClusterModel::fromModule(module);
    func::FuncOp func = getEntryFunction(module);
    if (cluster.dataRanks() <= 1 || !func || func.getBody().empty())
      return;
    auto grid = module.lookupSymbol<shard::GridOp>(kWorldGrid);
    if (!grid) {
      module.emitError("px-global-loss-mean: no shard.grid @world: run px-cluster first");
      return signalPassFailure();
    }
    SmallVector<int16_t> axes = cluster.batchAxes((int64_t)grid.getShape().size());
    int64_t ranks = cluster.dataRanks();
    func.walk([&](Operation *op) {
      if (auto l = dyn_cast<px::SoftmaxCrossEntropyLossOp>(op))
        rewrite(l, l.getLabels(), l.getWeights(), grid, axes, ranks);
      else if (auto l = dyn_cast<px::NegativeLogLikelihoodLossOp>(op))
        rewrite(l, l.getTarget(), l.getWeight(), grid, axes, ranks);
    });
  }
};

} // namespace
