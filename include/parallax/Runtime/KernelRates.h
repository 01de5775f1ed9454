//===- KernelRates.h - the kernels with a calibrated rate of their own -*- C++ -*-===//
//
// `parallax-run --calibrate` times a small and a large representative call
// of each kernel below and writes their rates (work per second) into the
// profile's "op_rates"; parallax-opt's step prediction divides an op of
// that kind by the rate at its work instead of by the generic rates
// (products' flops, streamed bytes). The unit of work is the kernel's own:
// a recurrent layer's multiply-adds, a pooling window's taps, a
// normalization's bytes. The compiler and the runtime both take the unit
// and its formulas from here, so that the two count alike.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_KERNELRATES_H
#define PARALLAX_RUNTIME_KERNELRATES_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace parallax::rt {

enum class KernelWork {
  /// 2 x multiply-adds: a convolution 2 |y| |W| / C_out (each kernel of
  /// the three), a recurrent layer 2 T B (|W| + |R|) forward and twice that
  /// for its gradient.
  Flops,
  /// Outputs (of the forward op; dy's elements for the gradient) times the
  /// window's elements.
  WindowTaps,
  /// Operands and results, in bytes.
  Bytes,
  /// What each member of the group sends (CollectiveVolume.h's volumes).
  SentBytes,
};

/// A convolution kernel's flops (any of the three): its output's elements
/// (dy's for the gradients) times a filter's elements per output channel
/// (C/group x the window), times 2.
inline double convFlops(double outputs, double filterPerChannel) {
  return 2.0 * outputs * filterPerChannel;
}

/// A recurrent layer's flops over `steps` x `batch` rows with W's and R's
/// `weights` elements (all directions): each row multiplies each weight
/// once forward; the gradient does it twice (dx and dh, dW and dR).
inline double recurrentFlops(double steps, double batch, double weights, bool grad) {
  return (grad ? 4.0 : 2.0) * steps * batch * weights;
}

/// A max pooling's taps: its outputs (dy's elements for the gradient) times
/// the window's elements.
inline double windowTaps(double outputs, double window) { return outputs * window; }

struct RatedKernel {
  std::string_view op;
  KernelWork work;
};

/// Kernels whose speed the generic rates miss most: the three
/// convolutions (the filter gradient's reduction runs slower than the
/// forward product), multi-pass normalizations, window scans, and
/// recurrences of small per-step products.
inline constexpr RatedKernel kRatedKernels[] = {
    {"conv", KernelWork::Flops},           {"conv_grad_input", KernelWork::Flops},
    {"conv_grad_filter", KernelWork::Flops},
    {"batch_norm", KernelWork::Bytes},     {"batch_norm_grad", KernelWork::Bytes},
    {"max_pool", KernelWork::WindowTaps},  {"max_pool_grad", KernelWork::WindowTaps},
    {"gru", KernelWork::Flops},            {"gru_grad", KernelWork::Flops},
    {"lstm", KernelWork::Flops},           {"lstm_grad", KernelWork::Flops},
    // A class, not a kernel: the ops of the px dialect's Elementwise trait
    // (add, mul, relu, where ...) but the costly ones below, timed on add.
    // Their tensors are activations, often in cache, where the streaming
    // rate (a dense update's, from memory) undersells them.
    {"elementwise", KernelWork::Bytes},
    // The ops of the CostlyPerElement trait (exp, erf, tanh, dropout's
    // draws, softmax ...), whose arithmetic bounds them: timed on
    // kCostlyPerElementProbe, in cache and from memory. A profile without
    // it times the element-wise ones as "elementwise".
    {"costly_per_element", KernelWork::Bytes},
    // Not a kernel either: the products' (gemm, matmul) rate when memory
    // bounds them, their operands' and result's bytes per second, timed on
    // a product of kProductBytesRows rows by a large weight (which a BLAS
    // packs: read, written and read again). A product takes the longer of
    // its flops at flops_per_second and its bytes at this rate.
    {"product_bytes", KernelWork::Bytes},
    // The same timed on one row, a product that streams its weight and
    // computes little: a product of fewer rows than kProductBytesRows
    // takes a rate between the two (Machine::productBytesPerSecond).
    {"product_stream", KernelWork::Bytes},
    // Not a kernel: the products' flops rate when their weight (the largest
    // operand) is too large for a core's cache, against the product's
    // smallest dimension (a small batch's rows, or the rows a weight's
    // gradient sums over): the BLAS streams the weight once per call and a
    // short dimension reuses it little. Its points are [smallest dimension,
    // flops per second], timed on a weight of kProductStreamedWeightBytes.
    {"product_flops", KernelWork::Flops},
};

