//===- Norm.cu - CUDA kernels of the Norm family ---------------------------===//
//
// softmax, log_softmax, layer_norm, batch_norm and their gradients on a GPU,
// with the CPU kernels' semantics (lib/Runtime/Kernels/Norm.cpp): the same
// bind-time checks and messages (Kernels/NormLayout.h), sums accumulated in
// double and rounded once, and element formulas evaluated in the element
// type in the CPU's order without fused multiply-adds, so results agree to
// rounding.
//
// Row reductions (a softmax line, a layer-norm row) run on a group of
// blockDim.x threads (a multiple of 32) per row, blockDim.y rows per block;
// every thread reads and writes only its own elements of a row, so an output
// that aliases its input is safe. Batch-norm statistics run one block per
// channel. A synchronized batch norm (a "grid" attribute) all-reduces its
// per-channel sums (in double, as the CPU does) through NCCL between the
// passes, ordered on the streams without the host; where the device has no
// NCCL for the group (ranks sharing a GPU) it runs the CPU kernel, whose
// sums go through MPI, over host staging.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelUtil.cuh"

#include "../../HostStaged.h"
#include "../../Kernels/CollectiveLayout.h"
#include "../../Kernels/KernelUtil.h"
#include "../../Kernels/NormLayout.h"
#include "parallax/Runtime/Collectives.h"

