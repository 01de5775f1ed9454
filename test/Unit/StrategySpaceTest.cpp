//===- StrategySpaceTest.cpp - a model's strategies as an FT graph ---------===//

#include "parallax/Analysis/StrategySpace.h"
#include "parallax/Dialect/Px/PxDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "llvm/ADT/STLExtras.h"

#include <gtest/gtest.h>

using namespace parallax;
using namespace parallax::strategy;

namespace {

/// x[32, 64] -> fc1 (64 -> 128) -> relu -> fc2 (128 -> 10): fc1 reads data,
/// fc2 reads fc1's output through an element-wise op and feeds the loss (an
/// op that runs whole).
std::vector<Operator> twoLayers() {
  Operator fc1, fc2;
  fc1.layer.name = "fc1.weight";
  fc1.layer.batch = 32;
  fc1.layer.in = 64;
  fc1.layer.out = 128;
  fc1.layer.inputGradient = false;
  fc1.inputWhole = true;
  fc2.layer.name = "fc2.weight";
  fc2.layer.batch = 32;
  fc2.layer.in = 128;
  fc2.layer.out = 10;
  fc2.producers = {0};
  fc2.outputWhole = true;
  return {fc1, fc2};
}

grid::Machine machine() {
  grid::Machine m;
  m.intra = {1e-5, 1e-9}; // 10 us, 1 GB/s
  m.flopsPerSecond = 1e10;
  m.kernelSeconds = 0;
  m.streamBytesPerSecond = 1e12;
  return m;
}

int configOf(const Space &s, int node, Split split) {
  for (size_t c = 0; c < s.splits[node].size(); ++c)
    if (s.splits[node][c] == split)
      return (int)c;
  return -1;
}

TEST(StrategySpace, SplitsEachLayerCanTake) {
  auto ops = twoLayers();
  EXPECT_EQ(splitsOf(ops[0], {1, 4}), std::vector<Split>{Split::Whole});
  EXPECT_EQ(splitsOf(ops[0], {2, 2}), (std::vector<Split>{Split::Whole, Split::Out, Split::In}));
  // 10 output features do not divide over 4 model ranks.
  EXPECT_EQ(splitsOf(ops[1], {4, 1}), (std::vector<Split>{Split::Whole, Split::In}));
  Operator table;
  table.table = true;
  table.tableRows = 1000;
  table.tableWidth = 16;
  EXPECT_EQ(splitsOf(table, {2, 1}), (std::vector<Split>{Split::Whole, Split::Rows}));
  EXPECT_EQ(splitsOf(table, {3, 1}), std::vector<Split>{Split::Whole});
}

TEST(StrategySpace, MegatronPairCostsOneAllReduceAndNoResharding) {
  auto ops = twoLayers();
  grid::Machine m = machine();
  Space s = spaceOf(ops, {2, 1}, false, false, m);
  ASSERT_EQ(s.graph.edges.size(), 1u);
  const Graph::Edge &e = s.graph.edges[0];
  int n2 = (int)s.splits[1].size();
  auto edge = [&](Split a, Split b) {
    return e.cost[configOf(s, 0, a) * n2 + configOf(s, 1, b)];
  };
  // Output features into input features: nothing moves.
  EXPECT_EQ(edge(Split::Out, Split::In).seconds, 0);
  // Split output into a layer that reads it whole: an all-gather of
  // fc1's 32 x 128 floats on 2 ranks (alpha + half the bytes at beta).
  double x = 32 * 128 * 4;
  EXPECT_DOUBLE_EQ(edge(Split::Out, Split::Whole).seconds, 1e-5 + 1e-9 * x / 2);
  // Whole into input features: sliced forward, the split input gradient
  // gathered backward.
  EXPECT_DOUBLE_EQ(edge(Split::Whole, Split::In).seconds, 1e-5 + 1e-9 * x / 2);
  EXPECT_EQ(edge(Split::Whole, Split::Whole).seconds, 0);

  // fc2 split by input features all-reduces its partial products (32 x 10
  // floats): 2 alpha + 2 (1/2) bytes beta, beside its compute and its
  // update (streaming value and gradient twice).
  double flops2 = 2.0 * 32 * 10 * 128;
  const Cost in2 = s.graph.nodes[1].configs[configOf(s, 1, Split::In)];
  double compute = 3 * flops2 / 2 / m.flopsPerSecond;
  double allReduce = 2e-5 + 1e-9 * 32 * 10 * 4;
  auto update = [&](double weightBytes) { return 4 * weightBytes / m.streamBytesPerSecond; };
  EXPECT_NEAR(in2.seconds, compute + allReduce + update(640 * 4), 1e-12);
  // Its weight block, gradient and kept (whole) output: 2 x 640 floats +
  // 32 x 10 floats.
  EXPECT_DOUBLE_EQ(in2.bytes, 2 * 640 * 4 + 32 * 10 * 4);
  // The whole layer: no collective, full compute and weight.
  const Cost whole2 = s.graph.nodes[1].configs[configOf(s, 1, Split::Whole)];
  EXPECT_NEAR(whole2.seconds, 3 * flops2 / m.flopsPerSecond + update(1280 * 4), 1e-12);
  EXPECT_DOUBLE_EQ(whole2.bytes, 2 * 1280 * 4 + 32 * 10 * 4);
}

TEST(StrategySpace, ZeroOneShardsTheOptimizerState) {
  auto ops = twoLayers();
  grid::Machine m = machine();
  m.optimizerSlots = 2; // Adam
  Space plain = spaceOf(ops, {1, 4}, false, false, m), zero = spaceOf(ops, {1, 4}, true, false, m);
  double w = 64 * 128 * 4;
  // Value, gradient and two moments, against value, gradient and a quarter
  // of the moments.
  EXPECT_DOUBLE_EQ(plain.graph.nodes[0].configs[0].bytes - zero.graph.nodes[0].configs[0].bytes,
                   w * 2 - w * 0.5);
}

TEST(StrategySpace, EachLayerMayShardItsUpdate) {
  // ZeRO-1 per layer: on a batch axis of two ranks or more, each layer's
  // split has a variant with its update sharded (a quarter of its
  // optimizer state, a reduce-scatter and an all-gather instead of the
  // all-reduce, the update on a quarter), and one recomputing as well
  // where it can recompute; on 4 x 1 none.
  auto ops = twoLayers();
  grid::Machine m = machine();
  m.optimizerSlots = 2; // Adam
  Space s = spaceOf(ops, {1, 4}, 0, 0, m), zero = spaceOf(ops, {1, 4}, 1, 0, m);
  const Graph::Node &fc1 = s.graph.nodes[0];
  ASSERT_EQ(fc1.variants.size(), 1u);
  ASSERT_EQ(fc1.variants[0].size(), 3u); // recomputed, sharded, both
  const auto &meaning = s.variants[0][0];
  EXPECT_TRUE(meaning[0].recomputes && !meaning[0].shardsUpdate);
  EXPECT_TRUE(!meaning[1].recomputes && meaning[1].shardsUpdate);
  EXPECT_TRUE(meaning[2].recomputes && meaning[2].shardsUpdate);
  // The sharded variant is the layer priced as the whole model sharded.
  EXPECT_DOUBLE_EQ(fc1.variants[0][1].bytes, zero.graph.nodes[0].configs[0].bytes);
  EXPECT_DOUBLE_EQ(fc1.variants[0][1].seconds, zero.graph.nodes[0].configs[0].seconds);
  double w = 64 * 128 * 4;
  EXPECT_DOUBLE_EQ(fc1.configs[0].bytes - fc1.variants[0][1].bytes, w * 2 - w * 0.5);
  // Reduce-scatter and all-gather: one alpha-beta all-reduce's terms.
  double ar = 2 * m.intra.alpha * 2 + m.intra.beta * 2 * w * 3 / 4;
  double rsAg = 2 * (m.intra.alpha * 2 + m.intra.beta * w * 3 / 4);
  double update = 4.0 * w * 3 / m.streamBytesPerSecond;
  EXPECT_NEAR(fc1.configs[0].seconds - fc1.variants[0][1].seconds,
              (ar - rsAg) + update * 3 / 4, 1e-12);
  // A solution's variants name the layers.
  Strategy both = s.strategyOf(Solution{{}, {0, 0}, {3, 2}}, ops);
  EXPECT_EQ(both.shardedUpdates, (std::vector<std::string>{"fc1.weight", "fc2.weight"}));
  EXPECT_EQ(both.recomputed, std::vector<std::string>{"fc1.weight"});
  EXPECT_EQ(both.summary(), "1x4, ZeRO-1 on 2 layers, 1 layer recomputed");
  // No batch axis to shard over on 4 x 1: only recomputation.
  Space byModel = spaceOf(ops, {4, 1}, 0, 0, m);
  for (const auto &config : byModel.variants[0])
    for (const Space::Variant &v : config)
      EXPECT_FALSE(v.shardsUpdate);
  // The search's smallest 1 x 4 point shards both.
  StrategySearch search = searchStrategies(ops, 4, m);
  size_t most = 0;
  for (const Point &p : search.candidates)
    if (p.strategy.grid.pr == 1)
      most = std::max(most, p.strategy.shardedUpdates.size());
  EXPECT_EQ(most, 2u);
}

TEST(StrategySpace, RecomputingASegmentCostsItsShareOfTheTime) {
  // A level of recomputation prices that share of the layers' kept
  // outputs read again (what it frees, the compiled plan says).
  auto ops = twoLayers();
  grid::Machine m = machine();
  Space none = spaceOf(ops, {1, 4}, false, 0, m), half = spaceOf(ops, {1, 4}, false, 0.5, m),
        all = spaceOf(ops, {1, 4}, false, 1, m);
  for (size_t n = 0; n < 2; ++n) {
    double t0 = none.graph.nodes[n].configs[0].seconds,
           t1 = all.graph.nodes[n].configs[0].seconds;
    EXPECT_GT(t1, t0);
    EXPECT_NEAR(half.graph.nodes[n].configs[0].seconds, (t0 + t1) / 2, 1e-15);
  }
  Strategy s;
  s.grid = {1, 4};
  s.recompute = 0.25;
  EXPECT_EQ(s.summary(), "1x4, recompute 25%");
  s.recompute = 1;
  EXPECT_EQ(s.summary(), "1x4, recompute");
}

TEST(StrategySpace, ALayerMayRecomputeItsOutput) {
  // Each split whose output px-recompute can recompute has a variant that
  // keeps none of it for the layer's forward product once more: not a
  // split by input features (its partial sums leave through an all-reduce),
  // nor an output gathered for an op that runs whole (fc2's, for the loss).
  auto ops = twoLayers();
  grid::Machine m = machine();
  Space s = spaceOf(ops, {2, 2}, 0, 0, m);
  const Graph::Node &fc1 = s.graph.nodes[0], &fc2 = s.graph.nodes[1];
  ASSERT_EQ(fc1.variants.size(), fc1.configs.size());
  double y = 16 * 128 * 4; // fc1's output on a rank: 16 samples
  double forward = 2.0 * 16 * 64 * 128 / m.flopsPerSecond;
  auto check = [&](Split split, double output, double flops) {
    int c = configOf(s, 0, split);
    ASSERT_FALSE(fc1.variants[c].empty()) << nameOf(split);
    ASSERT_TRUE(s.variants[0][c][0].recomputes) << nameOf(split);
    const Cost &keep = fc1.configs[c], &again = fc1.variants[c][0];
    EXPECT_DOUBLE_EQ(keep.bytes - again.bytes, output) << nameOf(split);
    EXPECT_NEAR(again.seconds - keep.seconds, flops + 2 * output / m.streamBytesPerSecond, 1e-15)
        << nameOf(split);
  };
  check(Split::Whole, y, forward);
  check(Split::Out, y / 2, forward / 2);
  // (The other variants shard the update: EachLayerMayShardItsUpdate.)
  auto recomputes = [&](int node, Split split) {
    return llvm::any_of(s.variants[node][configOf(s, node, split)],
                        [](const Space::Variant &v) { return v.recomputes; });
  };
  EXPECT_FALSE(recomputes(0, Split::In));
  ASSERT_EQ(fc2.variants.size(), fc2.configs.size());
  EXPECT_TRUE(s.variants[1][configOf(s, 1, Split::Whole)][0].recomputes);
  EXPECT_FALSE(recomputes(1, Split::In));
  // A solution's variant 1 names the layer among the recomputed ones.
  Solution sol{{}, {configOf(s, 0, Split::Out), configOf(s, 1, Split::In)}, {1, 0}};
  Strategy strategy = s.strategyOf(sol, ops);
  EXPECT_EQ(strategy.recomputed, std::vector<std::string>{"fc1.weight"});
  EXPECT_EQ(strategy.summary(), "2x2, 1 layer recomputed, 2 of 2 split");
  // The search reaches below what keeping every output can: its smallest
  // point recomputes.
  StrategySearch search = searchStrategies(ops, 4, m);
  EXPECT_FALSE(search.frontier.back().strategy.recomputed.empty());
}

TEST(StrategySpace, AWholeTableChoosesItsSynchronization) {
  // An embedding table of 10000 x 64 whose 4096 lookups a step touch
  // (1024 per rank on 1 x 4): px-sync's three schemes are variants of its
  // whole split there, in kTableSchemes' order, each at its closed form;
  // on 2 x 2 too for the whole table (each model rank's batch group
  // serves its replica); split by vocabulary, the parameter server of its
  // block beside its all-gatherv (no densifying all-reduce); on 4 x 1
  // (nothing to synchronize) none.
  Operator table;
  table.layer.name = "emb";
  table.table = true;
  table.tableRows = 10000;
  table.tableWidth = 64;
  table.lookups = 4096;
  std::vector<Operator> ops{table};
  grid::Machine m = machine();
  Space s = spaceOf(ops, {1, 4}, 0, 0, m);
  const Graph::Node &node = s.graph.nodes[0];
  ASSERT_EQ(node.configs.size(), 1u);
  ASSERT_EQ(node.variants.size(), 1u);
  ASSERT_EQ(node.variants[0].size(), 2u);
  const Cost &agv = node.configs[0], &ps = node.variants[0][0], &ar = node.variants[0][1];
  const double row = 64 * 4 + 8, gathered = 1024.0 * 64 * 4, whole = 10000.0 * 64 * 4;
  // All-gatherv moves (N - 1) x its rows to every rank and holds them all;
  // the parameter server (N - 1) / N of them each way, holding its own
  // three times (pulled, pushed, received); the all-reduce the whole
  // densified table, held beside it.
  EXPECT_NEAR(agv.seconds - ps.seconds,
              (2 * 1e-5 + 1e-9 * 3 * 1024 * row) - (4 * 1e-5 + 2e-9 * 1024 * row * 0.75), 1e-12);
  EXPECT_DOUBLE_EQ(agv.bytes - ps.bytes, gathered * 5 - gathered * 3);
  EXPECT_DOUBLE_EQ(ar.bytes - agv.bytes, whole + gathered - gathered * 5);
  EXPECT_GT(ar.seconds, agv.seconds);
  // A solution's variant names the scheme; the summary counts those not
  // all-gathered.
  Strategy byPs = s.strategyOf(Solution{{}, {0}, {1}}, ops);
  EXPECT_EQ(byPs.tableSchemes,
            (std::vector<std::pair<std::string, std::string>>{{"emb", "ps"}}));
  EXPECT_EQ(byPs.syncVariables(), std::vector<std::string>{"emb=ps"});
  EXPECT_EQ(byPs.summary(), "1x4, 1 table by ps");
  EXPECT_EQ(s.strategyOf(Solution{{}, {0}, {0}}, ops).syncVariables(),
            std::vector<std::string>{"emb=allgatherv"});
  Space grid = spaceOf(ops, {2, 2}, 0, 0, m);
  int kept = configOf(grid, 0, Split::Whole), rows = configOf(grid, 0, Split::Rows);
  ASSERT_GE(kept, 0);
  ASSERT_GE(rows, 0);
  EXPECT_EQ(grid.graph.nodes[0].variants[kept].size(), 2u);
  ASSERT_EQ(grid.graph.nodes[0].variants[rows].size(), 1u);
  EXPECT_EQ(grid.strategyOf(Solution{{}, {kept}, {1}}, ops).syncVariables(),
            std::vector<std::string>{"emb=ps"});
  EXPECT_EQ(grid.strategyOf(Solution{{}, {rows}, {0}}, ops).syncVariables(),
            std::vector<std::string>{"emb=allgatherv"});
  EXPECT_EQ(grid.strategyOf(Solution{{}, {rows}, {1}}, ops).syncVariables(),
            std::vector<std::string>{"emb=ps"});
  // Its block's server costs (2048 lookups a batch rank, 5000 rows here):
  // (N - 1) / N of its pulled rows each way, against (N - 1) all-gathered.
  const Cost &rowsAgv = grid.graph.nodes[0].configs[rows],
             &rowsPs = grid.graph.nodes[0].variants[rows][0];
  EXPECT_NEAR(rowsAgv.seconds - rowsPs.seconds,
              (1e-5 + 1e-9 * 2048 * row) - (4 * 1e-5 + 2e-9 * 2048 * row * 0.5), 1e-12);
  EXPECT_TRUE(spaceOf(ops, {4, 1}, 0, 0, m).graph.nodes[0].variants.empty());
  // The search keeps the whole table's parameter server, faster and
  // smaller here, and drops the all-gatherv it dominates; a point with the
  // table split by vocabulary (2 x 2) names its scheme too.
  StrategySearch search = searchStrategies(ops, 4, m);
  bool sawPs = false;
  for (const Point &p : search.frontier)
    for (const auto &[name, scheme] : p.strategy.tableSchemes) {
      auto split = std::find_if(p.strategy.splits.begin(), p.strategy.splits.end(),
                                [&](const auto &s) { return s.first == name; });
      bool whole = split == p.strategy.splits.end() || split->second == Split::Whole;
      if (whole)
        EXPECT_NE(scheme, "allgatherv") << p.strategy.summary();
      else
        EXPECT_NE(scheme, "allreduce") << p.strategy.summary();
      sawPs |= whole && scheme == "ps";
    }
  EXPECT_TRUE(sawPs);
}

TEST(StrategySpace, SearchCoversEveryGridAndItsFrontier) {
  auto ops = twoLayers();
  grid::Machine m = machine();
  m.ranksPerMachine = 4;
  StrategySearch search = searchStrategies(ops, 4, m);
  // 1x4, 2x2 and 4x1, each with the cheap activations kept or recomputed
  // (ZeRO-1 is each layer's variant).
  EXPECT_EQ(search.spaces, 6);
  ASSERT_FALSE(search.frontier.empty());
  for (size_t i = 1; i < search.frontier.size(); ++i) {
    EXPECT_LE(search.frontier[i - 1].predicted.seconds, search.frontier[i].predicted.seconds);
    EXPECT_GT(search.frontier[i - 1].predicted.bytes, search.frontier[i].predicted.bytes);
  }
  // The candidates the driver compiles hold each space's fastest point,
  // so the whole frontier's fastest among them.
  EXPECT_TRUE(llvm::any_of(search.candidates, [&](const Point &p) {
    return p.predicted.seconds == search.frontier.front().predicted.seconds &&
           p.predicted.bytes == search.frontier.front().predicted.bytes;
  }));
  // The least memory splits both layers' weights over 4 model ranks.
  const Strategy &smallest = search.frontier.back().strategy;
  EXPECT_EQ(smallest.grid.pr, 4);
  for (const auto &[name, split] : smallest.splits)
    EXPECT_NE(split, Split::Whole) << name;
  EXPECT_TRUE(smallest.pureModel());
  // A model group spans no machine: on 2 ranks per machine no 4 x 1.
  m.ranksPerMachine = 2;
  for (const Point &p : searchStrategies(ops, 4, m).candidates)
    EXPECT_LE(p.strategy.grid.pr, 2);
}

/// The operators of a step written in px IR (an Operator keeps no IR);
/// none when it does not parse, which the caller's size check reports.
std::vector<Operator> operatorsOfText(const char *text) {
  mlir::MLIRContext context;
  context.loadDialect<px::PxDialect, mlir::func::FuncDialect>();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  EXPECT_TRUE(module) << "the step does not parse";
  return module ? operatorsOf(*module) : std::vector<Operator>{};
}

/// fc1 -> relu -> fc2, a residual add of fc2's output and the relu into
/// fc3, a softmax (which runs whole) into fc4.
constexpr const char *kResidual = R"mlir(
module {
  func.func @main() -> tensor<4x6xf32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<4x8xf32> batched
    %w1 = px.variable "fc1.weight" trainable = dense<0.1> : tensor<6x8xf32>
    %w2 = px.variable "fc2.weight" trainable = dense<0.1> : tensor<6x6xf32>
    %w3 = px.variable "fc3.weight" trainable = dense<0.1> : tensor<6x6xf32>
    %w4 = px.variable "fc4.weight" trainable = dense<0.1> : tensor<6x6xf32>
    %h1 = px.gemm %x, %w1 {trans_b} : tensor<4x8xf32>, tensor<6x8xf32>
    %r1 = px.relu %h1 : tensor<4x6xf32>
    %h2 = px.gemm %r1, %w2 {trans_b} : tensor<4x6xf32>, tensor<6x6xf32>
    %s = px.add %h2, %r1 : tensor<4x6xf32>, tensor<4x6xf32>
    %h3 = px.gemm %s, %w3 {trans_b} : tensor<4x6xf32>, tensor<6x6xf32>
    %p = px.softmax %h3 : tensor<4x6xf32>
    %h4 = px.gemm %p, %w4 {trans_b} : tensor<4x6xf32>, tensor<6x6xf32>
    return %h4 : tensor<4x6xf32>
  }
}
)mlir";

