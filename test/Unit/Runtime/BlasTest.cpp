// blas::gemm / blas::gemv split over threads must give the single-call
// result for every transpose combination, both split directions (rows of C
// when m > n, column blocks otherwise, including a ragged last block),
// leading dimensions wider than the operands, beta != 0 and k == 0, on
// whichever library f32 products go to (ctest runs them again with
// PARALLAX_BLAS=openblas).
#include "../../../lib/Runtime/Kernels/Blas.h"
#include "parallax/Runtime/Kernel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <random>
#include <vector>

using namespace parallax::rt;

namespace {

/// C = alpha op(A) op(B) + beta C in doubles, by the book.
void refGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
             const std::vector<float> &a, int64_t lda,
             const std::vector<float> &b, int64_t ldb, double beta,
             std::vector<double> &c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += (double)(ta ? a[p * lda + i] : a[i * lda + p]) *
             (double)(tb ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * ldc + j] = alpha * s + beta * c[i * ldc + j];
    }
}

std::vector<float> random(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(gen);
  return v;
}

void checkGemm(int threads, bool ta, bool tb, int64_t m, int64_t n,
               int64_t k) {
  SCOPED_TRACE(testing::Message() << "threads " << threads << " ta " << ta
                                  << " tb " << tb << " m " << m << " n " << n
                                  << " k " << k);
  // Leading dimensions 3 wider than the stored rows.
  int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 3, ldc = n + 3;
  auto a = random((ta ? k : m) * lda, 1), b = random((tb ? n : k) * ldb, 2);
  auto c0 = random(m * ldc, 3);
  std::vector<float> c(c0);
  std::vector<double> ref(c0.begin(), c0.end());
  blas::gemm(threads, ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb,
             0.25f, c.data(), ldc);
  refGemm(ta, tb, m, n, k, 0.5, a, lda, b, ldb, 0.25, ref, ldc);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      double want = j < n ? ref[i * ldc + j] : c0[i * ldc + j];
      ASSERT_NEAR(c[i * ldc + j], want, 1e-4 * (1 + std::abs(want)))
          << "at C[" << i << ", " << j << "]" << (j >= n ? " (padding)" : "");
    }
}

TEST(Blas, GemmSplitOverThreadsMatchesReference) {
  for (int threads : {1, 2, 3})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        checkGemm(threads, ta, tb, 300, 70, 40);  // rows of C
        checkGemm(threads, ta, tb, 37, 333, 50);  // ragged column blocks
        checkGemm(threads, ta, tb, 5, 7, 3);      // below the threshold
      }
}

TEST(Blas, GemmWithEmptyContractionScalesC) {
  std::vector<float> c{1, 2, 3, 4};
  blas::gemm(2, false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 1, 3.0f,
             c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{3, 6, 9, 12}));
  blas::gemm(2, false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 1, 0.0f,
             c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{0, 0, 0, 0}));
}

TEST(Blas, GemmWithZeroBetaIgnoresWhatCHeld) {
  // The arena hands products buffers that still hold an earlier kernel's
  // values, NaN included: beta 0 must overwrite them, as BLAS specifies.
  for (int threads : {1, 2})
    for (bool tb : {false, true}) {
      int64_t m = 40, n = 260, k = 64;
      auto a = random(m * k, 7), b = random(k * n, 8);
      std::vector<float> c(m * n, std::nanf(""));
      std::vector<double> ref(m * n, 0.0);
      blas::gemm(threads, false, tb, m, n, k, 1.0f, a.data(), k, b.data(),
                 tb ? k : n, 0.0f, c.data(), n);
      refGemm(false, tb, m, n, k, 1.0, a, k, b, tb ? k : n, 0.0, ref, n);
      for (int64_t i = 0; i < m * n; ++i)
        ASSERT_NEAR(c[i], ref[i], 1e-4 * (1 + std::abs(ref[i])))
            << "threads " << threads << " tb " << tb << " at " << i;
    }
}

TEST(Blas, SgemmLibraryIsTheOneBuiltAndChosen) {
  const char *env = std::getenv("PARALLAX_BLAS");
  bool openblas = env && std::string(env) == "openblas";
#ifdef PARALLAX_HAVE_DNNL
  EXPECT_STREQ(sgemmLibrary(), openblas ? "OpenBLAS" : "oneDNN");
#else
  (void)openblas;
  EXPECT_STREQ(sgemmLibrary(), "OpenBLAS");
#endif
}

TEST(Blas, GemvSplitOverThreadsMatchesReference) {
  for (int threads : {1, 2})
    for (bool trans : {false, true}) {
      int64_t m = 150, n = 97, lda = n + 2;
      auto a = random(m * lda, 4);
      auto x = random(trans ? m : n, 5);
      auto y0 = random(trans ? n : m, 6);
      std::vector<float> y(y0);
      blas::gemv(threads, trans, m, n, 2.0f, a.data(), lda, x.data(), 0.5f,
                 y.data());
      for (size_t o = 0; o < y.size(); ++o) {
        double s = 0;
        for (int64_t p = 0; p < (trans ? m : n); ++p)
          s += trans ? (double)a[p * lda + o] * x[p]
                     : (double)a[o * lda + p] * x[p];
        double want = 2.0 * s + 0.5 * y0[o];
        ASSERT_NEAR(y[o], want, 1e-4 * (1 + std::abs(want)))
            << "threads " << threads << " trans " << trans << " y[" << o << "]";
      }
    }
}

} // namespace