#include <math_constants.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace parallax::rt {
namespace {

using namespace cuda;
using namespace norm;

//===----------------------------------------------------------------------===//
// Device helpers
//===----------------------------------------------------------------------===//

/// Threads per block at most of the kernels that reduce rows or channels.
constexpr int kMaxGroupThreads = 512;

/// Threads per row for rows of `len` elements, and the block it makes.
struct RowLaunch {
  dim3 block, grid;
};
RowLaunch rowLaunch(int64_t rows, int64_t len) {
  unsigned tx = len <= 256 ? 32 : len <= 2048 ? 128 : 512;
  unsigned ty = std::max(1u, std::min<unsigned>(kMaxRowsPerBlock, 256 / tx));
  int64_t blocks = std::max<int64_t>(1, (rows + ty - 1) / ty);
  blocks = std::min<int64_t>(blocks, 65535 * 8);
  return {dim3(tx, ty), dim3((unsigned)blocks)};
}

// Grid-stride over rows, a block's rows at a time, so that every thread of
// a block takes part in each reduction (threads past the end have no
// elements).
#define PX_FOR_ROWS(row, rows)                                                 \
  for (int64_t row##Base_ = (int64_t)blockIdx.x * blockDim.y;                  \
       row##Base_ < (rows); row##Base_ += (int64_t)gridDim.x * blockDim.y)     \
    if (int64_t row = row##Base_ + threadIdx.y; true)

//===----------------------------------------------------------------------===//
// softmax, log_softmax and their gradients
//===----------------------------------------------------------------------===//

/// One line of `len` elements `stride` apart, the elements j = first,
/// first + step, ...; Reduce sums (or maxes) over the line's threads.
template <typename T, AxisKind K, typename Reduce>
__device__ void axisLine(const T *a, const T *b, T *out, int64_t len,
                         int64_t stride, int64_t first, int64_t step,
                         Reduce reduce) {
  if constexpr (K == AxisKind::Softmax || K == AxisKind::LogSoftmax) {
    double mx = -CUDART_INF;
    for (int64_t j = first; j < len; j += step)
      mx = nanMax(mx, (double)a[j * stride]);
    T tm = (T)reduce(mx, true);
    double sum = 0;
    for (int64_t j = first; j < len; j += step) {
      T e = expT(subRn(a[j * stride], tm));
      if (K == AxisKind::Softmax)
        out[j * stride] = e;
      sum += e;
    }
    sum = reduce(sum, false);
    if constexpr (K == AxisKind::Softmax) {
      T inv = (T)(1.0 / sum);
      for (int64_t j = first; j < len; j += step)
        out[j * stride] = mulRn(out[j * stride], inv);
    } else {
      T shift = (T)((double)tm + log(sum));
      for (int64_t j = first; j < len; j += step)
        out[j * stride] = subRn(a[j * stride], shift);
    }
  } else if constexpr (K == AxisKind::SoftmaxGrad) {
    const T *y = a, *dy = b;
    double sum = 0;
    for (int64_t j = first; j < len; j += step)
      sum += (double)dy[j * stride] * (double)y[j * stride];
    T ts = (T)reduce(sum, false);
    for (int64_t j = first; j < len; j += step)
      out[j * stride] = mulRn(y[j * stride], subRn(dy[j * stride], ts));
  } else {
    const T *y = a, *dy = b;
    double sum = 0;
    for (int64_t j = first; j < len; j += step)
      sum += (double)dy[j * stride];
    T ts = (T)reduce(sum, false);
    for (int64_t j = first; j < len; j += step)
      out[j * stride] = subRn(dy[j * stride], mulRn(expT(y[j * stride]), ts));
  }
}

/// The line's first element: lines are (outer, inner) pairs.
__device__ inline int64_t lineBase(int64_t l, int64_t len, int64_t inner) {
  return (l / inner) * len * inner + l % inner;
}

/// A group of threads per line.
template <typename T, AxisKind K>
__global__ void __launch_bounds__(kMaxGroupThreads)
    axisGroupKernel(const T *a, const T *b, T *out, int64_t lines, int64_t len,
                    int64_t inner) {
  auto reduce = [](double v, bool max) {
    return max ? groupReduce<true>(v) : groupReduce<false>(v);
  };
  PX_FOR_ROWS(l, lines) {
    int64_t n = l < lines ? len : 0;
    int64_t base = l < lines ? lineBase(l, len, inner) : 0;
    axisLine<T, K>(a + base, b ? b + base : nullptr, out + base, n, inner,
                   threadIdx.x, blockDim.x, reduce);
  }
}

/// One thread per line: lines next to each other in memory (a strided axis
/// with many lines) are read by neighbouring threads.
template <typename T, AxisKind K>
__global__ void axisThreadKernel(const T *a, const T *b, T *out, int64_t lines,
                                 int64_t len, int64_t inner) {
  auto reduce = [](double v, bool) { return v; };
  for (int64_t l = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; l < lines;
       l += (int64_t)gridDim.x * blockDim.x) {
    int64_t base = lineBase(l, len, inner);
    axisLine<T, K>(a + base, b ? b + base : nullptr, out + base, len, inner, 0,
                   1, reduce);
  }
}

template <typename T, AxisKind K>
KernelFn axisTyped(KernelArgs &args, int64_t axis) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &in0 = args.in(0);
  const T *a = in0.as<T>();
  const T *b = (K == AxisKind::SoftmaxGrad || K == AxisKind::LogSoftmaxGrad)
                   ? args.in(1).as<T>()
                   : nullptr;
  T *y = args.out(0).as<T>();
  int64_t outer = product(in0.shape, 0, axis), len = in0.dim(axis);
  int64_t inner = product(in0.shape, axis + 1, in0.shape.size());
  int64_t lines = outer * inner;
  cudaStream_t stream = dev.stream();
  if (lines == 0 || len == 0)
    return [] {};
  if (inner > 1 && (lines >= 2048 || len <= 32))
    return [=] {
      axisThreadKernel<T, K><<<blocksFor(lines), kThreads, 0, stream>>>(
          a, b, y, lines, len, inner);
      PX_CUDA_LAUNCHED();
    };
  RowLaunch rl = rowLaunch(lines, len);
  return [=] {
    axisGroupKernel<T, K>
        <<<rl.grid, rl.block, 0, stream>>>(a, b, y, lines, len, inner);
    PX_CUDA_LAUNCHED();
  };
}

template <AxisKind K> KernelFn axisFactory(KernelArgs &args) {
  int64_t axis = axisOf(args, K);
  return args.in(0).dtype == DType::F32 ? axisTyped<float, K>(args, axis)
                                        : axisTyped<double, K>(args, axis);
}

//===----------------------------------------------------------------------===//
// layer_norm and layer_norm_grad
//===----------------------------------------------------------------------===//

/// A parameter on the device with its broadcast map (null: one element
/// per normalised element).
template <typename T> struct DevParam {
  const T *data = nullptr;
  const int64_t *map = nullptr;
  __device__ T operator[](int64_t j) const { return data[map ? map[j] : j]; }
};

template <typename T>
DevParam<T> devParam(CudaDevice &dev, const T *data,
                     const std::vector<int64_t> &map,
                     std::vector<Scratch> &keep) {
  DevParam<T> p;
  p.data = data;
  if (!map.empty()) {
    keep.push_back(deviceArray(dev, map));
    p.map = static_cast<const int64_t *>(keep.back()->data());
  }
  return p;
}

template <typename T>
__global__ void __launch_bounds__(kMaxGroupThreads)
    layerNormKernel(const T *x, DevParam<T> scale, DevParam<T> bias,
                    bool hasBias, T *y, T *mean, T *invStd, int64_t rows,
                    int64_t len, double eps) {
  PX_FOR_ROWS(r, rows) {
    int64_t n = r < rows ? len : 0;
    const T *xr = x + (r < rows ? r : 0) * len;
    T *yr = y + (r < rows ? r : 0) * len;
    double sum = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      sum += (double)xr[j];
    double mu = groupReduce<false>(sum) / (double)len;
    double sq = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      double d = (double)xr[j] - mu;
      sq += d * d;
    }
    sq = groupReduce<false>(sq);
    double inv = 1.0 / sqrt(sq / (double)len + eps);
    if (r < rows && threadIdx.x == 0) {
      mean[r] = (T)mu;
      invStd[r] = (T)inv;
    }
    T m = (T)mu, iv = (T)inv;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      T v = mulRn(mulRn(subRn(xr[j], m), iv), scale[j]);
      yr[j] = hasBias ? addRn(v, bias[j]) : v;
    }
  }
}

