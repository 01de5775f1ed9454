//===- ShardModel.cpp - each layer's weight split over the model axis -----===//
//
// Integrated model and batch parallelism (SPAA'18) with upstream's SPMD
// passes: this pass only chooses each layer's split and annotates its
// weight; sharding-propagation carries the splits through the whole step
// (forward and backward: autodiff ran before, as JAX differentiates before
// GSPMD partitions, so the backward products get their collectives from
// the same sharding rules as the forward ones) and shard-partition rewrites
// it per rank. The shard collectives it inserts become px's.
//
//===----------------------------------------------------------------------===//

#include "parallax/Transforms/Passes.h"
#include "parallax/Analysis/Layers.h"
#include "parallax/Analysis/StrategySpace.h"
#include "parallax/Analysis/VariableAccess.h"
#include "parallax/Dialect/Px/PxShapes.h"
#include "parallax/Dialect/Px/PxShardingInterface.h"
#include "parallax/Transforms/Cluster.h"
#include "parallax/Transforms/ClusterMachine.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Shard/Transforms/Passes.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/EquivalenceClasses.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

namespace parallax {
#define GEN_PASS_DEF_PXSHARDMODEL
#include "parallax/Transforms/Passes.h.inc"
} // namespace parallax

using namespace mlir;
using namespace parallax;

namespace {

enum class Split { OutputFeatures, InputFeatures };

/// The layer whose output `consumer` reads, through ops that carry a split
/// on the activation they read (an activation function, a bias add, a
/// batch norm, a pool, attention's reshapes, products and softmax), if a
/// split of that layer's output features would reach `consumer`'s input
/// features (featuresReach: no reshape merges it away, no softmax or
/// product needs it whole, no transpose moves it elsewhere) and the `ranks`
/// divide it all the way (the heads of a reshape among it).
Operation *producingLayer(Operation *consumer, const llvm::DenseMap<Operation *, Split> &layers,
                          int64_t ranks) {
  SmallVector<Operation *> chain;
  for (Operation *def = consumer->getOperand(0).getDefiningOp(); def;
       def = splitCarrierOf(def).getDefiningOp()) {
    if (layers.count(def))
      return featuresReach(def, llvm::to_vector(llvm::reverse(chain)), consumer, ranks)
                 ? def
                 : nullptr;
    if (!followsChannelSplit(def))
      return nullptr;
    chain.push_back(def);
  }
  return nullptr;
}

/// Whether product `op`, split by its input features after a layer split by
/// output features, should rather start a pair of its own: it widens its
/// activation, and a later product would take its output split by input
/// features (Megatron-LM's MLP, whose first layer is split by output
/// features and its second by input features). Paired with the layer
/// before, it would all-reduce its wide output and the next layer would
/// start over; on its own it gathers its narrow input and the next layer
/// all-reduces a narrow output. That is where a feature split reaches it
/// across a layer norm written out as element-wise ops and reductions
/// (which keep the split, their sums all-reduced), as torch.onnx.export
/// writes nn.LayerNorm below opset 17.
bool widensIntoPair(Operation *op, int64_t ranks) {
  if (!isa<px::GemmOp, px::MatMulOp>(op))
    return false;
  auto in = cast<RankedTensorType>(op->getOperand(0).getType());
  auto out = cast<RankedTensorType>(op->getResult(0).getType());
  if (out.getNumElements() <= in.getNumElements())
    return false;
  llvm::DenseMap<Operation *, Split> alone{{op, Split::OutputFeatures}};
  for (Operation *later = op->getNextNode(); later; later = later->getNextNode())
    if (isa<px::GemmOp, px::MatMulOp>(later) && splittableWeightOf(later) &&
        producingLayer(later, alone, ranks) == op)
      return true;
  return false;
}

/// Whether `op` pools its input's rows (dimension 2) away: a reduction over
/// them, or a pool (AdaptiveAvgPool2d(1), avg_pool2d(x, H)) whose output
/// keeps one row.
bool poolsRows(Operation *op) {
  if (isa<px::ReduceSumOp, px::ReduceMeanOp, px::ReduceMaxOp, px::ReduceMinOp>(op)) {
    auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes");
    int64_t rank = cast<RankedTensorType>(op->getOperand(0).getType()).getRank();
    return axes && llvm::any_of(axes.asArrayRef(), [&](int64_t a) {
             return px::normalizeAxis(a, rank) == std::optional<int64_t>(2);
           });
  }
  auto out = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  return isa<px::AveragePoolOp, px::MaxPoolOp>(op) && out && out.getRank() > 2 &&
         out.getDimSize(2) == 1;
}

/// Whether `consumer` is a head on a global pooling of one of `rowSplit`'s
/// convolutions: it reads, through ops a channel split passes, a pool of
/// their rows (poolsRows), whose [N, C] result every model rank holds after
/// the partial sums are added. A split of its input features would be
/// carried back through the pool, and through a residual addition into
/// both branches, making the row-split layers reshard their activations by
/// channels. (A head on a flatten instead reshards once, at the flatten,
/// and keeps its input split.)
bool headOnPooledRows(Operation *consumer, const llvm::DenseSet<Operation *> &rowSplit) {
  bool pooled = false;
  for (Operation *def = consumer->getOperand(0).getDefiningOp(); def;
       def = splitCarrierOf(def).getDefiningOp()) {
    if (rowSplit.contains(def))
      return pooled;
    if (poolsRows(def)) {
      pooled = true;
      continue;
    }
    if (splittableWeightOf(def) || !followsChannelSplit(def))
      return false;
  }
  return false;
}

/// reshape(reduce(x, keepdims)) that only drops the kept dimensions: the
/// reduction without keepdims (which the reductions' sharding model
/// describes). px-autodiff's bias gradients are of this form.
template <typename ReduceOp>
void dropKeptDims(func::FuncOp func) {
  for (auto reshape : llvm::make_early_inc_range(func.getOps<px::ReshapeOp>())) {
    auto reduce = reshape.getInput().template getDefiningOp<ReduceOp>();
    if (!reduce || !reduce.getKeepdims() || !reduce->hasOneUse())
      continue;
    OpBuilder b(reshape);
    auto dropped = ReduceOp::create(b, reduce.getLoc(), reduce.getInput(), reduce.getAxesAttr(),
                                    b.getBoolAttr(false));
    if (dropped.getType() != reshape.getType()) {
      dropped.erase();
      continue;
    }
    reshape.replaceAllUsesWith(dropped.getOutput());
    reshape.erase();
    reduce.erase();
  }
}

/// Whether `conv`'s rows split into `ranks` blocks for domain parallelism.
bool rowsSplit(px::ConvOp conv, int64_t ranks) {
  std::optional<px::Halo> halo = px::domainHalo(conv);
  return halo && px::rowsSplitInto(conv.getX().getType().getDimSize(2),
                               conv.getY().getType().getDimSize(2), *halo, ranks);
}

struct ShardModelPass : parallax::impl::PxShardModelBase<ShardModelPass> {
  using PxShardModelBase::PxShardModelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (convSplit != "channels" && convSplit != "domain" && convSplit != "auto") {
      mlir::emitError(module.getLoc(), "px-shard-model: unknown conv-split '")
          << convSplit << "' (expected channels, domain or auto)";
      return signalPassFailure();
    }
    explicitSplits.clear();
    usedSplits.clear();
    byRows.clear();
    if (failed(parseLayerSplits(module)))
      return signalPassFailure();
    ClusterModel cluster = ClusterModel::fromModule(module);
    func::FuncOp func = getEntryFunction(module);
    if (cluster.modelRanks <= 1 || !func || func.getBody().empty())
      return;
    auto grid = module.lookupSymbol<shard::GridOp>(kWorldGrid);
    if (!grid || grid.getShape().back() != cluster.modelRanks) {
      module.emitError("px-shard-model: no shard.grid @world whose last axis holds the ")
          << cluster.modelRanks << " model ranks: run px-cluster with model-ranks first";
      return signalPassFailure();
    }
    if (convSplit == "auto")
      chooseConvSplits(module, cluster);
    dropKeptDims<px::ReduceSumOp>(func);
    dropKeptDims<px::ReduceMeanOp>(func);
    if (failed(annotateWeights(func, grid)) || failed(annotateTables(module, func, grid)))
      return signalPassFailure();
    if (sequenceParallel)
      annotateRows(func, grid);
    for (auto &named : explicitSplits)
      if (!usedSplits.contains(named.getKey())) {
        // The variables that name a layer are those the pairing rule split.
        SmallVector<StringRef> layerNames;
        for (auto var : func.getOps<px::VariableOp>())
          if (px::hasAttr<px::PxDialect::LayerSplitAttrHelper>(var))
            layerNames.push_back(var.getName());
        mlir::emitError(module.getLoc(), "px-shard-model: layer-splits names '")
            << named.getKey() << "', which is no layer's weight or embedding table (those are: "
            << llvm::join(layerNames, ", ") << ")";
        return signalPassFailure();
      }

