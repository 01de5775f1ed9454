//===- Linalg.cu - CUDA kernels of the Linalg family ----------------------===//
//
// px.matmul and px.gemm on the GPU, with the CPU kernels' checks and
// messages (lib/Runtime/Kernels/Linalg.cpp). Floats go through cuBLAS:
// row-major Y = A B is column-major Y^T = B^T A^T, so every call passes B
// first. Batches are one call: a batch of A over a shared B folds into M,
// batch strides that are uniform (every matrix, or one broadcast to all)
// take the strided-batched call, and anything else (a partly broadcast
// batch, [2, 1, m, k] x [3, k, n]) a pointer-array batched call whose
// arrays are made when the kernel is bound. Integers take a plain kernel
// with two's complement wrap-around, as the CPU's loop.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelUtil.cuh"

#include "../../Kernels/KernelUtil.h"

#include <algorithm>
#include <climits>
#include <type_traits>
#include <vector>

namespace parallax::rt {
namespace {

using namespace detail;
using cuda::Scratch;

template <typename T> constexpr cudaDataType_t cudaTypeOf() {
  return std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_64F;
}

template <typename T> cublasComputeType_t computeTypeOf(const CudaDevice &dev) {
  if constexpr (std::is_same_v<T, float>)
    return dev.tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  else
    return CUBLAS_COMPUTE_64F;
}

/// cuBLAS takes int dimensions.
void expectInt(const KernelArgs &args, int64_t v, const char *what) {
  if (v > INT_MAX)
    args.fail(std::string(what) + " " + std::to_string(v) +
              " is too large for cuBLAS (at most " + std::to_string(INT_MAX) + ")");
}

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

/// A matmul's shapes after the CPU kernel's checks: vectors promoted,
/// batch dimensions broadcast, and each batch element's matrix offsets.
struct MatmulGeometry {
  int64_t m = 0, n = 0, k = 0, batches = 1;
  /// Whether one GEMM of batches * m rows does it (B shared by the batch).
  bool fold = true;
  /// Uniform batch strides of A and B (0: broadcast), when there are
  /// (always when fold).
  bool strided = false;
  int64_t strideA = 0, strideB = 0;
  /// Offsets of A's and B's matrix for each batch element.
  std::vector<int64_t> offA, offB;
};

MatmulGeometry matmulGeometry(const KernelArgs &args) {
  const TensorView &lhs = args.in(0), &rhs = args.in(1), &out = args.out(0);
  std::vector<int64_t> as = lhs.shape, bs = rhs.shape;
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec)
    as.insert(as.begin(), 1);
  if (bVec)
    bs.push_back(1);
  MatmulGeometry g;
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  if (bs[bs.size() - 2] != k)
    args.fail("contraction dimensions differ: " + shapeStr(lhs.shape) + " x " +
              shapeStr(rhs.shape));
  size_t ra = as.size() - 2, rb = bs.size() - 2, rank = std::max(ra, rb);
  std::vector<int64_t> batch(rank), aBatch(rank, 1), bBatch(rank, 1);
  for (size_t d = 0; d < ra; ++d)
    aBatch[rank - ra + d] = as[d];
  for (size_t d = 0; d < rb; ++d)
    bBatch[rank - rb + d] = bs[d];
  for (size_t d = 0; d < rank; ++d) {
    if (aBatch[d] != bBatch[d] && aBatch[d] != 1 && bBatch[d] != 1)
      args.fail("batch dimensions of " + shapeStr(lhs.shape) + " and " +
                shapeStr(rhs.shape) + " do not broadcast");
    batch[d] = aBatch[d] == 1 ? bBatch[d] : aBatch[d];
  }
  std::vector<int64_t> expected = batch;
  if (!aVec)
    expected.push_back(m);
  if (!bVec)
    expected.push_back(n);
  if (out.shape != expected)
    args.fail("output shape " + shapeStr(out.shape) + " does not match " +
              shapeStr(expected) + " of " + shapeStr(lhs.shape) + " x " +
              shapeStr(rhs.shape));

