//===- Linalg.cpp - matmul and gemm kernels -------------------------------===//
//
// px.matmul (numpy matmul: vector promotion, broadcast batch dimensions) and
// px.gemm (ONNX Gemm). Floats go through OpenBLAS; integers through a plain
// loop with wrap-around arithmetic.
//
//===----------------------------------------------------------------------===//

#include "parallax/Runtime/Kernel.h"

#include "KernelUtil.h"
#include "LinalgLayout.h"

#include "Blas.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>

namespace parallax::rt {
namespace {

using namespace detail;

/// Y[M,N] = A[M,K] * B[K,N], all contiguous row-major, through BLAS.
template <typename T>
void matmulBlas(int threads, const T *a, const T *b, T *y, int64_t m,
                int64_t n, int64_t k) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    std::fill(y, y + m * n, T(0));
    return;
  }
  if (n == 1) // matrix x vector
    blas::gemv(threads, false, m, k, T(1), a, k, b, T(0), y);
  else if (m == 1) // vector x matrix: y = B^T a
    blas::gemv(threads, true, k, n, T(1), b, n, a, T(0), y);
  else
    blas::gemm(threads, false, false, m, n, k, T(1), a, k, b, n, T(0), y, n);
}

/// The same with integers: wrap-around (two's complement) arithmetic.
template <typename T>
void matmulLoop(const T *a, const T *b, T *y, int64_t rowBegin, int64_t rowEnd,
                int64_t n, int64_t k) {
  using W = uint64_t;
  for (int64_t i = rowBegin; i < rowEnd; ++i) {
    T *yr = y + i * n;
    std::fill(yr, yr + n, T(0));
    for (int64_t p = 0; p < k; ++p) {
      W av = (W)(int64_t)a[i * k + p];
      const T *br = b + p * n;
      for (int64_t j = 0; j < n; ++j)
        yr[j] = (T)(int64_t)((W)(int64_t)yr[j] + av * (W)(int64_t)br[j]);
    }
  }
}

template <typename T> KernelFn matmulTyped(KernelArgs &args) {
  // Each batch element's matrix offsets in A and B (unless folded), read
  // by the closures.
  auto g = std::make_shared<const MatmulGeometry>(
      matmulGeometry(args, /*foldedOffsets=*/false));
  const int64_t m = g->m, n = g->n, k = g->k, batches = g->batches;
  const bool fold = g->fold;
  const T *a = args.in(0).as<T>(), *b = args.in(1).as<T>();
  T *y = args.out(0).as<T>();
  int threads = args.env.threads;

  if constexpr (std::is_floating_point_v<T>) {
    if (fold) // one GEMM; a batch of A over a shared B folds into M
      return [=] { matmulBlas(threads, a, b, y, batches * m, n, k); };
    // Small products would each run on one thread: spread the batch over
    // the threads instead. Large ones are split inside blas::gemm. The
    // limits are OpenBLAS 0.3's thresholds for going multi-threaded (gemm:
    // m*n*k < 65536 * 4; gemv: m*n < 2304 * 4), which blas:: also uses.
    bool vector = m == 1 || n == 1;
    bool small = vector ? (n == 1 ? m * k : k * n) < 2304 * 4
                        : m * n * k < 65536 * 4;
    return [=] {
      auto body = [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          matmulBlas(small ? 1 : threads, a + g->offA[i], b + g->offB[i],
                     y + i * m * n, m, n, k);
      };
      if (small)
        parallelFor(threads, batches, 2, body);
      else
        body(0, batches);
    };
  } else {
    int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, n * k));
    if (fold)
      return [=] {
        int64_t rows = batches * m;
        parallelFor(threads, rows, grain, [&](int64_t r0, int64_t r1) {
          matmulLoop(a, b, y, r0, r1, n, k);
        });
      };
    return [=] {
      parallelFor(threads, batches * m, grain, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1;) {
          int64_t i = r / m, row = r % m;
          int64_t rowEnd = std::min(m, row + (r1 - r));
          matmulLoop(a + g->offA[i], b + g->offB[i], y + i * m * n, row,
                     rowEnd, n, k);
          r += rowEnd - row;
        }
      });
    };
  }
}

KernelFn matmulFactory(KernelArgs &args) {
  checkMatmulOperands(args);
  switch (args.in(0).dtype) {
  case DType::F32: return matmulTyped<float>(args);
  case DType::F64: return matmulTyped<double>(args);
  case DType::I64: return matmulTyped<int64_t>(args);
  case DType::I32: return matmulTyped<int32_t>(args);
  case DType::I16: return matmulTyped<int16_t>(args);
  default: return matmulTyped<int8_t>(args);
  }
}

template <typename T> KernelFn gemmTyped(KernelArgs &args) {
  const GemmLayout l = gemmLayout(args);
  const bool ta = l.transA, tb = l.transB;
  const T alpha = (T)l.alpha, beta = (T)l.beta;
  const int64_t m = l.m, n = l.n, k = l.k;
  const int64_t cRowStride = l.cRowStride, cColStride = l.cColStride;
  const T *c = l.hasC ? args.in(2).as<T>() : nullptr;
  const TensorView &A = args.in(0), &B = args.in(1), &out = args.out(0);
  const T *a = A.as<T>(), *b = B.as<T>();
  T *y = out.as<T>();
  bool useC = l.hasC && beta != T(0);
  int64_t lda = l.lda, ldb = l.ldb;
  int threads = args.env.threads;
  return [=] {
    if (m == 0 || n == 0)
      return;
    if (useC) {
      parallelFor(threads, m, std::max<int64_t>(1, 16384 / n),
                  [&](int64_t r0, int64_t r1) {
                    for (int64_t i = r0; i < r1; ++i) {
                      const T *cr = c + i * cRowStride;
                      T *yr = y + i * n;
                      if (cColStride)
                        for (int64_t j = 0; j < n; ++j)
                          yr[j] = beta * cr[j];
                      else
                        std::fill(yr, yr + n, beta * cr[0]);
                    }
                  });
    }
    // With k == 0 this leaves beta * C (or zeros): blas::gemm handles it.
    blas::gemm(threads, ta, tb, m, n, k, alpha, a, lda, b, ldb,
               useC ? T(1) : T(0), y, n);
  };
}

KernelFn gemmFactory(KernelArgs &args) {
  checkGemmOperands(args);
  if (args.in(0).dtype == DType::F32)
    return gemmTyped<float>(args);
  return gemmTyped<double>(args);
}

} // namespace

void registerLinalgKernels(KernelRegistry &r) {
  r.add("matmul", matmulFactory);
  r.add("gemm", gemmFactory);
}

} // namespace parallax::rt