template <typename T> KernelFn layerNormTyped(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  LayerNormLayout l = layerNormLayout(args);
  const LayerNormShape &s = l.shape;
  std::vector<Scratch> keep;
  DevParam<T> scale = devParam(dev, args.in(1).as<T>(), l.scaleMap, keep);
  bool hasBias = l.hasBias;
  DevParam<T> bias;
  if (hasBias)
    bias = devParam(dev, args.in(2).as<T>(), l.biasMap, keep);
  double eps = l.eps;
  const T *xp = args.in(0).as<T>();
  T *y = args.out(0).as<T>(), *mean = args.out(1).as<T>(),
    *invStd = args.out(2).as<T>();
  int64_t rows = s.rows, len = s.len;
  cudaStream_t stream = dev.stream();
  RowLaunch rl = rowLaunch(rows, len);
  return [=] {
    (void)keep;
    if (rows == 0)
      return;
    layerNormKernel<T><<<rl.grid, rl.block, 0, stream>>>(
        xp, scale, bias, hasBias, y, mean, invStd, rows, len, eps);
    PX_CUDA_LAUNCHED();
  };
}

KernelFn layerNormFactory(KernelArgs &args) {
  auto typed = [&](auto t) { return layerNormTyped<decltype(t)>(args); };
  return dispatchNormFloat(args, args.in(0).dtype, "layer_norm", typed);
}

/// dx of one row per thread group: dx = iv * (g - mean(g) - xhat *
/// mean(g * xhat)) with g = dy * scale, xhat = (x - m) * iv.
template <typename T>
__global__ void __launch_bounds__(kMaxGroupThreads)
    layerNormDxKernel(const T *dy, const T *x, DevParam<T> scale, const T *mean,
                      const T *invStd, T *dx, int64_t rows, int64_t len) {
  PX_FOR_ROWS(r, rows) {
    int64_t n = r < rows ? len : 0;
    int64_t off = (r < rows ? r : 0) * len;
    T m = r < rows ? mean[r] : T(0), iv = r < rows ? invStd[r] : T(0);
    double sg = 0, sgx = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      T g = mulRn(dy[off + j], scale[j]);
      T xh = mulRn(subRn(x[off + j], m), iv);
      sg += (double)g;
      sgx += (double)g * (double)xh;
    }
    sg = groupReduce<false>(sg);
    sgx = groupReduce<false>(sgx);
    T mg = (T)(sg / (double)len), mgx = (T)(sgx / (double)len);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      T g = mulRn(dy[off + j], scale[j]);
      T xh = mulRn(subRn(x[off + j], m), iv);
      dx[off + j] = mulRn(iv, subRn(subRn(g, mg), mulRn(xh, mgx)));
    }
  }
}

/// Column sums of dy * xhat and dy over a chunk of rows: 32 columns and
/// kColRows row-threads per block, chunk blockIdx.y; partial[c][0, len) and
/// partial[c][len, 2 len).
constexpr int kColRows = 8;
template <typename T>
__global__ void layerNormColumnKernel(const T *dy, const T *x, const T *mean,
                                      const T *invStd, double *partial,
                                      int64_t rows, int64_t len,
                                      int64_t chunks) {
  __shared__ double sds[kColRows][33], sdb[kColRows][33];
  int64_t c = blockIdx.y;
  int64_t first = rows * c / chunks, last = rows * (c + 1) / chunks;
  for (int64_t j0 = (int64_t)blockIdx.x * 32; j0 < len;
       j0 += (int64_t)gridDim.x * 32) {
    int64_t j = j0 + threadIdx.x;
    double ds = 0, db = 0;
    if (j < len)
      for (int64_t r = first + threadIdx.y; r < last; r += kColRows) {
        T m = mean[r], iv = invStd[r];
        T d = dy[r * len + j];
        T xh = mulRn(subRn(x[r * len + j], m), iv);
        ds += (double)d * (double)xh;
        db += (double)d;
      }
    sds[threadIdx.y][threadIdx.x] = ds;
    sdb[threadIdx.y][threadIdx.x] = db;
    __syncthreads();
    if (threadIdx.y == 0 && j < len) {
      for (int k = 1; k < kColRows; ++k) {
        ds += sds[k][threadIdx.x];
        db += sdb[k][threadIdx.x];
      }
      partial[c * 2 * len + j] = ds;
      partial[c * 2 * len + len + j] = db;
    }
    __syncthreads();
  }
}

