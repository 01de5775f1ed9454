//===- Synchronize.cpp - one synchronization scheme per variable ----------===//
//
// Data parallelism over the ranks of @world: each rank computes the mean loss
// of its part of the global batch, so the gradient of the global mean loss
// is the average of the ranks' gradients; px-autodiff seeds the backward
// pass with 1/N (px.gradient_scale), so each rank's gradients are shares
// that sum to it and the 1/N below is already applied. Per trainable
// variable:
//
//   allreduce   px.all_reduce <sum> of the dense gradient (a sparse one
//               is densified first: Horovod's sparse_as_dense), in fusion
//               buckets issued in backward order as soon as they fill;
//   allgatherv  every rank gathers every rank's rows, scaled by 1/N, and
//               applies them all to its replica (Horovod's sparse path);
//   ps          parameter server: rows partitioned over servers co-located
//               with the workers; reads of the variable become px.ps_pull
//               of the rows needed, the row gradient (scaled by 1/N) a
//               px.ps_push to their servers, summed within a machine first,
//               and each server updates only the rows it owns.
//
// "hybrid" picks the cheapest per variable with the alpha-beta link model:
// all-reduce for dense variables, for sparse ones whichever of the three
// moves the fewest seconds of bytes (Parallax, EuroSys'19, section 3).
// `variables` fixes the scheme of the variables it names.
//
//===----------------------------------------------------------------------===//

#include "parallax/Transforms/Passes.h"
#include "parallax/Target/IndexProfiler.h"
#include "parallax/Transforms/Cluster.h"
#include "parallax/Runtime/CollectiveVolume.h"
#include "parallax/Runtime/RowPartition.h"

#include "Buckets.h"
#include "PxBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Dominance.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>

namespace parallax {
#define GEN_PASS_DEF_PXSYNC
#include "parallax/Transforms/Passes.h.inc"
} // namespace parallax

using namespace mlir;
using namespace parallax;

namespace {

struct SyncPass : parallax::impl::PxSyncBase<SyncPass> {
  using PxSyncBase::PxSyncBase;

  ClusterModel cluster;
  shard::GridOp grid;
  SmallVector<int16_t> axes;

  LogicalResult fail(Operation *op, const llvm::Twine &msg) {
    op->emitError("px-sync: ") << msg;
    return failure();
  }

  /// The collective's common attributes: the whole world grid.
  FlatSymbolRefAttr gridRef() {
    return FlatSymbolRefAttr::get(grid.getSymNameAttr());
  }

  /// Predicted seconds of one step's synchronization of a variable.
  double allReduceTime(double bytes) {
    double n = cluster.dataRanks();
    return 2 * bytes * (n - 1) / n / cluster.bandwidth() +
           2 * (n - 1) * cluster.latency();
  }

  /// `variables`: the schemes fixed by name.
  llvm::StringMap<std::string> fixed;
  /// `sharded-variables`: bucketed apart.
  llvm::StringSet<> apart;

  /// Parses `variables` against the step's trainable variables: a name
  /// that is none of them, a scheme that is no scheme, and a scheme its
  /// gradient or the grid cannot take are errors.
  LogicalResult parseFixed(ModuleOp module, func::FuncOp func) {
    llvm::StringMap<px::GradientOp> gradients;
    for (px::GradientOp g : func.getOps<px::GradientOp>())
      if (auto var = g.getVariable().getDefiningOp<px::VariableOp>())
        gradients[var.getName()] = g;
    for (const std::string &entry : variableSchemes) {
      auto [name, chosen] = StringRef(entry).split('=');
      if (name.empty() || chosen.empty())
        return module.emitError("px-sync: variables (--sync-variable): '")
               << entry << "' is not NAME=SCHEME";
      if (chosen != "allreduce" && chosen != "ps" && chosen != "allgatherv")
        return module.emitError("px-sync: variables (--sync-variable): unknown scheme '")
               << chosen << "' for '" << name << "' (expected allreduce, ps or allgatherv)";
      auto it = gradients.find(name);
      if (it == gradients.end()) {
        std::string known;
        for (const auto &g : gradients)
          known += (known.empty() ? "" : ", ") + g.getKey().str();
        return module.emitError("px-sync: variables (--sync-variable): '")
               << name << "' is no trainable variable of the step (they are: " << known
               << ")";
      }
      bool sparse = isa<px::SparseGradType>(it->second.getGrad().getType());
      if (chosen == "allgatherv" && !sparse)
        return module.emitError("px-sync: variables (--sync-variable): '")
               << name << "' has a dense gradient; allgatherv gathers row-sparse ones "
               << "(a table read only through Gather)";
      if (chosen == "ps" && cast<ShapedType>(it->second.getVariable().getType()).getRank() < 1)
        return module.emitError("px-sync: variables (--sync-variable): '")
               << name << "' is a scalar; ps partitions a variable's rows";
      // On a grid that splits the model, each model rank's batch group
      // serves its own replica of a whole table.
      if (chosen == "ps" && cluster.modelRanks > 1 && !sparse)
        return module.emitError("px-sync: variables (--sync-variable): '")
               << name << "' has a dense gradient: on a grid that splits the model only "
               << "a row-sparse table goes to the parameter servers";
      if (!fixed.try_emplace(name, chosen.str()).second)
        return module.emitError("px-sync: variables (--sync-variable): '")
               << name << "' is named twice";
    }
    return success();
  }

