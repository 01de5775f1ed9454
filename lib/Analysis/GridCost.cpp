//===- GridCost.cpp - a layer's cost on a Pr x Pc grid (SPAA'18) ----------===//

#include "parallax/Analysis/GridCost.h"
#include "parallax/Runtime/Grid.h"

#include <algorithm>
#include <cmath>

namespace parallax::grid {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / std::max<int64_t>(b, 1); }

double ceilLog2(int64_t p) { return p <= 1 ? 0.0 : std::ceil(std::log2((double)p)); }

namespace {

bool spans(const Grid &g, std::vector<int64_t> axes, int64_t perMachine) {
  return rt::groupsSpanMachines({g.pc, g.pr}, axes, (int)std::min<int64_t>(perMachine, 1 << 30));
}

} // namespace

std::string Grid::str() const { return std::to_string(pr) + "x" + std::to_string(pc); }

std::vector<Grid> gridsOf(int64_t p) {
  std::vector<Grid> grids;
  for (int64_t pr = 1; pr <= p; ++pr)
    if (p % pr == 0)
      grids.push_back({pr, p / pr});
  return grids;
}

double allGatherBytes(int64_t p, double bytes) { return p <= 1 ? 0 : (double)(p - 1) / p * bytes; }
double allReduceBytes(int64_t p, double bytes) { return 2 * allGatherBytes(p, bytes); }

double allGatherSeconds(int64_t p, double bytes, const Link &link) {
  return p <= 1 ? 0 : link.alpha * ceilLog2(p) + link.beta * allGatherBytes(p, bytes);
}
double allReduceSeconds(int64_t p, double bytes, const Link &link) {
  return p <= 1 ? 0 : 2 * link.alpha * ceilLog2(p) + link.beta * allReduceBytes(p, bytes);
}

namespace {
/// `m`'s calibrated curve of a `kind` collective on groups of `g` ranks on
/// one machine ("all_reduce/4"), if it has one.
const rt::RateCurve *collectiveCurve(const Machine &m, std::string_view kind, int64_t g,
                                     bool oneMachine) {
  if (!oneMachine || g < 2)
    return nullptr;
  auto it = m.opRates.find(rt::collectiveRateName(kind, g));
  return it == m.opRates.end() || it->second.points.empty() ? nullptr : &it->second;
}
} // namespace

double calibratedCollectiveRate(const Machine &m, std::string_view kind, int64_t g,
                                bool oneMachine, double sent) {
  const rt::RateCurve *curve = collectiveCurve(m, kind, g, oneMachine);
  if (!curve || sent <= 0 || sent < curve->points.front().first)
    return 0;
  return curve->at(sent);
}

std::optional<double> calibratedServerSeconds(const Machine &m, std::string_view kind, int64_t g,
                                              bool oneMachine, double sent) {
  const rt::RateCurve *curve = collectiveCurve(m, kind, g, oneMachine);
  if (!curve)
    return std::nullopt;
  const auto &[smallest, rate] = curve->points.front();
  if (sent <= smallest)
    return rate > 0 ? std::optional<double>(smallest / rate) : std::nullopt;
  double r = curve->at(sent);
  return r > 0 ? std::optional<double>(sent / r) : std::nullopt;
}

double allGatherSeconds(int64_t p, double bytes, const Link &link, const Machine &m) {
  double sent = allGatherBytes(p, bytes);
  double rate = calibratedCollectiveRate(m, "all_gather", p, &link == &m.intra, sent);
  return rate > 0 ? sent / rate : allGatherSeconds(p, bytes, link);
}
double reduceScatterSeconds(int64_t p, double bytes, const Link &link, const Machine &m) {
  double sent = allGatherBytes(p, bytes);
  double rate = calibratedCollectiveRate(m, "reduce_scatter", p, &link == &m.intra, sent);
  return rate > 0 ? sent / rate : allGatherSeconds(p, bytes, link);
}
double allReduceSeconds(int64_t p, double bytes, const Link &link, const Machine &m) {
  double sent = allReduceBytes(p, bytes);
  double rate = calibratedCollectiveRate(m, "all_reduce", p, &link == &m.intra, sent);
  return rate > 0 ? sent / rate : allReduceSeconds(p, bytes, link);
}

