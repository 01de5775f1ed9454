//===- ConvTest.cpp - the Conv CUDA kernels against the CPU's --------------===//
//
// Convolutions run on cuDNN (or, for pads cuDNN cannot express, on cuDNN
// over an explicitly padded copy; beyond 3 spatial dims on direct kernels):
// their sums are ordered differently from the CPU's im2col + GEMM, so f32
// compares with rtol 1e-4 (atol 1e-4 for sums that cancel to near 0). The
// pooling kernels accumulate in the CPU's order and must match it closely.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelTestUtil.h"

#include "../Runtime/KernelTestCases.h"

#include <cmath>
#include <limits>

namespace parallax::rt::test {
namespace {

using nlohmann::json;
using namespace cases;

TestTensor randomTensor(DType dt, std::vector<int64_t> shape, uint64_t seed) {
  int64_t n = numel(shape);
  return TestTensor(dt, std::move(shape), randomValues(n, seed));
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

std::vector<ConvCase> convCases() {
  return {
      // 2-D, symmetric pads, bias.
      {{2, 3, 7, 6}, {4, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
      // Stride 2, no bias.
      {{2, 4, 9, 8}, {6, 4, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, false},
      // Dilation 2, rectangular kernel.
      {{1, 3, 10, 9}, {2, 3, 3, 2}, {1, 1}, {2, 1, 2, 1}, {2, 2}, 1, true},
      // Asymmetric pads (explicit padding for cuDNN), both ways round.
      {{2, 3, 8, 7}, {5, 3, 3, 3}, {2, 1}, {0, 1, 1, 2}, {1, 1}, 1, true},
      {{2, 3, 8, 9}, {4, 3, 3, 3}, {2, 2}, {2, 0, 1, 1}, {1, 1}, 1, false},
      // TF "SAME" at stride 2: pads (0, 1).
      {{2, 4, 8, 8}, {4, 4, 3, 3}, {2, 2}, {0, 0, 1, 1}, {1, 1}, 1, false},
      // Groups.
      {{2, 4, 7, 7}, {6, 2, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 2, true},
      // Depthwise, multiplier 1 and 2.
      {{2, 5, 9, 9}, {5, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 5, true},
      {{2, 5, 9, 8}, {10, 1, 3, 3}, {2, 1}, {1, 0, 1, 2}, {1, 2}, 5, false},
      // Pointwise.
      {{3, 8, 5, 5}, {4, 8, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true},
      // 1-D: strided with asymmetric pads; dilated and grouped.
      {{2, 3, 17}, {4, 3, 5}, {2}, {2, 1}, {1}, 1, true},
      {{2, 6, 20}, {6, 2, 3}, {1}, {2, 2}, {2}, 3, false},
      // 3-D.
      {{1, 2, 5, 6, 7}, {3, 2, 2, 3, 3}, {1, 2, 1}, {0, 1, 1, 1, 0, 1}, {1, 1, 2}, 1, true},
      {{2, 4, 4, 5, 6}, {4, 2, 3, 3, 3}, {2, 1, 1}, {1, 1, 1, 1, 1, 1}, {1, 1, 1}, 2, false},
      // 4-D: beyond cuDNN, the direct kernels.
      {{1, 2, 3, 4, 3, 4}, {2, 2, 2, 2, 2, 2}, {1, 2, 1, 1}, {0, 1, 0, 1, 1, 0, 1, 0},
       {1, 1, 2, 1}, 1, true},
      // Several blocks' worth, odd sizes.
      {{4, 16, 33, 35}, {32, 16, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true},
  };
}

// f32 sums are ordered differently from the CPU's (cuDNN vs im2col + GEMM).
double convRtol(DType dt) { return dt == DType::F32 ? 1e-4 : 1e-9; }
double convAtol(DType dt) { return dt == DType::F32 ? 1e-4 : 1e-9; }

class CudaConvTest : public CudaKernelTest {};

TEST_F(CudaConvTest, Conv) {
  uint64_t seed = 1;
  for (DType dt : {DType::F32, DType::F64})
    for (const ConvCase &c : convCases()) {
      SCOPED_TRACE(describe(c, dt));
      std::vector<TestTensor> ins{randomTensor(dt, c.x, seed++),
                                  randomTensor(dt, c.w, seed++)};
      if (c.bias)
        ins.push_back(randomTensor(dt, {c.w[0]}, seed++));
      expectCudaMatchesCpu("conv", ins, {TestTensor(dt, c.y())}, c.attrs(),
                           convRtol(dt), convAtol(dt));
    }
}

TEST_F(CudaConvTest, ConvBiasAbsent) {
  ConvCase c = convCases()[0];
  for (DType dt : {DType::F32, DType::F64})
    expectCudaMatchesCpu("conv",
                         {randomTensor(dt, c.x, 7), randomTensor(dt, c.w, 8),
                          TestTensor::none()},
                         {TestTensor(dt, c.y())}, c.attrs(), convRtol(dt), convAtol(dt));
}

TEST_F(CudaConvTest, ConvGradInput) {
  uint64_t seed = 100;
  for (DType dt : {DType::F32, DType::F64})
    for (const ConvCase &c : convCases()) {
      SCOPED_TRACE(describe(c, dt));
      expectCudaMatchesCpu("conv_grad_input",
                           {randomTensor(dt, c.y(), seed), randomTensor(dt, c.w, seed + 1)},
                           {TestTensor(dt, c.x)}, c.attrs(), convRtol(dt), convAtol(dt));
      seed += 2;
    }
}

TEST_F(CudaConvTest, ConvGradFilter) {
  uint64_t seed = 200;
  for (DType dt : {DType::F32, DType::F64})
    for (const ConvCase &c : convCases()) {
      SCOPED_TRACE(describe(c, dt));
      expectCudaMatchesCpu("conv_grad_filter",
                           {randomTensor(dt, c.x, seed), randomTensor(dt, c.y(), seed + 1)},
                           {TestTensor(dt, c.w)}, c.attrs(), convRtol(dt), convAtol(dt));
      seed += 2;
    }
}

TEST_F(CudaConvTest, ConvEmptyBatch) {
  // No images: y and dx are empty, dw is zero.
  ConvCase c{{0, 3, 6, 6}, {4, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, false};
  for (DType dt : {DType::F32, DType::F64}) {
    expectCudaMatchesCpu("conv", {TestTensor(dt, c.x), randomTensor(dt, c.w, 1)},
                         {TestTensor(dt, c.y())}, c.attrs());
    expectCudaMatchesCpu("conv_grad_filter", {TestTensor(dt, c.x), TestTensor(dt, c.y())},
                         {TestTensor(dt, c.w)}, c.attrs());
  }
}

TEST_F(CudaConvTest, ConvBindErrors) {
  // Both backends refuse these (expectCudaMatchesCpu checks that both fail).
  ConvCase c = convCases()[0];
  DType dt = DType::F32;
  // Wrong y shape.
  expectCudaMatchesCpu("conv", {randomTensor(dt, c.x, 1), randomTensor(dt, c.w, 2)},
                       {TestTensor(dt, {2, 4, 6, 6})}, c.attrs());
  // Channels do not match the group.
  json grouped = c.attrs();
  grouped["group"] = 2;
  expectCudaMatchesCpu("conv", {randomTensor(dt, c.x, 1), randomTensor(dt, c.w, 2)},
                       {TestTensor(dt, c.y())}, grouped);
  // Mixed dtypes, a bad bias, negative pads.
  expectCudaMatchesCpu("conv", {randomTensor(dt, c.x, 1), randomTensor(DType::F64, c.w, 2)},
                       {TestTensor(dt, c.y())}, c.attrs());
  expectCudaMatchesCpu("conv",
                       {randomTensor(dt, c.x, 1), randomTensor(dt, c.w, 2),
                        randomTensor(dt, {3}, 3)},
                       {TestTensor(dt, c.y())}, c.attrs());
  json negPad = c.attrs();
  negPad["pads"] = {-1, 1, 1, 1};
  expectCudaMatchesCpu("conv_grad_input", {randomTensor(dt, c.y(), 1), randomTensor(dt, c.w, 2)},
                       {TestTensor(dt, c.x)}, negPad);
  expectCudaMatchesCpu("conv_grad_filter",
                       {randomTensor(dt, c.x, 1), randomTensor(dt, {2, 4, 5, 5}, 2)},
                       {TestTensor(dt, c.w)}, c.attrs());
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

/// The CPU tests' cases and more: windows entirely in the padding, and
/// one spanning many blocks.
std::vector<PoolCase> gpuPoolCases() {
  std::vector<PoolCase> cs = poolCases();
  // Pads as large as the kernel: windows entirely in the padding.
  cs.push_back({{1, 2, 4, 4}, {2, 2}, {2, 2}, {2, 2, 2, 2}, {}, false, false});
  cs.push_back({{1, 2, 4, 4}, {2, 2}, {2, 2}, {2, 2, 2, 2}, {}, false, true});
  cs.push_back({{4, 16, 37, 41}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {}, false, false});
  return cs;
}

/// Random values rounded to a few levels, so that windows hold ties.
TestTensor tiedTensor(DType dt, std::vector<int64_t> shape, uint64_t seed) {
  std::vector<double> v = randomValues(numel(shape), seed, -2.0, 2.0);
  for (double &e : v)
    e = std::round(e);
  return TestTensor(dt, std::move(shape), v);
}

// The pooling kernels sum in the CPU's order: only rounding of the same
// operations could differ (none expected).
constexpr double kPoolRtol = 1e-6, kPoolAtol = 1e-7;

TEST_F(CudaConvTest, MaxPool) {
  uint64_t seed = 300;
  std::vector<PoolCase> cases = gpuPoolCases();
  for (const PoolCase &c : dilatedPoolCases())
    cases.push_back(c);
  for (DType dt : {DType::F32, DType::F64})
    for (const PoolCase &c : cases) {
      SCOPED_TRACE(describe(c, dt, true));
      expectCudaMatchesCpu("max_pool", {randomTensor(dt, c.x, seed++)},
                           {TestTensor(dt, c.y())}, c.attrs(true), kPoolRtol, kPoolAtol);
      expectCudaMatchesCpu("max_pool_grad",
                           {randomTensor(dt, c.x, seed), randomTensor(dt, c.y(), seed + 1)},
                           {TestTensor(dt, c.x)}, c.attrs(true), kPoolRtol, kPoolAtol);
      seed += 2;
      // Ties: the gradient goes to the first maximum in window order.
      expectCudaMatchesCpu("max_pool_grad",
                           {tiedTensor(dt, c.x, seed), randomTensor(dt, c.y(), seed + 1)},
                           {TestTensor(dt, c.x)}, c.attrs(true), kPoolRtol, kPoolAtol);
      seed += 2;
    }
}

TEST_F(CudaConvTest, AvgPool) {
  uint64_t seed = 400;
  for (DType dt : {DType::F32, DType::F64})
    for (const PoolCase &c : gpuPoolCases()) {
      SCOPED_TRACE(describe(c, dt, false));
      expectCudaMatchesCpu("avg_pool", {randomTensor(dt, c.x, seed++)},
                           {TestTensor(dt, c.y())}, c.attrs(false), kPoolRtol, kPoolAtol);
      expectCudaMatchesCpu("avg_pool_grad", {randomTensor(dt, c.y(), seed++)},
                           {TestTensor(dt, c.x)}, c.attrs(false), kPoolRtol, kPoolAtol);
    }
}

TEST_F(CudaConvTest, MaxPoolNanAndInfinity) {
  // As the CPU: NaN wins the max and its gradient goes to the last NaN; an
  // all -inf window gives -inf and its gradient goes to its first element.
  json attrs{{"kernel_shape", {2, 2}}, {"strides", {1, 1}}, {"pads", {0, 0, 0, 0}},
             {"dilations", {1, 1}}};
  double nan = std::numeric_limits<double>::quiet_NaN(),
         inf = std::numeric_limits<double>::infinity();
  for (DType dt : {DType::F32, DType::F64}) {
    std::vector<double> y = runOnCuda("max_pool", {TestTensor(dt, {1, 1, 2, 2}, {1, nan, 3, nan})},
                                      {TestTensor(dt, {1, 1, 1, 1})}, attrs)[0]
                                .values();
    ASSERT_EQ(y.size(), 1u);
    EXPECT_TRUE(std::isnan(y[0]));
    std::vector<double> dx =
        runOnCuda("max_pool_grad",
                  {TestTensor(dt, {1, 1, 2, 2}, {1, nan, 3, nan}),
                   TestTensor(dt, {1, 1, 1, 1}, {2.0})},
                  {TestTensor(dt, {1, 1, 2, 2})}, attrs)[0]
            .values();
    EXPECT_EQ(dx, (std::vector<double>{0, 0, 0, 2.0}));
    y = runOnCuda("max_pool", {TestTensor(dt, {1, 1, 2, 2}, {-inf, -inf, -inf, -inf})},
                  {TestTensor(dt, {1, 1, 1, 1})}, attrs)[0]
            .values();
    EXPECT_EQ(y, (std::vector<double>{-inf}));
    dx = runOnCuda("max_pool_grad",
                   {TestTensor(dt, {1, 1, 2, 2}, {-inf, -inf, -inf, -inf}),
                    TestTensor(dt, {1, 1, 1, 1}, {2.0})},
                   {TestTensor(dt, {1, 1, 2, 2})}, attrs)[0]
             .values();
    EXPECT_EQ(dx, (std::vector<double>{2.0, 0, 0, 0}));
  }
}

TEST_F(CudaConvTest, PoolBindErrors) {
  PoolCase c = poolCases()[1];
  DType dt = DType::F32;
  // Wrong y shape; a kernel of the wrong rank; dx not x's shape.
  expectCudaMatchesCpu("max_pool", {randomTensor(dt, c.x, 1)}, {TestTensor(dt, {2, 2, 3, 3})},
                       c.attrs(true));
  json badKernel = c.attrs(false);
  badKernel["kernel_shape"] = {3};
  expectCudaMatchesCpu("avg_pool", {randomTensor(dt, c.x, 1)}, {TestTensor(dt, c.y())},
                       badKernel);
  expectCudaMatchesCpu("max_pool_grad", {randomTensor(dt, c.x, 1), randomTensor(dt, c.y(), 2)},
                       {TestTensor(dt, {2, 2, 7, 6})}, c.attrs(true));
  expectCudaMatchesCpu("avg_pool_grad", {randomTensor(DType::I32, c.y(), 2)},
                       {TestTensor(DType::I32, c.x)}, c.attrs(false));
}

} // namespace
} // namespace parallax::rt::test
