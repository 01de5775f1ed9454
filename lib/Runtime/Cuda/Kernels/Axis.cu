//===- Axis.cu - CUDA kernels of the Axis family ---------------------------===//
//
// cumsum, arg_max/arg_min, top_k, segment_reduce and its gradient as
// lib/Runtime/Kernels/Axis.cpp computes them, over the same [outer, n,
// inner] lines. Many lines: a thread per line, which repeats the CPU's loop
// exactly. Few long lines: a block per line (cumsum: a block scan of the
// threads' chunk sums, in the CPU's accumulator type; arg_*: a block
// reduction whose combine keeps the element the CPU's scan would keep).
//
// top_k sorts each line with CUB's segmented radix sort over keys that order
// like the CPU's comparator (-0 == +0); the sort is stable, so equal values
// keep the lower index first, as on the CPU.
//
// segment_reduce_grad adds with atomics: with overlapping ranges the sum's
// order (and its last bit) may differ from the CPU's.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelUtil.cuh"

#include "../../Kernels/AxisLayout.h"
#include "../../Kernels/KernelUtil.h"

#include <cub/cub.cuh>

#include <climits>
#include <string>
#include <type_traits>

namespace parallax::rt {
namespace {

using namespace cuda;
using namespace detail;

/// Block size of the block-per-line kernels.
constexpr int kLineThreads = 256;

/// Whether a thread per line (the CPU's loop) keeps the GPU busy enough.
bool threadPerLine(const Lines &g) { return g.n <= 64 || g.count() >= 8192; }

#define PX_FOR_LINES(l, lines)                                                 \
  for (int64_t l = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;            \
       l < (lines); l += (int64_t)gridDim.x * blockDim.x)

//===----------------------------------------------------------------------===//
// cumsum.
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void cumsumPerThread(const T *in, T *out, Lines g, bool exclusive,
                                bool reverse) {
  PX_FOR_LINES(l, g.count()) {
    cumsumRange(in, out, g, g.base(l), 0, g.n, CumsumAcc<T>(0), exclusive, reverse);
  }
}

template <typename T>
__global__ void cumsumPerBlock(const T *in, T *out, Lines g, bool exclusive,
                               bool reverse) {
  using A = CumsumAcc<T>;
  using Scan = cub::BlockScan<A, kLineThreads>;
  __shared__ typename Scan::TempStorage tmp;
  const int64_t chunk = (g.n + kLineThreads - 1) / kLineThreads;
  const int64_t k0 = min(g.n, threadIdx.x * chunk), k1 = min(g.n, k0 + chunk);
  for (int64_t l = blockIdx.x; l < g.count(); l += gridDim.x) {
    const int64_t b = g.base(l);
    auto at = [&](int64_t k) { return b + (reverse ? g.n - 1 - k : k) * g.inner; };
    A local = 0;
    for (int64_t k = k0; k < k1; ++k)
      local += cumsumWiden(in[at(k)]);
    A acc;
    Scan(tmp).ExclusiveSum(local, acc);
    __syncthreads(); // tmp is reused by the next line
    cumsumRange(in, out, g, b, k0, k1, acc, exclusive, reverse);
  }
}

template <typename T>
KernelFn bindCumsum(CudaDevice &dev, const TensorView &x, const TensorView &y,
                    const Lines &g, bool exclusive, bool reverse) {
  const T *in = x.as<const T>();
  T *out = y.as<T>();
  CudaDevice *d = &dev;
  const bool perThread = threadPerLine(g);
  return [=] {
    if (g.count() == 0 || g.n == 0)
      return;
    if (perThread)
      cumsumPerThread<T><<<blocksFor(g.count()), kThreads, 0, d->stream()>>>(
          in, out, g, exclusive, reverse);
    else
      cumsumPerBlock<T><<<blocksFor(g.count(), 1), kLineThreads, 0, d->stream()>>>(
          in, out, g, exclusive, reverse);
    PX_CUDA_LAUNCHED();
  };
}

KernelFn cumsumFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &x = args.in(0), &y = args.out(0);
  const CumsumLayout l = cumsumLayout(args);
  return dispatchNumeric(args, x.dtype, "cumsum", [&](auto tag) -> KernelFn {
    return bindCumsum<decltype(tag)>(dev, x, y, l.lines, l.exclusive, l.reverse);
  });
}

//===----------------------------------------------------------------------===//
// arg_max, arg_min.
//===----------------------------------------------------------------------===//

template <typename T> struct ArgPair {
  T v;
  int64_t i; ///< -1: no element
};

/// The element a sequential scan over both candidates' elements keeps: the
/// later one replaces the earlier exactly when `better` says so.
template <bool Max, typename T> struct ArgCombine {
  bool last;
  __device__ ArgPair<T> operator()(const ArgPair<T> &a, const ArgPair<T> &b) const {
    if (a.i < 0)
      return b;
    if (b.i < 0)
      return a;
    const ArgPair<T> &lo = a.i < b.i ? a : b, &hi = a.i < b.i ? b : a;
    return better<Max>(hi.v, lo.v, last) ? hi : lo;
  }
};

template <bool Max, typename T>
__global__ void argPerThread(const T *in, int64_t *out, Lines g, bool last) {
  PX_FOR_LINES(l, g.count()) { out[l] = argLine<Max>(in, g, g.base(l), last); }
}

template <bool Max, typename T>
__global__ void argPerBlock(const T *in, int64_t *out, Lines g, bool last) {
  using Reduce = cub::BlockReduce<ArgPair<T>, kLineThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  for (int64_t l = blockIdx.x; l < g.count(); l += gridDim.x) {
    const int64_t b = g.base(l);
    ArgPair<T> mine{T(0), -1};
    for (int64_t k = threadIdx.x; k < g.n; k += blockDim.x) {
      const T v = in[b + k * g.inner];
      if (mine.i < 0 || better<Max>(v, mine.v, last))
        mine = {v, k};
    }
    ArgPair<T> best = Reduce(tmp).Reduce(mine, ArgCombine<Max, T>{last});
    if (threadIdx.x == 0)
      out[l] = best.i;
    __syncthreads(); // tmp is reused by the next line
  }
}

template <bool Max, typename T>
KernelFn bindArg(CudaDevice &dev, const TensorView &x, int64_t *out,
                 const Lines &g, bool last) {
  const T *in = x.as<const T>();
  CudaDevice *d = &dev;
  const bool perThread = threadPerLine(g);
  return [=] {
    if (g.count() == 0)
      return;
    if (perThread)
      argPerThread<Max, T><<<blocksFor(g.count()), kThreads, 0, d->stream()>>>(
          in, out, g, last);
    else
      argPerBlock<Max, T><<<blocksFor(g.count(), 1), kLineThreads, 0, d->stream()>>>(
          in, out, g, last);
    PX_CUDA_LAUNCHED();
  };
}

template <bool Max> KernelFactory argFactory(std::string name) {
  return [name](KernelArgs &args) -> KernelFn {
    CudaDevice &dev = cudaDeviceOf(args);
    const TensorView &x = args.in(0), &y = args.out(0);
    const ArgLayout l = argLayout(args, name);
    int64_t *out = y.as<int64_t>();
    return dispatchNumeric(args, x.dtype, name, [&](auto tag) -> KernelFn {
      return bindArg<Max, decltype(tag)>(dev, x, out, l.lines, l.last);
    });
  };
}

//===----------------------------------------------------------------------===//
// top_k.
//===----------------------------------------------------------------------===//

template <typename T>
using KeyOf = std::conditional_t<sizeof(T) <= 4, uint32_t, uint64_t>;

/// An unsigned key whose order is the values' (-0 and +0 equal).
template <typename T> __device__ inline KeyOf<T> orderKey(T v) {
  using K = KeyOf<T>;
  constexpr K sign = K(1) << (sizeof(K) * 8 - 1);
  if constexpr (std::is_same_v<T, float>) {
    K bits = __float_as_uint(v == 0.0f ? 0.0f : v);
    return (bits & sign) ? ~bits : (bits | sign);
  } else if constexpr (std::is_same_v<T, double>) {
    K bits = (K)__double_as_longlong(v == 0.0 ? 0.0 : v);
    return (bits & sign) ? ~bits : (bits | sign);
  } else if constexpr (std::is_signed_v<T>) {
    using S = std::make_signed_t<K>;
    return (K)(S)v ^ sign;
  } else {
    return (K)v;
  }
}

/// Sort keys (ascending = the wanted order) and in-line indices of every
/// element, line by line.
template <typename T>
__global__ void topKKeys(const T *in, Lines g, bool largest, KeyOf<T> *keys,
                         int *idx) {
  const int64_t total = g.count() * g.n;
  PX_FOR_LINES(e, total) {
    const int64_t l = e / g.n, j = e % g.n;
    const KeyOf<T> key = orderKey(in[g.base(l) + j * g.inner]);
    keys[e] = largest ? (KeyOf<T>)~key : key;
    idx[e] = (int)j;
  }
}

template <typename T>
__global__ void topKGather(const T *in, Lines g, int64_t k, const int *sorted,
                           T *outVal, int64_t *outIdx) {
  const int64_t total = g.count() * k;
  PX_FOR_LINES(e, total) {
    const int64_t l = e / k, r = e % k;
    const int64_t j = sorted[l * g.n + r];
    const int64_t o = (l / g.inner) * k * g.inner + l % g.inner + r * g.inner;
    outVal[o] = in[g.base(l) + j * g.inner];
    outIdx[o] = j;
  }
}

__global__ void lineOffsets(int *offsets, int64_t lines, int64_t n) {
  PX_FOR_LINES(l, lines + 1) { offsets[l] = (int)(l * n); }
}

template <typename T>
KernelFn bindTopK(KernelArgs &args, CudaDevice &dev, const TensorView &x,
                  const TensorView &values, int64_t *outIdx, const Lines &g,
                  int64_t k, bool largest) {
  using K = KeyOf<T>;
  const int64_t total = g.count() * g.n;
  if (k == 0 || total == 0)
    return [] {};
  if (total > INT_MAX)
    args.fail("top_k: " + std::to_string(total) +
              " elements are more than the CUDA kernel's sort takes (2^31 - 1)");
  const T *in = x.as<const T>();
  T *outVal = values.as<T>();
  const int items = (int)total, lines = (int)g.count();
  Scratch offsets = scratch(dev, (g.count() + 1) * (int64_t)sizeof(int));
  lineOffsets<<<blocksFor(g.count() + 1), kThreads, 0, dev.stream()>>>(
      static_cast<int *>(offsets->data()), g.count(), g.n);
  PX_CUDA_LAUNCHED();
  size_t tempBytes = 0;
  const int *begins = static_cast<const int *>(offsets->data());
  PX_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(
      nullptr, tempBytes, (const K *)nullptr, (K *)nullptr, (const int *)nullptr,
      (int *)nullptr, items, lines, begins, begins + 1, 0, (int)sizeof(K) * 8,
      dev.stream()));
  Scratch keys = scratch(dev, total * (int64_t)sizeof(K)),
          sortedKeys = scratch(dev, total * (int64_t)sizeof(K)),
          idx = scratch(dev, total * (int64_t)sizeof(int)),
          sortedIdx = scratch(dev, total * (int64_t)sizeof(int)),
          temp = scratch(dev, (int64_t)tempBytes + 8);
  CudaDevice *d = &dev;
  return [=] {
    cudaStream_t st = d->stream();
    K *kIn = static_cast<K *>(keys->data()), *kOut = static_cast<K *>(sortedKeys->data());
    int *iIn = static_cast<int *>(idx->data()), *iOut = static_cast<int *>(sortedIdx->data());
    topKKeys<T><<<blocksFor(total), kThreads, 0, st>>>(in, g, largest, kIn, iIn);
    PX_CUDA_LAUNCHED();
    size_t bytes = tempBytes;
    const int *b = static_cast<const int *>(offsets->data());
    PX_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(
        temp->data(), bytes, (const K *)kIn, kOut, (const int *)iIn, iOut, items,
        lines, b, b + 1, 0, (int)sizeof(K) * 8, st));
    topKGather<T><<<blocksFor(g.count() * k), kThreads, 0, st>>>(
        in, g, k, iOut, outVal, outIdx);
    PX_CUDA_LAUNCHED();
  };
}