double Machine::productFlopsPerSecond(int64_t smallest, double largestBytes) const {
  auto it = opRates.find("product_flops");
  if (it == opRates.end() || it->second.points.empty() || smallest <= 0)
    return flopsPerSecond;
  double streamed = it->second.at((double)smallest);
  if (!(streamed > 0) || !(flopsPerSecond > 0))
    return flopsPerSecond;
  double t = std::log(std::max(largestBytes, 1.0) / rt::kProductCachedWeightBytes) /
             std::log(rt::kProductStreamedWeightBytes / rt::kProductCachedWeightBytes);
  if (t <= 0)
    return flopsPerSecond;
  if (t >= 1)
    return streamed;
  return std::exp((1 - t) * std::log(flopsPerSecond) + t * std::log(streamed));
}

double Machine::productBytesPerSecond(int64_t smallest, double bytes) const {
  auto probe = opRates.find("product_bytes");
  if (probe == opRates.end())
    return 0;
  double rate = probe->second.at(bytes);
  auto one = opRates.find("product_stream");
  if (one == opRates.end() || smallest >= rt::kProductBytesRows || !(rate > 0))
    return rate;
  double streamed = one->second.at(bytes);
  if (!(streamed > 0))
    return rate;
  // The one-row rate's share: all of it at one row and none at the
  // probe's rows (in log rows), for a product that streams as much as the
  // large probe; none for one of the small probe's size, which the cache
  // holds and whose few rows cost what the probe's do (a call's work, not
  // a stream), and between the two in log bytes. A constant rate (one
  // point) is taken as streamed.
  double rows = std::log((double)std::max<int64_t>(smallest, 1)) /
                std::log((double)rt::kProductBytesRows);
  const auto &points = one->second.points;
  double small = points.front().first, large = points.back().first, share = 1;
  if (large > small && small > 0)
    share = std::clamp(std::log(std::max(bytes, 1.0) / small) / std::log(large / small), 0.0, 1.0);
  double w = share * (1 - rows);
  return std::exp(w * std::log(streamed) + (1 - w) * std::log(rate));
}

double denseProductFlopsPerSecond(const Machine &m, int64_t rows, int64_t in, int64_t out,
                                  int64_t elementBytes) {
  return m.productFlopsPerSecond(std::min({rows, in, out}),
                                 (double)in * (double)out * (double)elementBytes);
}

// The model axis is the grid's inner axis (Grid's rank numbering).
const Link &Machine::modelLink(const Grid &g) const {
  return spans(g, {1}, ranksPerMachine) ? inter : intra;
}
const Link &Machine::batchLink(const Grid &g) const {
  return spans(g, {0}, ranksPerMachine) ? inter : intra;
}
const Link &Machine::worldLink(const Grid &g) const {
  return spans(g, {}, ranksPerMachine) ? inter : intra;
}

int64_t Layer::inElements() const {
  return kind == Kind::Dense ? in : in * inHeight * inWidth;
}
int64_t Layer::outElements() const {
  return kind == Kind::Dense ? out : out * outHeight * outWidth;
}
double Layer::flops() const {
  // Two per multiply-add: each output element takes one per weight it
  // sees (a dense layer's row of W, a convolution's filter).
  double perOutput = kind == Kind::Dense ? (double)in
                                         : (double)weightElements / std::max<int64_t>(out, 1);
  return 2.0 * (double)batch * (double)outElements() * perOutput;
}

const char *nameOf(Split s) { return s == Split::Model ? "model" : "domain"; }

Cost &Cost::operator+=(const Cost &o) {
  forwardBytes += o.forwardBytes;
  backwardBytes += o.backwardBytes;
  gradientBytes += o.gradientBytes;
  forwardSeconds += o.forwardSeconds;
  backwardSeconds += o.backwardSeconds;
  gradientSeconds += o.gradientSeconds;
  computeSeconds += o.computeSeconds;
  weightBytes += o.weightBytes;
  activationBytes += o.activationBytes;
  return *this;
}