  /// The rows of `var` (of its block, for a table split by vocabulary) a
  /// step touches: px-sparsity's bound for the whole table, spread evenly
  /// over the blocks (its profile of a block counts a block's rows
  /// already); all of them without one.
  int64_t rowsPerStep(px::VariableOp var) {
    int64_t rows = var.getOutput().getType().getDimSize(0);
    auto r = px::getAttr<px::PxDialect::RowsPerStepAttrHelper>(var);
    if (!r)
      return rows;
    auto source = px::getAttr<px::PxDialect::AlphaSourceAttrHelper>(var);
    int64_t blocks = 1;
    if (auto split = var.getSplitAxes();
        split && !split->getAxes().empty() && !(source && source.getValue() == "profile"))
      for (int16_t a : split->getAxes().front().asArrayRef())
        blocks *= grid.getShape()[a];
    return std::min(rows, (r.getInt() + blocks - 1) / blocks);
  }

  std::string choose(px::VariableOp var, Value grad) {
    if (auto it = fixed.find(var.getName()); it != fixed.end())
      return it->second;
    bool sparse = isa<px::SparseGradType>(grad.getType());
    auto type = var.getOutput().getType();
    if (!sparse) {
      if (scheme == "ps" && type.getRank() >= 1)
        return "ps";
      return "allreduce";
    }
    if (scheme != "hybrid")
      return scheme;
    // On a model-split grid the rows are never densified (Adam would update
    // every row: not what one rank's lazy update does): they are
    // all-gathered over the batch axes (whose bytes are exact), or served
    // by the parameter servers where that is cheaper (from Pc = 3 ranks).
    bool keepRows = cluster.modelRanks > 1;
    double n = cluster.dataRanks();
    int64_t rows = type.getDimSize(0);
    double rowBytes = (double)bytesOf(type) / std::max<int64_t>(rows, 1);
    int64_t capacity = cast<px::SparseGradType>(grad.getType()).getRows();
    // The servers are priced at px-sparsity's bound, as if every row the
    // step may touch were in this rank's block: they replace the exact
    // all-gatherv only where they are cheaper even then.
    int64_t u = rows;
    if (auto r = px::getAttr<px::PxDialect::RowsPerStepAttrHelper>(var))
      u = std::min(rows, r.getInt());
    double tAr = allReduceTime((double)bytesOf(type));
    double tAgv = capacity * (rowBytes + 8) * (n - 1) / cluster.bandwidth() +
                  (n - 1) * cluster.latency();
    double tPs = 2 * u * (rowBytes + 8) * (n - 1) / n / cluster.bandwidth() +
                 4 * cluster.latency();
    if (keepRows)
      return tPs < tAgv ? "ps" : "allgatherv";
    if (tPs <= tAgv && tPs <= tAr)
      return "ps";
    return tAgv <= tAr ? "allgatherv" : "allreduce";
  }

  /// Whether px-autodiff seeded the backward pass with 1/N, making each
  /// gradient this rank's share of the global one: then shares are summed
  /// and rows pushed or gathered as they are. Otherwise (IR differentiated
  /// without px-cluster's world size) gradients are averaged.
  bool shares = false;

  /// PyTorch DDP's first-bucket size: the first bucket is at most this
  /// (so communication starts early), and the loss joins it only up to
  /// this size (past it, sharding the bucket's update may be worth more
  /// than the synchronization the loss's own all-reduce costs).
  static constexpr int64_t kFirstBucketBytes = 1 << 20;

  shard::ReductionKind gradientReduction() const {
    return shares ? shard::ReductionKind::Sum : shard::ReductionKind::Average;
  }

  /// The gradient scaled by 1/N (ranks average their mean-loss gradients),
  /// unless it is already a share.
  Value averaged(PxBuilder &pb, Value grad) {
    if (cluster.dataRanks() == 1 || shares)
      return grad;
    auto type = cast<px::SparseGradType>(grad.getType());
    OpBuilder &b = pb.builder();
    Value idx = px::SparseGradIndicesOp::create(b, pb.location(), grad);
    Value vals = px::SparseGradValuesOp::create(b, pb.location(), grad);
    Value scaled = pb.scale(vals, 1.0 / cluster.dataRanks());
    return px::MakeSparseGradOp::create(b, pb.location(), type, idx, scaled);
  }

  ArrayAttr variables(OpBuilder &b, StringRef name) {
    return b.getStrArrayAttr({name});
  }

