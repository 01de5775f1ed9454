//===- StrategySpace.cpp - a model's parallelization strategies as an FT graph ---===//

#include "parallax/Analysis/StrategySpace.h"
#include "parallax/Analysis/Vocabulary.h"
#include "parallax/Analysis/Layers.h"
#include "parallax/Analysis/VariableAccess.h"
#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Dialect/Px/PxShardingInterface.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>
#include <string_view>

using namespace mlir;

namespace parallax::strategy {

const char *nameOf(Split s) {
  switch (s) {
  case Split::Whole:
    return "whole";
  case Split::Out:
    return "out";
  case Split::In:
    return "in";
  case Split::Rows:
    return "rows";
  }
  return "?";
}

std::optional<Split> splitNamed(llvm::StringRef name) {
  for (Split s : {Split::Whole, Split::Out, Split::In, Split::Rows})
    if (name == nameOf(s))
      return s;
  return std::nullopt;
}

std::vector<SpaceOptions> spaceOptionsOf(const grid::Grid &) {
  std::vector<SpaceOptions> options;
  for (double recompute : kRecomputeLevels)
    options.push_back({0, recompute});
  return options;
}

bool shardsUpdatesOn(const grid::Grid &g) { return g.pc >= 2; }

namespace {

/// The layer op's input activation (its data operand), as layersOf reads it.
Value dataOperandOf(Operation *op) {
  if (auto g = dyn_cast<px::GemmOp>(op))
    return g.getA();
  if (auto m = dyn_cast<px::MatMulOp>(op))
    return m.getLhs();
  if (auto c = dyn_cast<px::ConvOp>(op))
    return c.getX();
  return {};
}

} // namespace

std::vector<Operator> operatorsOf(ModuleOp module) {
  std::vector<Operator> ops;
  func::FuncOp func = getEntryFunction(module);
  if (!func || func.getBody().empty())
    return ops;
  llvm::StringMap<int> byName;
  for (grid::Layer &l : layersOf(module)) {
    if (byName.count(l.name))
      continue; // a weight read by two products (tied) chooses once
    byName[l.name] = (int)ops.size();
    Operator op;
    op.layer = std::move(l);
    ops.push_back(std::move(op));
  }
  // Which op is which operator: layer products by their weight, gathers by
  // their table (and the ops in step order, so that every run costs the
  // same).
  llvm::DenseMap<Operation *, int> opOf;
  std::vector<Operation *> inOrder;
  llvm::StringSet<> tables;
  for (const VariableInfo &v : analyzeVariables(module))
    if (v.trainable && v.access == VariableAccess::RowGather && v.shape.size() == 2) {
      Operator t;
      t.table = true;
      t.layer.name = v.name;
      t.tableRows = v.shape[0];
      t.tableWidth = v.shape[1];
      t.lookups = v.rowsReadPerStep;
      t.layer.inputGradient = false;
      byName[v.name] = (int)ops.size();
      tables.insert(v.name);
      ops.push_back(std::move(t));
    }
  for (const Vocabulary &v : vocabulariesOf(func)) {
    px::VariableOp var = v.loss ? v.weight : v.variables.front().first;
    if (auto it = byName.find(var.getName()); it != byName.end())
      ops[it->second].vocabulary = true;
  }
  func.walk([&](Operation *op) {
    if (auto g = dyn_cast<px::GatherOp>(op)) {
      auto var = g.getData().getDefiningOp<px::VariableOp>();
      if (var && tables.contains(var.getName())) {
        opOf[op] = byName[var.getName()];
        inOrder.push_back(op);
      }
      return;
    }
    px::VariableOp w = layerWeightOf(op);
    if (!w || !dataOperandOf(op))
      return;
    auto it = byName.find(w.getName());
    if (it == byName.end())
      return;
    opOf[op] = it->second;
    inOrder.push_back(op);
    // Only what px-shard-model splits chooses (every product of a tied
    // weight must be one).
    Operator &o = ops[it->second];
    o.splittable = o.splittable && splittableWeightOf(op);
    if (auto c = dyn_cast<px::ConvOp>(op))
      if (std::optional<px::Halo> h = px::domainHalo(c); h && o.splittable)
        o.halo = *h;
  });
  // Producers: each operator's input traced back, along the activation
  // each op carries (splitCarrierOf), through ops that follow a split to
  // the operator that made it; where such an op joins activations (a
  // residual add, attention's products) its other operands add
  // the operator their own chain leads to, and no more. A residual stream
  // so links each operator to the last two that wrote it rather than to
  // every earlier one (its layout is settled at each add), which leaves
  // the FT search something to eliminate. An op that runs whole ends the
  // trace: what reaches it is gathered there, whatever its split.
  // An operator that cannot be split but follows a split (a grouped
  // convolution runs on the groups it is given) is passed through like
  // any follower: it has no configuration to choose and no edges.
  auto operatorAt = [&](Operation *def) -> int {
    auto p = opOf.find(def);
    if (p == opOf.end() || (!ops[p->second].splittable && followsChannelSplit(def)))
      return -1;
    return p->second;
  };
  // The operator `v` comes from through ops that follow a split, with the
  // op it is and the chain from it to `v` (in forward order).
  auto leadsTo = [&](Value v, Operation *&from, SmallVector<Operation *> &path) -> int {
    path.clear();
    for (Operation *def = v.getDefiningOp(); def; def = splitCarrierOf(def).getDefiningOp()) {
      if (int p = operatorAt(def); p >= 0) {
        from = def;
        std::reverse(path.begin(), path.end());
        return p;
      }
      if (!followsChannelSplit(def))
        return -1;
      path.push_back(def);
    }
    return -1;
  };
  for (Operation *op : inOrder) {
    int index = operatorAt(op);
    if (index < 0)
      continue;
    Operator &o = ops[index];
    auto addProducer = [&](int p, int64_t features = 0) {
      if (p >= 0 && p != index && !llvm::is_contained(o.producers, p)) {
        o.producers.push_back(p);
        o.producerFeatures.push_back(features);
      }
    };
    Value input = isa<px::GatherOp>(op) ? Value() : dataOperandOf(op);
    Operation *def = input ? input.getDefiningOp() : nullptr;
    SmallVector<Operation *> chain;
    Operation *producer = nullptr;
    for (; def; def = splitCarrierOf(def).getDefiningOp()) {
      if (int p = operatorAt(def); p >= 0) {
        // A table's lookups have no features to follow (its edge is priced
        // by its layout alone).
        if (ops[p].table) {
          addProducer(p);
          break;
        }
        // A split of its features that the chain does not carry to this
        // operator's input features is gathered on the way: no pair.
        if (std::optional<int64_t> features =
                carriedFeatures(def, llvm::to_vector(llvm::reverse(chain)), op)) {
          addProducer(p, *features);
          producer = def;
        } else {
          def = nullptr;
        }
        break;
      }
      if (!followsChannelSplit(def))
        break;
      chain.push_back(def);
    }
    // Where the chain joins other activations (a residual add, attention's
    // products), the operators those come from, where their split arrives
    // on the dimension the chain's has there (unknown where the chain
    // reaches no operator: then linked as before).
    std::reverse(chain.begin(), chain.end());
    // The split's dimension, -1 where unknown (as optionals, GCC 12 took
    // their copies for maybe-uninitialized).
    int64_t dim = -1;
    if (producer)
      if (std::optional<int64_t> d = outputFeatureDim(producer))
        dim = *d;
    for (Operation *join : chain) {
      Value carrier = splitCarrierOf(join);
      int64_t out = -1;
      if (dim >= 0)
        if (std::optional<int64_t> o = carriedSplitDim(join, carrier, dim))
          out = *o;
      for (Value other : join->getOperands()) {
        if (other == carrier)
          continue;
        Operation *from = nullptr;
        SmallVector<Operation *> path;
        int q = leadsTo(other, from, path);
        if (q < 0)
          continue;
        if (!producer) {
          addProducer(q);
          continue;
        }
        int64_t want = -1;
        if (out >= 0)
          if (std::optional<int64_t> w = operandDimOf(join, other, out))
            want = *w;
        std::optional<CarriedSplit> got = featuresAlong(from, path);
        if (want >= 0 && got && got->dim == want)
          addProducer(q, got->sizes);
      }
      dim = out;
    }
    o.inputWhole |= !o.table && (!def || operatorAt(def) < 0) && o.producers.empty();
    // Where its output goes, through ops that follow a split, and whether
    // the split of its features survives them.
    struct Reader {
      OpOperand *use;
      std::optional<int64_t> dim;
    };
    SmallVector<Reader> work;
    for (OpOperand &use : op->getResult(0).getUses())
      work.push_back({&use, outputFeatureDim(op)});
    llvm::DenseSet<Operation *> seen;
    while (!work.empty() && !o.outputWhole) {
      Reader r = work.pop_back_val();
      Operation *user = r.use->getOwner();
      if (operatorAt(user) >= 0 || !seen.insert(user).second)
        continue;
      bool follows = followsChannelSplit(user);
      std::optional<int64_t> dim =
          follows && r.dim ? carriedSplitDim(user, r.use->get(), *r.dim) : std::nullopt;
      // A table's rows are no features: only an op that runs whole ends it.
      if (!follows || (!dim && !o.table)) {
        o.outputWhole = true;
        break;
      }
      if (px::isGroupedConv(user))
        o.outputGroups = std::gcd(o.outputGroups, cast<px::ConvOp>(user).getGroup());
      for (OpOperand &use : user->getResult(0).getUses())
        work.push_back({&use, dim});
    }
  }
  for (Operator &o : ops) {
    std::vector<std::pair<int, int64_t>> both;
    for (size_t i = 0; i < o.producers.size(); ++i)
      both.push_back({o.producers[i], o.producerFeatures[i]});
    llvm::sort(both);
    for (size_t i = 0; i < both.size(); ++i)
      std::tie(o.producers[i], o.producerFeatures[i]) = both[i];
  }
  return ops;
}

std::vector<Split> splitsOf(const Operator &op, const grid::Grid &g) {
  std::vector<Split> splits{Split::Whole};
  int64_t pr = g.pr;
  if (pr <= 1 || !op.splittable)
    return splits;
  if (op.table) {
    if (op.tableRows % pr == 0 || op.vocabulary)
      splits.push_back(Split::Rows);
    return splits;
  }
  const grid::Layer &l = op.layer;
  if (l.out % pr == 0 || op.vocabulary)
    splits.push_back(Split::Out);
  if (l.in % pr == 0)
    splits.push_back(Split::In);
  if (l.kind == grid::Layer::Kind::Conv && op.halo &&
      px::rowsSplitInto(l.inHeight, l.outHeight, *op.halo, pr))
    splits.push_back(Split::Rows);
  return splits;
}

bool tableSchemesOn(const grid::Grid &g, Split s) {
  return g.pc > 1 && (s == Split::Whole || s == Split::Rows);
}

bool tableSchemeOn(const grid::Grid &g, Split s, int k) {
  return tableSchemesOn(g, s) &&
         (s == Split::Whole || kTableSchemes[k] != std::string_view("allreduce"));
}

std::vector<std::string> Strategy::syncVariables() const {
  std::vector<std::string> out;
  for (const auto &[name, scheme] : tableSchemes)
    out.push_back(name + "=" + scheme);
  return out;
}

std::vector<std::string> Strategy::layerSplits() const {
  std::vector<std::string> out;
  if (grid.pr <= 1 || byPairingRule)
    return out;
  for (const auto &[name, split] : splits)
    out.push_back(name + "=" + nameOf(split));
  return out;
}

std::string Strategy::summary() const {
  int split = 0;
  for (const auto &s : splits)
    split += s.second != Split::Whole;
  std::string text = grid.str();
  if (shardUpdates >= 1)
    text += ", ZeRO-1";
  else if (shardUpdates > 0)
    text += ", ZeRO-1 " + std::to_string((int)std::lround(shardUpdates * 100)) + "%";
  else if (!shardedUpdates.empty())
    text += ", ZeRO-1 on " + std::to_string(shardedUpdates.size()) +
            (shardedUpdates.size() == 1 ? " layer" : " layers");
  if (recompute >= 1)
    text += ", recompute";
  else if (recompute > 0)
    text += ", recompute " + std::to_string((int)std::lround(recompute * 100)) + "%";
  if (!recomputed.empty())
    text += ", " + std::to_string(recomputed.size()) +
            (recomputed.size() == 1 ? " layer" : " layers") + " recomputed";
  // The tables synchronized otherwise than by all-gatherv.
  for (std::string_view scheme : {"ps", "allreduce"}) {
    int n = (int)llvm::count_if(tableSchemes, [&](const auto &t) { return t.second == scheme; });
    if (n > 0)
      text += ", " + std::to_string(n) + (n == 1 ? " table by " : " tables by ") +
              std::string(scheme == "ps" ? "ps" : "all-reduce");
  }
  if (grid.pr > 1)
    text += ", " + std::to_string(split) + " of " + std::to_string(splits.size()) + " split";
  if (grid.pr > 1 && (byPairingRule || splits.empty()))
    text += " (pairing rule)";
  if (sequenceParallel)
    text += ", sequence-parallel";
  return text;
}

bool Strategy::pureData() const { return grid.pr == 1; }

bool Strategy::pureModel() const {
  return grid.pc == 1 && llvm::all_of(splits, [](const auto &s) { return s.second != Split::Whole; });
}

namespace {

/// Where an activation's features (or rows) are on the model axis.
enum class Layout { Whole, Features, Rows };

Layout outputLayout(const Operator &op, Split s) {
  if (op.table)
    return Layout::Whole; // a split table's lookups are summed over the axis
  return s == Split::Out ? Layout::Features : s == Split::Rows ? Layout::Rows : Layout::Whole;
}

Layout inputLayout(Split s) {
  return s == Split::In ? Layout::Features : s == Split::Rows ? Layout::Rows : Layout::Whole;
}

double perRank(double n, int64_t parts) { return (double)grid::ceilDiv((int64_t)n, parts); }

/// Seconds of `flops` floating-point operations of one layer on one rank,
/// split by `s` over `g`: a dense layer's products run at the rate of their
/// smallest dimension and weight block (Machine::productFlopsPerSecond).
double computeSeconds(const grid::Layer &l, double flops, Split s, const grid::Grid &g,
                      const grid::Machine &m) {
  if (l.kind == grid::Layer::Kind::Dense) {
    int64_t in = s == Split::In ? grid::ceilDiv(l.in, g.pr) : l.in;
    int64_t out = s == Split::Out ? grid::ceilDiv(l.out, g.pr) : l.out;
    return flops / grid::denseProductFlopsPerSecond(m, grid::ceilDiv(l.batch, g.pc), in, out,
                                                    l.elementBytes);
  }
  double rate = m.convFlopsPerSecond;
  if (l.kind == grid::Layer::Kind::Conv)
    if (auto it = m.opRates.find("conv"); it != m.opRates.end() && it->second.at(flops) > 0)
      rate = it->second.at(flops);
  return flops / rate;
}

/// The bytes of a layer's output activation on one rank, whole.
double activationBytes(const Operator &op, const grid::Grid &g) {
  if (op.table)
    return perRank(op.lookups, g.pc) * op.tableWidth * 4.0;
  const grid::Layer &l = op.layer;
  return perRank(l.batch, g.pc) * (double)l.outElements() * (double)l.elementBytes;
}

/// A table's cost, its row-sparse gradient synchronized over the batch
/// axis by kTableSchemes[scheme] (px-sync's closed forms, its `choose`).
Cost tableCost(const Operator &op, Split s, const grid::Grid &g, const grid::Machine &m,
               int scheme = 0) {
  const double eb = 4.0;
  int64_t share = s == Split::Rows ? g.pr : 1;
  double rowsHere = perRank(op.tableRows, share);
  double gathered = perRank(op.lookups, g.pc) * op.tableWidth * eb;
  double table = rowsHere * op.tableWidth * eb;
  Cost c;
  // The lookups and the scatter of their gradient rows stream the rows.
  c.seconds = 2 * gathered / m.streamBytesPerSecond + 2 * m.kernelSeconds;
  if (s == Split::Rows)
    c.seconds += grid::allReduceSeconds(g.pr, gathered, m.modelLink(g), m);
  // Its state stays whole under ZeRO-1, which shards the all-reduce
  // buckets' dense updates only.
  c.bytes = table * (1 + m.optimizerSlots);
  double rowsPushed = std::min<double>(rowsHere, perRank(op.lookups, g.pc));
  double rowBytes = op.tableWidth * eb + 8; // a row and its id
  const grid::Link &link = m.batchLink(g);
  if (g.pc <= 1 || kTableSchemes[scheme] == std::string_view("allgatherv")) {
    // Every rank's rows gathered on every rank, and applied there.
    if (g.pc > 1)
      c.seconds += link.alpha * grid::ceilLog2(g.pc) +
                   link.beta * (double)(g.pc - 1) * rowsPushed * rowBytes;
    c.bytes += gathered * (1 + (double)g.pc);
  } else if (kTableSchemes[scheme] == std::string_view("ps")) {
    // Its rows pulled from their servers and their gradient pushed back,
    // (N - 1) / N of them remote each way; the servers apply what they own.
    double n = (double)g.pc;
    c.seconds += 4 * link.alpha + 2 * link.beta * rowsPushed * rowBytes * (n - 1) / n;
    c.bytes += 3 * gathered; // pulled rows, pushed gradient, a server's receipt
  } else {
    // Densified and all-reduced with the dense gradients; the update then
    // streams the whole table and its state.
    c.seconds += grid::allReduceSeconds(g.pc, table, link, m) +
                 (2 * table + 4 * table * (1 + m.optimizerSlots)) / m.streamBytesPerSecond;
    c.bytes += table + gathered;
  }
  return c;
}

Cost layerCost(const Operator &op, Split s, const grid::Grid &g, double shardUpdates,
               double recompute, const grid::Machine &m) {
  if (op.table)
    return tableCost(op, s, g, m);
  const grid::Layer &l = op.layer;
  const double eb = (double)l.elementBytes;
  const int64_t weights = l.weightCount();
  const int64_t weightShare = (s == Split::Out || s == Split::In) ? g.pr : 1;
  const int64_t computeShare = s == Split::Whole ? 1 : g.pr;
  const double samples = perRank(l.batch, g.pc);
  Cost c;
  // Forward, the weight's gradient, and the input's where it is needed.
  double forward = l.flops() / (double)g.pc / (double)computeShare;
  c.seconds = (2.0 + (l.inputGradient ? 1.0 : 0.0)) * computeSeconds(l, forward, s, g, m) +
              (2.0 + (l.inputGradient ? 1.0 : 0.0)) * m.kernelSeconds;
  const grid::Link &model = m.modelLink(g);
  double x = samples * (double)l.inElements() * eb, y = samples * (double)l.outElements() * eb;
  if (s == Split::Out && l.inputGradient) // partial input gradients
    c.seconds += grid::allReduceSeconds(g.pr, x, model, m);
  bool outputSplit = s == Split::Out || s == Split::Rows;
  if (outputSplit && op.outputGatheredOn(g)) {
    // Gathered for an op that runs whole, and held whole there.
    c.seconds += grid::allGatherSeconds(g.pr, y, model, m);
    c.bytes += y - perRank((int64_t)y, g.pr);
  }
  if ((s == Split::In || s == Split::Rows) && op.inputWhole && l.inputGradient)
    c.seconds += grid::allGatherSeconds(g.pr, x, model, m); // its split input gradient
  if (s == Split::In) // partial products
    c.seconds += grid::allReduceSeconds(g.pr, y, model, m);
  if (s == Split::Rows && g.pr > 1) {
    int64_t halo = op.halo ? std::max(op.halo->lo, op.halo->hi) : 0;
    double xHalo = (double)halo * l.inWidth * l.in * samples * eb;
    double dyHalo = (double)halo * l.outWidth * l.out * samples * eb;
    if (halo > 0)
      c.seconds += 2 * (model.alpha + model.beta * xHalo) +
                   (l.inputGradient ? 2 * (model.alpha + model.beta * dyHalo) : 0.0);
  }
  // The gradient's synchronization: over the batch axis, or every rank for
  // a weight whole on a model axis that splits the samples' rows.
  // A sharded update's share goes as a reduce-scatter and an all-gather
  // (the same bytes, at their own calibrated rates).
  double dw = perRank(weights, weightShare) * eb;
  double sharded = g.pc > 1 ? shardUpdates : 0.0;
  int64_t syncGroup = s == Split::Rows ? g.size() : g.pc;
  const grid::Link &syncLink = s == Split::Rows ? m.worldLink(g) : m.batchLink(g);
  c.seconds += (1 - sharded) * grid::allReduceSeconds(syncGroup, dw, syncLink, m);
  if (sharded > 0)
    c.seconds += sharded * (grid::reduceScatterSeconds(syncGroup, dw, syncLink, m) +
                            grid::allGatherSeconds(syncGroup, dw, syncLink, m));
  // The sharded update runs on its share of the parameters (on that share
  // of the buckets: the layer's expected share of each), over the group
  // its gradient is summed over.
  double perUpdater = 1.0 - sharded + sharded / (double)syncGroup;
  c.seconds += 4.0 * dw * (1 + m.optimizerSlots) * perUpdater / m.streamBytesPerSecond;
  // Value and gradient, optimizer state (its share under ZeRO-1), and the
  // output kept for the backward pass.
  double slots = (double)m.optimizerSlots * perUpdater;
  double kept = outputSplit ? perRank((int64_t)y, g.pr) : y;
  c.bytes += dw * (2.0 + slots) + kept;
  // Its activation recomputed once more in the backward pass (that share
  // of them); what that frees depends on the ops after it, which the
  // compiled plan prices.
  c.seconds += recompute * 2 * kept / m.streamBytesPerSecond;
  return c;
}

/// `layerCost` with the layer's output recomputed from its input in the
/// backward pass (px-recompute's `layers`): its forward product again and
/// the cheap ops after it, for the output it no longer keeps. None where
/// px-recompute cannot: a table, a layer whose output leaves through a
/// collective (partial sums reduced, or gathered for an op that runs
/// whole).
std::optional<Cost> recomputedLayerCost(const Operator &op, Split s, const grid::Grid &g,
                                        const Cost &kept, double recompute,
                                        const grid::Machine &m) {
  if (op.table || s == Split::In)
    return std::nullopt;
  bool outputSplit = s == Split::Out || s == Split::Rows;
  if (outputSplit && op.outputGatheredOn(g))
    return std::nullopt;
  const grid::Layer &l = op.layer;
  double y = activationBytes(op, g);
  double output = outputSplit ? perRank((int64_t)y, g.pr) : y;
  double forward = l.flops() / (double)g.pc / (double)(s == Split::Whole ? 1 : g.pr);
  Cost c = kept;
  c.seconds += computeSeconds(l, forward, s, g, m) + m.kernelSeconds +
               (1 - recompute) * 2 * output / m.streamBytesPerSecond;
  c.bytes -= output;
  return c;
}

/// Resharding the producer's output into the consumer's input, both ways.
Cost edgeCost(const Operator &from, Split fs, const Operator &to, Split ts, int64_t features,
              const grid::Grid &g, const grid::Machine &m) {
  Layout out = outputLayout(from, fs), in = to.table ? Layout::Whole : inputLayout(ts);
  Cost c;
  if (g.pr <= 1)
    return c;
  double x = activationBytes(from, g);
  const grid::Link &model = m.modelLink(g);
  if (out == Layout::Features && features > 0 && features % g.pr != 0) {
    // The model ranks do not divide it on the way (heads of a reshape):
    // gathered there, forward, and sliced back in the backward pass.
    c.seconds = grid::allGatherSeconds(g.pr, x, model, m);
    c.bytes = x - perRank((int64_t)x, g.pr);
    return c;
  }
  if (out == in)
    return c;
  if (in == Layout::Whole) {
    // Gathered forward (and kept for the consumer's backward pass); its
    // gradient is sliced back. An output an op that runs whole reads is
    // gathered once, in the producer's own cost.
    if (from.outputGatheredOn(g))
      return c;
    c.seconds = grid::allGatherSeconds(g.pr, x, model, m);
    c.bytes = x - perRank((int64_t)x, g.pr);
  } else if (out == Layout::Whole) {
    // Sliced forward; the gradient, split, is gathered backward.
    if (to.layer.inputGradient)
      c.seconds = grid::allGatherSeconds(g.pr, x, model, m);
  } else {
    // Features to rows or back: an all-to-all each way.
    c.seconds = 2 * grid::allGatherSeconds(g.pr, x / (double)g.pr, model, m);
  }
  return c;
}

} // namespace

Space spaceOf(const std::vector<Operator> &ops, const grid::Grid &g, double shardUpdates,
              double recompute, const grid::Machine &m) {
  Space space;
  space.grid = g;
  space.shardUpdates = shardUpdates;
  space.recompute = recompute;
  for (const Operator &op : ops) {
    std::vector<Split> splits = splitsOf(op, g);
    std::vector<Cost> costs;
    std::vector<std::vector<Cost>> variants;
    std::vector<std::vector<Space::Variant>> meanings;
    bool anyVariant = false;
    for (Split s : splits) {
      costs.push_back(layerCost(op, s, g, shardUpdates, recompute, m));
      std::vector<Cost> more;
      std::vector<Space::Variant> meaning;
      if (op.table) {
        for (int k = 1; k < (int)std::size(kTableSchemes); ++k)
          if (tableSchemeOn(g, s, k)) {
            more.push_back(tableCost(op, s, g, m, k));
            meaning.push_back({false, false, k});
          }
      } else {
        // The output recomputed, the update sharded (where the whole model
        // does not shard it already), and both.
        bool shards = shardsUpdatesOn(g) && shardUpdates < 1;
        std::optional<Cost> sharded;
        if (shards)
          sharded = layerCost(op, s, g, 1.0, recompute, m);
        if (auto r = recomputedLayerCost(op, s, g, costs.back(), recompute, m)) {
          more.push_back(*r);
          meaning.push_back({true, false, 0});
        }
        if (sharded) {
          more.push_back(*sharded);
          meaning.push_back({false, true, 0});
          if (auto rs = recomputedLayerCost(op, s, g, *sharded, recompute, m)) {
            more.push_back(*rs);
            meaning.push_back({true, true, 0});
          }
        }
      }
      anyVariant |= !more.empty();
      variants.push_back(std::move(more));
      meanings.push_back(std::move(meaning));
    }
    if (!anyVariant)
      variants.clear();
    space.variants.push_back(std::move(meanings));
    space.graph.addNode(op.layer.name, std::move(costs), std::move(variants));
    space.splits.push_back(std::move(splits));
  }
  for (size_t to = 0; to < ops.size(); ++to)
    for (size_t i = 0; i < ops[to].producers.size(); ++i) {
      int from = ops[to].producers[i];
      int64_t features =
          i < ops[to].producerFeatures.size() ? ops[to].producerFeatures[i] : 0;
      space.graph.addEdge(from, (int)to, [&, from, to, features](int f, int t) {
        return edgeCost(ops[from], space.splits[from][f], ops[to], space.splits[to][t], features,
                        g, m);
      });
    }
  return space;
}

Strategy Space::strategyOf(const Solution &s, const std::vector<Operator> &ops) const {
  Strategy strategy;
  strategy.grid = grid;
  strategy.shardUpdates = shardUpdates;
  strategy.recompute = recompute;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].splittable)
      strategy.splits.push_back({ops[i].layer.name, splits[i][s.configs[i]]});
    int k = i < s.variants.size() ? s.variants[i] : 0;
    Variant v;
    if (k > 0)
      v = variants[i][s.configs[i]][k - 1];
    if (ops[i].table && tableSchemesOn(grid, splits[i][s.configs[i]]))
      strategy.tableSchemes.push_back({ops[i].layer.name, kTableSchemes[v.tableScheme]});
    if (v.recomputes)
      strategy.recomputed.push_back(ops[i].layer.name);
    if (v.shardsUpdate)
      strategy.shardedUpdates.push_back(ops[i].layer.name);
  }
  return strategy;
}

