//===- Optimizer.cu - CUDA kernels of the Optimizer family -----------------===//
//
// sgd, momentum, adam, adagrad and assign as lib/Runtime/Kernels/Optimizer.cpp
// computes them (its header gives the formulas): the same operations in the
// same order, each rounded as the CPU rounds it. The f32/f64 operations use
// the _rn intrinsics so that nvcc cannot contract a multiply and an add the
// CPU keeps apart; madd is the CPU's "a * b + c rounded once".
//
// The per-step scalars (Adam's bias corrections) are computed on the GPU
// from dev.stepInfo(), once per block, so a replayed CUDA graph sees the
// current step.
//
// A sparse gradient is coalesced as the CPU coalesces it: (row, position)
// pairs are radix-sorted (stable, so positions stay in order within a row)
// and the first entry of each row sums the row's values in position order,
// then updates it. An index out of range reports kFaultRowOutOfRange and,
// as on the CPU (which throws before updating anything), nothing is updated.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelUtil.cuh"

#include "../../Kernels/OptimizerRules.h"


#include <cub/cub.cuh>

#include <algorithm>
#include <cmath>
#include <string>

namespace parallax::rt {
namespace {

using namespace cuda;

using namespace opt;

/// a * b + c rounded once to T, exactly as the CPU's madd.
__device__ inline float madd(float a, float b, float c) {
  return __double2float_rn(__dadd_rn(__dmul_rn(a, b), c));
}
__device__ inline double madd(double a, double b, double c) {
  return __fma_rn(a, b, c);
}

/// Optimizer.cpp's updateElement, operation by operation.
template <Kind K, bool Sparse, typename T>
__device__ inline void updateElement(const Scalars<T> &c, T *wp, T *s0p,
                                     T *s1p, int64_t i, T g) {
  T w = wp[i];
  if (c.hasWd)
    g = madd(w, c.wd, g);
  if constexpr (K == Kind::Sgd) {
    w = madd(g, c.negLr, w);
  } else if constexpr (K == Kind::Momentum) {
    T buf = addRn(mulRn(s0p[i], c.mu), g);
    s0p[i] = buf;
    T d = c.nesterov ? madd(buf, c.mu, g) : buf;
    w = madd(d, c.negLr, w);
  } else if constexpr (K == Kind::Adam) {
    if constexpr (!Sparse) {
      T m = madd(g, c.omb1, mulRn(s0p[i], c.b1));
      T v = madd(mulRn(c.omb2, g), g, mulRn(s1p[i], c.b2));
      s0p[i] = m;
      s1p[i] = v;
      T denom = addRn(divRn(sqrtRn(v), c.bc2sqrt), c.eps);
      w = addRn(w, divRn(mulRn(c.negStep, m), denom));
    } else {
      T oldM = s0p[i], oldV = s1p[i];
      T um = mulRn(subRn(g, oldM), c.omb1);
      T uv = mulRn(subRn(mulRn(g, g), oldV), c.omb2);
      s0p[i] = addRn(oldM, um);
      s1p[i] = addRn(oldV, uv);
      T numer = addRn(um, oldM);
      T denom = addRn(sqrtRn(addRn(uv, oldV)), c.eps);
      w = addRn(w, mulRn(c.negStep, divRn(numer, denom)));
    }
  } else { // Adagrad
    if constexpr (!Sparse) {
      T sum = madd(g, g, s0p[i]);
      s0p[i] = sum;
      T stdv = addRn(sqrtRn(sum), c.eps);
      w = addRn(w, divRn(mulRn(c.negLr, g), stdv));
    } else {
      T sum = addRn(s0p[i], mulRn(g, g));
      s0p[i] = sum;
      T stdv = addRn(sqrtRn(sum), c.eps);
      w = madd(divRn(g, stdv), c.negLr, w);
    }
  }
  wp[i] = w;
}

template <Kind K, typename T>
__global__ void denseUpdate(Hyper h, const StepInfo *info, T *w, T *s0, T *s1,
                            const T *g, int64_t n) {
  __shared__ Scalars<T> c;
  if (threadIdx.x == 0)
    c = scalarsFor<T>(K, h, info->step, /*sparse=*/false);
  __syncthreads();
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    updateElement<K, false, T>(c, w, s0, s1, i, g[i]);
}

/// Sort keys of a sparse gradient's positions: the row, or `rows` (sorted
/// last, skipped) for an unused slot (-1) and a bad index, which also
/// reports a fault and sets `bad` so that nothing is updated.
__global__ void sparseKeys(const int64_t *idx, int64_t n, int64_t rows,
                           uint64_t *keys, int64_t *pos, int *bad,
                           DeviceFault *fault, int64_t kernel) {
  for (int64_t p = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; p < n;
       p += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = idx[p];
    if (r != -1 && (r < 0 || r >= rows)) {
      reportFault(fault, kernel, kFaultRowOutOfRange, r, rows);
      atomicExch(bad, 1);
    }
    keys[p] = (r < 0 || r >= rows) ? (uint64_t)rows : (uint64_t)r;
    pos[p] = p;
  }
}

/// Element j of the row whose first sorted entry is q: the CPU's coalesced
/// update (the row's values summed in position order, then one update).
template <Kind K, typename T>
__global__ void sparseUpdate(Hyper h, const StepInfo *info, T *w, T *s0, T *s1,
                             const T *values, const uint64_t *rowOf,
                             const int64_t *posOf, int64_t n, int64_t rows,
                             int64_t rowSize, const int *bad) {
  __shared__ Scalars<T> c;
  if (threadIdx.x == 0)
    c = scalarsFor<T>(K, h, info->step, /*sparse=*/true);
  __syncthreads();
  if (*bad)
    return;
  const int64_t total = n * rowSize;
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t q = e / rowSize, j = e % rowSize;
    const uint64_t row = rowOf[q];
    if (row >= (uint64_t)rows || (q > 0 && rowOf[q - 1] == row))
      continue;
    int64_t end = q + 1;
    while (end < n && rowOf[end] == row)
      ++end;
    const int64_t off = (int64_t)row * rowSize;
    if (K == Kind::Sgd && !c.hasWd) {
      // One update per entry in position order, as the CPU's sgd.
      T wv = w[off + j];
      for (int64_t p = q; p < end; ++p)
        wv = madd(values[posOf[p] * rowSize + j], c.negLr, wv);
      w[off + j] = wv;
      continue;
    }
    T g = values[posOf[q] * rowSize + j];
    for (int64_t p = q + 1; p < end; ++p)
      g = addRn(g, values[posOf[p] * rowSize + j]);
    updateElement<K, true, T>(c, w + off, s0 ? s0 + off : nullptr,
                              s1 ? s1 + off : nullptr, j, g);
  }
}

template <Kind K, typename T>
KernelFn makeDense(CudaDevice &dev, const Hyper &h, T *w, T *s0, T *s1,
                   const T *g, int64_t n) {
  CudaDevice *d = &dev;
  return [=] {
    if (n <= 0)
      return;
    denseUpdate<K, T><<<blocksFor(n), kThreads, 0, d->stream()>>>(
        h, d->stepInfo(), w, s0, s1, g, n);
    PX_CUDA_LAUNCHED();
  };
}

template <Kind K, typename T>
KernelFn makeSparse(CudaDevice &dev, int64_t kernel, const Hyper &h, T *w,
                    T *s0, T *s1, const int64_t *idx, const T *values,
                    int64_t n, int64_t rows, int64_t rowSize) {
  if (n == 0)
    return [] {};
  int endBit = 1;
  while (endBit < 64 && (uint64_t(1) << endBit) <= (uint64_t)rows)
    ++endBit;
  size_t tempBytes = 0;
  PX_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, tempBytes, (const uint64_t *)nullptr, (uint64_t *)nullptr,
      (const int64_t *)nullptr, (int64_t *)nullptr, n, 0, endBit,
      dev.stream()));
  Scratch keys = scratch(dev, n * 8), sortedKeys = scratch(dev, n * 8),
          pos = scratch(dev, n * 8), sortedPos = scratch(dev, n * 8),
          temp = scratch(dev, (int64_t)tempBytes + 8), bad = scratch(dev, 8);
  CudaDevice *d = &dev;
  return [=] {
    cudaStream_t st = d->stream();
    auto *k = static_cast<uint64_t *>(keys->data());
    auto *sk = static_cast<uint64_t *>(sortedKeys->data());
    auto *p = static_cast<int64_t *>(pos->data());
    auto *sp = static_cast<int64_t *>(sortedPos->data());
    int *flag = static_cast<int *>(bad->data());
    PX_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int), st));
    sparseKeys<<<blocksFor(n), kThreads, 0, st>>>(idx, n, rows, k, p, flag,
                                                  d->fault(), kernel);
    PX_CUDA_LAUNCHED();
    size_t bytes = tempBytes;
    PX_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
        temp->data(), bytes, (const uint64_t *)k, sk, (const int64_t *)p, sp, n,
        0, endBit, st));
    if (rowSize <= 0)
      return;
    sparseUpdate<K, T><<<blocksFor(n * rowSize), kThreads, 0, st>>>(
        h, d->stepInfo(), w, s0, s1, values, sk, sp, n, rows, rowSize, flag);
    PX_CUDA_LAUNCHED();
  };
}

