// Tests of the Linalg kernels (matmul, gemm) against naive references.
#include "KernelTestCases.h"

#include <algorithm>

using namespace parallax::rt;
using namespace parallax::rt::test;
using namespace parallax::rt::test::cases;

namespace {

struct Ref {
  std::vector<int64_t> shape;
  std::vector<double> values;
};

/// numpy.matmul on doubles, by the book.
Ref refMatmul(std::vector<int64_t> as, std::vector<int64_t> bs,
              const std::vector<double> &a, const std::vector<double> &b) {
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec)
    as.insert(as.begin(), 1);
  if (bVec)
    bs.push_back(1);
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  size_t ra = as.size() - 2, rb = bs.size() - 2, rank = std::max(ra, rb);
  std::vector<int64_t> ab(rank, 1), bb(rank, 1), batch(rank);
  for (size_t d = 0; d < ra; ++d)
    ab[rank - ra + d] = as[d];
  for (size_t d = 0; d < rb; ++d)
    bb[rank - rb + d] = bs[d];
  int64_t batches = 1;
  for (size_t d = 0; d < rank; ++d) {
    batch[d] = std::max(ab[d], bb[d]);
    batches *= batch[d];
  }
  Ref r;
  r.shape = batch;
  if (!aVec)
    r.shape.push_back(m);
  if (!bVec)
    r.shape.push_back(n);
  r.values.assign(batches * m * n, 0.0);
  for (int64_t t = 0; t < batches; ++t) {
    // batch coordinates -> flat matrix index in a and b
    int64_t rem = t, ia = 0, ib = 0, sa = 1, sb = 1;
    for (size_t d = rank; d-- > 0;) {
      int64_t c = rem % batch[d];
      rem /= batch[d];
      ia += (ab[d] == 1 ? 0 : c) * sa;
      ib += (bb[d] == 1 ? 0 : c) * sb;
      sa *= ab[d];
      sb *= bb[d];
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += a[ia * m * k + i * k + p] * b[ib * k * n + p * n + j];
        r.values[t * m * n + i * n + j] = s;
      }
  }
  return r;
}

std::vector<double> randomInts(int64_t n, uint64_t seed, int lo, int hi) {
  std::vector<double> v = randomValues(n, seed, lo, hi + 1);
  for (double &x : v)
    x = std::floor(x);
  return v;
}

void checkMatmul(DType dt, std::vector<int64_t> as, std::vector<int64_t> bs,
                 int threads = 1) {
  SCOPED_TRACE(::testing::Message() << nameOf(dt) << " " << ::testing::PrintToString(as)
                                    << " x " << ::testing::PrintToString(bs));
  bool isInt = !isFloat(dt);
  auto av = isInt ? randomInts(numel(as), 1, -5, 5) : randomValues(numel(as), 1);
  auto bv = isInt ? randomInts(numel(bs), 2, -5, 5) : randomValues(numel(bs), 2);
  TestTensor A(dt, as, av), B(dt, bs, bv);
  Ref ref = refMatmul(as, bs, A.values(), B.values());
  TestTensor Y(dt, ref.shape);
  for (int64_t i = 0; i < Y.numElements(); ++i)
    Y.set(i, 12345); // garbage that must be overwritten
  ExecEnv env;
  env.threads = threads;
  runKernel("matmul", {&A, &B}, {&Y}, nlohmann::json::object(), env);
  if (isInt)
    expectNear(Y.values(), ref.values, 0, 0);
  else if (dt == DType::F32)
    expectNear(Y.values(), ref.values, 1e-5, 1e-5);
  else
    expectNear(Y.values(), ref.values, 1e-12, 1e-12);
}

TEST(LinalgKernels, MatmulF32MatchesReference) {
  for (auto &[as, bs] : kMatmulShapes)
    checkMatmul(DType::F32, as, bs);
}

TEST(LinalgKernels, MatmulF64MatchesReference) {
  for (auto &[as, bs] : kMatmulShapes)
    checkMatmul(DType::F64, as, bs);
}