    OpPassManager propagate(func::FuncOp::getOperationName());
    propagate.addPass(shard::createShardingPropagation());
    OpPassManager partition(func::FuncOp::getOperationName());
    partition.addPass(shard::createPartition());
    if (failed(runPipeline(propagate, func)))
      return signalPassFailure();
    gradientsFollowVariables(func);
    annotateTheRest(func, grid);
    if (failed(runPipeline(partition, func)) || failed(lowerCollectives(func)))
      return signalPassFailure();
  }

  /// A px.gradient names its variable, so it must read the variable as the
  /// variable is split. Propagation may choose otherwise for the marker (a
  /// batch norm's scale whose forward pass runs whole, after a convolution
  /// split by input channels, and whose backward pass runs on a channel
  /// block of a gradient that arrives split): then the gradient is
  /// resharded to the variable's split instead.
  static void gradientsFollowVariables(func::FuncOp func) {
    for (auto g : llvm::to_vector(func.getOps<px::GradientOp>())) {
      auto forMarker = g.getVariable().getDefiningOp<shard::ShardOp>();
      if (!forMarker || !forMarker.getAnnotateForUsers())
        continue;
      auto ofVariable = forMarker.getSrc().getDefiningOp<shard::ShardOp>();
      if (!ofVariable || ofVariable.getAnnotateForUsers() ||
          shard::Sharding(ofVariable.getSharding()) == shard::Sharding(forMarker.getSharding()))
        continue;
      OpBuilder b(g);
      auto gradForMarker = g.getGrad().getDefiningOp<shard::ShardOp>();
      Value grad = gradForMarker && gradForMarker.getAnnotateForUsers() ? gradForMarker.getSrc()
                                                                         : g.getGrad();
      Value sharding = ofVariable.getSharding();
      g.getVariableMutable().assign(shard::ShardOp::create(b, g.getLoc(), ofVariable.getResult(),
                                                           sharding, true));
      g.getGradMutable().assign(shard::ShardOp::create(b, g.getLoc(), grad, sharding, true));
      if (gradForMarker && gradForMarker->use_empty())
        gradForMarker.erase();
      if (forMarker->use_empty())
        forMarker.erase();
    }
  }