/// dscale[k], dbias[k]: the chunks' partial sums of the normalised elements
/// that scale element k broadcasts to (members[offsets[k], offsets[k+1]);
/// null offsets: element k only).
template <typename T>
__global__ void
layerNormFoldKernel(const double *partial, const int64_t *offsets,
                    const int64_t *members, T *dscale, T *dbias, int64_t nScale,
                    int64_t len, int64_t chunks) {
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < nScale;
       k += (int64_t)gridDim.x * blockDim.x) {
    int64_t b = offsets ? offsets[k] : k, e = offsets ? offsets[k + 1] : k + 1;
    double ds = 0, db = 0;
    for (int64_t c = 0; c < chunks; ++c)
      for (int64_t i = b; i < e; ++i) {
        int64_t j = members ? members[i] : i;
        ds += partial[c * 2 * len + j];
        db += partial[c * 2 * len + len + j];
      }
    dscale[k] = (T)ds;
    dbias[k] = (T)db;
  }
}

template <typename T> KernelFn layerNormGradTyped(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &dy = args.in(0), &x = args.in(1), &scaleT = args.in(2);
  LayerNormGradLayout l = layerNormGradLayout(args);
  const std::vector<int64_t> &map = l.scaleMap;
  int64_t rows = l.shape.rows, len = l.shape.len, nScale = l.nScale;
  std::vector<Scratch> keep;
  DevParam<T> scale = devParam(dev, scaleT.as<T>(), map, keep);
  // The inverse of the broadcast map, for a deterministic fold.
  const int64_t *offsets = nullptr, *members = nullptr;
  if (!map.empty()) {
    std::vector<int64_t> off(nScale + 1, 0), mem(len);
    for (int64_t j = 0; j < len; ++j)
      ++off[map[j] + 1];
    for (int64_t k = 0; k < nScale; ++k)
      off[k + 1] += off[k];
    std::vector<int64_t> fill(off.begin(), off.end() - 1);
    for (int64_t j = 0; j < len; ++j)
      mem[fill[map[j]]++] = j;
    keep.push_back(deviceArray(dev, off));
    offsets = static_cast<const int64_t *>(keep.back()->data());
    keep.push_back(deviceArray(dev, mem));
    members = static_cast<const int64_t *>(keep.back()->data());
  }
  // Row chunks for the column sums: enough blocks to fill the GPU.
  int64_t colBlocks =
      std::min<int64_t>(std::max<int64_t>(1, (len + 31) / 32), 65535);
  int64_t chunks = std::max<int64_t>(
      1, std::min<int64_t>((rows + 4 * kColRows - 1) / (4 * kColRows),
                           std::max<int64_t>(1, 1024 / colBlocks)));
  chunks = std::min<int64_t>(chunks, 65535);
  Scratch partial = scratch(dev, std::max<int64_t>(1, chunks * 2 * len) * 8);
  const T *dyp = dy.as<T>(), *xp = x.as<T>(), *meanp = args.in(3).as<T>(),
          *invp = args.in(4).as<T>();
  T *dx = args.out(0).as<T>(), *dscale = args.out(1).as<T>(),
    *dbias = args.out(2).as<T>();
  double *part = static_cast<double *>(partial->data());
  cudaStream_t stream = dev.stream();
  RowLaunch rl = rowLaunch(rows, len);
  return [=] {
    (void)keep;
    (void)partial;
    // The parameter sums first: they read dy, which dx may overwrite.
    if (len > 0 && rows > 0) {
      layerNormColumnKernel<T>
          <<<dim3((unsigned)colBlocks, (unsigned)chunks), dim3(32, kColRows), 0,
             stream>>>(dyp, xp, meanp, invp, part, rows, len, chunks);
      PX_CUDA_LAUNCHED();
    } else {
      PX_CUDA_CHECK(cudaMemsetAsync(
          part, 0, std::max<int64_t>(1, chunks * 2 * len) * 8, stream));
    }
    if (nScale > 0) {
      layerNormFoldKernel<T><<<blocksFor(nScale), kThreads, 0, stream>>>(
          part, offsets, members, dscale, dbias, nScale, len, chunks);
      PX_CUDA_LAUNCHED();
    }
    if (rows > 0 && len > 0) {
      layerNormDxKernel<T><<<rl.grid, rl.block, 0, stream>>>(
          dyp, xp, scale, meanp, invp, dx, rows, len);
      PX_CUDA_LAUNCHED();
    }
  };
}

KernelFn layerNormGradFactory(KernelArgs &args) {
  auto typed = [&](auto t) { return layerNormGradTyped<decltype(t)>(args); };
  return dispatchNormFloat(args, args.in(1).dtype, "layer_norm_grad", typed);
}

//===----------------------------------------------------------------------===//
// batch_norm and batch_norm_grad
//===----------------------------------------------------------------------===//
//
// A channel's N * spatial values are cut into parts, one block each, so that
// a layer of few channels still fills the GPU (one block per channel gave
// 16 to 64 blocks on a 132-SM H100); each block writes its sums, in double,
// and a fold adds a channel's parts in order: the results depend on the
// shape alone, not on the GPU or the run. The statistics take two passes
// (the mean, then squared deviations from it) as on the CPU.

