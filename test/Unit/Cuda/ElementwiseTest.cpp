//===- ElementwiseTest.cpp - the Elementwise CUDA kernels against the CPU's --------------===//
//
// Every op of the family on the GPU against the CPU kernel: f32, f64 and the
// integer types the CPU takes, the broadcast patterns of the CPU's tests,
// sizes that need many blocks and are not multiples of 4 or 32, and the
// errors the CPU raises at bind time (both refuse) or run time (the GPU
// reports a fault). Inputs stay inside each function's domain: a NaN in
// both results would not compare equal.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelTestUtil.h"

#include <cmath>
#include <limits>

namespace parallax::rt::test {
namespace {

using Shape = std::vector<int64_t>;
using nlohmann::json;

const std::vector<DType> kFloatTypes = {DType::F32, DType::F64};
const std::vector<DType> kNumericTypes = {DType::F32, DType::F64, DType::I64, DType::I32,
                                          DType::I16, DType::I8,  DType::U8};

bool isFloatType(DType t) { return t == DType::F32 || t == DType::F64; }

/// Random values for `t` in [lo, hi): integers are rounded (and kept >= 0
/// for u8); with `nonzero`, 0 becomes 3.
TestTensor tensorFor(DType t, const Shape &s, uint64_t seed, double lo = -3.0,
                     double hi = 3.0, bool nonzero = false) {
  std::vector<double> v = randomValues(numel(s), seed, lo, hi);
  for (double &x : v) {
    if (!isFloatType(t)) {
      x = std::round(x * 16.0);
      if (t == DType::U8)
        x = std::abs(x);
      if (t == DType::Bool)
        x = x > 0;
    }
    if (nonzero && x == 0)
      x = 3;
  }
  return TestTensor(t, s, v);
}

// The CPU's broadcast patterns, plus sizes that need many blocks and a
// rank of 10 (more dimensions than Dims holds; the Geometry merges to 16).
const std::vector<std::pair<Shape, Shape>> kBroadcastCases = {
    {{3, 4}, {3, 4}},
    {{}, {2, 3}},
    {{2, 3}, {1}},
    {{6, 5}, {5}},
    {{5}, {6, 5}},
    {{4, 1}, {1, 5}},
    {{2, 3, 4}, {3, 1}},
    {{2, 1, 4, 1}, {3, 1, 5}},
    {{7, 3}, {7, 1}},
    {{2, 3, 1, 2, 2}, {3, 4, 1, 1}},
    {{0, 3}, {3}},
    {{300, 257}, {257}},
    {{3, 100, 257}, {100, 1}},
    {{70001}, {}},
    {{5, 1, 100, 100}, {3, 100, 1}},
    {{2, 1, 3, 1, 2, 1, 3, 1, 2, 5}, {1, 2, 1, 3, 1, 2, 1, 3, 1, 5}},
};

void checkBinary(const std::string &op, DType t, const Shape &sa, const Shape &sb,
                 DType outType, bool nonzeroB = false, json attrs = json::object()) {
  SCOPED_TRACE(op + " " + nameOf(t) + " " + ::testing::PrintToString(sa) + " vs " +
               ::testing::PrintToString(sb));
  Shape so = broadcastShape(sa, sb);
  expectCudaMatchesCpu(op,
                       {tensorFor(t, sa, 11), tensorFor(t, sb, 12, -3.0, 3.0, nonzeroB)},
                       {TestTensor(outType, so)}, attrs);
}

TEST_F(CudaKernelTest, ElementwiseArithmeticEveryTypeAndBroadcast) {
  for (DType t : kNumericTypes)
    for (const char *op : {"add", "sub", "mul", "div", "max", "min"})
      for (auto &[sa, sb] : kBroadcastCases)
        checkBinary(op, t, sa, sb, t, /*nonzeroB=*/std::string(op) == "div");
}

TEST_F(CudaKernelTest, ElementwiseIntegerEdgeCases) {
  // Truncating division, INT_MIN / -1, wrap-around.
  expectCudaMatchesCpu("div",
                       {TestTensor(DType::I32, {6}, {7, -7, 7, -7, 0, -2147483648.0}),
                        TestTensor(DType::I32, {6}, {2, 2, -2, -2, 5, -1})},
                       {TestTensor(DType::I32, {6})});
  for (const char *op : {"add", "mul", "sub"})
    expectCudaMatchesCpu(op,
                         {TestTensor(DType::I8, {3}, {100, -100, 127}),
                          TestTensor(DType::I8, {3}, {100, 100, 2})},
                         {TestTensor(DType::I8, {3})});
  expectCudaMatchesCpu("mul",
                       {TestTensor(DType::U8, {3}, {200, 255, 16}),
                        TestTensor(DType::U8, {3}, {200, 255, 16})},
                       {TestTensor(DType::U8, {3})});
}

TEST_F(CudaKernelTest, ElementwiseMaxMinPropagateNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // Only the NaN-free elements can be compared; the NaN ones must be NaN
  // on the GPU too, which a separate run checks via `equal`.
  for (const char *op : {"max", "min"}) {
    TestTensor a(DType::F32, {4}, {nan, 1, nan, -1}), b(DType::F32, {4}, {1, nan, nan, 2});
    std::vector<double> out = runOnCuda(op, {a, b}, {TestTensor(DType::F32, {4})})[0].values();
    EXPECT_TRUE(std::isnan(out[0]) && std::isnan(out[1]) && std::isnan(out[2])) << op;
    EXPECT_EQ(out[3], std::string(op) == "max" ? 2.0 : -1.0) << op;
  }
}

TEST_F(CudaKernelTest, ElementwisePow) {
  // Positive float bases with broadcast float exponents.
  for (DType t : kFloatTypes)
    expectCudaMatchesCpu("pow", {tensorFor(t, {40, 37}, 3, 0.1, 3.0), tensorFor(t, {37}, 4, -2, 2)},
                         {TestTensor(t, {40, 37})});
  // Scalar exponents (2 is the squaring path), negative bases.
  for (DType t : kFloatTypes)
    for (double e : {2.0, 3.0, -1.0})
      expectCudaMatchesCpu("pow", {tensorFor(t, {1001}, 5), TestTensor(t, {}, {e})},
                           {TestTensor(t, {1001})});
  // Integer exponents of float bases, float exponents of integer bases.
  expectCudaMatchesCpu("pow",
                       {TestTensor(DType::F64, {3}, {1.5, -2, 10}),
                        TestTensor(DType::I64, {3}, {2, 3, -1})},
                       {TestTensor(DType::F64, {3})});
  expectCudaMatchesCpu("pow",
                       {TestTensor(DType::I32, {4}, {2, -3, 5, 7}),
                        TestTensor(DType::F32, {4}, {3.7, 2.0, -0.5, 1e20})},
                       {TestTensor(DType::I32, {4})});
  // Integer bases and exponents, negative exponents, wrap-around.
  for (DType t : {DType::I64, DType::I32, DType::I16, DType::I8, DType::U8})
    expectCudaMatchesCpu("pow",
                         {TestTensor(t, {7}, {2, 3, 5, 1, 7, 2, 1}),
                          TestTensor(t, {7}, {10, 3, 0, 4, 9, 70, 100})},
                         {TestTensor(t, {7})});
  expectCudaMatchesCpu("pow",
                       {TestTensor(DType::I32, {6}, {2, -3, 5, 1, -1, 7}),
                        TestTensor(DType::I32, {6}, {10, 3, 0, -4, -3, -1})},
                       {TestTensor(DType::I32, {6})});
  // Many blocks, an integer exponent tensor broadcast over rows.
  expectCudaMatchesCpu("pow", {tensorFor(DType::F32, {513, 129}, 6, 0.5, 1.5),
                               TestTensor(DType::I32, {129}, randomValues(129, 7, 0, 5))},
                       {TestTensor(DType::F32, {513, 129})});
}

TEST_F(CudaKernelTest, ElementwiseMod) {
  for (bool fmod : {false, true}) {
    json attrs = json::object();
    if (fmod)
      attrs["fmod"] = true;
    for (DType t : kNumericTypes)
      for (auto &[sa, sb] : {std::pair<Shape, Shape>{{5, 7}, {5, 7}},
                             std::pair<Shape, Shape>{{300, 257}, {257}},
                             std::pair<Shape, Shape>{{4, 1}, {1, 5}}})
        checkBinary("mod", t, sa, sb, t, /*nonzeroB=*/true, attrs);
    expectCudaMatchesCpu("mod",
                         {TestTensor(DType::I32, {6}, {7, -7, 7, -7, -2147483648.0, 0}),
                          TestTensor(DType::I32, {6}, {3, 3, -3, -3, -1, 5})},
                         {TestTensor(DType::I32, {6})}, attrs);
  }
}

TEST_F(CudaKernelTest, ElementwiseComparisons) {
  for (const char *op : {"equal", "less", "greater"})
    for (DType t : kNumericTypes)
      for (auto &[sa, sb] : kBroadcastCases)
        checkBinary(op, t, sa, sb, DType::Bool);
  expectCudaMatchesCpu("equal",
                       {TestTensor(DType::F32, {4}, {1, 2, std::nan(""), -0.0}),
                        TestTensor(DType::F32, {4}, {1, 3, std::nan(""), 0.0})},
                       {TestTensor(DType::Bool, {4})});
  for (auto &[sa, sb] : kBroadcastCases)
    checkBinary("equal", DType::Bool, sa, sb, DType::Bool);
  // i1 operands are not ordered: both refuse.
  checkBinary("less", DType::Bool, {3}, {3}, DType::Bool);
}

TEST_F(CudaKernelTest, ElementwiseWhere) {
  const std::vector<std::tuple<Shape, Shape, Shape>> cases = {
      {{3, 4}, {3, 4}, {3, 4}},          {{3, 4}, {}, {3, 4}},
      {{3, 4}, {3, 4}, {}},              {{}, {3, 4}, {3, 4}},
      {{4, 1}, {1, 5}, {4, 5}},          {{2, 1, 3}, {4, 1}, {1, 3}},
      {{1000, 33}, {33}, {1000, 1}},     {{70001}, {70001}, {}},
      {{2, 1, 2, 1, 2, 1, 2, 1, 2, 3}, {1, 2, 1, 2, 1, 2, 1, 2, 1, 3}, {3}},
  };
  for (DType t : {DType::F32, DType::F64, DType::I64, DType::I32, DType::I16, DType::I8,
                  DType::U8, DType::Bool})
    for (auto &[sc, sx, sy] : cases) {
      SCOPED_TRACE(std::string(nameOf(t)) + " " + ::testing::PrintToString(sc));
      Shape so = broadcastShape(broadcastShape(sc, sx), sy);
      expectCudaMatchesCpu("where",
                           {tensorFor(DType::Bool, sc, 1), tensorFor(t, sx, 2),
                            tensorFor(t, sy, 3)},
                           {TestTensor(t, so)});
    }
  // Errors: mismatched types and shapes.
  expectCudaMatchesCpu("where",
                       {TestTensor(DType::Bool, {3}), TestTensor(DType::F32, {3}),
                        TestTensor(DType::F64, {3})},
                       {TestTensor(DType::F32, {3})});
  expectCudaMatchesCpu("where",
                       {TestTensor(DType::Bool, {4}), TestTensor(DType::F32, {3}),
                        TestTensor(DType::F32, {3})},
                       {TestTensor(DType::F32, {3})});
}

struct UnaryCase {
  const char *op;
  double lo, hi;
  bool floatOnly;
};

TEST_F(CudaKernelTest, ElementwiseUnary) {
  const UnaryCase cases[] = {
      {"neg", -3, 3, false},       {"abs", -3, 3, false},        {"relu", -3, 3, false},
      {"sign", -3, 3, false},      {"sqrt", 0, 9, true},         {"reciprocal", 0.1, 4, true},
      {"exp", -80, 80, true},      {"log", 1e-3, 100, true},     {"tanh", -12, 12, true},
      {"sigmoid", -90, 90, true},  {"erf", -5, 5, true},         {"sin", -7, 7, true},
      {"cos", -7, 7, true},        {"tan", -1.5, 1.5, true},     {"asin", -1, 1, true},
      {"acos", -1, 1, true},       {"atan", -10, 10, true},      {"sinh", -10, 10, true},
      {"cosh", -10, 10, true},     {"asinh", -10, 10, true},     {"acosh", 1, 10, true},
      {"atanh", -0.99, 0.99, true}, {"floor", -5, 5, true},      {"ceil", -5, 5, true},
      {"round", -5, 5, true},
  };
  for (const UnaryCase &c : cases) {
    std::vector<DType> types = c.floatOnly ? kFloatTypes : kNumericTypes;
    for (DType t : types)
      for (const Shape &s : {Shape{}, Shape{7}, Shape{33, 31}, Shape{100003}}) {
        SCOPED_TRACE(std::string(c.op) + " " + nameOf(t) + " " + ::testing::PrintToString(s));
        expectCudaMatchesCpu(c.op, {tensorFor(t, s, 21, c.lo, c.hi)}, {TestTensor(t, s)});
      }
  }
  // Halves round to even; exact halves and integers.
  for (DType t : kFloatTypes)
    expectCudaMatchesCpu("round", {TestTensor(t, {8}, {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3, -0.0})},
                         {TestTensor(t, {8})});
  // sigmoid and exp at the f32 extremes (no overflow, subnormal results).
  expectCudaMatchesCpu("sigmoid", {TestTensor(DType::F32, {6}, {-200, -88, -20, 20, 88, 200})},
                       {TestTensor(DType::F32, {6})});
  expectCudaMatchesCpu("exp", {TestTensor(DType::F32, {5}, {-103, -90, 0, 85, 88.7})},
                       {TestTensor(DType::F32, {5})}, json::object(), 1e-5, 1e-40);
  // abs and neg of INT_MIN wrap.
  for (const char *op : {"abs", "neg"})
    expectCudaMatchesCpu(op, {TestTensor(DType::I32, {3}, {-2147483648.0, -5, 5})},
                         {TestTensor(DType::I32, {3})});
  // Errors: integer input to a float-only op, a shape mismatch.
  expectCudaMatchesCpu("exp", {TestTensor(DType::I32, {3})}, {TestTensor(DType::I32, {3})});
  expectCudaMatchesCpu("neg", {TestTensor(DType::F32, {3})}, {TestTensor(DType::F32, {4})});
}

TEST_F(CudaKernelTest, ElementwiseNot) {
  for (const Shape &s : {Shape{5}, Shape{300, 301}})
    expectCudaMatchesCpu("not", {tensorFor(DType::Bool, s, 4)}, {TestTensor(DType::Bool, s)});
  expectCudaMatchesCpu("not", {TestTensor(DType::F32, {3})}, {TestTensor(DType::Bool, {3})});
}

TEST_F(CudaKernelTest, ElementwiseLeakyRelu) {
  for (DType t : kFloatTypes)
    for (json attrs : {json::object(), json{{"alpha", 0.2}}, json{{"alpha", -1.5}}})
      expectCudaMatchesCpu("leaky_relu", {tensorFor(t, {1025, 3}, 8)}, {TestTensor(t, {1025, 3})},
                           attrs);
  expectCudaMatchesCpu("leaky_relu", {TestTensor(DType::I32, {3})}, {TestTensor(DType::I32, {3})});
}

TEST_F(CudaKernelTest, ElementwiseClip) {
  const std::vector<json> bounds = {
      json::object(),          json{{"min", -0.5}},           json{{"max", 0.7}},
      json{{"min", -1.25}, {"max", 1.75}}, json{{"min", 2.0}, {"max", -2.0}},
      json{{"min", -1e30}, {"max", 1e30}},
  };
  for (DType t : kNumericTypes)
    for (const json &attrs : bounds)
      expectCudaMatchesCpu("clip", {tensorFor(t, {257, 9}, 9)}, {TestTensor(t, {257, 9})},
                           attrs);
  expectCudaMatchesCpu("clip", {TestTensor(DType::F32, {3})}, {TestTensor(DType::F32, {3})},
                       json{{"min", std::nan("")}});
}

TEST_F(CudaKernelTest, ElementwiseCastEveryPair) {
  const std::vector<DType> types = {DType::F32, DType::F64, DType::I64, DType::I32,
                                    DType::I16, DType::I8,  DType::U8,  DType::Bool};
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> probe = {0,    1,    -1,   3.7,    -3.7,   127.9, 128,   -129,
                                     255.5, 256, 300,  -300,   65537,  -40000.5, 3e9, -3e9,
                                     0.25, -0.0, 1e-30, 2147483647, -2147483648.0};
  for (DType from : types)
    for (DType to : types) {
      SCOPED_TRACE(std::string(nameOf(from)) + " -> " + nameOf(to));
      // The probe values as `from` holds them (wrapped by the CPU's own cast
      // from f64), repeated to need several blocks.
      TestTensor src(DType::F64, {(int64_t)probe.size()}, probe);
      TestTensor x(from, {(int64_t)probe.size()});
      runKernel("cast", {&src}, {&x});
      std::vector<double> vals;
      for (int r = 0; r < 500; ++r)
        for (double v : x.values())
          vals.push_back(v);
      // NaN and infinities only where the result is an integer (NaN -> 0).
      if (isFloatType(from) && !isFloatType(to))
        for (double v : {std::nan(""), inf, -inf, 1e19, -1e19})
          vals.push_back(v);
      const int64_t n = (int64_t)vals.size();
      expectCudaMatchesCpu("cast", {TestTensor(from, {n}, vals)}, {TestTensor(to, {n})},
                           json::object(), 0, 0);
    }
  expectCudaMatchesCpu("cast", {TestTensor(DType::F32, {3})}, {TestTensor(DType::I32, {4})});
  expectCudaMatchesCpu("cast", {TestTensor(DType::F16, {3})}, {TestTensor(DType::F32, {3})});
}

TEST_F(CudaKernelTest, ElementwiseDropoutMatchesTheCpuMask) {
  struct Case {
    Shape shape;
    json attrs;
    int64_t step, sampleOffset, globalBatch;
    int worldSize;
    uint64_t seed;
  };
  const std::vector<Case> cases = {
      {{4, 3, 5}, {{"ratio", (double)0.3f}, {"seed", 7}, {"stream", 2}}, 5, 8, 0, 1, 1234},
      {{3, 20011}, {{"ratio", 0.5}}, 17, 5, 0, 1, 42},
      {{6, 1000}, {{"ratio", 0.5}}, 3, 3, 0, 1, 99},
      {{4, 3, 500}, {{"ratio", 0.3}, {"sample_stride", 500}}, 2, 3, 6, 2, 5},
      {{4, 6, 500}, {{"ratio", 0.3}, {"sample_stride", 500}}, 2, 0, 6, 1, 5},
      {{10, 10}, {{"ratio", 0.5}, {"sample_stride", 0}}, 2, 3, 6, 1, 5},
      {{257, 1031}, {{"ratio", 0.1}, {"stream", 9}}, 1000, 0, 0, 1, 77},
      {{5, 7}, {{"ratio", 0.0}}, 1, 0, 0, 1, 0},
      {{5, 7}, {{"ratio", 1.0}}, 1, 0, 0, 1, 0},
      {{0, 7}, {{"ratio", 0.5}}, 1, 0, 0, 1, 0},
  };
  for (DType t : kFloatTypes)
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(nameOf(t)) + " " + ::testing::PrintToString(c.shape) + " " +
                   c.attrs.dump());
      ExecEnv env;
      env.step = c.step;
      env.seed = c.seed;
      env.sampleOffset = c.sampleOffset;
      env.globalBatch = c.globalBatch;
      env.worldSize = c.worldSize;
      env.dataRanks = c.worldSize;
      expectCudaMatchesCpu("dropout", {tensorFor(t, c.shape, 31)},
                           {TestTensor(t, c.shape), TestTensor(DType::Bool, c.shape)}, c.attrs,
                           1e-6, 0, env);
    }
  // Blocks of a model split (heads split_dim 1 over grid axis 1 of a 2 x 2
  // grid), on every rank: the whole tensor's numbering, as on the CPU.
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE("block of rank " + std::to_string(r));
    ExecEnv env;
    env.step = 3;
    env.seed = 8;
    env.worldSize = 4;
    env.rank = r;
    env.dataRanks = 2;
    env.globalBatch = 4;
    env.sampleOffset = (r / 2) * 2;
    const Shape b = {2, 2, 3, 20000};
    expectCudaMatchesCpu("dropout", {tensorFor(DType::F32, b, 31)},
                         {TestTensor(DType::F32, b), TestTensor(DType::Bool, b)},
                         {{"ratio", 0.4}, {"sample_stride", 4 * 3 * 20000},
                          {"grid_shape", {2, 2}}, {"grid_axes", {1}}, {"split_dim", 1}},
                         1e-6, 0, env);
  }
  // Errors: a bad ratio, a non-i1 mask, an integer input, a negative stride.
  Shape s = {3, 4};
  expectCudaMatchesCpu("dropout", {tensorFor(DType::F32, s, 1)},
                       {TestTensor(DType::F32, s), TestTensor(DType::Bool, s)}, {{"ratio", 1.5}});
  expectCudaMatchesCpu("dropout", {tensorFor(DType::F32, s, 1)},
                       {TestTensor(DType::F32, s), TestTensor(DType::F32, s)}, {{"ratio", 0.5}});
  expectCudaMatchesCpu("dropout", {tensorFor(DType::I32, s, 1)},
                       {TestTensor(DType::I32, s), TestTensor(DType::Bool, s)}, {{"ratio", 0.5}});
  expectCudaMatchesCpu("dropout", {tensorFor(DType::F32, s, 1)},
                       {TestTensor(DType::F32, s), TestTensor(DType::Bool, s)},
                       {{"ratio", 0.5}, {"sample_stride", -1}});
}