  /// Propagation leaves values no sharding constrains (an unused result,
  /// such as a batch norm's running statistics before px-optimizer writes
  /// them back) unannotated, and partition needs every value annotated:
  /// such a result gets the sharding its op's model gives it from the op's
  /// annotated operands (a channel block of batch norm's statistics when
  /// its channels are split, matching its split state variables), or is
  /// whole.
  void annotateTheRest(func::FuncOp func, shard::GridOp grid) {
    shard::Sharding whole =
        shard::Sharding::get(FlatSymbolRefAttr::get(grid.getSymNameAttr()), {});
    OpBuilder b(func.getContext());
    auto isDefAnnotation = [](Operation *u) {
      auto s = dyn_cast<shard::ShardOp>(u);
      return s && !s.getAnnotateForUsers();
    };
    func.walk([&](Operation *op) {
      if (isa<shard::ShardOp, shard::ShardingOp>(op) || op->getParentOp() != func)
        return;
      std::optional<std::vector<shard::Sharding>> modelled;
      for (OpResult r : op->getResults()) {
        if (!isa<RankedTensorType>(r.getType()) ||
            llvm::any_of(r.getUsers(), isDefAnnotation))
          continue;
        if (!modelled)
          modelled = modelledShardings(op);
        shard::Sharding s = modelled->empty() ? whole : (*modelled)[op->getNumOperands() +
                                                                      r.getResultNumber()];
        if (!s)
          s = whole;
        if (!r.use_empty()) {
          shard::maybeInsertTargetShardingAnnotation(s, r, b);
          continue;
        }
        // Upstream's helper annotates uses; an unused result gets its own.
        b.setInsertionPointAfter(op);
        shard::ShardOp::create(b, r.getLoc(), r, shard::ShardingOp::create(b, r.getLoc(), s),
                               /*annotate_for_users=*/false);
      }
    });
  }

  /// The shardings of `op`'s operands and results that its model chooses
  /// for its annotated operands and results, or none.
  static std::vector<shard::Sharding> modelledShardings(Operation *op) {
    auto model = dyn_cast<shard::ShardingInterface>(op);
    if (!model)
      return {};
    std::vector<shard::Sharding> operands, results;
    for (OpOperand &o : op->getOpOperands()) {
      FailureOr<std::pair<bool, shard::Sharding>> s = shard::getSharding(o);
      operands.push_back(succeeded(s) ? s->second : shard::Sharding());
    }
    for (OpResult r : op->getResults()) {
      FailureOr<std::pair<bool, shard::Sharding>> s = shard::getSharding(r);
      results.push_back(succeeded(s) ? s->second : shard::Sharding());
    }
    FailureOr<shard::ShardingOption> option = model.getShardingOption(operands, results);
    if (failed(option) || option->empty)
      return {};
    FailureOr<std::vector<shard::Sharding>> all = model.getShardingAnnotations(*option);
    return succeeded(all) ? *all : std::vector<shard::Sharding>();
  }

  /// layer-splits: the split a strategy fixes for each named variable.
  using Named = strategy::Split;
  llvm::StringMap<Named> explicitSplits;
  llvm::StringSet<> usedSplits;

  LogicalResult parseLayerSplits(ModuleOp module) {
    for (const std::string &spec : layerSplits) {
      auto [name, split] = StringRef(spec).rsplit('=');
      std::optional<Named> s = strategy::splitNamed(split);
      if (name.empty() || !s)
        return mlir::emitError(module.getLoc(), "px-shard-model: layer-splits entry '")
               << spec << "': expected VARIABLE=whole|out|in|rows";
      explicitSplits[name] = *s;
    }
    return success();
  }

  /// The split layer-splits names for `var`, if any (and marks it used).
  std::optional<Named> explicitSplitOf(px::VariableOp var) {
    if (!var)
      return std::nullopt;
    auto it = explicitSplits.find(var.getName());
    if (it == explicitSplits.end())
      return std::nullopt;
    usedSplits.insert(var.getName());
    return it->second;
  }

  /// conv-split=auto (SPAA'18's integrated parallelism): each
  /// convolution's rows are split where the closed-form model prices that
  /// below splitting its channels on this grid (halos and a weight
  /// gradient summed over every rank, against activations gathered and
  /// reduced over the model axis): early layers, whose activations are
  /// large and weights small, by rows; the rest by channels. The
  /// convolutions whose outputs a residual addition joins are split alike
  /// (joinedConvolutions), each group the way cheaper in sum (or the way
  /// --layer-split fixes one of them): a block whose branches end split
  /// differently reshards one of them at the join.
  void chooseConvSplits(ModuleOp module, const ClusterModel &cluster) {
    grid::Grid g{cluster.modelRanks, cluster.dataRanks()};
    grid::Machine machine = machineOf(cluster);
    llvm::StringMap<std::pair<double, double>> costs; // by rows, by channels
    for (grid::Layer layer : layersOf(module)) {
      if (layer.kind != grid::Layer::Kind::Conv)
        continue;
      layer.batch *= g.pc; // the module holds one batch rank's samples
      double rows = grid::costOf(layer, g, grid::Split::Domain, machine).seconds();
      double channels = grid::costOf(layer, g, grid::Split::Model, machine).seconds();
      costs[layer.name] = {rows, channels};
      if (rows < channels)
        byRows.insert(layer.name);
    }
    for (const SmallVector<px::ConvOp> &group :
         joinedConvolutions(getEntryFunction(module), cluster.modelRanks)) {
      // A member --layer-split fixes decides; else the closed forms' sums.
      double rows = 0, channels = 0;
      std::optional<bool> pinned;
      for (px::ConvOp conv : group) {
        StringRef name = trainableWeightOf(conv.getW()).getName();
        if (auto fixed = explicitSplits.find(name); fixed != explicitSplits.end())
          pinned = fixed->second == Named::Rows;
        if (auto it = costs.find(name); it != costs.end()) {
          rows += it->second.first;
          channels += it->second.second;
        }
      }
      for (px::ConvOp conv : group) {
        StringRef name = trainableWeightOf(conv.getW()).getName();
        if (!costs.count(name))
          continue; // not priced (a 3-D convolution): as it was
        if (pinned.value_or(rows < channels))
          byRows.insert(name);
        else
          byRows.erase(name);
      }
    }
  }
  llvm::StringSet<> byRows;

