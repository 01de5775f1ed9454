//===- LinalgTest.cpp - the Linalg CUDA kernels against the CPU's ---------===//

#include "CudaKernelTestUtil.h"

#include "../Runtime/KernelTestCases.h"

namespace parallax::rt::test {
namespace {

using Shape = std::vector<int64_t>;
using CudaLinalg = CudaKernelTest;
using cases::GemmProblem;

/// numpy matmul's result shape (the test's own, for the output tensor).
Shape matmulShape(Shape as, Shape bs) {
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec)
    as.insert(as.begin(), 1);
  if (bVec)
    bs.push_back(1);
  size_t ra = as.size() - 2, rb = bs.size() - 2, rank = std::max(ra, rb);
  Shape out(rank, 1);
  for (size_t d = 0; d < rank; ++d) {
    int64_t a = d + ra >= rank ? as[d + ra - rank] : 1;
    int64_t b = d + rb >= rank ? bs[d + rb - rank] : 1;
    out[d] = a == 1 ? b : a;
  }
  if (!aVec)
    out.push_back(as[as.size() - 2]);
  if (!bVec)
    out.push_back(bs.back());
  return out;
}

/// f32 products sum in f32 on both sides, in different orders: the
/// rounding grows with the contraction length.
double f32Tolerance(int64_t k) { return 1e-5 * std::max<double>(1.0, (double)k / 16); }

void checkMatmul(DType dt, const Shape &as, const Shape &bs, double lo = -1, double hi = 1) {
  SCOPED_TRACE(::testing::Message() << nameOf(dt) << " " << ::testing::PrintToString(as)
                                    << " x " << ::testing::PrintToString(bs));
  TestTensor A(dt, as, randomValues(numel(as), 1, lo, hi));
  TestTensor B(dt, bs, randomValues(numel(bs), 2, lo, hi));
  TestTensor Y(dt, matmulShape(as, bs));
  double tol = dt == DType::F32 ? f32Tolerance(as.back()) : dt == DType::F64 ? 1e-12 : 0;
  expectCudaMatchesCpu("matmul", {A, B}, {Y}, nlohmann::json::object(), tol, tol);
}

/// The CPU tests' shapes, and an empty batch.
const std::vector<std::pair<Shape, Shape>> kMatmulCases = [] {
  std::vector<std::pair<Shape, Shape>> cs = cases::kMatmulShapes;
  cs.push_back({{0, 3, 4}, {4, 5}});
  return cs;
}();

TEST_F(CudaLinalg, MatmulFloats) {
  for (DType dt : {DType::F32, DType::F64})
    for (const auto &[as, bs] : kMatmulCases)
      checkMatmul(dt, as, bs);
}

TEST_F(CudaLinalg, MatmulIntegers) {
  for (DType dt : {DType::I64, DType::I32, DType::I16, DType::I8})
    for (const auto &[as, bs] : kMatmulCases)
      checkMatmul(dt, as, bs, -5, 5);
}

TEST_F(CudaLinalg, MatmulBatchesAndLargerSizes) {
  for (DType dt : {DType::F32, DType::F64, DType::I32}) {
    checkMatmul(dt, {8, 5, 7}, {8, 7, 3});        // strided batch
    checkMatmul(dt, {3, 1, 5, 7}, {4, 7, 6});     // partly broadcast: pointer arrays
    checkMatmul(dt, {2, 3, 1, 5, 7}, {3, 4, 7, 6});
    checkMatmul(dt, {4, 1, 7}, {4, 7, 6});        // batched vector x matrix
    checkMatmul(dt, {7}, {5, 7, 6});              // shared A, batched B
    checkMatmul(dt, {5, 6, 7}, {5, 7, 1});        // batched matrix x vector
    checkMatmul(dt, {4, 16, 17}, {17, 9});        // folds into one GEMM
    checkMatmul(dt, {3, 130, 67}, {67, 33});
    checkMatmul(dt, {2, 1, 97, 45}, {5, 45, 61}); // odd sizes, several tiles
  }
  checkMatmul(DType::F32, {257, 513}, {513, 129});
  checkMatmul(DType::F64, {2, 70, 80}, {2, 80, 90});
}

TEST_F(CudaLinalg, MatmulIntegerWrapsAround) {
  checkMatmul(DType::I8, {3, 5, 9}, {9, 4}, -120, 120);
  checkMatmul(DType::I16, {6, 40}, {40, 7}, -30000, 30000);
  TestTensor A(DType::I8, {1, 2}, {100, 100}), B(DType::I8, {2, 1}, {2, 1}), Y(DType::I8, {1, 1});
  expectCudaMatchesCpu("matmul", {A, B}, {Y}, nlohmann::json::object(), 0, 0);
}

TEST_F(CudaLinalg, MatmulErrors) {
  TestTensor A(DType::F32, {3, 4}), B(DType::F32, {5, 2}), Y(DType::F32, {3, 2});
  expectCudaMatchesCpu("matmul", {A, B}, {Y}); // contraction
  TestTensor A2(DType::F32, {2, 3, 4}), B2(DType::F32, {3, 4, 5}), Y2(DType::F32, {3, 3, 5});
  expectCudaMatchesCpu("matmul", {A2, B2}, {Y2}); // batches do not broadcast
  TestTensor B3(DType::F32, {4, 5}), Y3(DType::F32, {3, 6});
  expectCudaMatchesCpu("matmul", {A, B3}, {Y3}); // output shape
  TestTensor B4(DType::F64, {4, 5}), Y4(DType::F32, {3, 5});
  expectCudaMatchesCpu("matmul", {A, B4}, {Y4}); // element types differ
  TestTensor H1(DType::F16, {3, 4}), H2(DType::F16, {4, 5}), H3(DType::F16, {3, 5});
  expectCudaMatchesCpu("matmul", {H1, H2}, {H3}); // f16
  TestTensor S(DType::F32, {}), Ys(DType::F32, {});
  expectCudaMatchesCpu("matmul", {S, S}, {Ys}); // rank 0
}

void checkGemm(DType dt, int64_t m, int64_t n, int64_t k, bool ta, bool tb, const Shape &cShape,
               bool hasC, double alpha, double beta, bool setAlphaBeta = true) {
  GemmProblem g =
      cases::makeGemm(dt, m, n, k, ta, tb, cShape, hasC, alpha, beta, setAlphaBeta);
  SCOPED_TRACE(g.what);
  std::vector<TestTensor> ins{g.A, g.B};
  if (hasC)
    ins.push_back(g.C);
  double tol = dt == DType::F32 ? f32Tolerance(k) : 1e-12;
  expectCudaMatchesCpu("gemm", ins, {TestTensor(dt, {m, n})}, g.attrs, tol, tol);
}

TEST_F(CudaLinalg, GemmTransposesAndCBroadcast) {
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{5, 7, 3}, {67, 129, 45}})
    for (DType dt : {DType::F32, DType::F64})
      for (int t = 0; t < 4; ++t) {
        bool ta = t & 1, tb = t & 2;
        checkGemm(dt, m, n, k, ta, tb, {}, false, 1.5, 1.0);
        for (const Shape &cs : std::vector<Shape>{{}, {1}, {n}, {1, n}, {m, 1}, {m, n}, {1, 1}})
          checkGemm(dt, m, n, k, ta, tb, cs, true, 0.5, -2.0);
      }
}