/// The kernel --calibrate times for "costly_per_element": the function a
/// GELU evaluates (torch exports nn.GELU as Erf), in the middle of the
/// class's vectorized kernels (exp, tanh, sigmoid, dropout's draws); log,
/// the trigonometric ones and pow by other than 2 call libm per element and
/// run slower than it.
inline constexpr const char *kCostlyPerElementProbe = "erf";

/// The products --calibrate times for "product_flops": [d, K] x [K, K]
/// for each smallest dimension d, K = kProductWeightDim; d = 1 streams the
/// weight and little else, so that a product of a few rows takes a rate
/// between streaming and arithmetic (not the 16-row one). flops_per_second
/// (a 512 x 512 x 512 product, its weight in cache) is the rate at
/// kProductCachedWeightBytes; a product whose largest operand lies between
/// the two takes a rate between them (geometrically, in log bytes).
inline constexpr int64_t kProductSmallestDims[] = {1, 16, 64, 256};
/// The rows of the "product_bytes" probe ("product_stream"'s: one).
inline constexpr int64_t kProductBytesRows = 16;
inline constexpr int64_t kProductWeightDim = 2048;
inline constexpr double kProductStreamedWeightBytes = 4.0 * kProductWeightDim * kProductWeightDim;
inline constexpr double kProductCachedWeightBytes = 4.0 * 512 * 512;

/// The collectives --calibrate times on groups of each size one machine
/// holds (every group at once, as a grid's groups run): their rates are
/// named "all_reduce/4" and so on, per group size, since ranks that share
/// cores slow each other down more in a larger group.
/// The parameter server's exchanges (ps_pull, ps_push) are timed as the
/// kernels run them, over a table of kPsProbeRows rows of kPsProbeWidth
/// floats, each rank asking for the rows of kPsProbeLookups lookups.
inline constexpr std::string_view kRatedCollectives[] = {"all_reduce", "reduce_scatter",
                                                         "all_gather", "ps_pull", "ps_push"};
inline constexpr int64_t kPsProbeRows = 1 << 16, kPsProbeWidth = 256;
inline constexpr int64_t kPsProbeLookups[] = {16, 1024};
inline std::string collectiveRateName(std::string_view kind, int64_t groupSize) {
  return std::string(kind) + "/" + std::to_string(groupSize);
}

/// The unit `op`'s calibrated rate counts, or none for a kernel without one.
inline std::optional<KernelWork> ratedWorkOf(std::string_view op) {
  for (const RatedKernel &k : kRatedKernels)
    if (k.op == op)
      return k.work;
  size_t slash = op.find('/');
  if (slash == std::string_view::npos || slash + 1 == op.size())
    return std::nullopt;
  std::string_view kind = op.substr(0, slash), size = op.substr(slash + 1);
  if (std::find(std::begin(kRatedCollectives), std::end(kRatedCollectives), kind) ==
          std::end(kRatedCollectives) ||
      size.size() > 6 || size.front() == '0' ||
      !std::all_of(size.begin(), size.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      std::stoi(std::string(size)) < 2)
    return std::nullopt;
  return KernelWork::SentBytes;
}

/// A kernel's calibrated rate against the work of one call, from the
/// [work, rate] points --calibrate measured (a small and a large call: a
/// call's fixed costs weigh on small ones). Between two points the rate
/// follows a straight line in log(work); beyond them it is the nearest
/// point's. One point (or a profile's plain number) is a constant rate.
struct RateCurve {
  std::vector<std::pair<double, double>> points; ///< by work

  double at(double work) const {
    if (points.empty())
      return 0;
    if (points.size() == 1 || work <= points.front().first)
      return points.front().second;
    if (work >= points.back().first)
      return points.back().second;
    auto hi = std::lower_bound(points.begin(), points.end(), work,
                               [](const auto &p, double w) { return p.first < w; });
    auto lo = hi - 1;
    double f = std::log(work / lo->first) / std::log(hi->first / lo->first);
    return lo->second + f * (hi->second - lo->second);
  }
};

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_KERNELRATES_H