/// Threads of a channel part's block.
constexpr int kPartThreads = 256;
/// Values a part takes at least, and the blocks a launch aims at.
constexpr int64_t kMinPerPart = 2048;
constexpr int64_t kTargetBlocks = 1024;

/// How each channel's `count` values are cut: `parts` of `per` values (the
/// last may be shorter).
struct ChannelParts {
  int64_t parts = 1, per = 0;
};
ChannelParts channelParts(int64_t c, int64_t count) {
  int64_t byWork = std::max<int64_t>(1, count / kMinPerPart);
  int64_t byGrid = std::max<int64_t>(1, kTargetBlocks / std::max<int64_t>(1, c));
  int64_t p = std::min<int64_t>({byWork, byGrid, int64_t(65535) * 8});
  int64_t per = (count + p - 1) / p;
  return {count > 0 ? (count + per - 1) / per : 1, per};
}

/// What a pass sums per channel: x; (x - mean)^2; dy and dy (x - mean); or
/// all three of the last (mean: sums[ch] / total).
enum class ChannelSum { X, SqDev, DyDev, SqDyDev };
template <ChannelSum S>
constexpr int kSumsOf = S == ChannelSum::SqDyDev ? 3 : S == ChannelSum::DyDev ? 2 : 1;

/// partial[(k c + ch) parts + part]: the k-th sum of S over this block's
/// part of channel ch. The element t of a channel is (n, s) = (t / spatial,
/// t % spatial), stepped without dividing.
template <typename T, ChannelSum S>
__global__ void __launch_bounds__(kPartThreads)
    channelPartsKernel(const T *x, const T *dy, const double *sums, double total,
                       double *partial, int64_t c, int64_t spatial, int64_t count,
                       int64_t parts, int64_t per) {
  constexpr int K = kSumsOf<S>;
  const int64_t begin = (int64_t)blockIdx.x * per, end = min(count, begin + per);
  const int64_t step = blockDim.x, dn = step / spatial, ds = step % spatial;
  for (int64_t ch = blockIdx.y; ch < c; ch += gridDim.y) {
    const double mean = S == ChannelSum::X ? 0.0 : sums[ch] / total;
    double acc[K] = {};
    int64_t t = begin + threadIdx.x, n = t / spatial, s = t - n * spatial;
    for (; t < end; t += step) {
      const int64_t i = (n * c + ch) * spatial + s;
      const double v = (double)x[i];
      if constexpr (S == ChannelSum::X) {
        acc[0] += v;
      } else {
        const double d = v - mean;
        if constexpr (S == ChannelSum::SqDev) {
          acc[0] += d * d;
        } else {
          const double g = (double)dy[i];
          acc[K - 2] += g;
          acc[K - 1] += g * d;
          if constexpr (K == 3)
            acc[0] += d * d;
        }
      }
      n += dn;
      s += ds;
      if (s >= spatial) {
        s -= spatial;
        ++n;
      }
    }
    for (int k = 0; k < K; ++k) {
      double r = groupReduce<false>(acc[k]);
      if (threadIdx.x == 0)
        partial[(k * c + ch) * parts + blockIdx.x] = r;
    }
  }
}

/// out[l] = the sum of line l's parts, in order.
__global__ void foldPartsKernel(const double *partial, double *out, int64_t lines,
                                int64_t parts) {
  for (int64_t l = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; l < lines;
       l += (int64_t)gridDim.x * blockDim.x) {
    const double *p = partial + l * parts;
    double s = 0;
    for (int64_t j = 0; j < parts; ++j)
      s += p[j];
    out[l] = s;
  }
}

/// A batch norm's per-channel passes: its shape, parts and their scratch.
struct ChannelPasses {
  int64_t c = 0, spatial = 1, count = 0;
  ChannelParts cut;
  double *partial = nullptr;

  /// Sums S over every channel into out[k c + ch] (mean from sums / total).
  template <typename T, ChannelSum S>
  void sum(const T *x, const T *dy, const double *sums, double total, double *out,
           cudaStream_t stream) const {
    dim3 grid((unsigned)cut.parts, (unsigned)std::min<int64_t>(c, 65535));
    channelPartsKernel<T, S><<<grid, kPartThreads, 0, stream>>>(
        x, dy, sums, total, partial, c, spatial, count, cut.parts, cut.per);
    PX_CUDA_LAUNCHED();
    foldPartsKernel<<<blocksFor(kSumsOf<S> * c), kThreads, 0, stream>>>(
        partial, out, kSumsOf<S> * c, cut.parts);
    PX_CUDA_LAUNCHED();
  }
};