  /// Partitions and placement of a PS variable (px-partition's, else one
  /// partition per rank).
  std::pair<int64_t, SmallVector<int64_t>> partitioning(px::VariableOp var) {
    int64_t rows = var.getOutput().getType().getDimSize(0);
    if (auto p = px::getAttr<px::PxDialect::PartitionsAttrHelper>(var))
      if (auto place = px::getAttr<px::PxDialect::PlacementAttrHelper>(var))
        return {p.getInt(), SmallVector<int64_t>(place.asArrayRef())};
    int64_t p = std::max<int64_t>(1, std::min<int64_t>(cluster.dataRanks(), rows));
    SmallVector<int64_t> place;
    for (int64_t i = 0; i < p; ++i)
      place.push_back(i);
    return {p, place};
  }

  /// Several gathers of one PS table whose ids are all known where the
  /// first gather is (the usual case: they are graph inputs, like a sampled
  /// softmax's targets and its shared negative samples) become one pull of
  /// the concatenated ids, sliced back per gather. A pull is two
  /// exchanges (requests, then rows), each a synchronization of every rank,
  /// so this halves the LM's pulls of its output table; a row both gathers
  /// read is pulled once. Returns false, changing nothing, when the gathers
  /// do not qualify: one gather, several blocks, dynamic or mixed-type ids,
  /// or ids computed after the first gather.
  template <typename PullFn>
  bool fusePulls(SmallVectorImpl<px::GatherOp> &gathers, OpBuilder &b,
                 PullFn pullOf) {
    if (gathers.size() < 2)
      return false;
    Block *block = gathers.front()->getBlock();
    for (px::GatherOp g : gathers)
      if (g->getBlock() != block || g.getAxis() != 0)
        return false;
    llvm::sort(gathers, [](px::GatherOp x, px::GatherOp y) {
      return x->isBeforeInBlock(y);
    });
    px::GatherOp first = gathers.front();
    auto firstIds = cast<RankedTensorType>(first.getIndices().getType());
    DominanceInfo dominance(first->getParentOp());
    for (px::GatherOp g : gathers) {
      auto ids = cast<RankedTensorType>(g.getIndices().getType());
      if (!ids.hasStaticShape() || ids.getElementType() != firstIds.getElementType() ||
          !cast<RankedTensorType>(g.getType()).hasStaticShape() ||
          (g != first && !dominance.properlyDominates(g.getIndices(), first)))
        return false;
    }
    b.setInsertionPoint(first);
    PxBuilder pb(b, first.getLoc());
    SmallVector<Value> flat;
    int64_t total = 0;
    for (px::GatherOp g : gathers) {
      int64_t n = cast<RankedTensorType>(g.getIndices().getType()).getNumElements();
      flat.push_back(pb.reshape(g.getIndices(), {n}));
      total += n;
    }
    auto table = cast<RankedTensorType>(first.getData().getType());
    SmallVector<int64_t> shape{total};
    llvm::append_range(shape, table.getShape().drop_front());
    Value rows = pullOf(first.getLoc(),
                        RankedTensorType::get(shape, table.getElementType()),
                        pb.concat(flat, 0));
    int64_t offset = 0;
    for (px::GatherOp g : gathers) {
      int64_t n = cast<RankedTensorType>(g.getIndices().getType()).getNumElements();
      SmallVector<int64_t> starts(shape.size(), 0), steps(shape.size(), 1);
      SmallVector<int64_t> part(shape);
      starts[0] = offset;
      part[0] = n;
      b.setInsertionPoint(g);
      pb.setLocation(g.getLoc());
      Value mine = pb.reshape(pb.slice(rows, starts, steps, part),
                              cast<RankedTensorType>(g.getType()).getShape());
      g.replaceAllUsesWith(mine);
      g.erase();
      offset += n;
    }
    return true;
  }