TEST(StrategySpace, OperatorsTraceProducersThroughSplitFollowingOps) {
  std::vector<Operator> ops = operatorsOfText(kResidual);
  ASSERT_EQ(ops.size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_EQ(ops[i].layer.name, "fc" + std::to_string(i + 1) + ".weight");
  EXPECT_TRUE(ops[0].producers.empty());
  EXPECT_TRUE(ops[0].inputWhole); // data
  EXPECT_FALSE(ops[0].outputWhole);
  EXPECT_EQ(ops[1].producers, std::vector<int>{0});
  // The residual add joins fc2's output and fc1's (through the relu).
  EXPECT_EQ(ops[2].producers, (std::vector<int>{0, 1}));
  EXPECT_FALSE(ops[2].inputWhole);
  EXPECT_TRUE(ops[2].outputWhole); // the softmax gathers it
  // After the softmax fc4 reads a whole input and links to nothing.
  EXPECT_TRUE(ops[3].producers.empty());
  EXPECT_TRUE(ops[3].inputWhole);
  EXPECT_EQ(ops[0].layer.batch, 4);
}

/// fc1's features merged with the tokens by a reshape into fc2 (no pair:
/// the split is inside the merged dimension), and kept leading by another
/// into fc3 (a pair).
constexpr const char *kMerged = R"mlir(
module {
  func.func @main() -> tensor<2x4xf32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<2x4x8xf32> batched
    %w1 = px.variable "fc1.weight" trainable = dense<0.1> : tensor<8x6xf32>
    %w2 = px.variable "fc2.weight" trainable = dense<0.2> : tensor<4x24xf32>
    %w3 = px.variable "fc3.weight" trainable = dense<0.3> : tensor<4x6xf32>
    %h = px.matmul %x, %w1 : tensor<2x4x8xf32>, tensor<8x6xf32>
    %r = px.relu %h : tensor<2x4x6xf32>
    %f = px.reshape %r : tensor<2x4x6xf32> -> tensor<2x24xf32>
    %y = px.gemm %f, %w2 {trans_b} : tensor<2x24xf32>, tensor<4x24xf32>
    %t = px.reshape %r : tensor<2x4x6xf32> -> tensor<8x6xf32>
    %z = px.gemm %t, %w3 {trans_b} : tensor<8x6xf32>, tensor<4x6xf32>
    return %y : tensor<2x4xf32>
  }
}
)mlir";