  /// The groups of forward convolutions (trainable weight, one group, rows
  /// that split over `ranks`) whose outputs residual additions join,
  /// through the ops a split passes (batch norm, activations) and the
  /// additions themselves (an identity shortcut carries the block before's
  /// sum): a ResNet's stem, every block's last convolution and its
  /// projection shortcut form one group.
  static SmallVector<SmallVector<px::ConvOp>> joinedConvolutions(func::FuncOp func,
                                                                 int64_t ranks) {
    llvm::DenseSet<Operation *> forward = forwardOps(func);
    auto isJoin = [&](Operation *op) {
      auto add = dyn_cast<px::AddOp>(op);
      return add && forward.contains(add) && add.getLhs().getType() == add.getType() &&
             add.getRhs().getType() == add.getType();
    };
    // The convolution or join a branch ends in, walking up from `v`.
    auto endOf = [&](Value v) -> Operation * {
      for (Operation *def = v.getDefiningOp(); def; def = splitCarrierOf(def).getDefiningOp()) {
        if (isJoin(def))
          return def;
        if (auto conv = dyn_cast<px::ConvOp>(def))
          return splittableWeightOf(conv) && rowsSplit(conv, ranks) ? def : nullptr;
        if (!followsChannelSplit(def))
          return nullptr;
      }
      return nullptr;
    };
    llvm::EquivalenceClasses<Operation *> joined;
    for (Operation &op : func.getBody().front())
      if (isJoin(&op))
        for (Value branch : op.getOperands())
          if (Operation *end = endOf(branch))
            joined.unionSets(&op, end);
    SmallVector<SmallVector<px::ConvOp>> groups;
    for (auto it = joined.begin(); it != joined.end(); ++it) {
      if (!(*it)->isLeader())
        continue;
      SmallVector<px::ConvOp> group;
      for (auto m = joined.member_begin(**it); m != joined.member_end(); ++m)
        if (auto conv = dyn_cast<px::ConvOp>(*m))
          group.push_back(conv);
      if (group.size() > 1)
        groups.push_back(std::move(group));
    }
    return groups;
  }

  /// Whether `conv` splits its rows rather than its channels.
  bool splitsRows(px::ConvOp conv) {
    if (auto named = explicitSplitOf(trainableWeightOf(conv.getW())))
      return *named == Named::Rows;
    if (convSplit == "domain")
      return true;
    if (convSplit != "auto")
      return false;
    px::VariableOp var = trainableWeightOf(conv.getW());
    return var && byRows.contains(var.getName());
  }