KernelFn topKFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &x = args.in(0), &values = args.out(0), &indices = args.out(1);
  const TopKLayout l = topKLayout(args);
  int64_t *outIdx = indices.as<int64_t>();
  return dispatchNumeric(args, x.dtype, "top_k", [&](auto tag) -> KernelFn {
    return bindTopK<decltype(tag)>(args, dev, x, values, outIdx, l.lines, l.k,
                                   l.largest);
  });
}

//===----------------------------------------------------------------------===//
// segment_reduce, segment_reduce_grad.
//===----------------------------------------------------------------------===//

/// Element (i, c) of the result: the CPU's loop over segment i's rows.
template <typename T>
__global__ void segmentReduceKernel(const T *x, const int64_t *s, const int64_t *e,
                                    T *y, int64_t m, int64_t rows, int64_t width,
                                    Segment mode) {
  PX_FOR_LINES(at, m * width) {
    const int64_t i = at / width, c = at % width;
    const int64_t r0 = clampBound(s[i], rows), r1 = clampBound(e[i], rows);
    if (r1 <= r0) { // an empty bag is zeros
      y[at] = T(0);
      continue;
    }
    if (mode == Segment::Max) {
      T best = x[r0 * width + c];
      for (int64_t r = r0 + 1; r < r1; ++r) {
        const T v = x[r * width + c];
        if (v > best || v != v)
          best = v;
      }
      y[at] = best;
      continue;
    }
    double acc = 0.0;
    for (int64_t r = r0; r < r1; ++r)
      acc += (double)x[r * width + c];
    const double scale = mode == Segment::Mean ? 1.0 / (double)(r1 - r0) : 1.0;
    y[at] = (T)(acc * scale);
  }
}