TEST(LinalgKernels, MatmulIntegerTypes) {
  for (DType dt : {DType::I64, DType::I32, DType::I16, DType::I8})
    for (auto &[as, bs] : kMatmulShapes)
      checkMatmul(dt, as, bs);
}

TEST(LinalgKernels, MatmulThreadedBatches) {
  for (DType dt : {DType::F32, DType::F64, DType::I32}) {
    checkMatmul(dt, {8, 5, 7}, {8, 7, 3}, 2);
    checkMatmul(dt, {3, 1, 5, 7}, {4, 7, 6}, 2);
    checkMatmul(dt, {64, 17}, {17, 9}, 2);
    checkMatmul(dt, {4, 16, 17}, {17, 9}, 2);
    checkMatmul(dt, {4, 1, 7}, {4, 7, 6}, 2); // batched vector x matrix
    checkMatmul(dt, {7}, {5, 7, 6}, 2);
    checkMatmul(dt, {5, 6, 7}, {5, 7, 1}, 2); // batched matrix x vector
  }
  // Large enough for OpenBLAS's own threads.
  checkMatmul(DType::F64, {2, 70, 80}, {2, 80, 90}, 2);
}

TEST(LinalgKernels, MatmulIntegerWrapsAround) {
  TestTensor A(DType::I8, {1, 2}, {100, 100}), B(DType::I8, {2, 1}, {2, 1});
  TestTensor Y(DType::I8, {1, 1});
  runKernel("matmul", {&A, &B}, {&Y});
  EXPECT_EQ(Y.get(0), (double)(int8_t)(uint8_t)300);
}

TEST(LinalgKernels, MatmulErrors) {
  TestTensor A(DType::F32, {3, 4}), B(DType::F32, {5, 2}), Y(DType::F32, {3, 2});
  EXPECT_NE(kernelError("matmul", {&A, &B}, {&Y}).find("contraction"),
            std::string::npos);
  TestTensor A2(DType::F32, {2, 3, 4}), B2(DType::F32, {3, 4, 5}),
      Y2(DType::F32, {3, 3, 5});
  EXPECT_NE(kernelError("matmul", {&A2, &B2}, {&Y2}).find("do not broadcast"),
            std::string::npos);
  TestTensor B3(DType::F32, {4, 5}), Y3(DType::F32, {3, 6});
  EXPECT_NE(kernelError("matmul", {&A, &B3}, {&Y3}).find("output shape"),
            std::string::npos);
  TestTensor B4(DType::F64, {4, 5}), Y4(DType::F32, {3, 5});
  EXPECT_NE(kernelError("matmul", {&A, &B4}, {&Y4}).find("element type"),
            std::string::npos);
  TestTensor H1(DType::F16, {3, 4}), H2(DType::F16, {4, 5}), H3(DType::F16, {3, 5});
  EXPECT_NE(kernelError("matmul", {&H1, &H2}, {&H3}).find("not supported"),
            std::string::npos);
  TestTensor S(DType::F32, {}), Ys(DType::F32, {});
  EXPECT_NE(kernelError("matmul", {&S, &S}, {&Ys}).find("rank"),
            std::string::npos);
  EXPECT_EQ(kernelError("matmul", {&A, &B3}, {&Y4}), ""); // a valid call
}

//===----------------------------------------------------------------------===//
// gemm
//===----------------------------------------------------------------------===//