Cost costOf(const Layer &layer, const Grid &grid, Split split, const Machine &m) {
  Cost c;
  c.split = split;
  const double eb = (double)layer.elementBytes;
  const int64_t samples = ceilDiv(layer.batch, grid.pc);
  const int64_t weights = layer.weightCount();
  const int64_t stateCopies = 2 + m.optimizerSlots; // value, gradient, state
  // Forward, and the two products of the backward pass.
  // A dense layer's three products are [B/Pc, in] x [in, out/Pr] and its
  // transposes: the same smallest dimension and weight block.
  double rate = layer.kind == Layer::Kind::Conv
                    ? m.convFlopsPerSecond
                    : denseProductFlopsPerSecond(m, samples, layer.in,
                                                 ceilDiv(layer.out, grid.pr), layer.elementBytes);
  c.computeSeconds = 3.0 * layer.flops() / (double)grid.size() / rate;
  if (split == Split::Model) {
    const Link &col = m.modelLink(grid), &row = m.batchLink(grid);
    double y = (double)samples * layer.outElements() * eb;
    double dx = (double)samples * layer.inElements() * eb;
    double dw = (double)ceilDiv(weights, grid.pr) * eb;
    c.forwardBytes = allGatherBytes(grid.pr, y);
    c.forwardSeconds = allGatherSeconds(grid.pr, y, col);
    if (layer.inputGradient) {
      c.backwardBytes = allReduceBytes(grid.pr, dx);
      c.backwardSeconds = allReduceSeconds(grid.pr, dx, col);
    }
    c.gradientBytes = allReduceBytes(grid.pc, dw);
    c.gradientSeconds = allReduceSeconds(grid.pc, dw, row);
    c.weightBytes = (int64_t)dw * stateCopies;
    c.activationBytes = (int64_t)y;
    return c;
  }
  // Domain: each rank holds ceil(H / Pr) rows of every feature map and
  // trades floor(k / 2) rows with each of its two neighbours.
  const Link &col = m.modelLink(grid), &world = m.worldLink(grid);
  int64_t halo = grid.pr > 1 ? layer.dilationHeight * (layer.kernelHeight / 2) : 0;
  double xHalo = (double)halo * layer.inWidth * layer.in * samples * eb;
  double dyHalo = (double)halo * layer.outWidth * layer.out * samples * eb;
  if (halo > 0) {
    c.forwardBytes = 2 * xHalo;
    c.forwardSeconds = 2 * (col.alpha + col.beta * xHalo);
    if (layer.inputGradient) {
      c.backwardBytes = 2 * dyHalo;
      c.backwardSeconds = 2 * (col.alpha + col.beta * dyHalo);
    }
  }
  double dw = (double)weights * eb;
  c.gradientBytes = allReduceBytes(grid.size(), dw);
  c.gradientSeconds = allReduceSeconds(grid.size(), dw, world);
  c.weightBytes = (int64_t)dw * stateCopies;
  c.activationBytes = (int64_t)((double)samples * layer.out * layer.outWidth *
                                ceilDiv(layer.outHeight, grid.pr) * eb);
  return c;
}

Cost bestCostOf(const Layer &layer, const Grid &grid, const Machine &m) {
  Cost model = costOf(layer, grid, Split::Model, m);
  if (layer.kind != Layer::Kind::Conv || grid.pr == 1)
    return model;
  Cost domain = costOf(layer, grid, Split::Domain, m);
  return domain.seconds() < model.seconds() ? domain : model;
}

GridCost costOf(const std::vector<Layer> &layers, const Grid &grid, const Machine &m) {
  GridCost g;
  g.grid = grid;
  Split previous = Split::Model;
  for (const Layer &l : layers) {
    Cost model = costOf(l, grid, Split::Model, m);
    if (previous == Split::Domain && grid.pr > 1) {
      // The input arrives split by rows of its feature maps.
      double x = (double)ceilDiv(l.batch, grid.pc) * l.inElements() * l.elementBytes;
      model.forwardBytes += allGatherBytes(grid.pr, x);
      model.forwardSeconds += allGatherSeconds(grid.pr, x, m.modelLink(grid));
    }
    Cost best = model;
    if (l.kind == Layer::Kind::Conv && grid.pr > 1) {
      Cost domain = costOf(l, grid, Split::Domain, m);
      if (domain.seconds() < model.seconds())
        best = domain;
    }
    previous = best.split;
    g.layers.push_back(best);
    g.total += best;
  }
  return g;
}

} // namespace parallax::grid