StrategySearch searchStrategies(const std::vector<Operator> &ops, int64_t ranks,
                                const grid::Machine &m, size_t pointsPerSpace,
                                const SearchOptions &options) {
  StrategySearch result;
  // The frontier over every space: each space's points enter one set.
  Frontier all;
  std::vector<Strategy> strategies;
  for (const grid::Grid &g : grid::gridsOf(ranks)) {
    if (!m.holdsModelGroup(g))
      continue;
    for (SpaceOptions o : spaceOptionsOf(g)) {
      Space space = spaceOf(ops, g, o.shardUpdates, o.recompute, m);
      ++result.spaces;
      result.nodes += space.graph.nodes.size();
      result.edges += space.graph.edges.size();
      SearchStats stats;
      std::vector<Solution> solutions = searchFrontier(space.graph, options, &stats);
      for (size_t i = 0; i < solutions.size(); ++i) {
        const Solution &s = solutions[i];
        auto choice = std::make_shared<Choice>();
        choice->node = 0;
        choice->config = (int)strategies.size();
        strategies.push_back(space.strategyOf(s, ops));
        all.insert({s.cost, choice});
        // Evenly spread over the space's frontier, both ends included.
        size_t n = solutions.size(), k = std::max<size_t>(pointsPerSpace, 1);
        bool spread = n <= k;
        for (size_t j = 0; j < k && !spread; ++j)
          spread = i == (k == 1 ? 0 : j * (n - 1) / (k - 1));
        if (spread)
          result.candidates.push_back({s.cost, strategies.back()});
      }
      result.stats.nodeEliminations += stats.nodeEliminations;
      result.stats.edgeEliminations += stats.edgeEliminations;
      result.stats.leafEliminations += stats.leafEliminations;
      result.stats.enumeratedNodes += stats.enumeratedNodes;
      result.stats.branches += stats.branches;
      result.stats.largestFrontier = std::max(result.stats.largestFrontier, stats.largestFrontier);
    }
  }
  for (const Frontier::Point &p : all.points())
    result.frontier.push_back({p.cost, strategies[p.choice->config]});
  return result;
}

} // namespace parallax::strategy
