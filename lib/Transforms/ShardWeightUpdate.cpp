//===- ShardWeightUpdate.cpp - each rank updates 1/G of a bucket ----------===//
//
// The bucket's parameters share one block of G * shard_bytes bytes laid out
// as their gradients are in the bucket, so that rank r's reduced block is
// the gradient of exactly the parameter bytes it updates.
//
//===----------------------------------------------------------------------===//

#include "parallax/Transforms/Passes.h"
#include "parallax/Runtime/Grid.h"
#include "parallax/Runtime/PlanAlignment.h"
#include "parallax/Transforms/Cluster.h"

#include "Buckets.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "llvm/ADT/TypeSwitch.h"

#include <climits>

namespace parallax {
#define GEN_PASS_DEF_PXSHARDWEIGHTUPDATE
#include "parallax/Transforms/Passes.h.inc"
} // namespace parallax

using namespace mlir;
using namespace parallax;

namespace {

/// The variable a dense optimizer update of `grad` updates, if `grad`'s one
/// reader is such an update.
px::VariableOp updatedBy(Value grad, Operation *&update) {
  if (!grad.hasOneUse())
    return {};
  update = *grad.getUsers().begin();
  Value var = llvm::TypeSwitch<Operation *, Value>(update)
                  .Case<px::SgdOp, px::MomentumOp, px::AdamOp, px::AdagradOp>(
                      [&](auto u) { return u.getGrad() == grad ? u.getVariable() : Value(); })
                  .Default([](Operation *) { return Value(); });
  if (!var || update->hasAttr("shard_bytes"))
    return {};
  return var.getDefiningOp<px::VariableOp>();
}

/// Whether `update` is the last op of the step to read `var` (through views
/// too), and `var` is in no block yet.
bool lastReader(px::VariableOp var, Operation *update) {
  SmallVector<Value> views{var.getOutput()};
  while (!views.empty()) {
    Value v = views.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (isa<px::AllGatherVariablesOp>(user))
        return false;
      if (user != update && update->isBeforeInBlock(user))
        return false;
      if (auto r = dyn_cast<px::ReshapeOp>(user))
        views.push_back(r.getOutput());
    }
  }
  return true;
}

struct ShardWeightUpdatePass
    : parallax::impl::PxShardWeightUpdateBase<ShardWeightUpdatePass> {
  using PxShardWeightUpdateBase::PxShardWeightUpdateBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp func = getEntryFunction(module);
    if (!func || func.getBody().empty())
      return;
    ClusterModel cluster = ClusterModel::fromModule(module);
    for (auto &bucket : bucketsOf(func.getBody().front()))
      shard(bucket, cluster);
  }

  void shard(ArrayRef<px::AllReduceOp> bucket, const ClusterModel &cluster) {
    px::AllReduceOp first = bucket.front(), last = bucket.back();
    rt::KernelGrid grid = gridOf(first, first.getGridAttr(), first.getGridAxes());
    // The verifiers keep grids static and positive and machines non-empty;
    // the group helpers throw otherwise, which this code cannot catch.
    if (grid.shape.empty() || !first.getInPlace() || cluster.ranksPerMachine < 1 ||
        llvm::any_of(grid.shape, [](int64_t d) { return d < 1; }))
      return;
    int64_t g = grid.groupSize();
    if (g <= 1 || g < minRanks ||
        (!acrossMachines &&
         rt::groupsSpanMachines(grid.shape, grid.axes, (int)cluster.ranksPerMachine)) ||
        (first.getReduction() != shard::ReductionKind::Sum &&
         first.getReduction() != shard::ReductionKind::Average))
      return;
    SmallVector<Operation *> updates;
    SmallVector<Value> vars;
    for (px::AllReduceOp ar : llvm::make_range(bucket.begin(), bucket.end())) {
      Operation *update = nullptr;
      px::VariableOp var = updatedBy(ar.getOutput(), update);
      if (!var || !ar.getInPlace() || bytesOf(ar.getOutput()) == 0 ||
          getElementTypeOrSelf(var.getType()) != getElementTypeOrSelf(ar.getType()) ||
          llvm::is_contained(vars, var.getOutput()) || !lastReader(var, update))
        return;
      updates.push_back(update);
      vars.push_back(var.getOutput());
    }
    int64_t total = *last.getOffset() +
                    rt::alignToPlan(std::max<int64_t>(bytesOf(last.getInput()), 1));
    int64_t shard = rt::alignToPlan((total + g - 1) / g);
    if (shard > INT_MAX) // MPI counts blocks in ints
      return;

    OpBuilder b(first);
    IntegerAttr shardBytes = b.getI64IntegerAttr(shard);
    SmallVector<int64_t> offsets;
    SmallVector<Attribute> names;
    Operation *lastUpdate = updates.front();
    for (auto [i, update] : llvm::enumerate(updates)) {
      px::AllReduceOp ar = bucket[i];
      ar.setShardUpdate(true);
      ar.setShardBytesAttr(shardBytes);
      update->setAttr("shard_offset", ar.getOffsetAttr());
      update->setAttr("shard_bytes", shardBytes);
      update->setAttr("grid", ar.getGridAttr());
      update->setAttr("grid_axes", ar.getGridAxesAttr());
      offsets.push_back(*ar.getOffset());
      if (auto n = px::getAttr<px::PxDialect::VariablesAttrHelper>(ar))
        names.append(n.begin(), n.end());
      if (lastUpdate->isBeforeInBlock(update))
        lastUpdate = update;
    }
    b.setInsertionPointAfter(lastUpdate);
    auto gather = px::AllGatherVariablesOp::create(
        b, first.getLoc(), first.getGridAttr(), first.getGridAxesAttr(), vars,
        b.getDenseI64ArrayAttr(offsets), shardBytes);
    if (!names.empty())
      px::setAttr<px::PxDialect::VariablesAttrHelper>(gather, b.getArrayAttr(names));
  }
};

} // namespace