TEST_F(CudaLinalg, GemmDefaultsAndDegenerateShapes) {
  checkGemm(DType::F32, 4, 6, 5, false, false, {6}, true, 1.0, 1.0, false);
  checkGemm(DType::F64, 4, 6, 5, true, true, {4, 6}, true, 1.0, 1.0, false);
  checkGemm(DType::F32, 4, 6, 5, false, false, {4, 6}, true, 2.0, 0.0); // beta 0 ignores C
  checkGemm(DType::F64, 1, 6, 5, false, true, {6}, true, 1.0, 1.0);
  checkGemm(DType::F64, 4, 1, 5, true, false, {}, true, 1.0, 3.0);
  checkGemm(DType::F32, 3, 4, 0, false, false, {4}, true, 1.0, 2.0); // empty contraction
  checkGemm(DType::F32, 3, 4, 0, false, false, {}, false, 1.0, 1.0);
  checkGemm(DType::F64, 0, 4, 3, false, false, {4}, true, 1.0, 1.0);
}

TEST_F(CudaLinalg, GemmErrors) {
  TestTensor A(DType::F32, {3, 4}), B(DType::F32, {5, 2}), Y(DType::F32, {3, 2});
  expectCudaMatchesCpu("gemm", {A, B}, {Y}); // contraction
  TestTensor B2(DType::F32, {4, 2}), C(DType::F32, {3, 3});
  expectCudaMatchesCpu("gemm", {A, B2, C}, {Y}); // C does not broadcast
  TestTensor C3(DType::F32, {1, 3, 2});
  expectCudaMatchesCpu("gemm", {A, B2, C3}, {Y});
  TestTensor Yb(DType::F32, {2, 3});
  expectCudaMatchesCpu("gemm", {A, B2}, {Yb}); // output shape
  TestTensor V(DType::F32, {4});
  expectCudaMatchesCpu("gemm", {V, B2}, {Y}); // not a matrix
  TestTensor Ai(DType::I32, {3, 4}), Bi(DType::I32, {4, 2}), Yi(DType::I32, {3, 2});
  expectCudaMatchesCpu("gemm", {Ai, Bi}, {Yi}); // integers
}

} // namespace
} // namespace parallax::rt::test
