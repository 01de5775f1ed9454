//===- GridCost.h - a layer's cost on a Pr x Pc grid (SPAA'18) -*- C++ -*-===//
//
// Gholami et al., "Integrated Model, Batch and Domain Parallelism in
// Training Neural Networks" (SPAA'18): P ranks form a Pr x Pc grid, Pr
// splits each layer's model (the rows of its weight: its output features or
// channels) or, for a convolution, its spatial domain, and Pc the batch.
// Per layer and rank, in closed form with the alpha-beta model of a link
// (a message of n bytes costs alpha + n beta):
//
//   model split   forward   all-gather of Y in the column (Pr ranks), (B/Pc) d_out
//                 backward  all-reduce of dX in the column, (B/Pc) d_in
//                           (not for a layer whose input is data)
//                 gradient  all-reduce of dW in the row (Pc ranks), |W| / Pr
//   domain split  forward   halo of d floor(k/2) input rows (d: dilation)
//                           from each of two neighbours (point to point)
//                 backward  the same halo of dY
//                 gradient  all-reduce of dW over all P ranks
//
// with all-gather(p, n) = alpha ceil(log2 p) + beta (p-1)/p n and
// all-reduce(p, n) = 2 alpha ceil(log2 p) + 2 beta (p-1)/p n. Compute
// divides evenly over the P ranks in every grid. docs/grid.md derives and
// checks these against the paper.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_ANALYSIS_GRIDCOST_H
#define PARALLAX_ANALYSIS_GRIDCOST_H

#include "parallax/Runtime/KernelRates.h"

#include <cstdint>
#include <map>
#include <string>
#include <optional>
#include <string_view>
#include <vector>

namespace parallax::grid {

/// A Pr x Pc process grid. Ranks are numbered with the model axis inner
/// (rank = batch index * Pr + model index), so that a model group is Pr
/// consecutive ranks: on one machine when it fits.
struct Grid {
  int64_t pr = 1, pc = 1;
  int64_t size() const { return pr * pc; }
  std::string str() const;
};

/// ceil(a / b), and ceil(log2 p) (the rounds of a tree collective; 0 for
/// one rank).
int64_t ceilDiv(int64_t a, int64_t b);
double ceilLog2(int64_t p);

/// Every Pr x Pc grid of `p` ranks, Pr ascending (1 x p is pure data
/// parallelism, p x 1 pure model parallelism).
std::vector<Grid> gridsOf(int64_t p);

/// A message of n bytes costs alpha + n * beta seconds.
struct Link {
  double alpha = 5e-6;
  double beta = 1.0 / 5e9;
};

double allGatherSeconds(int64_t p, double bytes, const Link &link);
double allReduceSeconds(int64_t p, double bytes, const Link &link);
/// Bytes each rank sends in those collectives (the beta terms' volume).
double allGatherBytes(int64_t p, double bytes);
double allReduceBytes(int64_t p, double bytes);

/// Where the ranks run and how fast they compute.
struct Machine {
  Link intra, inter{50e-6, 1.0 / 1.25e9};
  int64_t ranksPerMachine = 1 << 30;
  /// Sustained floating-point operations per second of one rank.
  double flopsPerSecond = 50e9;
  /// The same for convolutions.
  double convFlopsPerSecond = 20e9;
  /// Bytes per second a memory-bound op streams through one rank.
  double streamBytesPerSecond = 5e9;
  /// Seconds every kernel costs beyond its work.
  double kernelSeconds = 1e-6;
  /// Calibrated work per second of some kernels, by name (KernelRates.h).
  std::map<std::string, rt::RateCurve> opRates;
  /// Optimizer state per parameter (Adam: 2).
  int optimizerSlots = 0;
  /// Flops per second of a product (gemm, matmul) whose smallest dimension
  /// is `smallest` and whose largest operand (or result) holds
  /// `largestBytes`: flopsPerSecond for one that fits in cache, the
  /// calibrated "product_flops" curve for one streamed from memory, and
  /// geometrically between (KernelRates.h); flopsPerSecond without a curve.
  double productFlopsPerSecond(int64_t smallest, double largestBytes) const;
  /// Bytes per second of a product that moves `bytes` (operands and
  /// result) when memory bounds it: the "product_bytes" curve, and for a
  /// product of fewer rows (smallest dimension) than its probe's that
  /// streams more than the cache holds, a rate between it and
  /// "product_stream"'s (one row), geometrically in log rows and log
  /// bytes; 0 without "product_bytes".
  double productBytesPerSecond(int64_t smallest, double bytes) const;
  /// The link of a group: intra when every group over the axis stays on
  /// one machine.
  const Link &modelLink(const Grid &g) const;
  const Link &batchLink(const Grid &g) const;
  const Link &worldLink(const Grid &g) const;
  /// Whether each model group of `g` stays on one machine.
  bool holdsModelGroup(const Grid &g) const {
    return g.pr == 1 || ranksPerMachine % g.pr == 0;
  }
};

/// The calibrated rate (bytes each member sends per second) of a `kind`
/// collective ("all_reduce", "reduce_scatter", "all_gather") sending
/// `sent` bytes on a group of `g` ranks on one machine: `m`'s op_rates
/// (KernelRates.h's collectives, from parallax-run --calibrate); 0 where it
/// has none, or `sent` is below its smallest probe (latency rules there,
/// which the links' alpha-beta hold).
double calibratedCollectiveRate(const Machine &m, std::string_view kind, int64_t g,
                                bool oneMachine, double sent);
/// Seconds of a parameter-server exchange (`kind` "ps_pull" or "ps_push")
/// in which each member of a group of `g` on one machine sends `sent`
/// bytes, at `m`'s calibrated rate for its kind and group ("ps_pull/4",
/// the kernel timed whole: its exchanges, packing and serving); one smaller
/// than the smallest probe takes the probe's time (its synchronizations,
/// not its bytes, bound it). nullopt without a rate.
std::optional<double> calibratedServerSeconds(const Machine &m, std::string_view kind, int64_t g,
                                              bool oneMachine, double sent);
/// allGatherSeconds and allReduceSeconds at `m`'s calibrated rate for
/// groups of `p` where `link` is its intra-machine link and it has one,
/// else alpha-beta.
double allGatherSeconds(int64_t p, double bytes, const Link &link, const Machine &m);
double allReduceSeconds(int64_t p, double bytes, const Link &link, const Machine &m);
/// A reduce-scatter of `bytes` over `p` ranks (each keeps 1/p of the sum):
/// the all-gather's volume, at the calibrated "reduce_scatter" rate.
double reduceScatterSeconds(int64_t p, double bytes, const Link &link, const Machine &m);

/// Flops per second of a dense layer's products on one rank: `rows` rows
/// (samples) by a weight block of `in` x `out` elements of `elementBytes`
/// (Machine::productFlopsPerSecond at their smallest dimension and the
/// block's bytes).
double denseProductFlopsPerSecond(const Machine &m, int64_t rows, int64_t in, int64_t out,
                                  int64_t elementBytes);

/// One layer with a weight, as the model treats it.
struct Layer {
  enum class Kind { Dense, Conv };
  Kind kind = Kind::Dense;
  std::string name;
  /// Samples (rows of X for a dense layer) in one step, over all ranks.
  int64_t batch = 1;
  /// Dense: Y[B, out] = X[B, in] W^T. Conv: channels.
  int64_t in = 1, out = 1;
  /// Conv: input and output feature map (height, width), the kernel's
  /// height and width, and the weight's elements (channels x group).
  int64_t inHeight = 1, inWidth = 1, outHeight = 1, outWidth = 1;
  int64_t kernelHeight = 1, kernelWidth = 1, dilationHeight = 1;
  int64_t weightElements = 0;
  /// Whether dX is needed (the layer's input depends on a trainable
  /// variable); the first layer's input is data.
  bool inputGradient = true;
  int64_t elementBytes = 4;

