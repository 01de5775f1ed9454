//===- Linalg.cu - CUDA kernels of the Linalg family ----------------------===//
//
// px.matmul and px.gemm on the GPU, with the CPU kernels' checks and
// messages (lib/Runtime/Kernels/LinalgLayout.h). Floats go through cuBLAS:
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
#include "../../Kernels/LinalgLayout.h"

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
  checkMatmulOperands(args);
  const DType dtype = args.in(0).dtype;
  MatmulGeometry g = matmulGeometry(args);
  switch (dtype) {
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
  const GemmLayout l = gemmLayout(args);
  const bool ta = l.transA, tb = l.transB;
  const T alpha = (T)l.alpha, beta = (T)l.beta;
  const int64_t m = l.m, n = l.n, k = l.k;
  const int64_t cRowStride = l.cRowStride, cColStride = l.cColStride;
  const T *c = l.hasC ? args.in(2).as<const T>() : nullptr;
  const TensorView &A = args.in(0), &B = args.in(1), &out = args.out(0);
  const T *a = A.as<const T>(), *b = B.as<const T>();
  T *y = out.as<T>();
  const bool useC = l.hasC && beta != T(0);
  if (m == 0 || n == 0)
    return [] {};
  expectInt(args, m, "gemm: dimension");
  expectInt(args, n, "gemm: dimension");
  expectInt(args, k, "gemm: dimension");
  const int lda = (int)l.lda, ldb = (int)l.ldb;
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
  checkGemmOperands(args);
  if (args.in(0).dtype == DType::F32)
    return gemmTyped<float>(args, dev);
  return gemmTyped<double>(args, dev);
}

} // namespace

void registerCudaLinalgKernels(KernelRegistry &r) {
  r.add("matmul", matmulFactory);
  r.add("gemm", gemmFactory);
}

} // namespace parallax::rt
