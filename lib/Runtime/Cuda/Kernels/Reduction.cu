//===- Reduction.cu - CUDA kernels of the Reduction family ----------------===//
//
// reduce_{sum,mean,max,min,prod} and densify on the GPU, with the CPU
// kernels' checks, messages and accumulation (lib/Runtime/Kernels/
// ReductionLayout.h, Reducer.h).
//
// Reductions simplify their dimensions as the CPU does (size-1 dimensions
// dropped, adjacent reduced or kept dimensions merged) and accumulate as it
// does: floats in double, rounded once; integers in uint64 (sums, products:
// two's complement wrap-around) or int64 (max, min). The layout picks the
// kernel:
// - innermost dimension reduced, long rows: a block per output (and per
//   part of the row when there are few outputs), shared-memory reduction;
// - innermost dimension reduced, shorter rows: a warp per output;
// - anything else (innermost dimension kept: bias gradients, columns) and
//   very short rows: a thread per output, neighbouring threads reading
//   neighbouring elements, the reduced range split into parts when there
//   are too few outputs to fill the GPU.
// Split reductions combine their partial accumulators in a second kernel.
//
// densify sums rows in the CPU's order (index position order) without
// atomics: the row ids are sorted stably (CUB radix sort), and each output
// element adds its row's values in that order, so the result is exactly
// the CPU's.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelUtil.cuh"

#include "../../Kernels/KernelUtil.h"
#include "../../Kernels/Reducer.h"
#include "../../Kernels/ReductionLayout.h"

#include <cub/cub.cuh>

#include <algorithm>
#include <climits>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