/// Segment i's gradient for column c, added to the rows it came from.
template <typename T>
__global__ void segmentGradKernel(const T *g, const T *x, const int64_t *s,
                                  const int64_t *e, T *out, int64_t m,
                                  int64_t rows, int64_t width, Segment mode) {
  PX_FOR_LINES(at, m * width) {
    const int64_t i = at / width, c = at % width;
    const int64_t r0 = clampBound(s[i], rows), r1 = clampBound(e[i], rows);
    if (r1 <= r0)
      continue;
    if (mode == Segment::Max) {
      // The first maximum takes the gradient.
      atomicAdd(out + segmentArgMax(x, width, c, r0, r1) * width + c, g[at]);
      continue;
    }
    const T scale = mode == Segment::Mean ? T(1) / (T)(r1 - r0) : T(1);
    const T v = mulRn(g[at], scale);
    for (int64_t r = r0; r < r1; ++r)
      atomicAdd(out + r * width + c, v);
  }
}

template <typename T>
KernelFn bindSegmentReduce(CudaDevice &dev, const TensorView &data,
                           const TensorView &out, const int64_t *s,
                           const int64_t *e, int64_t m, int64_t rows,
                           int64_t width, Segment mode) {
  const T *x = data.as<const T>();
  T *y = out.as<T>();
  CudaDevice *d = &dev;
  return [=] {
    if (m * width == 0)
      return;
    segmentReduceKernel<T><<<blocksFor(m * width), kThreads, 0, d->stream()>>>(
        x, s, e, y, m, rows, width, mode);
    PX_CUDA_LAUNCHED();
  };
}