TEST(StrategySpace, OperatorsPairOnlyWhereTheFeaturesArrive) {
  std::vector<Operator> ops = operatorsOfText(kMerged);
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_TRUE(ops[1].producers.empty());
  EXPECT_TRUE(ops[1].inputWhole); // gathered before the merging reshape
  EXPECT_EQ(ops[2].producers, std::vector<int>{0});
  EXPECT_FALSE(ops[2].inputWhole);
  EXPECT_TRUE(ops[0].outputWhole); // one of its readers gathers it
}

/// fc1's 6 features as 3 heads of 2 ([2, 4, 6] -> [2, 4, 3, 2] -> [8, 6])
/// into fc2: the split reaches fc2's input features, through a dimension
/// of 3.
constexpr const char *kHeads = R"mlir(
module {
  func.func @main() -> tensor<8x4xf32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<2x4x8xf32> batched
    %w1 = px.variable "fc1.weight" trainable = dense<0.1> : tensor<8x6xf32>
    %w2 = px.variable "fc2.weight" trainable = dense<0.2> : tensor<4x6xf32>
    %h = px.matmul %x, %w1 : tensor<2x4x8xf32>, tensor<8x6xf32>
    %a = px.reshape %h : tensor<2x4x6xf32> -> tensor<2x4x3x2xf32>
    %b = px.reshape %a : tensor<2x4x3x2xf32> -> tensor<8x6xf32>
    %y = px.gemm %b, %w2 {trans_b} : tensor<8x6xf32>, tensor<4x6xf32>
    return %y : tensor<8x4xf32>
  }
}
)mlir";