/// Inference: y's coefficients from the given statistics, which pass
/// through to the running ones.
template <typename T>
__global__ void batchNormInferKernel(const T *scale, const T *bias,
                                     const T *inMean, const T *inVar,
                                     T *runMean, T *runVar, T *coef, int64_t c,
                                     double eps) {
  for (int64_t ch = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; ch < c;
       ch += (int64_t)gridDim.x * blockDim.x) {
    double inv = 1.0 / sqrt((double)inVar[ch] + eps);
    T m = inMean[ch], v = inVar[ch];
    coef[ch] = (T)((double)scale[ch] * inv);
    coef[c + ch] = (T)((double)bias[ch] - (double)m * scale[ch] * inv);
    runMean[ch] = m;
    runVar[ch] = v;
  }
}

/// Elementwise over [N, C, spatial]: I is 32-bit where the tensor allows,
/// since a 64-bit division costs several times a 32-bit one on the GPU.
template <typename T, typename I>
__global__ void batchNormApplyKernel(const T *x, const T *coef, T *y, I c, I spatial,
                                     I total) {
  for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total;
       i += (I)gridDim.x * blockDim.x) {
    I ch = (i / spatial) % c;
    y[i] = addRn(mulRn(coef[ch], x[i]), coef[c + ch]);
  }
}

/// True when [N, C, spatial] indexes in 32 bits (with room for the stride).
bool index32(int64_t elements) { return elements < (int64_t(1) << 31); }

/// The CPU kernel of a synchronized batch norm over host copies: its
/// statistics are all-reduced through MPI inside the kernel.
KernelFn syncBatchNorm(KernelArgs &args, const char *op) {
  CudaDevice &dev = cudaDeviceOf(args);
  dev.markHostSynchronizing("synchronized batch norm through MPI");
  return hostStaged(*KernelRegistry::global().find(op))(args);
}

/// A synchronized batch norm's statistics across its group (grid_axes of
/// its grid, as the CPU's groupSum): per-channel double sums all-reduced
/// through NCCL. Null `coll`: a local batch norm, whose all-reduces do
/// nothing.
struct SyncStats {
  Collectives *coll = nullptr;
  /// Values per channel in the whole group's batch over those of this rank.
  int groupSize = 1;

  /// Sums `count` doubles at `sums` over the group; the compute stream's
  /// later kernels see the result.
  void allReduce(double *sums, int64_t count) const {
    if (!coll)
      return;
    try {
      coll->allReduce(sums, count, DType::F64, ReduceOp::Sum)->wait();
    } catch (const CommError &e) {
      throw KernelError(e.what());
    }
  }
};

/// The NCCL collectives of a batch norm's "grid" (null when it has none or
/// when the device stages it through MPI: then syncBatchNorm runs). Counts
/// a step's all-reduces of `doubles` each as the CPU kernel counts them.
SyncStats syncStatsOf(KernelArgs &args, const std::vector<int64_t> &doubles) {
  SyncStats st;
  if (!args.has("grid"))
    return st;
  Comm *comm = args.env.comm;
  Group &group = batchNormGroup(args);
  CudaDevice &dev = cudaDeviceOf(args);
  try {
    st.coll = dev.collectives(*comm, group);
    st.groupSize = group.size();
  } catch (const CommError &e) {
    args.fail(e.what());
  }
  if (st.coll) {
    int64_t ring = 0;
    for (int64_t n : doubles)
      ring += ringBytes(n * (int64_t)sizeof(double), st.groupSize);
    dev.countTrafficEveryStep(*comm, "(batchnorm)", ring, ring);
  }
  return st;
}

/// Training, from the statistics st (sum, squared deviations over `total`
/// values per channel): y's coefficients and the running statistics, one
/// thread per channel.
template <typename T>
__global__ void batchNormCoefKernel(const double *st, double total, const T *scale,
                                    const T *bias, const T *inMean, const T *inVar,
                                    T *runMean, T *runVar, T *coef, int64_t c,
                                    double eps, double momentum, double unbias) {
  for (int64_t ch = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; ch < c;
       ch += (int64_t)gridDim.x * blockDim.x) {
    double mean = st[ch] / total, var = st[c + ch] / total;
    double inv = 1.0 / sqrt(var + eps);
    coef[ch] = (T)((double)scale[ch] * inv);
    coef[c + ch] = (T)((double)bias[ch] - mean * (double)scale[ch] * inv);
    runMean[ch] = (T)(momentum * inMean[ch] + (1.0 - momentum) * mean);
    runVar[ch] = (T)(momentum * inVar[ch] + (1.0 - momentum) * var * unbias);
  }
}

/// Scratch of a batch norm (or its gradient): st[0, 4c) for the sums, and
/// the parts' partial sums of passes of up to `sums` sums each.
struct BatchNormScratch {
  Scratch stats, partial;
  ChannelPasses passes;
};
BatchNormScratch batchNormScratch(CudaDevice &dev, const BatchShape &s, int sums) {
  BatchNormScratch b;
  b.passes.c = s.c;
  b.passes.spatial = std::max<int64_t>(1, s.spatial);
  b.passes.count = s.n * s.spatial;
  b.passes.cut = channelParts(s.c, b.passes.count);
  b.stats = scratch(dev, std::max<int64_t>(1, 4 * s.c) * (int64_t)sizeof(double));
  b.partial = scratch(dev, std::max<int64_t>(1, sums * s.c * b.passes.cut.parts) *
                               (int64_t)sizeof(double));
  b.passes.partial = static_cast<double *>(b.partial->data());
  return b;
}