void checkGemm(DType dt, int64_t m, int64_t n, int64_t k, bool ta, bool tb,
               std::vector<int64_t> cShape, bool hasC, double alpha,
               double beta, bool setAlphaBeta = true) {
  GemmProblem g = makeGemm(dt, m, n, k, ta, tb, cShape, hasC, alpha, beta, setAlphaBeta);
  SCOPED_TRACE(g.what);
  TestTensor &A = g.A, &B = g.B, &C = g.C;
  TestTensor Y(dt, {m, n});
  for (int64_t i = 0; i < Y.numElements(); ++i)
    Y.set(i, std::nan(""));
  std::vector<TestTensor *> ins{&A, &B};
  if (hasC)
    ins.push_back(&C);
  runKernel("gemm", ins, {&Y}, g.attrs);
  auto av = A.values(), bv = B.values();
  std::vector<double> cv = hasC ? C.values() : std::vector<double>{};
  std::vector<double> ref(m * n);
  int64_t cr = cShape.size() == 2 ? cShape[0] : 1;
  int64_t cc = cShape.empty() ? 1 : cShape.back();
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += (ta ? av[p * m + i] : av[i * k + p]) *
             (tb ? bv[j * k + p] : bv[p * n + j]);
      double c = hasC ? cv[(cr == 1 ? 0 : i) * cc + (cc == 1 ? 0 : j)] : 0.0;
      ref[i * n + j] = alpha * s + beta * c;
    }
  if (dt == DType::F32)
    expectNear(Y.values(), ref, 1e-5, 1e-5);
  else
    expectNear(Y.values(), ref, 1e-12, 1e-12);
}

TEST(LinalgKernels, GemmTransposesAndCBroadcast) {
  int64_t m = 5, n = 7, k = 3;
  for (DType dt : {DType::F32, DType::F64})
    for (int t = 0; t < 4; ++t) {
      bool ta = t & 1, tb = t & 2;
      checkGemm(dt, m, n, k, ta, tb, {}, false, 1.5, 1.0);
      for (std::vector<int64_t> cs :
           std::vector<std::vector<int64_t>>{{}, {1}, {n}, {1, n}, {m, 1}, {m, n}, {1, 1}})
        checkGemm(dt, m, n, k, ta, tb, cs, true, 0.5, -2.0);
    }
}

TEST(LinalgKernels, GemmDefaultsAndDegenerateShapes) {
  // alpha and beta absent: both default to 1.
  checkGemm(DType::F32, 4, 6, 5, false, false, {6}, true, 1.0, 1.0, false);
  checkGemm(DType::F64, 4, 6, 5, true, true, {4, 6}, true, 1.0, 1.0, false);
  // beta = 0 ignores C; a vector-shaped GEMM; an empty contraction.
  checkGemm(DType::F32, 4, 6, 5, false, false, {4, 6}, true, 2.0, 0.0);
  checkGemm(DType::F64, 1, 6, 5, false, true, {6}, true, 1.0, 1.0);
  checkGemm(DType::F64, 4, 1, 5, true, false, {}, true, 1.0, 3.0);
  checkGemm(DType::F32, 3, 4, 0, false, false, {4}, true, 1.0, 2.0);
  checkGemm(DType::F32, 3, 4, 0, false, false, {}, false, 1.0, 1.0);
}

TEST(LinalgKernels, GemmErrors) {
  TestTensor A(DType::F32, {3, 4}), B(DType::F32, {5, 2}), Y(DType::F32, {3, 2});
  EXPECT_NE(kernelError("gemm", {&A, &B}, {&Y}).find("contraction"),
            std::string::npos);
  TestTensor B2(DType::F32, {4, 2}), C(DType::F32, {3, 3});
  EXPECT_NE(kernelError("gemm", {&A, &B2, &C}, {&Y}).find("does not broadcast"),
            std::string::npos);
  TestTensor C3(DType::F32, {1, 3, 2});
  EXPECT_NE(kernelError("gemm", {&A, &B2, &C3}, {&Y}).find("does not broadcast"),
            std::string::npos);
  TestTensor Yb(DType::F32, {2, 3});
  EXPECT_NE(kernelError("gemm", {&A, &B2}, {&Yb}).find("output shape"),
            std::string::npos);
  TestTensor V(DType::F32, {4});
  EXPECT_NE(kernelError("gemm", {&V, &B2}, {&Y}).find("matrices"),
            std::string::npos);
  TestTensor Ai(DType::I32, {3, 4}), Bi(DType::I32, {4, 2}), Yi(DType::I32, {3, 2});
  EXPECT_NE(kernelError("gemm", {&Ai, &Bi}, {&Yi}).find("not supported"),
            std::string::npos);
  EXPECT_EQ(kernelError("gemm", {&A, &B2}, {&Y}), "");
}

} // namespace