TEST(StrategySpace, APairThroughHeadsTheRanksDoNotDivideIsGathered) {
  std::vector<Operator> ops = operatorsOfText(kHeads);
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[1].producers, std::vector<int>{0});
  EXPECT_EQ(ops[1].producerFeatures, std::vector<int64_t>{3});
  // On 3 model ranks the Megatron pair costs nothing between them; on 2
  // the 3 heads cannot be split and fc1's output is gathered.
  grid::Machine m = machine();
  auto pairCost = [&](int64_t pr) {
    Space s = spaceOf(ops, {pr, 1}, false, 0, m);
    int f = configOf(s, 0, Split::Out), t = configOf(s, 1, Split::In);
    EXPECT_EQ(s.graph.edges.size(), 1u);
    return s.graph.edges[0].cost[f * s.graph.nodes[1].configs.size() + t].seconds;
  };
  EXPECT_EQ(pairCost(3), 0.0);
  EXPECT_GT(pairCost(2), 0.0);
}

/// A residual add of fc2's output and fc1's transposed: fc1's features
/// arrive on the rows there, fc2's on the columns.
constexpr const char *kCrossedJoin = R"mlir(
module {
  func.func @main() -> tensor<6x6xf32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<6x8xf32> batched
    %w1 = px.variable "fc1.weight" trainable = dense<0.1> : tensor<6x8xf32>
    %w2 = px.variable "fc2.weight" trainable = dense<0.2> : tensor<6x8xf32>
    %w3 = px.variable "fc3.weight" trainable = dense<0.3> : tensor<6x6xf32>
    %h1 = px.gemm %x, %w1 {trans_b} : tensor<6x8xf32>, tensor<6x8xf32>
    %t = px.transpose %h1 {perm = array<i64: 1, 0>} : tensor<6x6xf32>
    %h2 = px.gemm %x, %w2 {trans_b} : tensor<6x8xf32>, tensor<6x8xf32>
    %s = px.add %h2, %t : tensor<6x6xf32>, tensor<6x6xf32>
    %y = px.gemm %s, %w3 {trans_b} : tensor<6x6xf32>, tensor<6x6xf32>
    return %y : tensor<6x6xf32>
  }
}
)mlir";