template <typename T> KernelFn batchNormTyped(KernelArgs &args, const SyncStats &sync) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &x = args.in(0);
  BatchNormLayout l = batchNormLayout(args);
  const BatchShape s = l.shape;
  double eps = l.eps, momentum = l.momentum;
  bool training = l.training;
  const int64_t count = s.n * s.spatial;
  // The values per channel of the whole (synchronized) batch.
  const double total = (double)count * sync.groupSize;
  double unbias = runningVarFactor(args, l, total);
  const T *xp = x.as<T>(), *scale = args.in(1).as<T>(),
          *bias = args.in(2).as<T>(), *inMean = args.in(3).as<T>(),
          *inVar = args.in(4).as<T>();
  T *y = args.out(0).as<T>(), *runMean = args.out(1).as<T>(),
    *runVar = args.out(2).as<T>();
  Scratch coefBuf =
      scratch(dev, std::max<int64_t>(1, 2 * s.c) * (int64_t)sizeof(T));
  T *coef = static_cast<T *>(coefBuf->data());
  BatchNormScratch bs = batchNormScratch(dev, s, 1);
  double *st = static_cast<double *>(bs.stats->data());
  const ChannelPasses passes = bs.passes;
  int64_t c = s.c, spatial = s.spatial, elements = s.n * s.c * s.spatial;
  cudaStream_t stream = dev.stream();
  return [=] {
    (void)coefBuf;
    (void)bs;
    if (c == 0)
      return;
    if (training) {
      passes.sum<T, ChannelSum::X>(xp, nullptr, st, total, st, stream);
      sync.allReduce(st, c);
      passes.sum<T, ChannelSum::SqDev>(xp, nullptr, st, total, st + c, stream);
      sync.allReduce(st + c, c);
      batchNormCoefKernel<T><<<blocksFor(c), kThreads, 0, stream>>>(
          st, total, scale, bias, inMean, inVar, runMean, runVar, coef, c, eps,
          momentum, unbias);
    } else {
      batchNormInferKernel<T><<<blocksFor(c), kThreads, 0, stream>>>(
          scale, bias, inMean, inVar, runMean, runVar, coef, c, eps);
    }
    PX_CUDA_LAUNCHED();
    if (elements > 0) {
      if (index32(elements))
        batchNormApplyKernel<T, uint32_t><<<blocksFor(elements), kThreads, 0, stream>>>(
            xp, coef, y, (uint32_t)c, (uint32_t)spatial, (uint32_t)elements);
      else
        batchNormApplyKernel<T, int64_t><<<blocksFor(elements), kThreads, 0, stream>>>(
            xp, coef, y, c, spatial, elements);
      PX_CUDA_LAUNCHED();
    }
  };
}

KernelFn batchNormFactory(KernelArgs &args) {
  checkFloat(args, args.in(0).dtype, "batch_norm");
  int64_t c = args.in(0).rank() >= 2 ? args.in(0).dim(1) : 0;
  // Only training synchronizes: the sums, then the squared deviations.
  SyncStats sync = syncStatsOf(args, args.flag("training") ? std::vector<int64_t>{c, c}
                                                           : std::vector<int64_t>{});
  if (args.has("grid") && !sync.coll && args.flag("training"))
    return syncBatchNorm(args, "batch_norm");
  if (args.in(0).dtype == DType::F32)
    return batchNormTyped<float>(args, sync);
  return batchNormTyped<double>(args, sync);
}

/// From the sums st[0, 4c) (x, squared deviations, dy, dy (x - mean)) over
/// `total` values per channel: with `outputs`, dbias = sum(dy) and dscale =
/// sum(dy xhat), taken before a synchronized batch norm all-reduces the
/// last two (this rank's, as on the CPU: the gradient all-reduce averages
/// them); else dx's coefficients k, mean(dy), m, iv, mean(dy xhat) in
/// coef[5 c].
template <typename T>
__global__ void batchNormGradCoefKernel(const double *st, double total, const T *scale,
                                        T *dscale, T *dbias, T *coef, int64_t c,
                                        double eps, bool outputs) {
  for (int64_t ch = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; ch < c;
       ch += (int64_t)gridDim.x * blockDim.x) {
    double mean = st[ch] / total, var = st[c + ch] / total;
    double inv = 1.0 / sqrt(var + eps);
    if (outputs) {
      dbias[ch] = (T)st[2 * c + ch];
      dscale[ch] = (T)(st[3 * c + ch] * inv);
      continue;
    }
    coef[ch] = (T)((double)scale[ch] * inv);
    coef[c + ch] = (T)(st[2 * c + ch] / total);
    coef[2 * c + ch] = (T)mean;
    coef[3 * c + ch] = (T)inv;
    coef[4 * c + ch] = (T)(st[3 * c + ch] * inv / total);
  }
}