  g.m = m, g.n = n, g.k = k;
  g.batches = product(batch, 0, rank);
  int64_t aCount = product(aBatch, 0, rank), bCount = product(bBatch, 0, rank);
  g.fold = g.batches <= 1 || (bCount == 1 && aCount == g.batches);
  // A batch that is either complete or a single broadcast matrix has a
  // constant stride per batch element.
  bool aUniform = aCount == g.batches || aCount == 1;
  bool bUniform = bCount == g.batches || bCount == 1;
  g.strided = aUniform && bUniform;
  g.strideA = aCount == 1 ? 0 : m * k;
  g.strideB = bCount == 1 ? 0 : k * n;

  std::vector<int64_t> aStr(rank), bStr(rank);
  int64_t sa = m * k, sb = k * n;
  for (size_t d = rank; d-- > 0;) {
    aStr[d] = aBatch[d] == 1 ? 0 : sa;
    bStr[d] = bBatch[d] == 1 ? 0 : sb;
    sa *= aBatch[d];
    sb *= bBatch[d];
  }
  g.offA.resize(g.batches);
  g.offB.resize(g.batches);
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < g.batches; ++i) {
    int64_t oa = 0, ob = 0;
    for (size_t d = 0; d < rank; ++d) {
      oa += idx[d] * aStr[d];
      ob += idx[d] * bStr[d];
    }
    g.offA[i] = oa;
    g.offB[i] = ob;
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < batch[d])
        break;
      idx[d] = 0;
    }
  }
  return g;
}

template <typename T>
KernelFn matmulFloat(KernelArgs &args, CudaDevice &dev, const MatmulGeometry &g) {
  const T *a = args.in(0).as<const T>(), *b = args.in(1).as<const T>();
  T *y = args.out(0).as<T>();
  const int64_t m = g.m, n = g.n, k = g.k, batches = g.batches;
  cudaStream_t stream = dev.stream();
  if (m == 0 || n == 0 || batches == 0)
    return [] {};
  if (k == 0) {
    const int64_t bytes = batches * m * n * (int64_t)sizeof(T);
    return [=] { PX_CUDA_CHECK(cudaMemsetAsync(y, 0, bytes, stream)); };
  }
  expectInt(args, m, "matmul: dimension");
  expectInt(args, n, "matmul: dimension");
  expectInt(args, k, "matmul: dimension");
  cublasHandle_t h = dev.cublas();
  const cudaDataType_t type = cudaTypeOf<T>();
  const cublasComputeType_t compute = computeTypeOf<T>(dev);
  const int in = (int)n, ik = (int)k;

  if (g.fold && batches * m <= INT_MAX) {
    const int rows = (int)(batches * m);
    return [=] {
      const T one = 1, zero = 0;
      PX_CUBLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, in, rows, ik, &one, b,
                                   type, in, a, type, ik, &zero, y, type, in, compute,
                                   CUBLAS_GEMM_DEFAULT));
    };
  }
  expectInt(args, batches, "matmul: batch count");
  const int count = (int)batches, im = (int)m;
  if (g.strided) {
    const long long sA = g.strideA, sB = g.strideB;
    return [=] {
      const T one = 1, zero = 0;
      PX_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
          h, CUBLAS_OP_N, CUBLAS_OP_N, in, im, ik, &one, b, type, in, sB, a, type, ik,
          sA, &zero, y, type, in, (long long)m * n, count, compute, CUBLAS_GEMM_DEFAULT));
    };
  }
  // Partly broadcast batches: arrays of matrix pointers, made once.
  std::vector<const void *> pa(batches), pb(batches);
  std::vector<void *> py(batches);
  for (int64_t i = 0; i < batches; ++i) {
    pa[i] = a + g.offA[i];
    pb[i] = b + g.offB[i];
    py[i] = y + i * m * n;
  }
  Scratch da = cuda::deviceArray(dev, pa), db = cuda::deviceArray(dev, pb),
          dy = cuda::deviceArray(dev, py);
  return [=] {
    const T one = 1, zero = 0;
    PX_CUBLAS_CHECK(cublasGemmBatchedEx(
        h, CUBLAS_OP_N, CUBLAS_OP_N, in, im, ik, &one,
        static_cast<const void *const *>(db->data()), type, in,
        static_cast<const void *const *>(da->data()), type, ik, &zero,
        static_cast<void *const *>(dy->data()), type, in, count, compute,
        CUBLAS_GEMM_DEFAULT));
  };
}