TEST(StrategySpace, AJoinLinksOnlyWhereItsSplitArrivesAlike) {
  std::vector<Operator> ops = operatorsOfText(kCrossedJoin);
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[2].producers, std::vector<int>{1});
  EXPECT_EQ(ops[2].producerFeatures, std::vector<int64_t>{6});
}

/// A tied vocabulary of 27 words (the embedding and, transposed, the
/// output layer of a softmax cross entropy) and a classifier of 27 classes
/// over 32 inputs: px-pad-vocabulary pads the vocabulary, not the
/// classifier.
constexpr const char *kVocabulary = R"mlir(
module {
  func.func @main() -> (tensor<f32>, tensor<f32>) attributes {px.loss = 0 : i64} {
    %tokens = px.input "tokens" : tensor<48xi64> batched
    %targets = px.input "targets" : tensor<48xi64> batched
    %x = px.input "x" : tensor<48x32xf32> batched
    %embed = px.variable "embed" trainable = #px.onnx_initializer<"embed"> : tensor<27x16xf32>
    %h = px.gather %embed[%tokens] : tensor<27x16xf32>, tensor<48xi64>
    %s = px.gemm %h, %embed {trans_b} : tensor<48x16xf32>, tensor<27x16xf32>
    %loss, %log_prob = px.softmax_cross_entropy_loss %s, %targets : tensor<48x27xf32>, tensor<48xi64>
    %w = px.variable "classifier" trainable = #px.onnx_initializer<"classifier"> : tensor<27x32xf32>
    %c = px.gemm %x, %w {trans_b} : tensor<48x32xf32>, tensor<27x32xf32>
    %loss2, %log_prob2 = px.softmax_cross_entropy_loss %c, %targets : tensor<48x27xf32>, tensor<48xi64>
    return %loss, %loss2 : tensor<f32>, tensor<f32>
  }
}
)mlir";

