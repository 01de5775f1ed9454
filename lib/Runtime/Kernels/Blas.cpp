//===- Blas.cpp - BLAS calls split over the runtime's threads -------------===//

#include "Blas.h"

#include "parallax/Runtime/Kernel.h"
#include "parallax/Runtime/KernelMemory.h"

#include <cblas.h>
#ifdef PARALLAX_HAVE_DNNL
#include <dnnl.h>
#include <omp.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace parallax::rt::blas {
namespace {

#ifdef PARALLAX_HAVE_DNNL
/// Below kOnednnMinWork (m*n*k) OpenBLAS's small-matrix kernels win
/// (measured on the attention products of the LM example, 20x20x64: 0.6 us
/// against oneDNN's 1.2 us per call; from 40x128x64 on oneDNN is 1.3-1.7x
/// faster).

/// oneDNN's sgemm unless PARALLAX_BLAS=openblas (read once, for A/B runs).
bool useDnnl() {
  static const bool use = [] {
    const char *v = std::getenv("PARALLAX_BLAS");
    return !(v && std::strcmp(v, "openblas") == 0);
  }();
  return use;
}
#endif

inline void call(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                 const float *a, int64_t lda, const float *b, int64_t ldb,
                 float beta, float *c, int64_t ldc, Sgemm lib) {
#ifdef PARALLAX_HAVE_DNNL
  if (lib == Sgemm::Fastest && useDnnl() && m * n * k >= kOnednnMinWork) {
    // oneDNN (OpenMP build) takes omp_get_max_threads() threads outside a
    // parallel region: there the limit goes to 1, as OpenBLAS's does, so
    // that a rank never spreads over the cores its neighbours use (gemmImpl
    // splits large products itself). Inside one of parallelFor's regions
    // it runs on the calling thread. Its sgemm is row-major, like the calls
    // here, and ignores C when beta is 0.
    if (!omp_in_parallel() && omp_get_max_threads() != 1)
      omp_set_num_threads(1);
    dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k,
                                  alpha, a, lda, b, ldb, beta, c, ldc);
    if (st == dnnl_success)
      return;
    // Only on arguments oneDNN rejects (it checks what BLAS would):
    // OpenBLAS's own check then reports them.
  }
#else
  (void)lib;
#endif
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, (blasint)m, (blasint)n,
              (blasint)k, alpha, a, (blasint)lda, b, (blasint)ldb, beta, c,
              (blasint)ldc);
}
inline void call(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                 double alpha, const double *a, int64_t lda, const double *b,
                 int64_t ldb, double beta, double *c, int64_t ldc, Sgemm) {
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
              T *c, int64_t ldc, Sgemm lib) {
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
    call(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, lib);
    return;
  }
  if (n >= m) {
    // Column blocks of C: columns j of op(B) are b + j (B [k, n]) or rows
    // b + j * ldb (B^T, B [n, k]).
    int64_t blocks = (n + kColumnAlign - 1) / kColumnAlign;
    parallelFor(threads, blocks, 1, [&](int64_t b0, int64_t b1) {
      int64_t j0 = b0 * kColumnAlign, j1 = std::min(n, b1 * kColumnAlign);
      call(ta, tb, m, j1 - j0, k, alpha, a, lda, tb ? b + j0 * ldb : b + j0,
           ldb, beta, c + j0, ldc, lib);
    });
  } else {
    // Row blocks of C: rows i of op(A) are a + i * lda (A [m, k]) or
    // columns a + i (A^T, A [k, m]).
    parallelFor(threads, m, 1, [&](int64_t i0, int64_t i1) {
      call(ta, tb, i1 - i0, n, k, alpha, ta ? a + i0 : a + i0 * lda, lda, b,
           ldb, beta, c + i0 * ldc, ldc, lib);
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
          int64_t ldb, float beta, float *c, int64_t ldc, Sgemm lib) {
  gemmImpl(threads, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, lib);
}
void gemm(int threads, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
          double alpha, const double *a, int64_t lda, const double *b,
          int64_t ldb, double beta, double *c, int64_t ldc, Sgemm lib) {
  gemmImpl(threads, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, lib);
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

const char *parallax::rt::sgemmLibrary() {
#ifdef PARALLAX_HAVE_DNNL
  if (blas::useDnnl())
    return "oneDNN";
#endif
  return "OpenBLAS";
}