  /// Parameter-server: pulls in the forward pass, a push of the gradient.
  LogicalResult toParameterServer(px::VariableOp var, px::GradientOp g,
                                  OpBuilder &b) {
    auto type = var.getOutput().getType();
    int64_t rows = type.getDimSize(0);
    auto [parts, place] = partitioning(var);
    auto common = [&](Operation *op) {
      px::setAttr<px::PxDialect::VariablesAttrHelper>(op, variables(b, var.getName()));
    };
    Value grad = g.getGrad();
    PxBuilder pb(b, g.getLoc());
    if (auto sparse = dyn_cast<px::SparseGradType>(grad.getType())) {
      // Reads: every gather of the table becomes a pull of its rows, or
      // gathers share one (see fusePulls).
      // A table split by rows over the model axis (vocabulary-parallel) is
      // read as `block of` that axis: its block's rows are served over the
      // batch axes, the others read as zeros.
      SmallVector<px::GatherOp> gathers;
      for (Operation *user : var.getOutput().getUsers())
        if (auto gather = dyn_cast<px::GatherOp>(user))
          gathers.push_back(gather);
      shard::GridAxesAttr block;
      for (px::GatherOp gather : gathers)
        if (gather.getGrid()) {
          auto axesOf = gather.getGridAxes();
          if (!axesOf || axesOf->empty())
            return gather.emitOpError("px-sync: a block of all the grid's axes leaves no "
                                      "batch axis to serve '")
                   << var.getName() << "' over";
          block = b.getDenseI16ArrayAttr(*axesOf);
        }
      auto pullOf = [&](Location loc, Type type, Value ids) {
        auto pull = px::PsPullOp::create(
            b, loc, type, gridRef(), b.getDenseI16ArrayAttr(axes),
            b.getI64IntegerAttr(parts), b.getDenseI64ArrayAttr(place),
            var.getOutput(), ids, block);
        common(pull);
        return pull.getRows();
      };
      if (!fusePulls(gathers, b, pullOf)) {
        for (px::GatherOp gather : gathers) {
          b.setInsertionPoint(gather);
          gather.replaceAllUsesWith(pullOf(gather.getLoc(), gather.getType(),
                                           gather.getIndices()));
          gather.erase();
        }
      }
    } else {
      // A dense variable on servers: pull every row, push the whole
      // gradient as rows.
      b.setInsertionPointAfter(var);
      SmallVector<int64_t> iota(rows);
      for (int64_t i = 0; i < rows; ++i)
        iota[i] = i;
      pb.setLocation(var.getLoc());
      Value ids = pb.indexVector(iota);
      auto pull = px::PsPullOp::create(
          b, var.getLoc(), type, gridRef(), b.getDenseI16ArrayAttr(axes),
          b.getI64IntegerAttr(parts), b.getDenseI64ArrayAttr(place),
          var.getOutput(), ids, /*block_axes=*/DenseI16ArrayAttr());
      common(pull);
      var.getOutput().replaceAllUsesExcept(pull.getRows(),
                                           SmallPtrSet<Operation *, 2>{pull, g});
      b.setInsertionPoint(g);
      pb.setLocation(g.getLoc());
      auto sparseType = px::SparseGradType::get(b.getContext(), rows, type);
      grad = px::MakeSparseGradOp::create(b, g.getLoc(), sparseType, ids, grad);
    }
    b.setInsertionPoint(g);
    pb.setLocation(g.getLoc());
    Value avg = averaged(pb, grad);
    auto in = cast<px::SparseGradType>(avg.getType());
    auto servedType = px::SparseGradType::get(
        b.getContext(), in.getRows() * cluster.dataRanks(), type);
    auto push = px::PsPushOp::create(
        b, g.getLoc(), servedType, gridRef(), b.getDenseI16ArrayAttr(axes),
        b.getI64IntegerAttr(parts), b.getDenseI64ArrayAttr(place), avg,
        localAggregation ? b.getUnitAttr() : UnitAttr());
    common(push);
    g.getGradMutable().assign(push.getServed());
    px::setAttr<px::PxDialect::PartitionsAttrHelper>(var, b.getI64IntegerAttr(parts));
    px::setAttr<px::PxDialect::PlacementAttrHelper>(var, b.getDenseI64ArrayAttr(place));
    double rowBytes = (double)bytesOf(type) / std::max<int64_t>(rows, 1);
    if (succeeded(predictFromProfile(var, parts, place, (int64_t)rowBytes)))
      return success();
    // Predicted traffic (an estimate: the rows one rank touches, owned by
    // the others with probability (N-1)/N, pulled and pushed once each).
    double n = cluster.dataRanks();
    int64_t u = rowsPerStep(var);
    setBytes(var, (int64_t)std::llround(2 * u * (rowBytes + 8) * (n - 1) / n), false);
    return success();
  }