/// Integer products: one thread per output element; the sum wraps in
/// uint64, which truncates to the same value as the CPU's per-step wrap.
template <typename T>
KernelFn matmulInteger(KernelArgs &args, CudaDevice &dev, const MatmulGeometry &g) {
  const T *a = args.in(0).as<const T>(), *b = args.in(1).as<const T>();
  T *y = args.out(0).as<T>();
  const int64_t m = g.m, n = g.n, k = g.k, total = g.batches * m * n;
  if (total == 0)
    return [] {};
  Scratch offA = cuda::deviceArray(dev, g.offA), offB = cuda::deviceArray(dev, g.offB);
  const int64_t *oa = static_cast<const int64_t *>(offA->data());
  const int64_t *ob = static_cast<const int64_t *>(offB->data());
  // Device lambdas cannot be defined inside the closure (a lambda).
  auto product = [=] __device__(int64_t i) {
    const int64_t j = i % n, row = (i / n) % m, bi = i / (n * m);
    const T *ar = a + oa[bi] + row * k;
    const T *bc = b + ob[bi] + j;
    uint64_t acc = 0;
    for (int64_t p = 0; p < k; ++p)
      acc += (uint64_t)(int64_t)ar[p] * (uint64_t)(int64_t)bc[p * n];
    y[i] = (T)(std::make_unsigned_t<T>)acc;
  };
  cudaStream_t stream = dev.stream();
  return [=] {
    (void)offA, (void)offB; // held for the kernel's lifetime
    cuda::forEach(stream, total, product);
  };
}

KernelFn matmulFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &lhs = args.in(0), &rhs = args.in(1), &out = args.out(0);
  if (lhs.dtype != rhs.dtype || out.dtype != lhs.dtype)
    args.fail(std::string("matmul operands and result must share one element "
                          "type, got ") +
              nameOf(lhs.dtype) + ", " + nameOf(rhs.dtype) + " -> " +
              nameOf(out.dtype));
  if (lhs.rank() < 1 || rhs.rank() < 1)
    args.fail("matmul operands must have rank >= 1");
  switch (lhs.dtype) {
  case DType::F32:
  case DType::F64:
  case DType::I64:
  case DType::I32:
  case DType::I16:
  case DType::I8: break;
  default:
    args.fail(std::string("matmul: element type ") + nameOf(lhs.dtype) +
              " is not supported by the CPU runtime");
  }
  MatmulGeometry g = matmulGeometry(args);
  switch (lhs.dtype) {
  case DType::F32: return matmulFloat<float>(args, dev, g);
  case DType::F64: return matmulFloat<double>(args, dev, g);
  case DType::I64: return matmulInteger<int64_t>(args, dev, g);
  case DType::I32: return matmulInteger<int32_t>(args, dev, g);
  case DType::I16: return matmulInteger<int16_t>(args, dev, g);
  default: return matmulInteger<int8_t>(args, dev, g);
  }
}

//===----------------------------------------------------------------------===//
// gemm
//===----------------------------------------------------------------------===//

