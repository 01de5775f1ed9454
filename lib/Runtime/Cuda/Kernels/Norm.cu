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

/// The element t of channel ch, t in [0, N * spatial).
__device__ inline int64_t channelElem(int64_t t, int64_t ch, int64_t c,
                                      int64_t spatial) {
  int64_t n = t / spatial;
  return (n * c + ch) * spatial + (t - n * spatial);
}

/// Mean and biased variance of channel ch over the block (two passes, in
/// double); every thread of the block must call it.
template <typename T>
__device__ void channelStats(const T *x, int64_t ch, int64_t c, int64_t spatial,
                             int64_t count, double &mean, double &var) {
  double sum = 0;
  for (int64_t t = threadIdx.x; t < count; t += blockDim.x)
    sum += (double)x[channelElem(t, ch, c, spatial)];
  mean = groupReduce<false>(sum) / (double)count;
  double sq = 0;
  for (int64_t t = threadIdx.x; t < count; t += blockDim.x) {
    double d = (double)x[channelElem(t, ch, c, spatial)] - mean;
    sq += d * d;
  }
  var = groupReduce<false>(sq) / (double)count;
}

/// Training: the batch statistics, y's coefficients (y = a x + b) and the
/// running statistics, one block per channel.
template <typename T>
__global__ void __launch_bounds__(kMaxGroupThreads)
    batchNormStatsKernel(const T *x, const T *scale, const T *bias,
                         const T *inMean, const T *inVar, T *runMean, T *runVar,
                         T *coef, int64_t c, int64_t spatial, int64_t count,
                         double eps, double momentum, double unbias) {
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    double mean, var;
    channelStats(x, ch, c, spatial, count, mean, var);
    if (threadIdx.x == 0) {
      double inv = 1.0 / sqrt(var + eps);
      coef[ch] = (T)((double)scale[ch] * inv);
      coef[c + ch] = (T)((double)bias[ch] - mean * (double)scale[ch] * inv);
      runMean[ch] = (T)(momentum * inMean[ch] + (1.0 - momentum) * mean);
      runVar[ch] = (T)(momentum * inVar[ch] + (1.0 - momentum) * var * unbias);
    }
  }
}

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

template <typename T>
__global__ void batchNormApplyKernel(const T *x, const T *coef, T *y, int64_t c,
                                     int64_t spatial, int64_t total) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t ch = (i / spatial) % c;
    y[i] = addRn(mulRn(coef[ch], x[i]), coef[c + ch]);
  }
}

/// Threads per channel block.
unsigned channelThreads(int64_t count) {
  return count >= 16384 ? 512 : count >= 1024 ? 256 : count >= 128 ? 128 : 32;
}

/// The CPU kernel of a synchronized batch norm over host copies: its
/// statistics are all-reduced through MPI inside the kernel.
KernelFn syncBatchNorm(KernelArgs &args, const char *op) {
  CudaDevice &dev = cudaDeviceOf(args);
  dev.markHostSynchronizing("synchronized batch norm through MPI");
  return hostStaged(*KernelRegistry::global().find(op))(args);
}

/// A synchronized batch norm's statistics across its group (grid_axes of
/// its grid, as the CPU's groupSum): per-channel double sums all-reduced
/// through NCCL. Null `coll`: a local batch norm.
struct SyncStats {
  Collectives *coll = nullptr;
  /// Values per channel in the whole group's batch over those of this rank.
  int groupSize = 1;