  /// With --profile-data on one machine: the exact bytes each rank sends
  /// over the profiled steps, by replaying the pulls and pushes on the rows
  /// the data touches (px.bytes_profiled: per rank, summed over
  /// px.profile_steps steps; px.bytes_per_step: their mean per step).
  LogicalResult predictFromProfile(px::VariableOp var, int64_t parts,
                                   ArrayRef<int64_t> place, int64_t rowBytes) {
    ModuleOp module = getOperation();
    auto dir = px::getAttr<px::PxDialect::ProfileDataAttrHelper>(module);
    auto steps = px::getAttr<px::PxDialect::ProfileStepsAttrHelper>(module);
    // The profiler replays one table's ids; a block's pull reads ids of
    // the whole table (the estimate stays).
    if (!dir || !steps || cluster.machines() > 1 || var.getSplitAxes())
      return failure();
    // The profile of this variable's reads; px-sync has replaced its gathers
    // by pulls already, so profile the module px-sparsity saw: re-run on a
    // copy where the pulls are gathers again is not needed, the profiler
    // follows px.ps_pull reads too.
    auto profile = profileRows(module, {var.getName().str()}, dir.getValue().str(),
                               steps.getInt(), cluster.dataRanks());
    if (!profile) {
      llvm::consumeError(profile.takeError());
      return failure();
    }
    auto all = profile->rows.find(var.getName().str());
    auto reads = profile->reads.find(var.getName().str());
    if (all == profile->rows.end() || reads == profile->reads.end())
      return failure();
    int64_t rows = var.getOutput().getType().getDimSize(0);
    parallax::rt::RowPartition partition(rows, std::vector<int64_t>(place.begin(), place.end()));
    int64_t n = cluster.dataRanks(), k = profile->steps;
    std::vector<int64_t> sent(n, 0);
    // Bytes rank r sends when each rank q touches the rows in sets[q]: one
    // `toServer` message part per remote row it needs, one `fromServer` part
    // per row another rank needs from it.
    auto exchange = [&](auto rowsOf, int64_t toServer, int64_t fromServer) {
      std::vector<std::vector<int64_t>> owned(n, std::vector<int64_t>(n, 0));
      for (int64_t q = 0; q < n; ++q)
        for (int64_t row : rowsOf(q))
          ++owned[q][partition.owner(row)];
      for (int64_t r = 0; r < n; ++r)
        for (int64_t o = 0; o < n; ++o)
          if (o != r)
            sent[r] += toServer * owned[r][o] + fromServer * owned[o][r];
    };
    for (int64_t s = 0; s < k; ++s) {
      // Each pull asks for its distinct rows (8-byte ids) and gets rows back.
      for (const auto &read : reads->second)
        exchange([&](int64_t q) -> const std::vector<int64_t> & { return read[s * n + q]; },
                 8, rowBytes);
      // The push sends each distinct row of the gradient once.
      exchange([&](int64_t q) -> const std::vector<int64_t> & { return all->second[s * n + q]; },
               8 + rowBytes, 0);
    }
    OpBuilder b(var);
    px::setAttr<px::PxDialect::BytesProfiledAttrHelper>(var, b.getDenseI64ArrayAttr(sent));
    int64_t total = 0;
    for (int64_t v : sent)
      total += v;
    setBytes(var, total / (n * k), false);
    px::setAttr<px::PxDialect::BytesSourceAttrHelper>(var, b.getStringAttr("profile"));
    return success();
  }

  LogicalResult toAllGatherV(px::VariableOp var, px::GradientOp g, OpBuilder &b) {
    b.setInsertionPoint(g);
    PxBuilder pb(b, g.getLoc());
    Value avg = averaged(pb, g.getGrad());
    auto in = cast<px::SparseGradType>(avg.getType());
    auto outType = px::SparseGradType::get(
        b.getContext(), in.getRows() * cluster.dataRanks(), in.getDenseType());
    auto gather = px::AllGatherVOp::create(b, g.getLoc(), outType, gridRef(),
                                           b.getDenseI16ArrayAttr(axes), avg);
    px::setAttr<px::PxDialect::VariablesAttrHelper>(gather, variables(b, var.getName()));
    g.getGradMutable().assign(gather.getOutput());
    // Exact: a fixed-size block of indices and rows to every other rank.
    int64_t rowBytes = bytesOf(in.getValuesType()) / std::max<int64_t>(in.getRows(), 1);
    setBytes(var, rt::allGatherBytes(in.getRows() * (8 + rowBytes), cluster.dataRanks()), true);
    return success();
  }

  void setBytes(px::VariableOp var, int64_t bytes, bool exact) {
    OpBuilder b(var);
    px::setAttr<px::PxDialect::BytesPerStepAttrHelper>(var, b.getI64IntegerAttr(bytes));
    px::setAttr<px::PxDialect::BytesExactAttrHelper>(var, b.getBoolAttr(exact));
  }