  /// Megatron-LM's pairing: a layer fed by a layer split by output features
  /// takes its input features split (one all-reduce for the pair); any
  /// other layer is split by output features. Convolutions pair the same
  /// way through batch norm and pooling (per channel, so they run on the
  /// first layer's channel block): the pair costs the all-reduce of the
  /// second layer's output forward and of the first one's input gradient
  /// backward, where splitting both by output channels would all-gather
  /// each layer's input forward and all-reduce each one's input gradient
  /// backward, half as much again. A dimension the model ranks do not
  /// divide is not split: the other split is taken, or none. With
  /// conv-split=domain, convolutions split their input rows instead, and a
  /// classifier on their global pool does not fall back to its input
  /// features: it stays whole (headOnPooledRows).
  LogicalResult annotateWeights(func::FuncOp func, shard::GridOp grid) {
    auto modelAxis = (shard::GridAxis)(grid.getShape().size() - 1);
    int64_t ranks = grid.getShape().back();
    llvm::DenseMap<Operation *, Split> layers;
    llvm::DenseSet<Operation *> rowSplit;
    // The weights decided so far. A split weight's later readers see its
    // annotation, but one left whole is still a bare variable to the
    // backward pass's products (dX = dY W reads it with its dimensions
    // swapped), which must not decide it again.
    llvm::DenseSet<Operation *> decided;
    OpBuilder b(func.getContext());
    for (Operation &op : llvm::make_early_inc_range(func.getBody().front())) {
      SplittableWeight w = splittableWeightOf(&op);
      if (!w.value)
        continue;
      if (Operation *var = trainableWeightOf(w.value); var && !decided.insert(var).second)
        continue;
      if (auto conv = dyn_cast<px::ConvOp>(&op); conv && splitsRows(conv)) {
        // Domain parallelism: the input's rows split, the weight whole.
        // Propagation carries the split on through the layers whose rows
        // can be split and gathers it before those that cannot.
        bool named = explicitSplitOf(trainableWeightOf(conv.getW())).has_value();
        if (named && !rowsSplit(conv, ranks))
          return conv.emitError("px-shard-model: layer-splits: the rows of '")
                 << trainableWeightOf(conv.getW()).getName() << "''s convolution do not split over "
                 << ranks << " model ranks (a stride that skips rows, rows that do not divide, "
                 << "or halos wider than a block)";
        recordSplit(trainableWeightOf(conv.getW()), rowsSplit(conv, ranks) ? Named::Rows : Named::Whole);
        if (rowsSplit(conv, ranks)) {
          rowSplit.insert(conv);
          SmallVector<SmallVector<shard::GridAxis>> rowAxes(3);
          rowAxes[2] = {modelAxis};
          b.setInsertionPoint(conv);
          auto sharding = shard::ShardingOp::create(
              b, op.getLoc(), shard::Sharding::get(FlatSymbolRefAttr::get(grid.getSymNameAttr()),
                                                   toGridAxesAttrs(rowAxes)));
          conv.getXMutable().assign(shard::ShardOp::create(b, op.getLoc(), conv.getX(),
                                                           sharding.getResult(),
                                                           /*annotate_for_users=*/true));
        }
        continue;
      }
      auto type = cast<RankedTensorType>(w.value.getType());
      auto dimOf = [&](Split s) { return s == Split::OutputFeatures ? w.outDim : w.inDim; };
      px::VariableOp var = trainableWeightOf(w.value);
      if (std::optional<Named> named = explicitSplitOf(var)) {
        if (*named == Named::Whole) {
          recordSplit(var, Named::Whole);
          continue;
        }
        if (*named == Named::Rows)
          return op.emitError("px-shard-model: layer-splits: '")
                 << var.getName() << "' is no convolution's or embedding table's weight: "
                 << "it splits whole, out or in";
        Split s = *named == Named::Out ? Split::OutputFeatures : Split::InputFeatures;
        if (type.getDimSize(dimOf(s)) % ranks != 0)
          return op.emitError("px-shard-model: layer-splits: the ")
                 << type.getDimSize(dimOf(s)) << (s == Split::OutputFeatures ? " output" : " input")
                 << " features of '" << var.getName() << "' do not divide over " << ranks
                 << " model ranks";
        annotateWeight(w, dimOf(s), grid, op.getLoc());
        recordSplit(var, s == Split::OutputFeatures ? Named::Out : Named::In);
        layers[&op] = s;
        continue;
      }
      Operation *from = producingLayer(&op, layers, ranks);
      Split split = from && layers[from] == Split::OutputFeatures && !widensIntoPair(&op, ranks)
                        ? Split::InputFeatures
                        : Split::OutputFeatures;
      if (type.getDimSize(dimOf(split)) % ranks != 0)
        split = split == Split::OutputFeatures ? Split::InputFeatures : Split::OutputFeatures;
      if (type.getDimSize(dimOf(split)) % ranks != 0 ||
          (split == Split::InputFeatures && !from && headOnPooledRows(&op, rowSplit))) {
        recordSplit(var, Named::Whole);
        continue;
      }
      layers[&op] = split;
      annotateWeight(w, dimOf(split), grid, op.getLoc());
      recordSplit(var, split == Split::OutputFeatures ? Named::Out : Named::In);
    }
    return success();
  }

  /// px.layer_split on `var`: what this pass chose for it (read by the
  /// strategy search for points compiled by the pairing rule).
  static void recordSplit(px::VariableOp var, Named split) {
    if (var)
      px::setAttr<px::PxDialect::LayerSplitAttrHelper>(
          var, StringAttr::get(var.getContext(), strategy::nameOf(split)));
  }

  /// Splits `w` along `dim` over the model axis. Every reader of the weight
  /// (the forward product, the backward ones, its gradient marker) sees the
  /// annotation.
  void annotateWeight(SplittableWeight w, int64_t dim, shard::GridOp grid, Location loc) {
    auto modelAxis = (shard::GridAxis)(grid.getShape().size() - 1);
    SmallVector<SmallVector<shard::GridAxis>> axes(dim + 1);
    axes[dim] = {modelAxis};
    OpBuilder b(grid.getContext());
    b.setInsertionPointAfterValue(w.value);
    auto sharding = shard::ShardingOp::create(
        b, loc, shard::Sharding::get(FlatSymbolRefAttr::get(grid.getSymNameAttr()),
                                     toGridAxesAttrs(axes)));
    auto annotated = shard::ShardOp::create(b, loc, w.value, sharding.getResult());
    w.value.replaceAllUsesExcept(annotated.getResult(), annotated);
  }

  /// Megatron-LM's vocabulary-parallel embedding: a table read only through
  /// row gathers is split by rows over the model axis when they divide
  /// evenly (each gather then sums the model ranks' partial lookups, and
  /// each rank's gradient is its rows'); otherwise it stays whole, and the
  /// report says why.
  LogicalResult annotateTables(ModuleOp module, func::FuncOp func, shard::GridOp grid) {
    int64_t ranks = grid.getShape().back();
    SmallVector<SmallVector<shard::GridAxis>> rows{{(shard::GridAxis)(grid.getShape().size() - 1)}};
    auto sharding = shard::Sharding::get(FlatSymbolRefAttr::get(grid.getSymNameAttr()),
                                         toGridAxesAttrs(rows));
    llvm::StringSet<> tables;
    for (const VariableInfo &v : analyzeVariables(module))
      if (v.trainable && v.access == VariableAccess::RowGather)
        tables.insert(v.name);
    OpBuilder b(func.getContext());
    for (auto var : llvm::to_vector(func.getOps<px::VariableOp>())) {
      if (!var.getTrainable() || !tables.contains(var.getName()) || var.getGrid())
        continue;
      int64_t vocabulary = var.getType().getDimSize(0);
      if (std::optional<Named> named = explicitSplitOf(var)) {
        if (*named == Named::Whole) {
          recordSplit(var, Named::Whole);
          continue;
        }
        if (*named != Named::Rows)
          return var.emitError("px-shard-model: layer-splits: '")
                 << var.getName() << "' is an embedding table: it splits whole or rows";
        if (vocabulary % ranks != 0)
          return var.emitError("px-shard-model: layer-splits: the ")
                 << vocabulary << " rows of '" << var.getName() << "' do not divide over "
                 << ranks << " model ranks";
      }
      recordSplit(var, vocabulary % ranks != 0 ? Named::Whole : Named::Rows);
      if (vocabulary % ranks != 0) {
        px::setAttr<px::PxDialect::WholeOnGridAttrHelper>(
            var, b.getStringAttr(llvm::Twine(vocabulary) + " rows do not divide over " +
                                 llvm::Twine(ranks) + " model ranks"));
        continue;
      }
      b.setInsertionPointAfter(var);
      auto op = shard::ShardingOp::create(b, var.getLoc(), sharding);
      auto annotated = shard::ShardOp::create(b, var.getLoc(), var.getOutput(), op.getResult());
      var.getOutput().replaceAllUsesExcept(annotated.getResult(), annotated);
    }
    return success();
  }