/// dx = k * (dy - mean(dy) - xhat * mean(dy * xhat)), xhat = (x - m) * iv.
template <typename T, typename I>
__global__ void batchNormDxKernel(const T *dy, const T *x, const T *coef, T *dx, I c,
                                  I spatial, I total) {
  for (I i = blockIdx.x * (I)blockDim.x + threadIdx.x; i < total;
       i += (I)gridDim.x * blockDim.x) {
    I ch = (i / spatial) % c;
    T k = coef[ch], mdy = coef[c + ch], m = coef[2 * c + ch],
      iv = coef[3 * c + ch], mdx = coef[4 * c + ch];
    T xh = mulRn(subRn(x[i], m), iv);
    dx[i] = mulRn(k, subRn(subRn(dy[i], mdy), mulRn(xh, mdx)));
  }
}

template <typename T>
KernelFn batchNormGradTyped(KernelArgs &args, const SyncStats &sync) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &dy = args.in(0), &x = args.in(1);
  const BatchShape s = batchNormGradShape(args);
  double eps = args.f64Or("epsilon", 1e-5);
  const T *dyp = dy.as<T>(), *xp = x.as<T>(), *scale = args.in(2).as<T>();
  T *dx = args.out(0).as<T>(), *dscale = args.out(1).as<T>(),
    *dbias = args.out(2).as<T>();
  Scratch coefBuf =
      scratch(dev, std::max<int64_t>(1, 5 * s.c) * (int64_t)sizeof(T));
  T *coef = static_cast<T *>(coefBuf->data());
  BatchNormScratch bs = batchNormScratch(dev, s, 3);
  double *st = static_cast<double *>(bs.stats->data());
  const ChannelPasses passes = bs.passes;
  int64_t c = s.c, spatial = s.spatial, count = s.n * s.spatial,
          elements = s.n * s.c * s.spatial;
  double total = (double)count * sync.groupSize;
  cudaStream_t stream = dev.stream();
  return [=] {
    (void)coefBuf;
    (void)bs;
    if (c == 0)
      return;
    passes.sum<T, ChannelSum::X>(xp, nullptr, st, total, st, stream);
    sync.allReduce(st, c);
    if (sync.coll) {
      // SyncBatchNorm: the group's variance, then this rank's sums of dy
      // and dy (x - mean), all-reduced after dbias and dscale take them.
      passes.sum<T, ChannelSum::SqDev>(xp, nullptr, st, total, st + c, stream);
      sync.allReduce(st + c, c);
      passes.sum<T, ChannelSum::DyDev>(xp, dyp, st, total, st + 2 * c, stream);
    } else {
      passes.sum<T, ChannelSum::SqDyDev>(xp, dyp, st, total, st + c, stream);
    }
    batchNormGradCoefKernel<T><<<blocksFor(c), kThreads, 0, stream>>>(
        st, total, scale, dscale, dbias, coef, c, eps, /*outputs=*/true);
    PX_CUDA_LAUNCHED();
    sync.allReduce(st + 2 * c, 2 * c);
    batchNormGradCoefKernel<T><<<blocksFor(c), kThreads, 0, stream>>>(
        st, total, scale, dscale, dbias, coef, c, eps, /*outputs=*/false);
    PX_CUDA_LAUNCHED();
    if (elements == 0)
      return;
    if (index32(elements))
      batchNormDxKernel<T, uint32_t><<<blocksFor(elements), kThreads, 0, stream>>>(
          dyp, xp, coef, dx, (uint32_t)c, (uint32_t)spatial, (uint32_t)elements);
    else
      batchNormDxKernel<T, int64_t><<<blocksFor(elements), kThreads, 0, stream>>>(
          dyp, xp, coef, dx, c, spatial, elements);
    PX_CUDA_LAUNCHED();
  };
}

KernelFn batchNormGradFactory(KernelArgs &args) {
  checkFloat(args, args.in(1).dtype, "batch_norm_grad");
  int64_t c = args.in(1).rank() >= 2 ? args.in(1).dim(1) : 0;
  // The statistics' two all-reduces, then the sums of dy and dy * xhat.
  SyncStats sync = syncStatsOf(args, {c, c, 2 * c});
  if (args.has("grid") && !sync.coll)
    return syncBatchNorm(args, "batch_norm_grad");
  if (args.in(1).dtype == DType::F32)
    return batchNormGradTyped<float>(args, sync);
  return batchNormGradTyped<double>(args, sync);
}

} // namespace

void registerCudaNormKernels(KernelRegistry &r) {
  PX_ADD_NORM_KERNELS(r);
}

} // namespace parallax::rt
