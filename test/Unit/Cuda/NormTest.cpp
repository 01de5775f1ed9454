//===- NormTest.cpp - the Norm CUDA kernels against the CPU's --------------===//

#include "CudaKernelTestUtil.h"

#include "../Runtime/KernelTestCases.h"

#include <cmath>

namespace parallax::rt::test {
namespace {

using namespace cases;

const DType kFloats[] = {DType::F32, DType::F64};

/// Looser absolute tolerance for f32 gradients, whose formulas subtract
/// nearly equal terms.
double gradAtol(DType dt) { return dt == DType::F32 ? 1e-5 : 1e-9; }

//===----------------------------------------------------------------------===//
// softmax, log_softmax and their gradients
//===----------------------------------------------------------------------===//

void checkAxisOps(DType dt, const std::vector<int64_t> &shape, int64_t axis,
                  bool setAxis = true, double scale = 3.0) {
  SCOPED_TRACE(::testing::Message() << nameOf(dt) << " " << ::testing::PrintToString(shape)
                                    << " axis " << axis);
  int64_t n = numel(shape);
  nlohmann::json attrs = nlohmann::json::object();
  if (setAxis)
    attrs["axis"] = axis;
  TestTensor x(dt, shape, randomValues(n, 11, -scale, scale));
  expectCudaMatchesCpu("softmax", {x}, {TestTensor(dt, shape)}, attrs);
  expectCudaMatchesCpu("log_softmax", {x}, {TestTensor(dt, shape)}, attrs);
  // y: a softmax (or log-softmax) output, so the gradients see real data.
  std::vector<double> yv(n), lv(n);
  {
    TestTensor y(dt, shape), l(dt, shape);
    runKernel("softmax", {&x}, {&y}, attrs);
    runKernel("log_softmax", {&x}, {&l}, attrs);
    yv = y.values();
    lv = l.values();
  }
  TestTensor dy(dt, shape, randomValues(n, 12));
  expectCudaMatchesCpu("softmax_grad", {TestTensor(dt, shape, yv), dy},
                       {TestTensor(dt, shape)}, attrs, 1e-5, gradAtol(dt));
  expectCudaMatchesCpu("log_softmax_grad", {TestTensor(dt, shape, lv), dy},
                       {TestTensor(dt, shape)}, attrs, 1e-5, gradAtol(dt));
}

TEST_F(CudaKernelTest, SoftmaxFamilyAlongOneAxis) {
  for (DType dt : kFloats) {
    checkAxisOps(dt, {4, 7}, -1);
    checkAxisOps(dt, {4, 7}, 0);
    checkAxisOps(dt, {2, 3, 4}, 1);
    checkAxisOps(dt, {2, 3, 4}, -3);
    checkAxisOps(dt, {2, 3, 4}, 2);
    checkAxisOps(dt, {5}, 0);
    checkAxisOps(dt, {3, 1}, 1);
    checkAxisOps(dt, {2, 3, 4}, -1, /*setAxis=*/false);
    // Rows long enough for 128- and 512-thread groups, many rows.
    checkAxisOps(dt, {64, 1000}, -1);
    checkAxisOps(dt, {3, 5001}, 1);
    checkAxisOps(dt, {3000, 37}, -1);
    // A strided axis: a group per line, then a thread per line.
    checkAxisOps(dt, {8, 100, 16}, 1);
    checkAxisOps(dt, {40, 70, 65}, 1);
    checkAxisOps(dt, {2, 3000, 3}, 1);
  }
  // Large logits: the maximum is subtracted.
  checkAxisOps(DType::F32, {3, 9}, -1, true, 500.0);
  checkAxisOps(DType::F64, {3, 9, 2}, 1, true, 2000.0);
}

TEST_F(CudaKernelTest, SoftmaxMaskedAndNaNRows) {
  // -inf gives exactly 0; a NaN poisons its row only (contiguous and
  // strided lines).
  for (DType dt : kFloats)
    for (int64_t axis : {1, 0}) {
      std::vector<double> v = {-INFINITY, 0.5, 1.5, -INFINITY, 2, 0, -3, 1, 0.25,
                               NAN,       1,   2,   3,         4, 5, 6, 7, 8};
      std::vector<int64_t> shape = axis == 1 ? std::vector<int64_t>{2, 9}
                                             : std::vector<int64_t>{9, 2};
      // Transposed for axis 0 so that the same lines hold the same values.
      std::vector<double> t(18);
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t j = 0; j < 9; ++j)
          t[axis == 1 ? r * 9 + j : j * 2 + r] = v[r * 9 + j];
      TestTensor x(dt, shape, t);
      nlohmann::json attrs = {{"axis", axis}};
      TestTensor cy(dt, shape), cl(dt, shape);
      runKernel("softmax", {&x}, {&cy}, attrs);
      runKernel("log_softmax", {&x}, {&cl}, attrs);
      TestTensor gy = runOnCuda("softmax", {x}, {TestTensor(dt, shape)}, attrs)[0];
      TestTensor gl = runOnCuda("log_softmax", {x}, {TestTensor(dt, shape)}, attrs)[0];
      for (int64_t i = 0; i < 18; ++i) {
        double c = cy.get(i), g = gy.get(i), lc = cl.get(i), lg = gl.get(i);
        EXPECT_EQ(std::isnan(c), std::isnan(g)) << i;
        EXPECT_EQ(std::isnan(lc), std::isnan(lg)) << i;
        if (!std::isnan(c)) {
          EXPECT_NEAR(g, c, 1e-6) << i;
        }
        if (std::isinf(lc)) {
          EXPECT_EQ(lg, lc) << i;
        } else if (!std::isnan(lc)) {
          EXPECT_NEAR(lg, lc, 1e-5) << i;
        }
      }
    }
}

TEST_F(CudaKernelTest, SoftmaxBindErrors) {
  TestTensor x(DType::F32, {2, 3}), y(DType::F32, {2, 3}), bad(DType::F32, {3, 2});
  expectCudaMatchesCpu("softmax", {x}, {y}, {{"axis", 2}});
  expectCudaMatchesCpu("softmax", {x}, {bad});
  expectCudaMatchesCpu("softmax_grad", {x, bad}, {y});
  TestTensor i(DType::I32, {2, 3});
  expectCudaMatchesCpu("log_softmax", {i}, {i});
}

//===----------------------------------------------------------------------===//
// layer_norm and layer_norm_grad
//===----------------------------------------------------------------------===//

/// The CPU tests' cases, and larger ones: several blocks, long rows (128-
/// and 512-thread groups), many rows.
const std::vector<LnCase> kGpuLnCases = [] {
  std::vector<LnCase> cs = kLnCases;
  cs.push_back({{64, 256}, -1, {256}, true, {256}});
  cs.push_back({{5, 3001}, -1, {3001}, true, {3001}});
  cs.push_back({{7, 33, 40}, 1, {33, 40}, true, {40}});
  cs.push_back({{1000, 37}, -1, {37}, true, {1}});
  cs.push_back({{300, 5, 7}, 1, {5, 1}, false, {}});
  return cs;
}();

std::vector<int64_t> statsShape(const LnCase &c) {
  int64_t rank = (int64_t)c.x.size(), a = c.axis < 0 ? c.axis + rank : c.axis;
  std::vector<int64_t> stats = c.x;
  for (int64_t d = a; d < rank; ++d)
    stats[d] = 1;
  return stats;
}

TEST_F(CudaKernelTest, LayerNormMatchesCpu) {
  for (DType dt : kFloats)
    for (const LnCase &c : kGpuLnCases)
      for (bool setEps : {false, true}) {
        SCOPED_TRACE(::testing::Message() << nameOf(dt) << " x "
                                          << ::testing::PrintToString(c.x) << " axis "
                                          << c.axis << " eps " << setEps);
        nlohmann::json attrs = {{"axis", c.axis}};
        if (setEps)
          attrs["epsilon"] = 0.25;
        std::vector<int64_t> stats = statsShape(c);
        std::vector<TestTensor> ins{
            TestTensor(dt, c.x, randomValues(numel(c.x), 41, -2, 3)),
            TestTensor(dt, c.scale, randomValues(numel(c.scale), 42))};
        if (c.bias)
          ins.push_back(TestTensor(dt, c.biasShape, randomValues(numel(c.biasShape), 43)));
        expectCudaMatchesCpu("layer_norm", ins,
                             {TestTensor(dt, c.x), TestTensor(dt, stats),
                              TestTensor(dt, stats)},
                             attrs, 1e-5, 1e-5);
      }
}

TEST_F(CudaKernelTest, LayerNormOfOffsetData) {
  // Data far from zero: the statistics must not lose digits.
  int64_t rows = 6, len = 1000;
  TestTensor x(DType::F32, {rows, len}, randomValues(rows * len, 141, 999, 1001));
  TestTensor s(DType::F32, {len}, std::vector<double>(len, 1.0));
  expectCudaMatchesCpu("layer_norm", {x, s},
                       {TestTensor(DType::F32, {rows, len}), TestTensor(DType::F32, {rows, 1}),
                        TestTensor(DType::F32, {rows, 1})},
                       nlohmann::json::object(), 1e-5, 1e-4);
  TestTensor xb(DType::F32, {rows, 1, len}, x.values()), one(DType::F32, {1}, {1.0}),
      zero(DType::F32, {1}, {0.0});
  expectCudaMatchesCpu("batch_norm", {xb, one, zero, zero, one},
                       {TestTensor(DType::F32, {rows, 1, len}), TestTensor(DType::F32, {1}),
                        TestTensor(DType::F32, {1})},
                       {{"training", true}, {"momentum", 0.0}}, 1e-5, 1e-4);
}

TEST_F(CudaKernelTest, LayerNormGradMatchesCpu) {
  for (DType dt : kFloats)
    for (const LnCase &c : kGpuLnCases) {
      SCOPED_TRACE(::testing::Message() << nameOf(dt) << " x "
                                        << ::testing::PrintToString(c.x) << " axis "
                                        << c.axis << " scale "
                                        << ::testing::PrintToString(c.scale));
      std::vector<int64_t> stats = statsShape(c);
      int64_t n = numel(c.x), rows = numel(stats);
      TestTensor x(dt, c.x, randomValues(n, 51, -2, 3));
      TestTensor scale(dt, c.scale, randomValues(numel(c.scale), 52));
      // The statistics as layer_norm gives them.
      TestTensor y(dt, c.x), mean(dt, stats), inv(dt, stats);
      runKernel("layer_norm", {&x, &scale}, {&y, &mean, &inv}, {{"axis", c.axis}});
      ASSERT_EQ(mean.numElements(), rows);
      TestTensor dy(dt, c.x, randomValues(n, 53));
      expectCudaMatchesCpu("layer_norm_grad", {dy, x, scale, mean, inv},
                           {TestTensor(dt, c.x), TestTensor(dt, c.scale),
                            TestTensor(dt, c.scale)},
                           {{"axis", c.axis}}, 1e-5, gradAtol(dt));
    }
}

TEST_F(CudaKernelTest, LayerNormBindErrors) {
  TestTensor x(DType::F32, {2, 3}), s(DType::F32, {3}), y(DType::F32, {2, 3}),
      m(DType::F32, {2, 1}), iv(DType::F32, {2, 1}), bad(DType::F32, {2});
  expectCudaMatchesCpu("layer_norm", {x, bad}, {y, m, iv});
  expectCudaMatchesCpu("layer_norm", {x, s}, {y, iv, bad});
  expectCudaMatchesCpu("layer_norm", {x, s}, {y, m, iv}, {{"axis", 5}});
  expectCudaMatchesCpu("layer_norm_grad", {y, x, bad, m, iv}, {y, s, s});
  expectCudaMatchesCpu("layer_norm_grad", {y, x, s, m, iv}, {y, bad, s});
}

//===----------------------------------------------------------------------===//
// batch_norm and batch_norm_grad
//===----------------------------------------------------------------------===//

const std::vector<std::vector<int64_t>> kBnShapes = {
    {2, 3, 4, 5}, {5, 3}, {2, 4, 3}, {1, 1, 2, 2, 2},
    {8, 16, 12, 12}, {4, 7, 33, 35}, {16, 3, 37, 31}, {300, 70},
    // Channels cut into several parts (Norm.cu's channelParts): maps of
    // 1024, of 323 (a part's threads wrap rows mid-map) and of 1 value.
    {64, 4, 32, 32}, {37, 3, 17, 19}, {20000, 3}};

std::vector<TestTensor> batchNormInputs(DType dt, const std::vector<int64_t> &xs) {
  int64_t c = xs[1];
  return {TestTensor(dt, xs, randomValues(numel(xs), 71, -1, 3)),
          TestTensor(dt, {c}, randomValues(c, 72)), TestTensor(dt, {c}, randomValues(c, 73)),
          TestTensor(dt, {c}, randomValues(c, 74)),
          TestTensor(dt, {c}, randomValues(c, 75, 0.5, 2))};
}

TEST_F(CudaKernelTest, BatchNormMatchesCpu) {
  for (DType dt : kFloats)
    for (const auto &xs : kBnShapes)
      for (bool training : {true, false})
        for (bool setAttrs : {true, false})
          for (bool unbiased : {false, true}) {
            if (unbiased && !training)
              continue;
            SCOPED_TRACE(::testing::Message()
                         << nameOf(dt) << " x " << ::testing::PrintToString(xs)
                         << " training " << training << " attrs " << setAttrs
                         << " unbiased " << unbiased);
            nlohmann::json attrs = nlohmann::json::object();
            if (setAttrs) {
              attrs["epsilon"] = 0.1;
              attrs["momentum"] = 0.7;
            }
            if (training)
              attrs["training"] = true;
            if (unbiased)
              attrs["unbiased_running_var"] = true;
            int64_t c = xs[1];
            expectCudaMatchesCpu("batch_norm", batchNormInputs(dt, xs),
                                 {TestTensor(dt, xs), TestTensor(dt, {c}), TestTensor(dt, {c})},
                                 attrs, 1e-5, 1e-5);
          }
}

TEST_F(CudaKernelTest, BatchNormGradMatchesCpu) {
  for (DType dt : kFloats)
    for (const auto &xs : kBnShapes)
      for (bool setEps : {true, false}) {
        SCOPED_TRACE(::testing::Message() << nameOf(dt) << " x "
                                          << ::testing::PrintToString(xs));
        int64_t c = xs[1];
        nlohmann::json attrs = nlohmann::json::object();
        if (setEps)
          attrs["epsilon"] = 0.01;
        std::vector<TestTensor> in = batchNormInputs(dt, xs);
        TestTensor dy(dt, xs, randomValues(numel(xs), 81));
        expectCudaMatchesCpu("batch_norm_grad", {dy, in[0], in[1]},
                             {TestTensor(dt, xs), TestTensor(dt, {c}), TestTensor(dt, {c})},
                             attrs, 1e-5, gradAtol(dt));
      }
}

TEST_F(CudaKernelTest, BatchNormErrors) {
  TestTensor x(DType::F32, {2, 3, 4}), c3(DType::F32, {3}), c4(DType::F32, {4}),
      y(DType::F32, {2, 3, 4});
  expectCudaMatchesCpu("batch_norm", {x, c3, c4, c3, c3}, {y, c3, c3});
  expectCudaMatchesCpu("batch_norm", {x, c3, c3, c3, c3}, {y, c4, c3});
  TestTensor v(DType::F32, {3});
  expectCudaMatchesCpu("batch_norm", {v, c3, c3, c3, c3}, {v, c3, c3});
  TestTensor e(DType::F32, {0, 3});
  expectCudaMatchesCpu("batch_norm", {e, c3, c3, c3, c3}, {e, c3, c3}, {{"training", true}});
  TestTensor one(DType::F32, {1, 3, 1});
  expectCudaMatchesCpu("batch_norm", {one, c3, c3, c3, c3}, {one, c3, c3},
                       {{"training", true}, {"unbiased_running_var", true}});
  TestTensor dyBad(DType::F32, {2, 3, 5});
  expectCudaMatchesCpu("batch_norm_grad", {dyBad, x, c3}, {y, c3, c3});
  expectCudaMatchesCpu("batch_norm_grad", {y, x, c4}, {y, c3, c3});
  TestTensor i(DType::I32, {2, 3, 4});
  expectCudaMatchesCpu("batch_norm_grad", {i, i, c3}, {y, c3, c3});
  // A synchronized batch norm needs a communicator (these tests have none):
  // both fail alike. With one: CollectiveTest.cpp.
  expectCudaMatchesCpu("batch_norm", {x, c3, c3, c3, c3}, {y, c3, c3},
                       {{"training", true}, {"grid", true}, {"grid_shape", {1}}});
  expectCudaMatchesCpu("batch_norm_grad", {y, x, c3}, {y, c3, c3},
                       {{"grid", true}, {"grid_shape", {1}}});
}

} // namespace
} // namespace parallax::rt::test
