//===- Blas.cpp - BLAS calls split over the runtime's threads -------------===//

#include "Blas.h"

#include "parallax/Runtime/Kernel.h"

#include <cblas.h>

#include <algorithm>
#include <mutex>

namespace parallax::rt::blas {
namespace {

inline void call(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                 const float *a, int64_t lda, const float *b, int64_t ldb,
                 float beta, float *c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, (blasint)m, (blasint)n,
              (blasint)k, alpha, a, (blasint)lda, b, (blasint)ldb, beta, c,
              (blasint)ldc);
}
inline void call(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                 double alpha, const double *a, int64_t lda, const double *b,
                 int64_t ldb, double beta, double *c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, (blasint)m, (blasint)n,
              (blasint)k, alpha, a, (blasint)lda, b, (blasint)ldb, beta, c,
              (blasint)ldc);
}
inline void callv(bool trans, int64_t m, int64_t n, float alpha, const float *a,
                  int64_t lda, const float *x, float beta, float *y) {
  cblas_sgemv(CblasRowMajor, trans ? CblasTrans : CblasNoTrans, (blasint)m,
              (blasint)n, alpha, a, (blasint)lda, x, 1, beta, y, 1);
}
inline void callv(bool trans, int64_t m, int64_t n, double alpha,
                  const double *a, int64_t lda, const double *x, double beta,
                  double *y) {
  cblas_dgemv(CblasRowMajor, trans ? CblasTrans : CblasNoTrans, (blasint)m,
              (blasint)n, alpha, a, (blasint)lda, x, 1, beta, y, 1);
}

// OpenBLAS 0.3's own thresholds for going multi-threaded: below them a
// product runs on one thread whatever the thread count.
constexpr int64_t kGemmWork = 65536 * 4, kGemvWork = 2304 * 4;
// Column blocks stay multiples of this many floats (a cache line's worth).
constexpr int64_t kColumnAlign = 16;

/// OpenBLAS's own threads off, once per process, before the first call.
void singleThreadedBlas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

template <typename T>
void gemmImpl(int threads, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
              T alpha, const T *a, int64_t lda, const T *b, int64_t ldb, T beta,
              T *c, int64_t ldc) {
  if (m <= 0 || n <= 0)
    return;
  singleThreadedBlas();
  lda = std::max<int64_t>(lda, 1);
  ldb = std::max<int64_t>(ldb, 1);
  ldc = std::max<int64_t>(ldc, 1);
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  if (threads <= 1 || m * n * k < kGemmWork) {
    call(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (n >= m) {
    // Column blocks of C: columns j of op(B) are b + j (B [k, n]) or rows
    // b + j * ldb (B^T, B [n, k]).
    int64_t blocks = (n + kColumnAlign - 1) / kColumnAlign;
    parallelFor(threads, blocks, 1, [&](int64_t b0, int64_t b1) {
      int64_t j0 = b0 * kColumnAlign, j1 = std::min(n, b1 * kColumnAlign);
      call(ta, tb, m, j1 - j0, k, alpha, a, lda, tb ? b + j0 * ldb : b + j0,
           ldb, beta, c + j0, ldc);
    });
  } else {
    // Row blocks of C: rows i of op(A) are a + i * lda (A [m, k]) or
    // columns a + i (A^T, A [k, m]).
    parallelFor(threads, m, 1, [&](int64_t i0, int64_t i1) {
      call(ta, tb, i1 - i0, n, k, alpha, ta ? a + i0 : a + i0 * lda, lda, b,
           ldb, beta, c + i0 * ldc, ldc);
    });
  }
}

template <typename T>
void gemvImpl(int threads, bool trans, int64_t m, int64_t n, T alpha,
              const T *a, int64_t lda, const T *x, T beta, T *y) {
  int64_t out = trans ? n : m;
  if (out <= 0)
    return;
  singleThreadedBlas();
  lda = std::max<int64_t>(lda, 1);
  if (threads <= 1 || m * n < kGemvWork) {
    callv(trans, m, n, alpha, a, lda, x, beta, y);
    return;
  }
  // Split the outputs: rows of A (y = A x) or columns of A (y = A^T x).
  parallelFor(threads, out, kColumnAlign, [&](int64_t o0, int64_t o1) {
    if (trans)
      callv(true, m, o1 - o0, alpha, a + o0, lda, x, beta, y + o0);
    else
      callv(false, o1 - o0, n, alpha, a + o0 * lda, lda, x, beta, y + o0);
  });
}

} // namespace

void gemm(int threads, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
          float alpha, const float *a, int64_t lda, const float *b,
          int64_t ldb, float beta, float *c, int64_t ldc) {
  gemmImpl(threads, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void gemm(int threads, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
          double alpha, const double *a, int64_t lda, const double *b,
          int64_t ldb, double beta, double *c, int64_t ldc) {
  gemmImpl(threads, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void gemv(int threads, bool trans, int64_t m, int64_t n, float alpha,
          const float *a, int64_t lda, const float *x, float beta, float *y) {
  gemvImpl(threads, trans, m, n, alpha, a, lda, x, beta, y);
}
void gemv(int threads, bool trans, int64_t m, int64_t n, double alpha,
          const double *a, int64_t lda, const double *x, double beta,
          double *y) {
  gemvImpl(threads, trans, m, n, alpha, a, lda, x, beta, y);
}

} // namespace parallax::rt::blas