  /// Megatron-LM's sequence parallelism: the rows (tokens, the leading
  /// dimension) of every layer norm, and of the dropouts, residual additions
  /// and other element-wise ops connected to it, forward and backward, are
  /// split over the model axis (rowRegion). The region's values are
  /// annotated where they are defined, and each edge into or out of it
  /// where it is used: a value the region takes from a product (its partial
  /// sums all-reduced) is sliced, which foldReduceScatters makes one
  /// reduce-scatter; a value it hands to a product is all-gathered. Left
  /// to propagation, the element-wise ops between a product and a layer
  /// norm would take either side's sharding, op by op.
  void annotateRows(func::FuncOp func, shard::GridOp grid) {
    auto modelAxis = (shard::GridAxis)(grid.getShape().size() - 1);
    RowRegion region = rowRegion(func, grid.getShape().back());
    auto ref = FlatSymbolRefAttr::get(grid.getSymNameAttr());
    SmallVector<SmallVector<shard::GridAxis>> rows{{modelAxis}};
    shard::Sharding split = shard::Sharding::get(ref, toGridAxesAttrs(rows));
    shard::Sharding whole = shard::Sharding::get(ref, {});
    OpBuilder b(func.getContext());
    auto annotate = [&](Value v, shard::Sharding s, bool forUsers) {
      return shard::ShardOp::create(b, v.getLoc(), v,
                                    shard::ShardingOp::create(b, v.getLoc(), s).getResult(),
                                    forUsers)
          .getResult();
    };
    for (Value v : region.values) {
      bool inside = v.getDefiningOp() && region.ops.contains(v.getDefiningOp());
      SmallVector<OpOperand *> uses =
          llvm::map_to_vector(v.getUses(), [](OpOperand &u) { return &u; });
      b.setInsertionPointAfterValue(v);
      Value defined = annotate(v, inside ? split : whole, /*forUsers=*/false);
      for (OpOperand *use : uses) {
        bool rowUse = region.ops.contains(use->getOwner());
        if (rowUse == inside) {
          use->set(defined);
          continue;
        }
        b.setInsertionPoint(use->getOwner());
        use->set(annotate(defined, rowUse ? split : whole, /*forUsers=*/true));
      }
    }
  }

  /// The ops that run on a block of rows and the values they read and
  /// write by rows.
  struct RowRegion {
    llvm::SetVector<Value> values;
    llvm::DenseSet<Operation *> ops;
  };

  /// From every layer norm whose rows the model ranks divide, through the
  /// ops that are parallel over their rows (element-wise ops whose operands
  /// broadcast only over trailing dimensions, dropouts, layer norms and
  /// their gradients) and share a tensor of those rows.
  static RowRegion rowRegion(func::FuncOp func, int64_t ranks) {
    RowRegion region;
    // The tensors of `op` indexed by its rows: those with its leading
    // dimension (of `rows` elements) and rank.
    auto rowValuesOf = [&](Operation *op) {
      SmallVector<Value> values;
      auto main = cast<RankedTensorType>(op->getResult(0).getType());
      for (Value v : llvm::concat<Value>(op->getOperands(), op->getResults())) {
        auto t = dyn_cast<RankedTensorType>(v.getType());
        if (t && t.getRank() == main.getRank() && t.getDimSize(0) == main.getDimSize(0) &&
            !v.getDefiningOp<px::VariableOp>() && !v.getDefiningOp<shard::ShardOp>())
          values.push_back(v);
      }
      return values;
    };
    auto isRowOp = [&](Operation *op) {
      if (op->getNumResults() == 0 || op->getParentOp() != func.getOperation())
        return false;
      auto main = dyn_cast<RankedTensorType>(op->getResult(0).getType());
      if (!main || main.getRank() < 2 || main.getDimSize(0) % ranks != 0)
        return false;
      // Described by its sharding model (a layer norm: with rows).
      auto sharding = dyn_cast<shard::ShardingInterface>(op);
      if (!sharding || sharding.getIndexingMaps().empty())
        return false;
      if (auto d = dyn_cast<px::DropoutOp>(op))
        return !d.getGrid();
      if (isa<px::LayerNormOp, px::LayerNormGradOp, px::DropoutGradOp>(op))
        return true;
      return op->hasTrait<px::OpTrait::Elementwise>() && op->getNumResults() == 1;
    };
    SmallVector<Value> work;
    for (auto ln : func.getOps<px::LayerNormOp>())
      if (isRowOp(ln)) {
        region.ops.insert(ln);
        llvm::append_range(work, rowValuesOf(ln));
      }
    while (!work.empty()) {
      Value v = work.pop_back_val();
      if (!region.values.insert(v))
        continue;
      SmallVector<Operation *> neighbours(v.getUsers());
      if (Operation *def = v.getDefiningOp())
        neighbours.push_back(def);
      // An op joins through a tensor of its own rows (not, say, a [T, H]
      // table broadcast into its [B, T, H]).
      for (Operation *op : neighbours)
        if (!region.ops.contains(op) && isRowOp(op) && llvm::is_contained(rowValuesOf(op), v)) {
          region.ops.insert(op);
          llvm::append_range(work, rowValuesOf(op));
        }
    }
    return region;
  }

