//===- Blas.h - BLAS calls split over the runtime's threads -----*- C++ -*-===//
//
// f32 products go to oneDNN's sgemm when the build found libdnnl-dev (unless
// PARALLAX_BLAS=openblas), everything else to OpenBLAS; sgemmLibrary()
// (parallax/Runtime/Kernel.h) names the one in use.
//
// The runtime keeps OpenBLAS single-threaded (the first call here sets it)
// and oneDNN too (each call outside a parallel region makes sure), and
// splits large products over its own (OpenMP) threads instead. With both
// pools active, OpenBLAS's
// threads spin after each call while the next elementwise kernel's OpenMP
// threads want the same cores: on a 2-core machine a 2-thread step of the
// nmt example took 4x as long as a 1-thread one. One pool avoids that.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_LIB_RUNTIME_KERNELS_BLAS_H
#define PARALLAX_LIB_RUNTIME_KERNELS_BLAS_H

#include <cstdint>

namespace parallax::rt::blas {

/// Which library an f32 product may use: the fastest available (oneDNN from
/// 64^3 multiply-adds when built with it), or OpenBLAS always, for callers
/// whose product shapes were chosen by measuring OpenBLAS (convolution's).
enum class Sgemm { Fastest, OpenBlas };

/// C[m, n] = alpha op(A) op(B) + beta C, row-major, leading dimensions as in
/// BLAS. Products of at least OpenBLAS's own threading threshold are split
/// over up to `threads` threads by rows or columns of C (whichever is
/// larger), each part one single-threaded BLAS call. k == 0 scales C by
/// beta (BLAS implementations differ on it).
void gemm(int threads, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
          float alpha, const float *a, int64_t lda, const float *b,
          int64_t ldb, float beta, float *c, int64_t ldc,
          Sgemm lib = Sgemm::Fastest);
void gemm(int threads, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
          double alpha, const double *a, int64_t lda, const double *b,
          int64_t ldb, double beta, double *c, int64_t ldc,
          Sgemm lib = Sgemm::Fastest);

/// y = alpha op(A) x + beta y, A [m, n] row-major (lda), unit strides.
void gemv(int threads, bool trans, int64_t m, int64_t n, float alpha,
          const float *a, int64_t lda, const float *x, float beta, float *y);
void gemv(int threads, bool trans, int64_t m, int64_t n, double alpha,
          const double *a, int64_t lda, const double *x, double beta,
          double *y);

} // namespace parallax::rt::blas

#endif // PARALLAX_LIB_RUNTIME_KERNELS_BLAS_H