TEST_F(CudaKernelTest, ElementwiseDropoutReadsTheStepOnTheDevice) {
  // One bound kernel run at two steps must draw two masks, as the CPU's
  // does: the step comes from stepInfo(), not from the closure.
  CudaDevice &dev = testCudaDevice();
  const int64_t n = 4099;
  TestTensor x = tensorFor(DType::F32, {n}, 3);
  Buffer dx(n * 4 + 64, &dev), dy(n * 4 + 64, &dev), dm(n + 64, &dev);
  dev.upload(dx.data(), x.data(), n * 4);
  PlanKernel kernel;
  kernel.op = "dropout";
  kernel.attrs = json{{"ratio", 0.5}};
  ExecEnv env;
  env.device = &dev;
  env.step = 1;
  KernelArgs args(kernel, {TensorView{dx.data(), DType::F32, {n}, MemorySpace::Cuda}},
                  {TensorView{dy.data(), DType::F32, {n}, MemorySpace::Cuda},
                   TensorView{dm.data(), DType::Bool, {n}, MemorySpace::Cuda}},
                  env);
  KernelFn fn = (*dev.kernels().find("dropout"))(args);
  for (int64_t step : {4, 9}) {
    dev.stepInfoHost()->step = step;
    dev.stepInfoHost()->seed = 11;
    fn();
    dev.synchronize();
    TestTensor gpuMask(DType::Bool, {n});
    dev.download(gpuMask.data(), dm.data(), n);
    TestTensor y(DType::F32, {n}), m(DType::Bool, {n});
    ExecEnv cpuEnv;
    cpuEnv.step = step;
    cpuEnv.seed = 11;
    runKernel("dropout", {&x}, {&y, &m}, kernel.attrs, cpuEnv);
    EXPECT_EQ(gpuMask.values(), m.values()) << "step " << step;
  }
}

