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

#include "llvm/ADT/StringSet.h"
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

  /// A bucket the pass can shard: its updates, their variables, and the
  /// bucket's bytes and block.
  struct Shardable {
    ArrayRef<px::AllReduceOp> bucket;
    SmallVector<Operation *> updates;
    SmallVector<Value> vars;
    int64_t total = 0, shard = 0;
  };

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp func = getEntryFunction(module);
    if (!func || func.getBody().empty())
      return;
    ClusterModel cluster = ClusterModel::fromModule(module);
    auto buckets = bucketsOf(func.getBody().front());
    SmallVector<Shardable> shardable;
    int64_t total = 0;
    for (auto &bucket : buckets)
      if (std::optional<Shardable> s = shardableOf(bucket, cluster)) {
        total += s->total;
        shardable.push_back(std::move(*s));
      }
    if (!variables.empty() && fraction < 1.0) {
      module.emitError("px-shard-weight-update: give `variables` or `fraction`, not both");
      return signalPassFailure();
    }
    // The buckets of the variables named, every member one of them; a
    // name in none of them keeps its update whole, which is said.
    if (!variables.empty()) {
      llvm::StringSet<> named;
      for (const std::string &v : variables)
        named.insert(v);
      llvm::erase_if(shardable, [&](const Shardable &s) {
        return llvm::any_of(s.bucket, [&](px::AllReduceOp ar) {
          auto names = px::getAttr<px::PxDialect::VariablesAttrHelper>(ar);
          return !names || llvm::any_of(names, [&](Attribute n) {
            return !named.contains(cast<StringAttr>(n).getValue());
          });
        });
      });
      llvm::StringSet<> sharded;
      for (const Shardable &s : shardable)
        for (px::AllReduceOp ar : s.bucket)
          if (auto names = px::getAttr<px::PxDialect::VariablesAttrHelper>(ar))
            for (Attribute n : names)
              sharded.insert(cast<StringAttr>(n).getValue());
      for (const std::string &v : variables)
        if (!sharded.contains(v))
          module.emitWarning("px-shard-weight-update: '")
              << v << "' is in no bucket whose update can be sharded (a group of fewer "
              << "than min-ranks ranks, a member read by more than its update, or a "
              << "member not named): its update stays whole";
    }
    // A share of them, the largest first (the most optimizer state per
    // bucket), until at least `fraction` of their bytes is sharded.
    if (fraction < 1.0) {
      llvm::stable_sort(shardable, [](const Shardable &a, const Shardable &b) {
        return a.total > b.total;
      });
      int64_t taken = 0;
      size_t n = 0;
      while (n < shardable.size() && (double)taken < fraction * (double)total)
        taken += shardable[n++].total;
      shardable.resize(n);
    }
    for (Shardable &s : shardable)
      shard(s);
  }

  std::optional<Shardable> shardableOf(ArrayRef<px::AllReduceOp> bucket,
                                       const ClusterModel &cluster) {
    px::AllReduceOp first = bucket.front(), last = bucket.back();
    rt::KernelGrid grid = gridOf(first, first.getGridAttr(), first.getGridAxes());
    // The verifiers keep grids static and positive and machines non-empty;
    // the group helpers throw otherwise, which this code cannot catch.
    if (grid.shape.empty() || !first.getInPlace() || cluster.ranksPerMachine < 1 ||
        llvm::any_of(grid.shape, [](int64_t d) { return d < 1; }))
      return std::nullopt;
    int64_t g = grid.groupSize();
    if (g <= 1 || g < minRanks ||
        (!acrossMachines &&
         rt::groupsSpanMachines(grid.shape, grid.axes, (int)cluster.ranksPerMachine)) ||
        (first.getReduction() != shard::ReductionKind::Sum &&
         first.getReduction() != shard::ReductionKind::Average))
      return std::nullopt;
    Shardable s;
    s.bucket = bucket;
    SmallVector<Operation *> &updates = s.updates;
    SmallVector<Value> &vars = s.vars;
    for (px::AllReduceOp ar : llvm::make_range(bucket.begin(), bucket.end())) {
      Operation *update = nullptr;
      px::VariableOp var = updatedBy(ar.getOutput(), update);
      if (!var || !ar.getInPlace() || bytesOf(ar.getOutput()) == 0 ||
          getElementTypeOrSelf(var.getType()) != getElementTypeOrSelf(ar.getType()) ||
          llvm::is_contained(vars, var.getOutput()) || !lastReader(var, update))
        return std::nullopt;
      updates.push_back(update);
      vars.push_back(var.getOutput());
    }
    int64_t total = *last.getOffset() +
                    rt::alignToPlan(std::max<int64_t>(bytesOf(last.getInput()), 1));
    int64_t shard = rt::alignToPlan((total + g - 1) / g);
    if (shard > INT_MAX) // MPI counts blocks in ints
      return std::nullopt;
    s.total = total;
    s.shard = shard;
    return s;
  }

  void shard(const Shardable &s) {
    ArrayRef<px::AllReduceOp> bucket = s.bucket;
    px::AllReduceOp first = bucket.front();
    const SmallVector<Operation *> &updates = s.updates;
    const SmallVector<Value> &vars = s.vars;
    int64_t shard = s.shard;
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