  SmallVector<shard::GridAxesAttr> toGridAxesAttrs(ArrayRef<SmallVector<shard::GridAxis>> axes) {
    SmallVector<shard::GridAxesAttr> attrs;
    for (auto &a : axes)
      attrs.push_back(shard::GridAxesAttr::get(&getContext(), a));
    return attrs;
  }

  /// Partial sums all-reduced only for each rank to keep its slice (a
  /// layer pair's output on a block of rows): one reduce-scatter, half
  /// the bytes.
  void foldReduceScatters(func::FuncOp func) {
    for (auto sl : llvm::to_vector(func.getOps<shard::AllSliceOp>())) {
      int64_t axis = sl.getSliceAxis().getSExtValue();
      // A reshape between them that keeps blocks of leading rows (the
      // product's [B*T, F] back to [B, T, F]) slices the same bytes.
      Value in = sl.getInput();
      auto reshape = in.getDefiningOp<px::ReshapeOp>();
      if (reshape && reshape->hasOneUse() && axis == 0)
        in = reshape.getInput();
      else
        reshape = nullptr;
      auto ar = in.getDefiningOp<shard::AllReduceOp>();
      if (!ar || !ar->hasOneUse() || ar.getReduction() != shard::ReductionKind::Sum ||
          ar.getGridAttr() != sl.getGridAttr() || ar.getGridAxes() != sl.getGridAxes())
        continue;
      auto full = cast<RankedTensorType>(ar.getInput().getType());
      int64_t ranks = cast<RankedTensorType>(sl.getInput().getType()).getDimSize(axis) /
                      std::max<int64_t>(1, sl.getResult().getType().getDimSize(axis));
      if (full.getRank() <= axis || full.getDimSize(axis) % ranks != 0)
        continue;
      SmallVector<int64_t> shape(full.getShape());
      shape[axis] /= ranks;
      OpBuilder b(sl);
      Value block = px::ReduceScatterOp::create(
          b, sl.getLoc(), full.clone(shape), sl.getGridAttr(), sl.getGridAxesAttr(),
          ar.getInput(), b.getI64IntegerAttr(axis),
          shard::ReductionKindAttr::get(&getContext(), shard::ReductionKind::Sum));
      if (reshape)
        block = px::ReshapeOp::create(b, reshape.getLoc(), sl.getResult().getType(), block);
      sl.replaceAllUsesWith(block);
      sl.erase();
      if (reshape)
        reshape.erase();
      ar.erase();
    }
  }

