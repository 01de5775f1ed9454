//===- GridCostTest.cpp - the SPAA'18 closed forms ------------------------===//
//
// Checked against the paper's own numbers and derivations: the AlexNet
// fully-connected stack (9216 -> 4096 -> 4096 -> 1000, B = 256) on 512
// ranks, bandwidth term only, and the bandwidth-optimal Pr of a uniform
// stack, Pr* ~ sqrt(2 d P / (3 B)).
//
//===----------------------------------------------------------------------===//

#include "parallax/Analysis/GridCost.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace parallax::grid;

namespace {

/// One word per element and beta = 1: cost in words, as the paper counts.
Machine wordCounter() {
  Machine m;
  m.intra = m.inter = {0.0, 1.0};
  m.flopsPerSecond = m.convFlopsPerSecond = 1e300;
  return m;
}

std::vector<Layer> denseStack(const std::vector<int64_t> &d, int64_t batch) {
  std::vector<Layer> layers;
  for (size_t i = 1; i < d.size(); ++i) {
    Layer l;
    l.name = "fc" + std::to_string(i);
    l.batch = batch;
    l.in = d[i - 1];
    l.out = d[i];
    l.inputGradient = i > 1;
    l.elementBytes = 1;
    layers.push_back(l);
  }
  return layers;
}

/// The paper's sum, written out independently of GridCost.cpp.
double paperWords(const std::vector<int64_t> &d, int64_t batch, int64_t pr, int64_t pc) {
  double t = 0, fr = (double)(pr - 1) / pr, fc = (double)(pc - 1) / pc;
  for (size_t i = 1; i < d.size(); ++i) {
    t += fr * batch / pc * d[i];
    if (i >= 2)
      t += 2 * fr * batch / pc * d[i - 1];
    t += 2 * fc * d[i] * d[i - 1] / pr;
  }
  return t;
}

TEST(GridCost, AlexNetFullyConnectedMatchesThePaper) {
  std::vector<int64_t> d = {9216, 4096, 4096, 1000};
  auto layers = denseStack(d, 256);
  Machine m = wordCounter();
  double data = costOf(layers, {1, 512}, m).total.seconds();
  double best = data;
  Grid bestGrid{1, 512};
  for (const Grid &g : gridsOf(512)) {
    double words = costOf(layers, g, m).total.seconds();
    EXPECT_NEAR(words, paperWords(d, 256, g.pr, g.pc), 1e-6 * words) << g.str();
    if (words < best) {
      best = words;
      bestGrid = g;
    }
  }
  // "about 50x fewer words than pure data parallelism", at 128 x 4.
  EXPECT_EQ(bestGrid.pr, 128);
  EXPECT_EQ(bestGrid.pc, 4);
  EXPECT_NEAR(data / best, 50.6, 0.1);
  // Pure model parallelism is no better than the best integrated grid.
  EXPECT_GT(costOf(layers, {512, 1}, m).total.seconds(), 2 * best);
}

TEST(GridCost, BandwidthOptimalModelSplitOfAUniformStack) {
  // d_i = d: the bandwidth-only optimum is near sqrt(2 d P / (3 B)).
  const int64_t d = 8192, p = 1024, batch = 64;
  auto layers = denseStack(std::vector<int64_t>(9, d), batch);
  Machine m = wordCounter();
  Grid best{1, p};
  for (const Grid &g : gridsOf(p))
    if (costOf(layers, g, m).total.seconds() < costOf(layers, best, m).total.seconds())
      best = g;
  // 296 here: the nearest grid is 256 x 4 (512 x 2 would win if the
  // backward dX term were left out).
  double predicted = std::sqrt(2.0 * d * p / (3.0 * batch));
  EXPECT_NEAR(predicted, 295.6, 0.1);
  EXPECT_EQ(best.pr, 256) << best.str();
}

TEST(GridCost, FlopsAndMemory) {
  Layer dense;
  dense.batch = 32;
  dense.in = 100;
  dense.out = 10;
  EXPECT_DOUBLE_EQ(dense.flops(), 2.0 * 32 * 100 * 10);
  Layer conv;
  conv.kind = Layer::Kind::Conv;
  conv.batch = 2;
  conv.in = 3;
  conv.out = 8;
  conv.inHeight = conv.inWidth = 10;
  conv.outHeight = conv.outWidth = 8;
  conv.kernelHeight = conv.kernelWidth = 3;
  conv.weightElements = 8 * 3 * 9;
  // 2 flops per multiply-add: 27 of them for each of 2 x 8 x 8 x 8 outputs.
  EXPECT_DOUBLE_EQ(conv.flops(), 2.0 * 2 * 8 * 64 * 27);
  EXPECT_EQ(conv.inElements(), 300);
  EXPECT_EQ(conv.outElements(), 512);
  Machine m;
  // Model split over 2: half the weights (value + gradient), the whole
  // output of the rank's 16 samples (B / Pc = 32 / 2).
  Cost c = costOf(dense, {2, 2}, Split::Model, m);
  EXPECT_EQ(c.weightBytes, 500 * 4 * 2);
  EXPECT_EQ(c.activationBytes, 16 * 10 * 4);
  // Domain split over 2: every weight, half the output rows.
  Cost d = costOf(conv, {2, 1}, Split::Domain, m);
  EXPECT_EQ(d.weightBytes, 216 * 4 * 2);
  EXPECT_EQ(d.activationBytes, 2 * 8 * 8 * 4 * 4);
  // Compute divides over all ranks: forward and two backward products.
  EXPECT_DOUBLE_EQ(c.computeSeconds, 3 * dense.flops() / 4 / m.flopsPerSecond);
}

TEST(GridCost, DilationWidensTheHalo) {
  Layer l;
  l.kind = Layer::Kind::Conv;
  l.batch = 2;
  l.in = l.out = 4;
  l.inHeight = l.inWidth = l.outHeight = l.outWidth = 16;
  l.kernelHeight = l.kernelWidth = 3;
  l.weightElements = 4 * 4 * 9;
  l.elementBytes = 1;
  Machine m;
  double one = costOf(l, {2, 1}, Split::Domain, m).forwardBytes;
  l.dilationHeight = 2;
  EXPECT_DOUBLE_EQ(costOf(l, {2, 1}, Split::Domain, m).forwardBytes, 2 * one);
}

TEST(GridCost, AModelSplitAfterADomainSplitGathersItsInput) {
  Layer conv;
  conv.kind = Layer::Kind::Conv;
  conv.batch = 8;
  conv.in = conv.out = 16;
  conv.inHeight = conv.inWidth = conv.outHeight = conv.outWidth = 32;
  conv.kernelHeight = conv.kernelWidth = 3;
  conv.weightElements = 16 * 16 * 9;
  conv.elementBytes = 1;
  Layer fc;
  fc.batch = 8;
  fc.in = 16 * 32 * 32;
  fc.out = 10;
  fc.elementBytes = 1;
  Machine m = wordCounter();
  GridCost g = costOf(std::vector<Layer>{conv, fc}, {4, 1}, m);
  ASSERT_EQ(g.layers[0].split, Split::Domain);
  double alone = costOf(fc, {4, 1}, Split::Model, m).forwardBytes;
  // All-gather of the fc's 8 x 16384 input over 4 ranks: 3/4 of it.
  EXPECT_DOUBLE_EQ(g.layers[1].forwardBytes, alone + 0.75 * 8 * 16384);
}

TEST(GridCost, CollectivesFollowAlphaBeta) {
  Link l{1e-5, 1e-9};
  EXPECT_DOUBLE_EQ(allGatherSeconds(1, 1e6, l), 0.0);
  EXPECT_DOUBLE_EQ(allReduceSeconds(1, 1e6, l), 0.0);
  // p = 4: 2 latency steps; (p-1)/p of n on the wire (twice for all-reduce).
  EXPECT_DOUBLE_EQ(allGatherSeconds(4, 1e6, l), 2e-5 + 0.75e-3);
  EXPECT_DOUBLE_EQ(allReduceSeconds(4, 1e6, l), 4e-5 + 1.5e-3);
  // p = 5 rounds the latency steps up.
  EXPECT_DOUBLE_EQ(allGatherSeconds(5, 0, l), 3e-5);
}

TEST(GridCost, DataParallelismOnlyReducesGradients) {
  Layer l;
  l.batch = 32;
  l.in = 100;
  l.out = 10;
  Machine m = wordCounter();
  m.intra = m.inter = {0.0, 1.0};
  Cost c = costOf(l, {1, 4}, Split::Model, m);
  EXPECT_EQ(c.forwardBytes, 0);
  EXPECT_EQ(c.backwardBytes, 0);
  // 2 (p-1)/p |W| elements of 4 bytes.
  EXPECT_DOUBLE_EQ(c.gradientBytes, 2 * 0.75 * 1000 * 4);
  // Value, gradient, and with Adam two states, all whole.
  m.optimizerSlots = 2;
  EXPECT_EQ(costOf(l, {1, 4}, Split::Model, m).weightBytes, 1000 * 4 * 4);
  // Model parallelism over 2 splits the weight and the memory.
  EXPECT_EQ(costOf(l, {2, 2}, Split::Model, m).weightBytes, 500 * 4 * 4);
}

TEST(GridCost, DomainSplitTradesHalosInsteadOfActivations) {
  // A 3x3 convolution of a 64-channel 56x56 map: one halo row each way.
  Layer l;
  l.kind = Layer::Kind::Conv;
  l.batch = 16;
  l.in = l.out = 64;
  l.inHeight = l.inWidth = l.outHeight = l.outWidth = 56;
  l.kernelHeight = l.kernelWidth = 3;
  l.weightElements = 64 * 64 * 9;
  l.elementBytes = 1;
  Machine m = wordCounter();
  Cost domain = costOf(l, {4, 2}, Split::Domain, m);
  // Forward: one row (56 x 64 channels x 8 samples) to each of 2 neighbours.
  EXPECT_DOUBLE_EQ(domain.forwardBytes, 2 * 56 * 64 * 8);
  EXPECT_DOUBLE_EQ(domain.backwardBytes, 2 * 56 * 64 * 8);
  // dW is all-reduced over all 8 ranks.
  EXPECT_DOUBLE_EQ(domain.gradientBytes, 2 * 7.0 / 8 * 64 * 64 * 9);
  // Splitting channels instead gathers whole feature maps: far more.
  Cost model = costOf(l, {4, 2}, Split::Model, m);
  EXPECT_GT(model.bytes(), 10 * domain.bytes());
  EXPECT_EQ(bestCostOf(l, {4, 2}, m).split, Split::Domain);
  // A 1x1 convolution has no halo.
  l.kernelHeight = l.kernelWidth = 1;
  EXPECT_EQ(costOf(l, {4, 2}, Split::Domain, m).forwardBytes, 0);
}

TEST(GridCost, GroupsOnOneMachineUseItsLink) {
  Machine m;
  m.intra = {0, 1.0};
  m.inter = {0, 10.0};
  m.ranksPerMachine = 4;
  // 4 x 2 on machines of 4: model groups (4 consecutive ranks) stay on one
  // machine, batch groups cross machines.
  EXPECT_EQ(&m.modelLink({4, 2}), &m.intra);
  EXPECT_EQ(&m.batchLink({4, 2}), &m.inter);
  EXPECT_EQ(&m.batchLink({1, 4}), &m.intra);
  EXPECT_EQ(&m.modelLink({8, 1}), &m.inter);
}

TEST(GridCost, CollectivesAtTheirCalibratedRateOnOneMachine) {
  // all_reduce/4 at 1e6 B/s from 1 KB sent on; all_gather/4 none.
  Machine m;
  m.intra = {1e-3, 1e-9};
  m.inter = {1e-3, 1e-9};
  m.opRates["all_reduce/4"].points = {{1000, 1e6}};
  // 1 MB over 4 ranks sends 1.5 MB each: 1.5 s at the rate.
  EXPECT_DOUBLE_EQ(allReduceSeconds(4, 1e6, m.intra, m), 1.5);
  // Alpha-beta across machines, below the smallest probe, for another
  // group size and for a kind without a rate.
  EXPECT_DOUBLE_EQ(allReduceSeconds(4, 1e6, m.inter, m),
                   allReduceSeconds(4, 1e6, m.inter));
  EXPECT_DOUBLE_EQ(allReduceSeconds(4, 400, m.intra, m),
                   allReduceSeconds(4, 400, m.intra));
  EXPECT_DOUBLE_EQ(allReduceSeconds(2, 1e6, m.intra, m),
                   allReduceSeconds(2, 1e6, m.intra));
  EXPECT_DOUBLE_EQ(allGatherSeconds(4, 1e6, m.intra, m),
                   allGatherSeconds(4, 1e6, m.intra));
}

TEST(GridCost, ParameterServerExchangesAtTheirCalibratedRate) {
  // ps_pull/4 at 1e6 B/s for 1 KB sent, 2e6 for 100 KB; ps_push none.
  Machine m;
  m.opRates["ps_pull/4"].points = {{1000, 1e6}, {100000, 2e6}};
  // At a probe, between them (the curve's rate), and below the smallest
  // probe: its time, 1 ms, whatever the bytes.
  EXPECT_DOUBLE_EQ(*calibratedServerSeconds(m, "ps_pull", 4, true, 100000), 0.05);
  EXPECT_DOUBLE_EQ(*calibratedServerSeconds(m, "ps_pull", 4, true, 10000),
                   10000 / m.opRates["ps_pull/4"].at(10000));
  EXPECT_DOUBLE_EQ(*calibratedServerSeconds(m, "ps_pull", 4, true, 10), 1e-3);
  // Across machines, for another group size, or a kind without a rate:
  // none (the links' alpha-beta stay).
  EXPECT_FALSE(calibratedServerSeconds(m, "ps_pull", 4, false, 1000));
  EXPECT_FALSE(calibratedServerSeconds(m, "ps_pull", 2, true, 1000));
  EXPECT_FALSE(calibratedServerSeconds(m, "ps_push", 4, true, 1000));
}

TEST(GridCost, ProductsRunAtTheRateOfTheirSmallestDimensionAndWeight) {
  Machine m;
  m.flopsPerSecond = 1e9;
  // Without a curve, every product runs at flops_per_second.
  EXPECT_DOUBLE_EQ(m.productFlopsPerSecond(16, 1e9), 1e9);
  m.opRates["product_flops"].points = {{16, 1e8}, {256, 4e8}};
  // A weight the size of the streamed probe's (or larger) takes the curve,
  // straight in log(dimension) between its points and flat beyond them.
  EXPECT_DOUBLE_EQ(m.productFlopsPerSecond(16, parallax::rt::kProductStreamedWeightBytes), 1e8);
  EXPECT_NEAR(m.productFlopsPerSecond(64, 4 * parallax::rt::kProductStreamedWeightBytes), 2.5e8, 1e-3);
  EXPECT_DOUBLE_EQ(m.productFlopsPerSecond(4, parallax::rt::kProductStreamedWeightBytes), 1e8);
  EXPECT_DOUBLE_EQ(m.productFlopsPerSecond(1024, parallax::rt::kProductStreamedWeightBytes), 4e8);
  // One in cache runs at flops_per_second whatever its shape.
  EXPECT_DOUBLE_EQ(m.productFlopsPerSecond(16, parallax::rt::kProductCachedWeightBytes), 1e9);
  EXPECT_DOUBLE_EQ(m.productFlopsPerSecond(16, 1000), 1e9);
  // Halfway between the two sizes (in log bytes), halfway between the
  // rates (in log rate): sqrt(1e9 * 1e8).
  double half = std::sqrt(parallax::rt::kProductCachedWeightBytes * parallax::rt::kProductStreamedWeightBytes);
  EXPECT_NEAR(m.productFlopsPerSecond(16, half), std::sqrt(1e17), 1e-3);
  // With a one-row point (as --calibrate measures it), a
  // product of 4 rows takes the rate halfway (in log rows) to the 16-row
  // one, not the 16-row rate.
  m.opRates["product_flops"].points = {{1, 2e7}, {16, 1e8}, {256, 4e8}};
  EXPECT_NEAR(m.productFlopsPerSecond(4, parallax::rt::kProductStreamedWeightBytes), 6e7, 1e-3);
  EXPECT_DOUBLE_EQ(m.productFlopsPerSecond(1, 4 * parallax::rt::kProductStreamedWeightBytes), 2e7);
}

TEST(GridCost, AProductOfFewRowsStreamsAtARateBetweenTheOneRowAndTheProbes) {
  Machine m;
  // Without "product_bytes" there is no roofline.
  EXPECT_EQ(m.productBytesPerSecond(1, 1e6), 0);
  m.opRates["product_bytes"].points = {{1e6, 2e9}, {1e8, 1e9}};
  // Without "product_stream" every product takes the probe's curve.
  EXPECT_DOUBLE_EQ(m.productBytesPerSecond(1, 1e8), 1e9);
  m.opRates["product_stream"].points = {{1e6, 8e9}, {1e8, 4e9}};
  EXPECT_NEAR(m.productBytesPerSecond(1, 1e8), 4e9, 1);
  // 4 rows: halfway in log rows from 1 to kProductBytesRows (16).
  EXPECT_NEAR(m.productBytesPerSecond(4, 1e8), 2e9, 1);
  // The size of the small (in-cache) probe: the probe's rate whatever the
  // rows; halfway in log bytes, half the one-row share: the curves give
  // 6e9 and 1.5e9 there, and one row sqrt(6e9 * 1.5e9).
  EXPECT_NEAR(m.productBytesPerSecond(1, 1e6), 2e9, 1);
  EXPECT_NEAR(m.productBytesPerSecond(1, 1e7), 3e9, 1);
  EXPECT_DOUBLE_EQ(m.productBytesPerSecond(parallax::rt::kProductBytesRows, 1e8), 1e9);
  EXPECT_DOUBLE_EQ(m.productBytesPerSecond(512, 1e8), 1e9);
}

TEST(GridCost, ASkinnyLayerComputesAtItsProductRate) {
  // A 2048 x 2048 layer (16 MiB, the streamed probe's weight) on 64
  // samples: 3 products of 2 * 64 * 2048^2 flops. On 1 x 1 its smallest
  // dimension is 64; on 1 x 4, 16 samples per rank.
  Machine m;
  m.flopsPerSecond = 1e9;
  m.opRates["product_flops"].points = {{16, 1e8}, {64, 2e8}};
  Layer l;
  l.batch = 64;
  l.in = l.out = 2048;
  double flops = 2.0 * 64 * 2048 * 2048;
  EXPECT_NEAR(costOf(l, {1, 1}, Split::Model, m).computeSeconds, 3 * flops / 2e8, 1e-9);
  EXPECT_NEAR(costOf(l, {1, 4}, Split::Model, m).computeSeconds, 3 * flops / 4 / 1e8, 1e-9);
}

} // namespace
