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

#include "parallax/Runtime/Comm.h"

#include <cub/cub.cuh>

#include <algorithm>
#include <cmath>
#include <string>

namespace parallax::rt {
namespace {

using namespace cuda;

std::string shapeStr(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

enum class Kind { Sgd, Momentum, Adam, Adagrad };

const char *kindName(Kind k) {
  switch (k) {
  case Kind::Sgd: return "sgd";
  case Kind::Momentum: return "momentum";
  case Kind::Adam: return "adam";
  case Kind::Adagrad: return "adagrad";
  }
  return "?";
}

int stateCount(Kind k) {
  switch (k) {
  case Kind::Sgd: return 0;
  case Kind::Momentum: return 1;
  case Kind::Adam: return 2;
  case Kind::Adagrad: return 1;
  }
  return 0;
}

struct Hyper {
  double lr = 0, wd = 0, momentum = 0, beta1 = 0, beta2 = 0, eps = 0;
  bool nesterov = false;
};

/// Per-step scalars in the element type (in double, rounded once to T).
template <typename T> struct Scalars {
  T negLr, wd, mu, b1, omb1, b2, omb2, eps, bc2sqrt, negStep;
  bool hasWd, nesterov;
};

template <Kind K, typename T>
__device__ Scalars<T> scalarsFor(const Hyper &h, int64_t step, bool sparse) {
  Scalars<T> s{};
  s.negLr = T(-h.lr);
  s.wd = T(h.wd);
  s.hasWd = h.wd != 0.0;
  s.mu = T(h.momentum);
  s.nesterov = h.nesterov;
  s.eps = T(h.eps);
  if (K == Kind::Adam) {
    s.b1 = T(h.beta1);
    s.omb1 = T(1.0 - h.beta1);
    s.b2 = T(h.beta2);
    s.omb2 = T(1.0 - h.beta2);
    double bc1 = 1.0 - pow(h.beta1, (double)step);
    double bc2 = 1.0 - pow(h.beta2, (double)step);
    s.bc2sqrt = T(sqrt(bc2));
    double stepSize = sparse ? h.lr * sqrt(bc2) / bc1 : h.lr / bc1;
    s.negStep = T(-stepSize);
  }
  return s;
}

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
    c = scalarsFor<K, T>(h, info->step, /*sparse=*/false);
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
    c = scalarsFor<K, T>(h, info->step, /*sparse=*/true);
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

double finiteAttr(const KernelArgs &args, const char *name, double v) {
  if (!std::isfinite(v))
    args.fail(std::string(name) + " must be finite, got " + std::to_string(v));
  return v;
}

double rateAttr(const KernelArgs &args, const char *name) {
  double v = finiteAttr(args, name, args.f64(name));
  if (!(v >= 0.0 && v < 1.0))
    args.fail(std::string(name) + " must be in [0, 1), got " +
              std::to_string(v));
  return v;
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
  if (!sparse && args.has("shard_offset")) {
    // Weight-update sharding, as the CPU kernel (Optimizer.cpp) explains:
    // this rank updates its block [r*S, (r+1)*S) of the bucket.
    int64_t offset = args.i64("shard_offset"), shard = args.i64("shard_bytes");
    int64_t bytes = var.bytes(), r = collectiveGroup(args).rank();
    if (offset < 0 || shard <= 0 || offset % (int64_t)sizeof(T) != 0 ||
        shard % (int64_t)sizeof(T) != 0)
      args.fail("shard_offset and shard_bytes must be whole elements, got " +
                std::to_string(offset) + " and " + std::to_string(shard));
    int64_t lo = std::clamp(r * shard - offset, int64_t(0), bytes) / (int64_t)sizeof(T);
    int64_t hi = std::clamp((r + 1) * shard - offset, int64_t(0), bytes) / (int64_t)sizeof(T);
    if (hi <= lo)
      return [] {};
    int64_t inBlock = offset / (int64_t)sizeof(T) + lo - r * shard / (int64_t)sizeof(T);
    int64_t at = args.flag("shard_state") ? inBlock : lo;
    const T *bucket = args.in(gi).as<T>() - offset / (int64_t)sizeof(T);
    return makeDense<K, T>(dev, h, w + lo, s0 ? s0 + at : nullptr,
                           s1 ? s1 + at : nullptr, bucket + inBlock, hi - lo);
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

/// Optimizer.cpp's optimizerFactory: the same checks and messages.
template <Kind K> KernelFn optimizerFactory(KernelArgs &args) {
  cudaDeviceOf(args);
  const char *op = kindName(K);
  int ns = stateCount(K);
  size_t dense = 2 + ns, sparseCount = 3 + ns;
  size_t nin = args.ins.size();
  if (nin != dense && nin != sparseCount)
    args.fail(std::string(op) + " expects " + std::to_string(dense) +
              " inputs (dense gradient) or " + std::to_string(sparseCount) +
              " (sparse gradient: indices, rows), got " + std::to_string(nin));
  bool sparse = nin == sparseCount;
  for (size_t i = 0; i < nin; ++i)
    args.in(i); // every input must be present
  if (!args.outs.empty())
    args.fail(std::string(op) + " has no outputs, got " +
              std::to_string(args.outs.size()));
  const TensorView &var = args.in(0);
  if (var.dtype == DType::F16 || var.dtype == DType::BF16)
    args.fail(std::string("variable: ") + nameOf(var.dtype) +
              " is not supported by the CPU runtime");
  if (var.dtype != DType::F32 && var.dtype != DType::F64)
    args.fail(std::string("variable must be f32 or f64, got ") +
              nameOf(var.dtype));
  static const char *stateNames[][2] = {
      {"", ""}, {"velocity", ""}, {"m", "v"}, {"sum", ""}};
  int kindIdx = (int)K;
  std::vector<int64_t> stateShape = var.shape;
  if (args.flag("shard_state") && (sparse || !args.has("shard_offset")))
    args.fail("shard_state needs a dense gradient and shard_offset");
  if (args.flag("shard_state"))
    stateShape = {args.i64("shard_bytes") / (int64_t)sizeOf(var.dtype)};
  for (int s = 0; s < ns; ++s) {
    const TensorView &st = args.in(1 + s);
    const char *name = stateNames[kindIdx][s];
    args.expectDType(st, var.dtype, name);
    if (st.shape != stateShape)
      args.fail(std::string(name) +
                (args.flag("shard_state") ? " must have one block's shape "
                                          : " must have the variable's shape ") +
                shapeStr(stateShape) + ", got " + shapeStr(st.shape));
  }
  size_t gi = 1 + ns;
  if (!sparse) {
    const TensorView &g = args.in(gi);
    args.expectDType(g, var.dtype, "grad");
    if (g.shape != var.shape)
      args.fail("grad must have the variable's shape " + shapeStr(var.shape) +
                ", got " + shapeStr(g.shape));
  } else {
    const TensorView &idx = args.in(gi), &rows = args.in(gi + 1);
    args.expectDType(idx, DType::I64, "sparse gradient indices");
    if (idx.rank() != 1)
      args.fail("sparse gradient indices must have rank 1, got " +
                shapeStr(idx.shape));
    if (var.rank() < 1)
      args.fail("a sparse gradient needs a variable of rank >= 1");
    args.expectDType(rows, var.dtype, "sparse gradient rows");
    std::vector<int64_t> expected{idx.dim(0)};
    expected.insert(expected.end(), var.shape.begin() + 1, var.shape.end());
    if (rows.shape != expected)
      args.fail("sparse gradient rows must have shape " + shapeStr(expected) +
                ", got " + shapeStr(rows.shape));
  }
  Hyper h;
  h.lr = finiteAttr(args, "lr", args.f64("lr"));
  if (h.lr < 0)
    args.fail("lr must be >= 0, got " + std::to_string(h.lr));
  h.wd = finiteAttr(args, "weight_decay", args.f64Or("weight_decay", 0.0));
  if (K == Kind::Momentum) {
    h.momentum = rateAttr(args, "momentum");
    h.nesterov = args.flag("nesterov");
  }
  if (K == Kind::Adam) {
    h.beta1 = rateAttr(args, "beta1");
    h.beta2 = rateAttr(args, "beta2");
  }
  if (K == Kind::Adam || K == Kind::Adagrad) {
    h.eps = finiteAttr(args, "epsilon", args.f64("epsilon"));
    if (!(h.eps > 0))
      args.fail("epsilon must be > 0, got " + std::to_string(h.eps));
  }
  return var.dtype == DType::F32 ? bindTyped<K, float>(args, h, sparse)
                                 : bindTyped<K, double>(args, h, sparse);
}

KernelFn assignFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  if (args.ins.size() != 2)
    args.fail("assign expects 2 inputs (variable, value), got " +
              std::to_string(args.ins.size()));
  const TensorView &var = args.in(0), &value = args.in(1);
  if (!args.outs.empty())
    args.fail("assign has no outputs, got " + std::to_string(args.outs.size()));
  args.expectDType(value, var.dtype, "value");
  if (value.shape != var.shape)
    args.fail("value must have the variable's shape " + shapeStr(var.shape) +
              ", got " + shapeStr(value.shape));
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