KernelFn segmentReduceFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &data = args.in(0), &starts = args.in(1), &ends = args.in(2),
                   &out = args.out(0);
  const SegmentLayout l = segmentReduceLayout(args);
  const int64_t *s = starts.as<const int64_t>(), *e = ends.as<const int64_t>();
  return dispatchFloat(args, data.dtype, "segment_reduce", [&](auto tag) -> KernelFn {
    return bindSegmentReduce<decltype(tag)>(dev, data, out, s, e, l.m, l.rows, l.width,
                                            l.mode);
  });
}

template <typename T>
KernelFn bindSegmentGrad(CudaDevice &dev, const TensorView &dy,
                         const TensorView &data, const TensorView &dx,
                         const int64_t *s, const int64_t *e, int64_t m,
                         int64_t rows, int64_t width, Segment mode) {
  const T *g = dy.as<const T>(), *x = data.as<const T>();
  T *out = dx.as<T>();
  CudaDevice *d = &dev;
  return [=] {
    if (rows * width == 0)
      return;
    PX_CUDA_CHECK(cudaMemsetAsync(out, 0, (size_t)(rows * width) * sizeof(T),
                                  d->stream()));
    if (m == 0)
      return;
    segmentGradKernel<T><<<blocksFor(m * width), kThreads, 0, d->stream()>>>(
        g, x, s, e, out, m, rows, width, mode);
    PX_CUDA_LAUNCHED();
  };
}

KernelFn segmentReduceGradFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &dy = args.in(0), &data = args.in(1), &starts = args.in(2),
                   &ends = args.in(3), &dx = args.out(0);
  const SegmentLayout l = segmentReduceGradLayout(args);
  const int64_t *s = starts.as<const int64_t>(), *e = ends.as<const int64_t>();
  return dispatchFloat(args, data.dtype, "segment_reduce_grad", [&](auto tag) -> KernelFn {
    return bindSegmentGrad<decltype(tag)>(dev, dy, data, dx, s, e, l.m, l.rows, l.width,
                                          l.mode);
  });
}

} // namespace

void registerCudaAxisKernels(KernelRegistry &r) {
  r.add("cumsum", cumsumFactory);
  r.add("arg_max", argFactory<true>("arg_max"));
  r.add("arg_min", argFactory<false>("arg_min"));
  r.add("top_k", topKFactory);
  r.add("segment_reduce", segmentReduceFactory);
  r.add("segment_reduce_grad", segmentReduceGradFactory);
}

} // namespace parallax::rt