TEST_F(CudaKernelTest, ElementwiseDropoutGrad) {
  for (DType t : kFloatTypes)
    for (double ratio : {0.0, 0.25, 0.5, 1.0})
      for (const Shape &s : {Shape{3, 5}, Shape{1000, 101}})
        expectCudaMatchesCpu("dropout_grad",
                             {tensorFor(t, s, 5), tensorFor(DType::Bool, s, 6)},
                             {TestTensor(t, s)}, {{"ratio", ratio}}, 1e-6, 0);
  expectCudaMatchesCpu("dropout_grad",
                       {tensorFor(DType::F32, {3, 4}, 5), tensorFor(DType::Bool, {3, 5}, 6)},
                       {TestTensor(DType::F32, {3, 4})}, {{"ratio", 0.5}});
}

TEST_F(CudaKernelTest, ElementwiseRunTimeErrorsAreFaults) {
  // Integer division and modulo by zero, integer 0 to a negative power:
  // the CPU throws while running, the GPU reports a fault at synchronize.
  for (DType t : {DType::I64, DType::I32, DType::I8, DType::U8}) {
    TestTensor a = tensorFor(t, {100, 37}, 1);
    TestTensor b = tensorFor(t, {37}, 2, -3.0, 3.0, /*nonzero=*/true);
    b.set(20, 0);
    expectCudaMatchesCpu("div", {a, b}, {TestTensor(t, {100, 37})});
    expectCudaMatchesCpu("mod", {a, b}, {TestTensor(t, {100, 37})});
    expectCudaMatchesCpu("mod", {a, b}, {TestTensor(t, {100, 37})}, {{"fmod", true}});
  }
  expectCudaMatchesCpu("pow",
                       {TestTensor(DType::I32, {4}, {2, 0, 3, 4}),
                        TestTensor(DType::I32, {4}, {1, -2, 1, 1})},
                       {TestTensor(DType::I32, {4})});
  // The fault is cleared: the next kernel runs cleanly.
  checkBinary("div", DType::I32, {5, 7}, {7}, DType::I32, /*nonzeroB=*/true);
  // Bind-time errors: both refuse.
  expectCudaMatchesCpu("add", {TestTensor(DType::F32, {2, 3}), TestTensor(DType::F32, {4})},
                       {TestTensor(DType::F32, {2, 3})});
  expectCudaMatchesCpu("add", {TestTensor(DType::F32, {2, 3}), TestTensor(DType::F32, {3})},
                       {TestTensor(DType::F32, {4, 2, 3})});
  expectCudaMatchesCpu("mul", {TestTensor(DType::F32, {2, 3}), TestTensor(DType::I64, {2, 3})},
                       {TestTensor(DType::F32, {2, 3})});
  expectCudaMatchesCpu("add", {TestTensor(DType::F32, {2, 3}), TestTensor(DType::F32, {2, 3})},
                       {TestTensor(DType::I64, {2, 3})});
}

} // namespace
} // namespace parallax::rt::test
