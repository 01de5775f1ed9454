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

#include <cmath>
#include <limits>

namespace parallax::rt::test {
namespace {

using nlohmann::json;

int64_t prod(const std::vector<int64_t> &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

int64_t outDim(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe,
               int64_t d, bool ceil) {
  int64_t span = in + pb + pe - (d * (k - 1) + 1);
  int64_t out = (ceil ? (span + s - 1) / s : span / s) + 1;
  if (ceil && (out - 1) * s >= in + pb)
    --out;
  return out;
}

TestTensor randomTensor(DType dt, std::vector<int64_t> shape, uint64_t seed) {
  int64_t n = prod(shape);
  return TestTensor(dt, std::move(shape), randomValues(n, seed));
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

struct ConvCase {
  std::vector<int64_t> x, w; // [N, C, in...], [M, C/group, k...]
  std::vector<int64_t> strides, pads, dilations;
  int64_t group = 1;
  bool bias = false;

  size_t nd() const { return x.size() - 2; }
  std::vector<int64_t> y() const {
    std::vector<int64_t> s{x[0], w[0]};
    for (size_t i = 0; i < nd(); ++i)
      s.push_back(outDim(x[2 + i], w[2 + i], strides[i], pads[i], pads[nd() + i],
                         dilations[i], false));
    return s;
  }
  json attrs() const {
    json a{{"strides", strides}, {"pads", pads}, {"dilations", dilations}};
    if (group != 1)
      a["group"] = group;
    return a;
  }
};

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

std::string describe(const ConvCase &c, DType dt) {
  return std::string(nameOf(dt)) + " x" + json(c.x).dump() + " w" + json(c.w).dump() +
         " " + c.attrs().dump();
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

struct PoolCase {
  std::vector<int64_t> x, kernel, strides, pads, dilations;
  bool ceil = false, includePad = false;

  size_t nd() const { return x.size() - 2; }
  std::vector<int64_t> dil() const {
    return dilations.empty() ? std::vector<int64_t>(nd(), 1) : dilations;
  }
  std::vector<int64_t> y() const {
    std::vector<int64_t> s{x[0], x[1]};
    for (size_t i = 0; i < nd(); ++i)
      s.push_back(outDim(x[2 + i], kernel[i], strides[i], pads[i], pads[nd() + i],
                         dil()[i], ceil));
    return s;
  }
  json attrs(bool isMax) const {
    json a{{"kernel_shape", kernel}, {"strides", strides}, {"pads", pads}};
    if (isMax)
      a["dilations"] = dil();
    if (ceil)
      a["ceil_mode"] = true;
    if (includePad && !isMax)
      a["count_include_pad"] = true;
    return a;
  }
};

/// The CPU tests' cases.
std::vector<PoolCase> poolCases() {
  std::vector<PoolCase> cs;
  cs.push_back({{2, 3, 6, 6}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {}, false, false});
  cs.push_back({{2, 2, 7, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, false, false});
  cs.push_back({{2, 2, 7, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, false, true});
  // ceil_mode: the last window hangs over the end (padding) ...
  cs.push_back({{1, 2, 6, 6}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, true, false});
  cs.push_back({{1, 2, 6, 6}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, true, true});
  // ... or a window that would start in the end padding is dropped.
  cs.push_back({{1, 1, 7, 5}, {2, 2}, {3, 2}, {1, 0, 1, 1}, {}, true, true});
  cs.push_back({{1, 1, 7, 5}, {2, 2}, {3, 2}, {1, 0, 1, 1}, {}, true, false});
  // Asymmetric pads, rectangular kernels and strides.
  cs.push_back({{2, 2, 8, 9}, {3, 2}, {1, 3}, {2, 0, 1, 1}, {}, false, true});
  cs.push_back({{2, 2, 8, 9}, {3, 2}, {1, 3}, {2, 0, 1, 1}, {}, true, false});
  // Pads as large as the kernel: windows entirely in the padding.
  cs.push_back({{1, 2, 4, 4}, {2, 2}, {2, 2}, {2, 2, 2, 2}, {}, false, false});
  cs.push_back({{1, 2, 4, 4}, {2, 2}, {2, 2}, {2, 2, 2, 2}, {}, false, true});
  // 1-D and 3-D.
  cs.push_back({{2, 3, 9}, {3}, {2}, {1, 2}, {}, true, true});
  cs.push_back({{2, 3, 9}, {2}, {3}, {0, 1}, {}, false, false});
  cs.push_back({{1, 2, 5, 4, 6}, {2, 3, 2}, {2, 1, 2}, {1, 1, 0, 0, 1, 1}, {}, true, true});
  cs.push_back({{1, 2, 5, 4, 6}, {2, 3, 2}, {2, 1, 2}, {1, 1, 0, 0, 1, 1}, {}, false, false});
  // Several blocks' worth.
  cs.push_back({{2, 8, 40, 40}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, true, true});
  cs.push_back({{4, 16, 37, 41}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {}, false, false});
  return cs;
}

/// Max-pool only: dilations.
std::vector<PoolCase> dilatedCases() {
  return {{{1, 2, 9, 8}, {3, 2}, {2, 1}, {2, 1, 1, 0}, {2, 3}, true, false},
          {{2, 1, 10}, {3}, {2}, {1, 1}, {3}, false, false},
          {{1, 1, 6, 5, 7}, {2, 2, 3}, {1, 2, 2}, {1, 0, 0, 1, 1, 2}, {2, 1, 2}, true, false}};
}

std::string describe(const PoolCase &c, DType dt, bool isMax) {
  return std::string(nameOf(dt)) + " x" + json(c.x).dump() + " " + c.attrs(isMax).dump();
}

/// Random values rounded to a few levels, so that windows hold ties.
TestTensor tiedTensor(DType dt, std::vector<int64_t> shape, uint64_t seed) {
  std::vector<double> v = randomValues(prod(shape), seed, -2.0, 2.0);
  for (double &e : v)
    e = std::round(e);
  return TestTensor(dt, std::move(shape), v);
}

// The pooling kernels sum in the CPU's order: only rounding of the same
// operations could differ (none expected).
constexpr double kPoolRtol = 1e-6, kPoolAtol = 1e-7;

TEST_F(CudaConvTest, MaxPool) {
  uint64_t seed = 300;
  std::vector<PoolCase> cases = poolCases();
  for (const PoolCase &c : dilatedCases())
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
    for (const PoolCase &c : poolCases()) {
      SCOPED_TRACE(describe(c, dt, false));
      expectCudaMatchesCpu("avg_pool", {randomTensor(dt, c.x, seed++)},
                           {TestTensor(dt, c.y())}, c.attrs(false), kPoolRtol, kPoolAtol);
      expectCudaMatchesCpu("avg_pool_grad", {randomTensor(dt, c.y(), seed++)},
                           {TestTensor(dt, c.x)}, c.attrs(false), kPoolRtol, kPoolAtol);
    }
}

/// Runs `op` on the GPU only and returns its first output.
std::vector<double> runOnGpu(const std::string &op, std::vector<TestTensor> inputs,
                             TestTensor output, const json &attrs) {
  CudaDevice &dev = testCudaDevice();
  const KernelFactory *factory = dev.kernels().find(op);
  if (!factory) {
    ADD_FAILURE() << "no CUDA kernel '" << op << "'";
    return {};
  }
  std::vector<std::unique_ptr<Buffer>> storage;
  auto toDevice = [&](TestTensor &t) {
    int64_t bytes = t.numElements() * (int64_t)sizeOf(t.dtype);
    storage.push_back(std::make_unique<Buffer>(bytes + 64, &dev));
    dev.upload(storage.back()->data(), t.data(), bytes);
    return TensorView{storage.back()->data(), t.dtype, t.shape, MemorySpace::Cuda};
  };
  std::vector<TensorView> gi, go{toDevice(output)};
  for (TestTensor &t : inputs)
    gi.push_back(toDevice(t));
  PlanKernel kernel;
  kernel.op = op;
  kernel.attrs = attrs;
  ExecEnv env;
  env.device = &dev;
  env.step = 1;
  KernelArgs args(kernel, gi, go, env);
  args.index = 0;
  KernelFn fn = (*factory)(args);
  fn();
  dev.synchronize();
  dev.download(output.data(), go[0].data,
               output.numElements() * (int64_t)sizeOf(output.dtype));
  return output.values();
}

TEST_F(CudaConvTest, MaxPoolNanAndInfinity) {
  // As the CPU: NaN wins the max and its gradient goes to the last NaN; an
  // all -inf window gives -inf and its gradient goes to its first element.
  json attrs{{"kernel_shape", {2, 2}}, {"strides", {1, 1}}, {"pads", {0, 0, 0, 0}},
             {"dilations", {1, 1}}};
  double nan = std::numeric_limits<double>::quiet_NaN(),
         inf = std::numeric_limits<double>::infinity();
  for (DType dt : {DType::F32, DType::F64}) {
    std::vector<double> y = runOnGpu("max_pool", {TestTensor(dt, {1, 1, 2, 2}, {1, nan, 3, nan})},
                                     TestTensor(dt, {1, 1, 1, 1}), attrs);
    ASSERT_EQ(y.size(), 1u);
    EXPECT_TRUE(std::isnan(y[0]));
    std::vector<double> dx =
        runOnGpu("max_pool_grad",
                 {TestTensor(dt, {1, 1, 2, 2}, {1, nan, 3, nan}),
                  TestTensor(dt, {1, 1, 1, 1}, {2.0})},
                 TestTensor(dt, {1, 1, 2, 2}), attrs);
    EXPECT_EQ(dx, (std::vector<double>{0, 0, 0, 2.0}));
    y = runOnGpu("max_pool", {TestTensor(dt, {1, 1, 2, 2}, {-inf, -inf, -inf, -inf})},
                 TestTensor(dt, {1, 1, 1, 1}), attrs);
    EXPECT_EQ(y, (std::vector<double>{-inf}));
    dx = runOnGpu("max_pool_grad",
                  {TestTensor(dt, {1, 1, 2, 2}, {-inf, -inf, -inf, -inf}),
                   TestTensor(dt, {1, 1, 1, 1}, {2.0})},
                  TestTensor(dt, {1, 1, 2, 2}), attrs);
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