namespace parallax::rt {
namespace {

using namespace detail;
using cuda::Dims;
using cuda::kThreads;
using cuda::Scratch;

/// A reduction as the kernels see it: the kept dimensions in output order
/// and the reduced ones, each with its input stride; the reduced range of
/// `count` elements is split into `parts` chunks of `chunk`.
struct ReduceGeom {
  Dims kept, red;
  int64_t outN = 0, count = 0, parts = 1, chunk = 0;
};

/// The input offset of element i of the row-major index space `d`.
__device__ inline int64_t offsetOf(const Dims &d, int64_t i) {
  if (d.rank == 1)
    return i * d.stride[0];
  int64_t off = 0;
  for (int j = d.rank - 1; j >= 0; --j) {
    off += (i % d.size[j]) * d.stride[j];
    i /= d.size[j];
  }
  return off;
}

template <typename Red>
__device__ inline typename Red::A warpReduce(typename Red::A v) {
  for (int off = 16; off > 0; off /= 2)
    v = Red::combine(v, __shfl_down_sync(0xffffffffu, v, off));
  return v;
}

/// Stores one output's accumulator: finished, or as a partial result.
template <typename T, typename Red>
__device__ inline void store(T *y, typename Red::A *partial, const ReduceGeom &g,
                             int64_t o, int64_t p, typename Red::A acc) {
  if (g.parts > 1)
    partial[p * g.outN + o] = acc;
  else
    y[o] = Red::finish(acc, g.count);
}

/// A thread per (output, part).
template <typename T, typename Red>
__global__ void reduceThreads(const T *__restrict__ x, T *__restrict__ y,
                              typename Red::A *partial, ReduceGeom g) {
  const int64_t total = g.outN * g.parts;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t o = t % g.outN, p = t / g.outN;
    const int64_t base = offsetOf(g.kept, o);
    const int64_t r0 = p * g.chunk, r1 = min(g.count, r0 + g.chunk);
    typename Red::A acc = Red::init();
    for (int64_t r = r0; r < r1; ++r)
      acc = Red::combine(acc, Red::load(x[base + offsetOf(g.red, r)]));
    store<T, Red>(y, partial, g, o, p, acc);
  }
}

/// A warp per output (never split).
template <typename T, typename Red>
__global__ void reduceWarps(const T *__restrict__ x, T *__restrict__ y, ReduceGeom g) {
  const int64_t warps = blockDim.x / 32, lane = threadIdx.x % 32;
  for (int64_t o = blockIdx.x * warps + threadIdx.x / 32; o < g.outN;
       o += (int64_t)gridDim.x * warps) {
    const int64_t base = offsetOf(g.kept, o);
    typename Red::A acc = Red::init();
    for (int64_t r = lane; r < g.count; r += 32)
      acc = Red::combine(acc, Red::load(x[base + offsetOf(g.red, r)]));
    acc = warpReduce<Red>(acc);
    if (lane == 0)
      y[o] = Red::finish(acc, g.count);
  }
}

/// A block per (output, part): blockIdx.y is the part.
template <typename T, typename Red>
__global__ void reduceBlocks(const T *__restrict__ x, T *__restrict__ y,
                             typename Red::A *partial, ReduceGeom g) {
  using A = typename Red::A;
  __shared__ A shared[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int warps = (blockDim.x + 31) / 32;
  const int64_t p = blockIdx.y;
  const int64_t r0 = p * g.chunk, r1 = min(g.count, r0 + g.chunk);
  for (int64_t o = blockIdx.x; o < g.outN; o += gridDim.x) {
    const int64_t base = offsetOf(g.kept, o);
    A acc = Red::init();
    for (int64_t r = r0 + threadIdx.x; r < r1; r += blockDim.x)
      acc = Red::combine(acc, Red::load(x[base + offsetOf(g.red, r)]));
    acc = warpReduce<Red>(acc);
    if (lane == 0)
      shared[warp] = acc;
    __syncthreads();
    if (warp == 0) {
      acc = lane < warps ? shared[lane] : Red::init();
      acc = warpReduce<Red>(acc);
      if (lane == 0)
        store<T, Red>(y, partial, g, o, p, acc);
    }
    __syncthreads(); // shared is rewritten for the next output
  }
}

/// Combines the parts of split reductions, in part order.
template <typename T, typename Red>
__global__ void reduceParts(const typename Red::A *__restrict__ partial,
                            T *__restrict__ y, ReduceGeom g) {
  for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < g.outN;
       o += (int64_t)gridDim.x * blockDim.x) {
    typename Red::A acc = partial[o];
    for (int64_t p = 1; p < g.parts; ++p)
      acc = Red::combine(acc, partial[p * g.outN + o]);
    y[o] = Red::finish(acc, g.count);
  }
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Rows at least this long take a block per output, shorter ones from
/// kWarpRow a warp.
constexpr int64_t kBlockRow = 4096, kWarpRow = 32;

template <typename T, ReduceKind K>
KernelFn makeReduction(CudaDevice &dev, const TensorView &x, const TensorView &y,
                       const std::vector<int64_t> &dims, const std::vector<bool> &reduced,
                       const std::vector<int64_t> &strides, int64_t count) {
  using Red = Reducer<T, K>;
  using A = typename Red::A;
  ReduceGeom g;
  for (size_t i = 0; i < dims.size(); ++i) {
    Dims &d = reduced[i] ? g.red : g.kept;
    d.size[d.rank] = dims[i];
    d.stride[d.rank++] = strides[i];
  }
  g.outN = y.numElements();
  g.count = count;
  const bool rows = !reduced.empty() && reduced.back();
  enum class Mode { Threads, Warps, Blocks } mode = Mode::Threads;
  if (rows && count >= kBlockRow)
    mode = Mode::Blocks;
  else if (rows && count >= kWarpRow)
    mode = Mode::Warps;

  // Split the reduced range when the outputs alone leave the GPU idle: aim
  // for about 1024 blocks or 128Ki threads, parts of at least 8192 elements
  // per block or 64 per thread.
  g.parts = 1;
  if (mode == Mode::Blocks)
    g.parts = std::min<int64_t>({ceilDiv(1024, g.outN), ceilDiv(count, 8192), 65535});
  else if (mode == Mode::Threads)
    g.parts = std::max<int64_t>(1, std::min(ceilDiv(128 * 1024, g.outN), count / 64));
  g.parts = std::max<int64_t>(1, g.parts);
  g.chunk = ceilDiv(count, g.parts);
  if (g.chunk > 0)
    g.parts = ceilDiv(count, g.chunk); // no empty parts
  Scratch partials;
  A *partial = nullptr;
  if (g.parts > 1) {
    partials = cuda::scratch(dev, g.parts * g.outN * (int64_t)sizeof(A));
    partial = static_cast<A *>(partials->data());
  }

  const T *xp = x.as<const T>();
  T *yp = y.as<T>();
  cudaStream_t stream = dev.stream();
  return [=] {
    (void)partials; // held for the kernel's lifetime
    switch (mode) {
    case Mode::Threads:
      reduceThreads<T, Red>
          <<<cuda::blocksFor(g.outN * g.parts), kThreads, 0, stream>>>(xp, yp, partial, g);
      break;
    case Mode::Warps:
      reduceWarps<T, Red><<<cuda::blocksFor(g.outN * 32), kThreads, 0, stream>>>(xp, yp, g);
      break;
    case Mode::Blocks: {
      dim3 grid((unsigned)std::min<int64_t>(g.outN, 65535 * 8), (unsigned)g.parts);
      reduceBlocks<T, Red><<<grid, kThreads, 0, stream>>>(xp, yp, partial, g);
      break;
    }
    }
    PX_CUDA_LAUNCHED();
    if (g.parts > 1) {
      reduceParts<T, Red><<<cuda::blocksFor(g.outN), kThreads, 0, stream>>>(partial, yp, g);
      PX_CUDA_LAUNCHED();
    }
  };
}

KernelFactory reduceFactory(std::string name, ReduceKind kind) {
  return [name, kind](KernelArgs &args) -> KernelFn {
    CudaDevice &dev = cudaDeviceOf(args);
    const TensorView &x = args.in(0), &y = args.out(0);
    const ReductionLayout layout = reductionLayout(args, name);
    const std::vector<int64_t> &dims = layout.dims, &strides = layout.strides;
    const std::vector<bool> &reduced = layout.reduced;
    const int64_t count = layout.count;
    if (reductionCopies(layout, x.dtype)) {
      // Nothing (or only size-1 dimensions) reduced: a copy.
      const void *src = x.data;
      void *dst = y.data;
      const int64_t bytes = x.bytes();
      cudaStream_t stream = dev.stream();
      return [=] {
        if (bytes > 0)
          PX_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
      };
    }
    return dispatchNumeric(args, x.dtype, name, [&](auto tag) -> KernelFn {
      using T = decltype(tag);
      if (y.numElements() == 0)
        return [] {};
      return dispatchReduceKind(args, kind, name, [&](auto k) -> KernelFn {
        return makeReduction<T, decltype(k)::value>(dev, x, y, dims, reduced, strides,
                                                    count);
      });
    });
  };
}

//===----------------------------------------------------------------------===//
// densify(indices, values) -> dense.
//===----------------------------------------------------------------------===//

/// Sort keys: the row, or `rows` for an unused (-1) or bad index, which
/// sorts after every used row. A bad index is reported.
__global__ void densifyKeys(const int64_t *__restrict__ idx,
                            unsigned long long *__restrict__ keys, int64_t n, int64_t rows,
                            DeviceFault *fault, int64_t kernel) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = idx[i];
    const bool bad = r != -1 && (r < 0 || r >= rows);
    if (bad)
      cuda::reportFault(fault, kernel, kFaultRowOutOfRange, r, rows);
    keys[i] = (unsigned long long)(r == -1 || bad ? rows : r);
  }
}