  /// The weight's elements.
  int64_t weightCount() const { return kind == Kind::Dense ? in * out : weightElements; }
  /// Elements of one sample's input and output.
  int64_t inElements() const;
  int64_t outElements() const;
  /// Forward floating-point operations of the whole batch.
  double flops() const;
};

enum class Split { Model, Domain };
const char *nameOf(Split s);

/// Per rank and step.
struct Cost {
  Split split = Split::Model;
  double forwardBytes = 0, backwardBytes = 0, gradientBytes = 0;
  double forwardSeconds = 0, backwardSeconds = 0, gradientSeconds = 0;
  double computeSeconds = 0;
  /// Parameters, gradients and optimizer state, and the activations kept
  /// for the backward pass (the layer's output: its input is the previous
  /// layer's output, or data).
  int64_t weightBytes = 0, activationBytes = 0;

  double bytes() const { return forwardBytes + backwardBytes + gradientBytes; }
  double commSeconds() const { return forwardSeconds + backwardSeconds + gradientSeconds; }
  double seconds() const { return commSeconds() + computeSeconds; }
  int64_t memoryBytes() const { return weightBytes + activationBytes; }
  Cost &operator+=(const Cost &o);
};

/// The layer's cost on `grid` with the model axis splitting it as `split`
/// (Domain only for convolutions). A split that does not divide (more
/// parts than rows, channels or samples) is still costed, with the
/// larger share.
Cost costOf(const Layer &layer, const Grid &grid, Split split, const Machine &m);

/// The cheaper of the layer's splits on `grid`.
Cost bestCostOf(const Layer &layer, const Grid &grid, const Machine &m);

/// A whole model on one grid: each layer's cheaper split, in step order,
/// summed. A model-split layer after a domain-split one first gathers its
/// input over the Pr ranks (the opposite change is a local slice).
struct GridCost {
  Grid grid;
  std::vector<Cost> layers;
  Cost total;
};
GridCost costOf(const std::vector<Layer> &layers, const Grid &grid, const Machine &m);

} // namespace parallax::grid

#endif // PARALLAX_ANALYSIS_GRIDCOST_H