  /// Fuses the dense gradients into buckets, in the order the backward pass
  /// produces them, and all-reduces each bucket right after its last
  /// gradient.
  void allReduceInBuckets(ArrayRef<std::pair<px::VariableOp, px::GradientOp>> list,
                          Block &block, OpBuilder &b) {
    auto position = [&](Value v) -> Operation * {
      Operation *def = v.getDefiningOp();
      return def ? block.findAncestorOpInBlock(*def) : &block.front();
    };
    SmallVector<std::pair<px::VariableOp, px::GradientOp>> order(list.begin(), list.end());
    llvm::stable_sort(order, [&](auto a, auto b) {
      Operation *pa = position(a.second.getGrad()), *pb = position(b.second.getGrad());
      return pa != pb && pa->isBeforeInBlock(pb);
    });
    // A gradient px-shard-model summed over the model axis (a row-split
    // convolution's filter, its batch norm's scale and bias: partial sums
    // over the blocks of rows) is summed over the whole grid at once, one
    // all-reduce instead of two, in buckets of its own (a bucket is one
    // group's). Gradients are shares here, so the two sums are one; or
    // the batch axes hold one rank, whose average is the gradient itself.
    SmallVector<int16_t> allAxes;
    for (int16_t a = 0; a < (int16_t)grid.getShape().size(); ++a)
      allAxes.push_back(a);
    auto modelSum = [&](px::GradientOp g) -> px::AllReduceOp {
      auto ar = g.getGrad().getDefiningOp<px::AllReduceOp>();
      if (!(shares || cluster.dataRanks() == 1) || !ar || !ar->hasOneUse() || ar.getBucket() ||
          ar.getReduction() != shard::ReductionKind::Sum ||
          ar.getGridAttr() != gridRef() || px::getAttr<px::PxDialect::VariablesAttrHelper>(ar))
        return {};
      return ar;
    };
    struct Pending {
      SmallVector<std::pair<px::VariableOp, px::GradientOp>> members;
      int64_t filled = 0;
      // PyTorch DDP's rule: a small first bucket so communication starts early.
      int64_t limit = 0;
      ArrayRef<int16_t> axes;
      int64_t group = 1;
      shard::ReductionKind reduction = shard::ReductionKind::Sum;
    };
    // The batch axes' buckets and the whole grid's, each twice: the
    // variables whose updates are to be sharded (`sharded-variables`) fill
    // buckets of their own.
    int64_t first = std::min<int64_t>(bucketBytes, kFirstBucketBytes);
    // A whole-grid bucket sums model-axis partial sums: shares, or the
    // gradient of a batch axis of one rank.
    shard::ReductionKind batchKind = gradientReduction(), wholeKind = shard::ReductionKind::Sum;
    Pending batch{{}, 0, first, axes, cluster.dataRanks(), batchKind};
    Pending whole{{}, 0, first, allAxes, cluster.worldSize, wholeKind};
    // (Their first bucket is no smaller: the small first bucket starts the
    // communication early, which the others' does.)
    Pending batchApart{{}, 0, bucketBytes, axes, cluster.dataRanks(), batchKind};
    Pending wholeApart{{}, 0, bucketBytes, allAxes, cluster.worldSize, wholeKind};
    int64_t bucket = 0;
    auto flush = [&](Pending &p) {
      if (p.members.empty())
        return;
      Operation *last = position(p.members.front().second.getGrad());
      for (auto &[var, g] : p.members)
        if (last->isBeforeInBlock(position(g.getGrad())))
          last = position(g.getGrad());
      b.setInsertionPointAfter(last);
      for (auto &[var, g] : p.members) {
        auto ar = px::AllReduceOp::create(
            b, g.getLoc(), g.getGrad().getType(), gridRef(),
            b.getDenseI16ArrayAttr(p.axes), g.getGrad(),
            shard::ReductionKindAttr::get(b.getContext(), p.reduction),
            b.getI64IntegerAttr(bucket));
        px::setAttr<px::PxDialect::VariablesAttrHelper>(ar, variables(b, var.getName()));
        g.getGradMutable().assign(ar.getOutput());
      }
      p.members.clear();
      p.filled = 0;
      ++bucket;
      p.limit = bucketBytes;
    };
    for (auto &[var, g] : order) {
      bool sharded = apart.contains(var.getName());
      Pending *p = sharded ? &batchApart : &batch;
      if (px::AllReduceOp partial = modelSum(g)) {
        g.getGradMutable().assign(partial.getInput());
        partial.erase();
        p = sharded ? &wholeApart : &whole;
      }
      int64_t bytes = bytesOf(cast<RankedTensorType>(g.getGrad().getType()));
      if (!p->members.empty() && p->filled + bytes > p->limit)
        flush(*p);
      p->members.push_back({var, g});
      p->filled += bytes;
      setBytes(var, rt::ringBytes(bytes, p->group), true);
    }
    flush(batch);
    flush(whole);
    flush(batchApart);
    flush(wholeApart);
    // The two groups' buckets interleave.
    renumberBucketsInIssueOrder(block);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (scheme != "hybrid" && scheme != "allreduce" && scheme != "ps" &&
        scheme != "allgatherv") {
      module.emitError("px-sync: unknown scheme '")
          << scheme << "' (expected hybrid, allreduce, ps or allgatherv)";
      return signalPassFailure();
    }
    cluster = ClusterModel::fromModule(module);
    grid = module.lookupSymbol<shard::GridOp>(kWorldGrid);
    if (!grid) {
      module.emitError("px-sync: no shard.grid @world: run px-cluster first");
      return signalPassFailure();
    }
    axes = cluster.batchAxes((int64_t)grid.getShape().size());
    if (cluster.modelRanks > 1 && scheme == "ps") {
      module.emitError("px-sync: on a grid that splits the model, variables are "
                       "synchronized by all-reduce or all-gather (scheme '")
          << scheme << "' is refused there; a whole table goes to the parameter servers "
          << "with --sync-variable=TABLE=ps)";
      return signalPassFailure();
    }
    func::FuncOp func = getEntryFunction(module);
    if (!func || !px::hasAttr<px::PxDialect::LossAttrHelper>(func)) {
      module.emitError("px-sync: no training step (px.loss) to synchronize");
      return signalPassFailure();
    }
    if (auto scale = px::getAttr<px::PxDialect::GradientScaleAttrHelper>(module)) {
      double expected = 1.0 / (double)cluster.dataRanks();
      if (scale.getValueAsDouble() != expected) {
        module.emitError("px-sync: px.gradient_scale is ")
            << scale.getValueAsDouble() << " but " << cluster.dataRanks()
            << " ranks need " << expected
            << " (px-autodiff ran for another world size)";
        return signalPassFailure();
      }
      shares = true;
    }
    if (failed(parseFixed(module, func)))
      return signalPassFailure();
    Block &block = func.getBody().front();
    OpBuilder b(module.getContext());

    SmallVector<std::pair<px::VariableOp, px::GradientOp>> dense;
    for (px::GradientOp g : llvm::to_vector(func.getOps<px::GradientOp>())) {
      auto var = g.getVariable().getDefiningOp<px::VariableOp>();
      if (cluster.modelRanks > 1 && cluster.dataRanks() == 1 &&
          isa<px::SparseGradType>(g.getGrad().getType())) {
        // A grid of Pr x 1 has no batch to synchronize over: the rows stay
        // sparse, and the optimizer updates only them, as on one rank.
        // (Data parallelism on one rank keeps what --sync says, so that its
        // run is the reference of the same scheme on N ranks.)
        px::setAttr<px::PxDialect::SyncAttrHelper>(var, b.getStringAttr("none"));
        setBytes(var, 0, true);
        continue;
      }
      std::string chosen = choose(var, g.getGrad());
      px::setAttr<px::PxDialect::SyncAttrHelper>(var, b.getStringAttr(chosen));
      if (chosen == "ps") {
        if (failed(toParameterServer(var, g, b)))
          return signalPassFailure();
      } else if (chosen == "allgatherv") {
        if (failed(toAllGatherV(var, g, b)))
          return signalPassFailure();
      } else {
        if (isa<px::SparseGradType>(g.getGrad().getType())) {
          b.setInsertionPointAfterValue(g.getGrad());
          Value densified = px::DensifyOp::create(b, g.getLoc(), g.getGrad());
          g.getGradMutable().assign(densified);
        }
        dense.push_back({var, g});
      }
    }
    for (const std::string &name : shardedVariables) {
      if (!llvm::any_of(dense, [&](auto &vg) { return vg.first.getName() == name; })) {
        std::string known;
        for (auto &[var, g] : dense)
          known += (known.empty() ? "" : ", ") + var.getName().str();
        module.emitError("px-sync: sharded-variables (--shard-weight-update-variables): '")
            << name << "' is no all-reduced variable of the step (they are: " << known
            << "): only an all-reduce bucket's update can be sharded";
        return signalPassFailure();
      }
      apart.insert(name);
    }
    allReduceInBuckets(dense, block, b);
    // A bucket is issued after its last gradient, which may come after
    // another member's marker: the markers (which have no results) go last.
    for (px::GradientOp g : llvm::to_vector(func.getOps<px::GradientOp>()))
      g->moveBefore(block.getTerminator());

    // Statistics of the whole batch in every training-mode batch norm and
    // in every batch norm gradient (px-autodiff writes those for training
    // mode only; on a model-split grid, a gradient may read a resharded copy
    // of its forward op's input, so they are not matched by operands),
    // summed over the batch axes only: on a grid that splits the model, the
    // ranks of a model group hold the same samples (and, in a batch norm
    // split by channels, different channels), so a sum over them would
    // count samples twice.
    // Their traffic: the forward pass all-reduces the per-channel sums and
    // squared deviations (C doubles each), the backward pass those again and
    // the two gradient sums (2C doubles); each counted as a ring all-reduce
    // over the batch group, C being this rank's channels.
    // A batch norm whose rows px-shard-model split (domain parallelism)
    // already sums over the model axis: the batch axes join it.
    int64_t bnBytes = 0;
    auto ring = [](int64_t doubles, int64_t n) { return rt::ringBytes(8 * doubles, n); };
    // The channels and the group's size.
    auto synchronize = [&](auto op) -> std::pair<int64_t, int64_t> {
      if (!op.getGrid() && localBatchnorm)
        return {0, 1};
      SmallVector<int16_t> opAxes;
      if (op.getGrid())
        llvm::append_range(opAxes, op.getGridAxes());
      if (!localBatchnorm)
        for (int16_t a : axes)
          if (!llvm::is_contained(opAxes, a))
            opAxes.push_back(a);
      llvm::sort(opAxes);
      int64_t group = shard::collectiveProcessGroupSize(opAxes, grid);
      op.setGridAttr(gridRef());
      if (cluster.modelRanks > 1)
        op.setGridAxesAttr(b.getDenseI16ArrayAttr(opAxes));
      return {op.getScale().getType().getDimSize(0), group};
    };
    func.walk([&](Operation *op) {
      if (auto bn = dyn_cast<px::BatchNormOp>(op); bn && bn.getTraining()) {
        auto [c, n] = synchronize(bn);
        bnBytes += 2 * ring(c, n);
      }
      if (auto grad = dyn_cast<px::BatchNormGradOp>(op)) {
        auto [c, n] = synchronize(grad);
        bnBytes += 2 * ring(c, n) + ring(2 * c, n);
      }
    });
    if (bnBytes)
      px::setAttr<px::PxDialect::BatchnormBytesPerStepAttrHelper>(
          module, b.getI64IntegerAttr(bnBytes));

    // The reported loss is the mean over the whole batch.
    auto ret = cast<func::ReturnOp>(block.getTerminator());
    int64_t lossIndex = px::getAttr<px::PxDialect::LossAttrHelper>(func).getInt();
    Value loss = ret.getOperand(lossIndex);
    if (lossInBucket && rideFirstBucket(block, loss, ret, lossIndex, b))
      return;
    b.setInsertionPoint(ret);
    auto avg = px::AllReduceOp::create(
        b, loss.getLoc(), loss.getType(), gridRef(), b.getDenseI16ArrayAttr(axes),
        loss, shard::ReductionKindAttr::get(b.getContext(), shard::ReductionKind::Average),
        IntegerAttr());
    px::setAttr<px::PxDialect::VariablesAttrHelper>(avg, b.getStrArrayAttr({"(loss)"}));
    ret.setOperand(lossIndex, avg.getOutput());
  }