/// starts[r] = the first sorted position whose row is >= r, r in [0, rows].
__global__ void densifyStarts(const unsigned long long *__restrict__ sorted, int64_t n,
                              int64_t rows, int64_t *__restrict__ starts) {
  for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r <= rows;
       r += (int64_t)gridDim.x * blockDim.x) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (sorted[mid] < (unsigned long long)r)
        lo = mid + 1;
      else
        hi = mid;
    }
    starts[r] = lo;
  }
}

/// Each output element: its row's values added in index order from zero.
template <typename T>
__global__ void densifyRows(const T *__restrict__ vals, const int64_t *__restrict__ order,
                            const int64_t *__restrict__ starts, T *__restrict__ out,
                            int64_t rows, int64_t width) {
  const int64_t total = rows * width;
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = e / width, c = e % width;
    T acc = T(0);
    for (int64_t j = starts[r], end = starts[r + 1]; j < end; ++j)
      acc = (T)(acc + vals[order[j] * width + c]);
    out[e] = acc;
  }
}

template <typename T>
KernelFn makeDensify(const KernelArgs &args, CudaDevice &dev, const TensorView &idx,
                     const TensorView &vals, const TensorView &out) {
  const int64_t n = idx.numElements(), rows = out.shape[0];
  const int64_t width = rows ? out.numElements() / rows : 0;
  if (n > INT_MAX)
    args.fail("densify: " + std::to_string(n) + " indices are more than the GPU's sort takes (" +
              std::to_string(INT_MAX) + ")");
  // Keys only need the bits of `rows`, the largest one.
  int endBit = 1;
  while (endBit < 64 && ((unsigned long long)rows >> endBit) != 0)
    ++endBit;
  using Key = unsigned long long;
  Scratch keys = cuda::scratch(dev, n * (int64_t)sizeof(Key) + 8);
  Scratch sorted = cuda::scratch(dev, n * (int64_t)sizeof(Key) + 8);
  Scratch order = cuda::scratch(dev, n * (int64_t)sizeof(int64_t) + 8);
  Scratch starts = cuda::scratch(dev, (rows + 1) * (int64_t)sizeof(int64_t));
  std::vector<int64_t> positions(n);
  std::iota(positions.begin(), positions.end(), int64_t(0));
  Scratch iota = cuda::deviceArray(dev, positions);
  size_t tempBytes = 0;
  PX_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, tempBytes, static_cast<const Key *>(keys->data()),
      static_cast<Key *>(sorted->data()), static_cast<const int64_t *>(iota->data()),
      static_cast<int64_t *>(order->data()), (int)n, 0, endBit, dev.stream()));
  Scratch temp = cuda::scratch(dev, (int64_t)tempBytes + 8);

  const int64_t *ip = idx.as<const int64_t>();
  const T *vp = vals.as<const T>();
  T *op = out.as<T>();
  cudaStream_t stream = dev.stream();
  DeviceFault *fault = dev.fault();
  const int64_t kernel = args.index;
  return [=] {
    Key *k = static_cast<Key *>(keys->data()), *ks = static_cast<Key *>(sorted->data());
    int64_t *ord = static_cast<int64_t *>(order->data());
    int64_t *st = static_cast<int64_t *>(starts->data());
    if (n > 0) {
      densifyKeys<<<cuda::blocksFor(n), kThreads, 0, stream>>>(ip, k, n, rows, fault, kernel);
      PX_CUDA_LAUNCHED();
      size_t bytes = tempBytes;
      PX_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
          temp->data(), bytes, k, ks, static_cast<const int64_t *>(iota->data()), ord, (int)n,
          0, endBit, stream));
    }
    if (rows * width == 0)
      return;
    densifyStarts<<<cuda::blocksFor(rows + 1), kThreads, 0, stream>>>(ks, n, rows, st);
    PX_CUDA_LAUNCHED();
    densifyRows<T><<<cuda::blocksFor(rows * width), kThreads, 0, stream>>>(vp, ord, st, op,
                                                                            rows, width);
    PX_CUDA_LAUNCHED();
  };
}

KernelFn densifyFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &idx = args.in(0), &vals = args.in(1), &out = args.out(0);
  checkDensify(args);
  return dispatchNumeric(args, vals.dtype, "densify", [&](auto tag) -> KernelFn {
    using T = decltype(tag);
    return makeDensify<T>(args, dev, idx, vals, out);
  });
}

} // namespace

void registerCudaReductionKernels(KernelRegistry &r) {
  for (const auto &[name, kind] : detail::kReduceOps)
    r.add(name, reduceFactory(name, kind));
  r.add("densify", densifyFactory);
}

} // namespace parallax::rt