template <typename T> KernelFn gemmTyped(KernelArgs &args, CudaDevice &dev) {
  const TensorView &A = args.in(0), &B = args.in(1), &out = args.out(0);
  bool ta = args.flag("trans_a"), tb = args.flag("trans_b");
  T alpha = (T)args.f64Or("alpha", 1.0), beta = (T)args.f64Or("beta", 1.0);
  if (A.rank() != 2 || B.rank() != 2)
    args.fail("gemm operands A and B must be matrices, got " +
              shapeStr(A.shape) + " and " + shapeStr(B.shape));
  int64_t m = A.dim(ta ? 1 : 0), k = A.dim(ta ? 0 : 1);
  int64_t kb = B.dim(tb ? 1 : 0), n = B.dim(tb ? 0 : 1);
  if (k != kb)
    args.fail("gemm contraction dimensions differ: " + std::to_string(k) +
              " vs " + std::to_string(kb));
  if (out.shape != std::vector<int64_t>{m, n})
    args.fail("gemm output shape " + shapeStr(out.shape) + " must be " +
              shapeStr({m, n}));
  bool hasC = args.hasIn(2);
  int64_t cRowStride = 0, cColStride = 0;
  const T *c = nullptr;
  if (hasC) {
    const TensorView &C = args.in(2);
    if (C.dtype != A.dtype)
      args.fail("gemm C must have A's element type");
    if (C.rank() > 2)
      args.fail("gemm C of shape " + shapeStr(C.shape) +
                " does not broadcast to " + shapeStr({m, n}));
    int64_t cr = C.rank() == 2 ? C.dim(0) : 1;
    int64_t cc = C.rank() >= 1 ? C.shape.back() : 1;
    if ((cr != 1 && cr != m) || (cc != 1 && cc != n))
      args.fail("gemm C of shape " + shapeStr(C.shape) +
                " does not broadcast to " + shapeStr({m, n}));
    cRowStride = cr == 1 ? 0 : cc;
    cColStride = cc == 1 ? 0 : 1;
    c = C.as<const T>();
  }
  const T *a = A.as<const T>(), *b = B.as<const T>();
  T *y = out.as<T>();
  const bool useC = hasC && beta != T(0);
  if (m == 0 || n == 0)
    return [] {};
  expectInt(args, m, "gemm: dimension");
  expectInt(args, n, "gemm: dimension");
  expectInt(args, k, "gemm: dimension");
  const int lda = (int)std::max<int64_t>(1, A.dim(1));
  const int ldb = (int)std::max<int64_t>(1, B.dim(1));
  const int im = (int)m, in = (int)n, ik = (int)k;
  cudaStream_t stream = dev.stream();
  cublasHandle_t h = dev.cublas();
  const cudaDataType_t type = cudaTypeOf<T>();
  const cublasComputeType_t compute = computeTypeOf<T>(dev);
  // Column-major: Y^T = op(B)^T op(A)^T; a row-major operand is its own
  // transpose there, so trans_b applies to the first operand.
  const cublasOperation_t opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  auto scaleC = [=] __device__(int64_t i) {
    const int64_t r = i / n, j = i % n;
    y[i] = beta * c[r * cRowStride + j * cColStride];
  };
  return [=] {
    if (useC) // Y = beta * C, broadcast, then the product adds to it
      cuda::forEach(stream, m * n, scaleC);
    if (k == 0) { // no product: beta * C as it stands, or zeros
      if (!useC)
        PX_CUDA_CHECK(cudaMemsetAsync(y, 0, m * n * (int64_t)sizeof(T), stream));
      return;
    }
    const T one = 1, zero = 0;
    PX_CUBLAS_CHECK(cublasGemmEx(h, opB, opA, in, im, ik, &alpha, b, type, ldb, a, type,
                                 lda, useC ? &one : &zero, y, type, in, compute,
                                 CUBLAS_GEMM_DEFAULT));
  };
}

KernelFn gemmFactory(KernelArgs &args) {
  CudaDevice &dev = cudaDeviceOf(args);
  const TensorView &A = args.in(0), &B = args.in(1), &out = args.out(0);
  if (B.dtype != A.dtype || out.dtype != A.dtype)
    args.fail("gemm operands and result must share one element type");
  switch (A.dtype) {
  case DType::F32: return gemmTyped<float>(args, dev);
  case DType::F64: return gemmTyped<double>(args, dev);
  default:
    args.fail(std::string("gemm: element type ") + nameOf(A.dtype) +
              " is not supported by the CPU runtime");
  }
}

} // namespace

void registerCudaLinalgKernels(KernelRegistry &r) {
  r.add("matmul", matmulFactory);
  r.add("gemm", gemmFactory);
}

} // namespace parallax::rt