template <Kind K, typename T>
KernelFn bindTyped(KernelArgs &args, const Hyper &h, bool sparse) {
  CudaDevice &dev = cudaDeviceOf(args);
  UpdateOperands<T> o = readUpdate<T>(args, K, sparse);
  if (o.empty)
    return [] {};
  if (!o.sparse)
    return makeDense<K, T>(dev, h, o.w, o.s0, o.s1, o.g, o.n);
  return makeSparse<K, T>(dev, args.index, h, o.w, o.s0, o.s1, o.idx, o.rows,
                          o.nIdx, o.varRows, o.rowSize);
}

template <Kind K> KernelFn optimizerFactory(KernelArgs &args) {
  cudaDeviceOf(args);
  OptimizerCheck c = checkOptimizer(args, K);
  return args.in(0).dtype == DType::F32 ? bindTyped<K, float>(args, c.h, c.sparse)
                                        : bindTyped<K, double>(args, c.h, c.sparse);
}

KernelFn assignFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  checkAssign(args);
  const TensorView &var = args.in(0), &value = args.in(1);
  void *dst = var.data;
  const void *src = value.data;
  int64_t bytes = var.bytes();
  CudaDevice *d = &dev;
  return [=] {
    if (dst == src || bytes <= 0)
      return;
    PX_CUDA_CHECK(cudaMemcpyAsync(dst, src, (size_t)bytes,
                                  cudaMemcpyDeviceToDevice, d->stream()));
  };
}

} // namespace

void registerCudaOptimizerKernels(KernelRegistry &r) {
  PX_ADD_OPTIMIZER_KERNELS(r);
}

} // namespace parallax::rt