  /// Partial sums reduced one by one and then added (the input gradient of
  /// an activation that several products split by features read:
  /// attention's query, key and value projections) are added first and
  /// reduced once, as Megatron-LM's fused QKV product is: in a sum of
  /// terms (a tree of px.add, in any order: autodiff accumulates the
  /// residual's gradient first), the terms that are all-reductions (or
  /// reduce-scatters) of one group are one.
  static void addPartialsFirst(func::FuncOp func) {
    // The sum over the model axis of `v`'s partial sums, if that is all
    // that reads them (and the reshape after it: the product's [B*T, H]
    // back to [B, T, H], which commutes with the sum).
    struct Reduced {
      Operation *collective = nullptr;
      px::ReshapeOp reshape;
    };
    auto reducedOf = [](Value v) -> Reduced {
      Reduced r;
      if (!v.hasOneUse())
        return {};
      if ((r.reshape = v.getDefiningOp<px::ReshapeOp>())) {
        v = r.reshape.getInput();
        if (!v.hasOneUse())
          return {};
      }
      Operation *def = v.getDefiningOp();
      if (auto ar = dyn_cast_or_null<shard::AllReduceOp>(def))
        r.collective = ar.getReduction() == shard::ReductionKind::Sum ? def : nullptr;
      else if (auto rs = dyn_cast_or_null<px::ReduceScatterOp>(def))
        r.collective = rs.getReduction() == shard::ReductionKind::Sum ? def : nullptr;
      return r;
    };
    // One collective over one group (its attributes: grid, axes,
    // reduction, scatter axis) of partial sums of one type.
    auto alike = [](const Reduced &a, const Reduced &b) {
      return a.collective && b.collective && a.collective != b.collective &&
             a.collective->getName() == b.collective->getName() &&
             a.collective->getAttrDictionary() == b.collective->getAttrDictionary() &&
             a.collective->getOperand(0).getType() == b.collective->getOperand(0).getType() &&
             !a.reshape == !b.reshape;
    };
    // A sum of same-typed terms (px.add's whose results only feed the
    // sum): its terms, and the adds that are its inner nodes.
    auto sameType = [](px::AddOp add) {
      return add.getLhs().getType() == add.getOutput().getType() &&
             add.getRhs().getType() == add.getOutput().getType();
    };
    auto isInner = [&](Value v, Type type) -> bool {
      auto add = v.getDefiningOp<px::AddOp>();
      return add && v.hasOneUse() && v.getType() == type && sameType(add);
    };
    for (auto root : llvm::to_vector(func.getOps<px::AddOp>())) {
      auto user = root->hasOneUse() ? dyn_cast<px::AddOp>(*root->user_begin()) : px::AddOp();
      if (!sameType(root) || (user && sameType(user)))
        continue; // not a sum, or inside a larger one
      SmallVector<px::AddOp> inner{root};
      SmallVector<Value> terms;
      for (size_t i = 0; i < inner.size(); ++i)
        for (Value v : {inner[i].getLhs(), inner[i].getRhs()}) {
          if (isInner(v, root.getType()))
            inner.push_back(v.getDefiningOp<px::AddOp>());
          else
            terms.push_back(v);
        }
      // The reduced terms, grouped by collective.
      SmallVector<SmallVector<Reduced>> groups;
      SmallVector<Value> rest;
      for (Value t : terms) {
        Reduced r = reducedOf(t);
        auto group = llvm::find_if(groups, [&](auto &g) { return alike(g.front(), r); });
        if (group != groups.end())
          group->push_back(r);
        else if (r.collective)
          groups.push_back({r});
        else
          rest.push_back(t);
      }
      if (llvm::none_of(groups, [](auto &g) { return g.size() > 1; }))
        continue;
      OpBuilder b(root);
      SmallVector<Value> sums;
      for (SmallVector<Reduced> &g : groups) {
        if (g.size() == 1) {
          rest.push_back(g.front().reshape ? Value(g.front().reshape.getOutput())
                                           : g.front().collective->getResult(0));
          g.clear();
          continue;
        }
        Value partials = g.front().collective->getOperand(0);
        for (Reduced &r : llvm::drop_begin(g))
          partials = px::AddOp::create(b, root.getLoc(), partials, r.collective->getOperand(0))
                         .getOutput();
        Operation *once = b.clone(*g.front().collective);
        once->setOperand(0, partials);
        Value sum = once->getResult(0);
        if (g.front().reshape)
          sum = px::ReshapeOp::create(b, g.front().reshape.getLoc(), root.getType(), sum);
        sums.push_back(sum);
      }
      Value total = sums.front();
      for (Value v : llvm::concat<Value>(llvm::drop_begin(sums), rest))
        total = px::AddOp::create(b, root.getLoc(), total, v).getOutput();
      root.getOutput().replaceAllUsesWith(total);
      for (px::AddOp add : inner)
        add.erase();
      for (SmallVector<Reduced> &g : groups)
        for (Reduced &r : g) {
          if (r.reshape)
            r.reshape.erase();
          r.collective->erase();
        }
    }
  }

  /// The shard collectives partition inserted, as px ops; anything else it
  /// needs is refused, naming the op.
  LogicalResult lowerCollectives(func::FuncOp func) {
    foldReduceScatters(func);
    addPartialsFirst(func);
    WalkResult r = func.walk([&](Operation *op) -> WalkResult {
      OpBuilder b(op);
      if (auto ar = dyn_cast<shard::AllReduceOp>(op)) {
        auto px = px::AllReduceOp::create(
            b, ar.getLoc(), ar.getResult().getType(), ar.getGridAttr(), ar.getGridAxesAttr(),
            ar.getInput(), shard::ReductionKindAttr::get(&getContext(), ar.getReduction()),
            IntegerAttr());
        ar.replaceAllUsesWith(px.getOutput());
        ar.erase();
        return WalkResult::advance();
      }
      if (auto ag = dyn_cast<shard::AllGatherOp>(op)) {
        auto px = px::AllGatherOp::create(b, ag.getLoc(), ag.getResult().getType(),
                                          ag.getGridAttr(), ag.getGridAxesAttr(), ag.getInput(),
                                          b.getI64IntegerAttr(ag.getGatherAxis().getSExtValue()));
        ag.replaceAllUsesWith(px.getOutput());
        ag.erase();
        return WalkResult::advance();
      }
      if (auto sl = dyn_cast<shard::AllSliceOp>(op)) {
        auto px = px::AllSliceOp::create(b, sl.getLoc(), sl.getResult().getType(),
                                         sl.getGridAttr(), sl.getGridAxesAttr(), sl.getInput(),
                                         b.getI64IntegerAttr(sl.getSliceAxis().getSExtValue()));
        sl.replaceAllUsesWith(px.getOutput());
        sl.erase();
        return WalkResult::advance();
      }
      if (auto a2a = dyn_cast<shard::AllToAllOp>(op)) {
        // A value split along one dimension resplit along another (a
        // weight's gradient computed on its input-channel block, for a
        // weight split by output channels).
        auto px = px::AllToAllOp::create(
            b, a2a.getLoc(), a2a.getResult().getType(), a2a.getGridAttr(),
            a2a.getGridAxesAttr(), a2a.getInput(),
            b.getI64IntegerAttr(a2a.getSplitAxis().getSExtValue()),
            b.getI64IntegerAttr(a2a.getConcatAxis().getSExtValue()));
        a2a.replaceAllUsesWith(px.getOutput());
        a2a.erase();
        return WalkResult::advance();
      }
      if (auto cast = dyn_cast<tensor::CastOp>(op); cast && cast.getSource().getType() == cast.getType()) {
        cast.replaceAllUsesWith(cast.getSource());
        cast.erase();
        return WalkResult::advance();
      }
      if (isa<shard::ShardDialect, tensor::TensorDialect>(op->getDialect())) {
        op->emitError("px-shard-model: the partitioned step needs '")
            << op->getName() << "', which px cannot run yet (docs/grid.md)";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    return failure(r.wasInterrupted());
  }
};

} // namespace