  /// Sums `count` doubles at `sums` over the group; the compute stream's
  /// later kernels see the result.
  void allReduce(double *sums, int64_t count) const {
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

/// Per channel, one block each: out[ch] = the sum of x, or with Shift of
/// (x - mean)^2 where mean = sums[ch] / total (the group's values per
/// channel).
template <typename T, bool Shift>
__global__ void __launch_bounds__(kMaxGroupThreads)
    channelSumKernel(const T *x, const double *sums, double total, double *out,
                     int64_t c, int64_t spatial, int64_t count) {
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    double mean = Shift ? sums[ch] / total : 0.0, acc = 0;
    for (int64_t t = threadIdx.x; t < count; t += blockDim.x) {
      double v = (double)x[channelElem(t, ch, c, spatial)];
      if (Shift) {
        v -= mean;
        v *= v;
      }
      acc += v;
    }
    acc = groupReduce<false>(acc);
    if (threadIdx.x == 0)
      out[ch] = acc;
  }
}

/// The group's statistics into st[0, 2c) (sum, then squared deviations),
/// all-reduced after each pass.
template <typename T>
void launchSyncStats(const SyncStats &sync, const T *x, double *st, int64_t c,
                     int64_t spatial, int64_t count, unsigned blocks, unsigned threads,
                     cudaStream_t stream) {
  double total = (double)count * sync.groupSize;
  channelSumKernel<T, false><<<blocks, dim3(threads, 1), 0, stream>>>(
      x, nullptr, total, st, c, spatial, count);
  PX_CUDA_LAUNCHED();
  sync.allReduce(st, c);
  channelSumKernel<T, true><<<blocks, dim3(threads, 1), 0, stream>>>(
      x, st, total, st + c, c, spatial, count);
  PX_CUDA_LAUNCHED();
  sync.allReduce(st + c, c);
}

/// Training with the group's statistics st (sum, squared deviations over
/// `total` values per channel): y's coefficients and the running
/// statistics, one thread per channel.
template <typename T>
__global__ void syncBatchNormCoefKernel(const double *st, double total, const T *scale,
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
  bool synced = training && sync.coll;
  Scratch statsBuf = scratch(dev, synced ? 2 * s.c * (int64_t)sizeof(double) : 1);
  double *stats = static_cast<double *>(statsBuf->data());
  int64_t c = s.c, spatial = s.spatial, elements = s.n * s.c * s.spatial;
  // A block per channel (grid-stride past the grid's limit).
  unsigned chBlocks = blocksFor(c, 1), chThreads = channelThreads(count);
  cudaStream_t stream = dev.stream();
  return [=] {
    (void)coefBuf;
    (void)statsBuf;
    if (c == 0)
      return;
    if (synced) {
      launchSyncStats(sync, xp, stats, c, spatial, count, chBlocks, chThreads, stream);
      syncBatchNormCoefKernel<T><<<blocksFor(c), kThreads, 0, stream>>>(
          stats, total, scale, bias, inMean, inVar, runMean, runVar, coef, c, eps,
          momentum, unbias);
    } else if (training) {
      batchNormStatsKernel<T><<<chBlocks, dim3(chThreads, 1), 0, stream>>>(
          xp, scale, bias, inMean, inVar, runMean, runVar, coef, c, spatial,
          count, eps, momentum, unbias);
    } else {
      batchNormInferKernel<T><<<blocksFor(c), kThreads, 0, stream>>>(
          scale, bias, inMean, inVar, runMean, runVar, coef, c, eps);
    }
    PX_CUDA_LAUNCHED();
    if (elements > 0) {
      batchNormApplyKernel<T><<<blocksFor(elements), kThreads, 0, stream>>>(
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

/// Per channel: statistics, dbias = sum(dy), dscale = sum(dy * xhat), and
/// dx's coefficients k, mean(dy), m, iv, mean(dy * xhat) in coef[5 c].
template <typename T>
__global__ void __launch_bounds__(kMaxGroupThreads)
    batchNormGradStatsKernel(const T *dy, const T *x, const T *scale, T *dscale,
                             T *dbias, T *coef, int64_t c, int64_t spatial,
                             int64_t count, double eps) {
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    double sum = 0;
    for (int64_t t = threadIdx.x; t < count; t += blockDim.x)
      sum += (double)x[channelElem(t, ch, c, spatial)];
    double mean = groupReduce<false>(sum) / (double)count;
    double sq = 0, sdy = 0, sdyx = 0;
    for (int64_t t = threadIdx.x; t < count; t += blockDim.x) {
      int64_t i = channelElem(t, ch, c, spatial);
      double d = (double)x[i] - mean, g = (double)dy[i];
      sq += d * d;
      sdy += g;
      sdyx += g * d;
    }
    double var = groupReduce<false>(sq) / (double)count;
    sdy = groupReduce<false>(sdy);
    sdyx = groupReduce<false>(sdyx);
    if (threadIdx.x == 0) {
      double inv = 1.0 / sqrt(var + eps);
      double ds = sdyx * inv;
      dbias[ch] = (T)sdy;
      dscale[ch] = (T)ds;
      coef[ch] = (T)((double)scale[ch] * inv);
      coef[c + ch] = (T)(sdy / (double)count);
      coef[2 * c + ch] = (T)mean;
      coef[3 * c + ch] = (T)inv;
      coef[4 * c + ch] = (T)(ds / (double)count);
    }
  }
}

/// Synchronized: with the group's statistics st[0, 2c) over `total` values
/// per channel, this rank's sums of dy and dy * (x - mean) into st[2c, 4c),
/// and dbias, dscale from them (this rank's: the gradient all-reduce
/// averages them, as on the CPU).
template <typename T>
__global__ void __launch_bounds__(kMaxGroupThreads)
    syncBatchNormGradSumsKernel(const T *dy, const T *x, double *st, double total,
                                T *dscale, T *dbias, int64_t c, int64_t spatial,
                                int64_t count, double eps) {
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    double mean = st[ch] / total, var = st[c + ch] / total;
    double sdy = 0, sdyx = 0;
    for (int64_t t = threadIdx.x; t < count; t += blockDim.x) {
      int64_t i = channelElem(t, ch, c, spatial);
      double g = (double)dy[i];
      sdy += g;
      sdyx += g * ((double)x[i] - mean);
    }
    sdy = groupReduce<false>(sdy);
    sdyx = groupReduce<false>(sdyx);
    if (threadIdx.x == 0) {
      double inv = 1.0 / sqrt(var + eps);
      dbias[ch] = (T)sdy;
      dscale[ch] = (T)(sdyx * inv);
      st[2 * c + ch] = sdy;
      st[3 * c + ch] = sdyx;
    }
  }
}

/// Synchronized: dx's coefficients (as batchNormGradStatsKernel's) from the
/// group's sums st[0, 4c).
template <typename T>
__global__ void syncBatchNormGradCoefKernel(const double *st, double total, const T *scale,
                                            T *coef, int64_t c, double eps) {
  for (int64_t ch = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; ch < c;
       ch += (int64_t)gridDim.x * blockDim.x) {
    double mean = st[ch] / total, var = st[c + ch] / total;
    double inv = 1.0 / sqrt(var + eps);
    coef[ch] = (T)((double)scale[ch] * inv);
    coef[c + ch] = (T)(st[2 * c + ch] / total);
    coef[2 * c + ch] = (T)mean;
    coef[3 * c + ch] = (T)inv;
    coef[4 * c + ch] = (T)(st[3 * c + ch] * inv / total);
  }
}

/// dx = k * (dy - mean(dy) - xhat * mean(dy * xhat)), xhat = (x - m) * iv.
template <typename T>
__global__ void batchNormDxKernel(const T *dy, const T *x, const T *coef, T *dx,
                                  int64_t c, int64_t spatial, int64_t total) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t ch = (i / spatial) % c;
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
  Scratch statsBuf = scratch(dev, sync.coll ? 4 * s.c * (int64_t)sizeof(double) : 1);
  double *stats = static_cast<double *>(statsBuf->data());
  int64_t c = s.c, spatial = s.spatial, count = s.n * s.spatial,
          elements = s.n * s.c * s.spatial;
  double total = (double)count * sync.groupSize;
  // A block per channel (grid-stride past the grid's limit).
  unsigned chBlocks = blocksFor(c, 1), chThreads = channelThreads(count);
  cudaStream_t stream = dev.stream();
  return [=] {
    (void)coefBuf;
    (void)statsBuf;
    if (c == 0)
      return;
    if (sync.coll) {
      // SyncBatchNorm: the group's statistics, then dx from the group's
      // sums of dy and dy * xhat.
      launchSyncStats(sync, xp, stats, c, spatial, count, chBlocks, chThreads, stream);
      syncBatchNormGradSumsKernel<T><<<chBlocks, dim3(chThreads, 1), 0, stream>>>(
          dyp, xp, stats, total, dscale, dbias, c, spatial, count, eps);
      PX_CUDA_LAUNCHED();
      sync.allReduce(stats + 2 * c, 2 * c);
      syncBatchNormGradCoefKernel<T><<<blocksFor(c), kThreads, 0, stream>>>(
          stats, total, scale, coef, c, eps);
    } else {
      batchNormGradStatsKernel<T><<<chBlocks, dim3(chThreads, 1), 0, stream>>>(
          dyp, xp, scale, dscale, dbias, coef, c, spatial, count, eps);
    }
    PX_CUDA_LAUNCHED();
    batchNormDxKernel<T><<<blocksFor(elements), kThreads, 0, stream>>>(
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