TEST(StrategySpace, AVocabularySplitsOnAnyGridAsPadded) {
  std::vector<Operator> ops = operatorsOfText(kVocabulary);
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].layer.name, "embed");
  EXPECT_TRUE(ops[0].vocabulary);
  EXPECT_FALSE(ops[1].vocabulary);
  // 27 classes on 4 model ranks: the vocabulary by classes (padded to
  // 28), the classifier by its 32 inputs only.
  EXPECT_EQ(splitsOf(ops[0], {4, 1}), (std::vector<Split>{Split::Whole, Split::Out, Split::In}));
  EXPECT_EQ(splitsOf(ops[1], {4, 1}), (std::vector<Split>{Split::Whole, Split::In}));
}

/// conv1 -> relu -> a convolution of 2 groups -> relu -> conv3.
constexpr const char *kGrouped = R"mlir(
module {
  func.func @main() -> tensor<2x4x4x4xf32> attributes {px.loss = 0 : i64} {
    %x = px.input "x" : tensor<2x3x4x4xf32> batched
    %w1 = px.variable "conv1.weight" trainable = dense<0.1> : tensor<8x3x1x1xf32>
    %w2 = px.variable "conv2.weight" trainable = dense<0.2> : tensor<8x4x3x3xf32>
    %w3 = px.variable "conv3.weight" trainable = dense<0.3> : tensor<4x8x1x1xf32>
    %a = px.conv %x, %w1 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : tensor<2x3x4x4xf32>, tensor<8x3x1x1xf32>
    %r = px.relu %a : tensor<2x8x4x4xf32>
    %b = px.conv %r, %w2 {dilations = array<i64: 1, 1>, group = 2 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x8x4x4xf32>, tensor<8x4x3x3xf32>
    %r2 = px.relu %b : tensor<2x8x4x4xf32>
    %c = px.conv %r2, %w3 {dilations = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : tensor<2x8x4x4xf32>, tensor<4x8x1x1xf32>
    return %c : tensor<2x4x4x4xf32>
  }
}
)mlir";

TEST(StrategySpace, AGroupedConvolutionKeepsASplitBetweenItsGroups) {
  std::vector<Operator> ops = operatorsOfText(kGrouped);
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].layer.name, "conv1.weight");
  // The grouped convolution follows a split: no configuration of its own.
  EXPECT_FALSE(ops[1].splittable);
  EXPECT_EQ(ops[2].producers, std::vector<int>{0});
  // conv1's features reach conv3 through 2 groups: on 2 model ranks a
  // pair, on 4 the grouped convolution runs whole and conv1's output is
  // gathered.
  EXPECT_EQ(ops[2].producerFeatures, std::vector<int64_t>{2});
  EXPECT_EQ(ops[0].outputGroups, 2);
  EXPECT_FALSE(ops[0].outputGatheredOn({2, 1}));
  EXPECT_TRUE(ops[0].outputGatheredOn({4, 1}));
}

TEST(StrategySpace, LayerSplitsNameEachOperator) {
  Strategy s;
  s.grid = {2, 2};
  s.splits = {{"fc1.weight", Split::Out}, {"fc2.weight", Split::In}, {"t", Split::Rows}};
  EXPECT_EQ(s.layerSplits(),
            (std::vector<std::string>{"fc1.weight=out", "fc2.weight=in", "t=rows"}));
  EXPECT_EQ(s.summary(), "2x2, 3 of 3 split");
  s.grid = {1, 4};
  EXPECT_TRUE(s.layerSplits().empty()); // nothing to split without a model axis
  EXPECT_TRUE(s.pureData());
}

} // namespace