  /// The loss's all-reduce as one more member of the first gradient bucket
  /// issued (bucket 0, or with `sharded-variables` the first holding none
  /// of them: a member that is no gradient would keep a sharded update
  /// whole), when that bucket is at most kFirstBucketBytes of the loss's
  /// element type: a step has one collective fewer, and so one point fewer
  /// where every rank waits for the slowest. With shares (gradients
  /// summed), the loss is scaled by 1/N first, as its gradient was.
  bool rideFirstBucket(Block &block, Value loss, func::ReturnOp ret,
                       int64_t lossIndex, OpBuilder &b) {
    auto lossType = dyn_cast<RankedTensorType>(loss.getType());
    if (!lossType)
      return false;
    auto holdsSharded = [&](px::AllReduceOp ar) {
      auto names = px::getAttr<px::PxDialect::VariablesAttrHelper>(ar);
      return names && llvm::any_of(names, [&](Attribute n) {
               return apart.contains(cast<StringAttr>(n).getValue());
             });
    };
    // Buckets are numbered in issue order (renumberBucketsInIssueOrder).
    llvm::DenseSet<int64_t> shardedBuckets;
    for (auto ar : block.getOps<px::AllReduceOp>())
      if (ar.getBucket() && holdsSharded(ar))
        shardedBuckets.insert((int64_t)*ar.getBucket());
    std::optional<int64_t> chosen;
    for (auto ar : block.getOps<px::AllReduceOp>())
      if (ar.getBucket() && !shardedBuckets.contains((int64_t)*ar.getBucket()) &&
          (!chosen || (int64_t)*ar.getBucket() < *chosen))
        chosen = (int64_t)*ar.getBucket();
    if (!chosen)
      return false;
    px::AllReduceOp firstMember, lastMember;
    int64_t bytes = 0;
    for (auto ar : block.getOps<px::AllReduceOp>()) {
      if (!ar.getBucket() || (int64_t)*ar.getBucket() != *chosen)
        continue;
      auto type = cast<RankedTensorType>(ar.getInput().getType());
      // A bucket is one group's: the loss is averaged over the batch axes.
      if (type.getElementType() != lossType.getElementType() ||
          ar.getGridAxes() != ArrayRef<int16_t>(axes))
        return false;
      bytes += bytesOf(type);
      if (!firstMember)
        firstMember = ar;
      lastMember = ar;
    }
    if (!lastMember || bytes > kFirstBucketBytes)
      return false;
    // The fused collective runs where its first member is: the loss (and
    // its scaling, placed right after it) must exist by then.
    Operation *def = loss.getDefiningOp();
    Operation *at = def ? block.findAncestorOpInBlock(*def) : nullptr;
    if (!at || !at->isBeforeInBlock(firstMember))
      return false;
    b.setInsertionPointAfterValue(loss);
    PxBuilder pb(b, loss.getLoc());
    Value share = shares ? pb.scale(loss, 1.0 / (double)cluster.dataRanks()) : loss;
    b.setInsertionPointAfter(lastMember);
    auto avg = px::AllReduceOp::create(
        b, loss.getLoc(), loss.getType(), gridRef(), b.getDenseI16ArrayAttr(axes),
        share, shard::ReductionKindAttr::get(b.getContext(), gradientReduction()),
        b.getI64IntegerAttr(*chosen));
    px::setAttr<px::PxDialect::VariablesAttrHelper>(avg, b.getStrArrayAttr({"(loss)"}));
    ret.setOperand(lossIndex, avg.getOutput());
    return true;
  }
};

} // namespace
