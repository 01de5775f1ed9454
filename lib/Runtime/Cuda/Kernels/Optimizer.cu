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

// Correctly rounded operations that nvcc never fuses.
__device__ inline float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul(double a, double b) { return __dmul_rn(a, b); }
__device__ inline float add(float a, float b) { return __fadd_rn(a, b); }
__device__ inline double add(double a, double b) { return __dadd_rn(a, b); }
__device__ inline float sub(float a, float b) { return __fsub_rn(a, b); }
__device__ inline double sub(double a, double b) { return __dsub_rn(a, b); }
__device__ inline float div(float a, float b) { return __fdiv_rn(a, b); }
__device__ inline double div(double a, double b) { return __ddiv_rn(a, b); }
__device__ inline float sqrtRn(float a) { return __fsqrt_rn(a); }
__device__ inline double sqrtRn(double a) { return __dsqrt_rn(a); }
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
    T buf = add(mul(s0p[i], c.mu), g);
    s0p[i] = buf;
    T d = c.nesterov ? madd(buf, c.mu, g) : buf;
    w = madd(d, c.negLr, w);
  } else if constexpr (K == Kind::Adam) {
    if constexpr (!Sparse) {
      T m = madd(g, c.omb1, mul(s0p[i], c.b1));
      T v = madd(mul(c.omb2, g), g, mul(s1p[i], c.b2));
      s0p[i] = m;
      s1p[i] = v;
      T denom = add(div(sqrtRn(v), c.bc2sqrt), c.eps);
      w = add(w, div(mul(c.negStep, m), denom));
    } else {
      T oldM = s0p[i], oldV = s1p[i];
      T um = mul(sub(g, oldM), c.omb1);
      T uv = mul(sub(mul(g, g), oldV), c.omb2);
      s0p[i] = add(oldM, um);
      s1p[i] = add(oldV, uv);
      T numer = add(um, oldM);
      T denom = add(sqrtRn(add(uv, oldV)), c.eps);
      w = add(w, mul(c.negStep, div(numer, denom)));
    }
  } else { // Adagrad
    if constexpr (!Sparse) {
      T sum = madd(g, g, s0p[i]);
      s0p[i] = sum;
      T stdv = add(sqrtRn(sum), c.eps);
      w = add(w, div(mul(c.negLr, g), stdv));
    } else {
      T sum = add(s0p[i], mul(g, g));
      s0p[i] = sum;
      T stdv = add(sqrtRn(sum), c.eps);
      w = madd(div(g, stdv), c.negLr, w);
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
      g = add(g, values[posOf[p] * rowSize + j]);
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
  const TensorView &var = args.in(0);
  int ns = stateCount(K);
  T *w = var.as<T>();
  T *s0 = ns > 0 ? args.in(1).as<T>() : nullptr;
  T *s1 = ns > 1 ? args.in(2).as<T>() : nullptr;
  size_t gi = 1 + ns;
  if (std::optional<UpdateShard> u = updateShard(args, sparse)) {
    if (u->hi <= u->lo)
      return [] {};
    return makeDense<K, T>(dev, h, w + u->lo, s0 ? s0 + u->state : nullptr,
                           s1 ? s1 + u->state : nullptr, args.in(gi).as<T>() + u->grad,
                           u->hi - u->lo);
  }
  if (!sparse)
    return makeDense<K, T>(dev, h, w, s0, s1, args.in(gi).as<T>(),
                           var.numElements());
  const TensorView &idx = args.in(gi), &rows = args.in(gi + 1);
  int64_t rowSize = 1;
  for (size_t i = 1; i < var.shape.size(); ++i)
    rowSize *= var.shape[i];
  return makeSparse<K, T>(dev, args.index, h, w, s0, s1, idx.as<int64_t>(),
                          rows.as<T>(), idx.numElements(), var.dim(0), rowSize);
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
  r.add("sgd", optimizerFactory<Kind::Sgd>);
  r.add("momentum", optimizerFactory<Kind::Momentum>);
  r.add("adam", optimizerFactory<Kind::Adam>);
  r.add("adagrad", optimizerFactory<Kind::Adagrad>);
  r.add("assign", assignFactory);
}

} // namespace parallax::rt
