// Tests of the Elementwise kernels: broadcasting binary ops, comparisons,
// where, unary ops, clip, cast, dropout and dropout_grad, each against a
// naive reference written here.
#include "KernelTestUtil.h"

#include <cmath>
#include <functional>
#include <limits>

using namespace parallax::rt;
using namespace parallax::rt::test;

namespace {

using Shape = std::vector<int64_t>;
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();


/// Flat index into `in` of element `flat` of the broadcast result `out`.
int64_t sourceIndex(const Shape &in, const Shape &out, int64_t flat) {
  std::vector<int64_t> idx(out.size());
  for (int64_t d = (int64_t)out.size() - 1; d >= 0; --d) {
    idx[d] = flat % out[d];
    flat /= out[d];
  }
  int64_t off = 0, stride = 1;
  for (int64_t d = (int64_t)in.size() - 1; d >= 0; --d) {
    int64_t od = d + (int64_t)(out.size() - in.size());
    if (in[d] != 1)
      off += idx[od] * stride;
    stride *= in[d];
  }
  return off;
}

bool isFloatType(DType t) { return t == DType::F32 || t == DType::F64; }

/// Values suitable for `t`: uniform floats, or integers in [-50, 50].
std::vector<double> valuesFor(DType t, int64_t n, uint64_t seed, bool nonzero = false) {
  std::vector<double> v = randomValues(n, seed, -3.0, 3.0);
  for (double &x : v) {
    if (!isFloatType(t))
      x = std::round(x * 16.0);
    if (nonzero && x == 0)
      x = 3;
  }
  return v;
}

using BinRef = std::function<double(double, double)>;

/// Runs `op` on random operands of shapes a, b and compares with `ref`.
void checkBinary(const std::string &op, DType t, const Shape &sa, const Shape &sb,
                 BinRef ref, DType outType, int threads = 1, bool nonzeroB = false) {
  SCOPED_TRACE(op + " " + nameOf(t) + " " + ::testing::PrintToString(sa) + " vs " +
               ::testing::PrintToString(sb) + " threads " + std::to_string(threads));
  Shape so = broadcastShape(sa, sb);
  TestTensor a(t, sa, valuesFor(t, numel(sa), 11));
  TestTensor b(t, sb, valuesFor(t, numel(sb), 12, nonzeroB));
  TestTensor o(outType, so);
  ExecEnv env;
  env.threads = threads;
  runKernel(op, {&a, &b}, {&o}, nlohmann::json::object(), env);
  std::vector<double> expected(numel(so));
  for (int64_t i = 0; i < numel(so); ++i) {
    double r = ref(a.get(sourceIndex(sa, so, i)), b.get(sourceIndex(sb, so, i)));
    if (outType == DType::F32)
      r = (float)r;
    expected[i] = r;
  }
  if (isFloatType(outType))
    expectNear(o.values(), expected, 1e-6, 1e-7);
  else
    EXPECT_EQ(o.values(), expected);
}

const std::vector<std::pair<Shape, Shape>> kBroadcastCases = {
    {{3, 4}, {3, 4}},          // same shape
    {{}, {2, 3}},              // rank-0 scalar
    {{2, 3}, {1}},             // single element
    {{6, 5}, {5}},             // bias
    {{5}, {6, 5}},             // bias, other side
    {{4, 1}, {1, 5}},          // outer product
    {{2, 3, 4}, {3, 1}},       // middle broadcast
    {{2, 1, 4, 1}, {3, 1, 5}}, // general 4-d
    {{7, 3}, {7, 1}},          // per-row scalar
    {{2, 3, 1, 2, 2}, {3, 4, 1, 1}},
    {{0, 3}, {3}},             // empty
};

TEST(ElementwiseBinary, FloatArithmeticAllBroadcasts) {
  std::vector<std::pair<std::string, BinRef>> ops = {
      {"add", [](double a, double b) { return a + b; }},
      {"sub", [](double a, double b) { return a - b; }},
      {"mul", [](double a, double b) { return a * b; }},
      {"div", [](double a, double b) { return a / b; }},
      {"max", [](double a, double b) { return std::max(a, b); }},
      {"min", [](double a, double b) { return std::min(a, b); }},
  };
  for (DType t : {DType::F32, DType::F64})
    for (auto &[name, ref] : ops)
      for (auto &[sa, sb] : kBroadcastCases)
        checkBinary(name, t, sa, sb, ref, t);
}

TEST(ElementwiseBinary, IntegerArithmetic) {
  auto truncDiv = [](double a, double b) { return std::trunc(a / b); };
  for (DType t : {DType::I64, DType::I32, DType::I16, DType::I8}) {
    for (auto &[sa, sb] : kBroadcastCases) {
      checkBinary("add", t, sa, sb, [](double a, double b) { return a + b; }, t);
      checkBinary("sub", t, sa, sb, [](double a, double b) { return a - b; }, t);
      checkBinary("max", t, sa, sb, [](double a, double b) { return std::max(a, b); }, t);
      checkBinary("min", t, sa, sb, [](double a, double b) { return std::min(a, b); }, t);
      checkBinary("div", t, sa, sb, truncDiv, t, 1, /*nonzeroB=*/true);
      if (t != DType::I8) // |a*b| <= 2304 overflows i8; wrap-around is tested below
        checkBinary("mul", t, sa, sb, [](double a, double b) { return a * b; }, t);
    }
  }
}

TEST(ElementwiseBinary, IntegerDivisionTruncatesTowardZero) {
  TestTensor a(DType::I32, {6}, {7, -7, 7, -7, 0, -2147483648.0});
  TestTensor b(DType::I32, {6}, {2, 2, -2, -2, 5, -1});
  TestTensor o(DType::I32, {6});
  runKernel("div", {&a, &b}, {&o});
  EXPECT_EQ(o.values(), (std::vector<double>{3, -3, -3, 3, 0, -2147483648.0}));
}

TEST(ElementwiseBinary, IntegerOverflowWraps) {
  TestTensor a(DType::I8, {3}, {100, -100, 127});
  TestTensor b(DType::I8, {3}, {100, 100, 2});
  TestTensor o(DType::I8, {3});
  runKernel("add", {&a, &b}, {&o});
  EXPECT_EQ(o.values(), (std::vector<double>{-56, 0, -127}));
  runKernel("mul", {&a, &b}, {&o});
  EXPECT_EQ(o.values(), (std::vector<double>{16, -16, -2}));
}

TEST(ElementwiseBinary, ParallelChunksCrossRows) {
  // Large enough for several threads; chunk borders fall inside rows.
  for (int threads : {2, 3, 4}) {
    checkBinary("add", DType::F32, {300, 257}, {257}, [](double a, double b) { return a + b; },
                DType::F32, threads);
    checkBinary("mul", DType::F64, {3, 100, 257}, {100, 1}, [](double a, double b) { return a * b; },
                DType::F64, threads);
    checkBinary("sub", DType::F32, {70001}, {}, [](double a, double b) { return a - b; },
                DType::F32, threads);
    checkBinary("max", DType::I64, {5, 1, 100, 100}, {3, 100, 1},
                [](double a, double b) { return std::max(a, b); }, DType::I64, threads);
  }
}

TEST(ElementwiseBinary, MaxMinPropagateNaN) {
  TestTensor a(DType::F32, {4}, {kNaN, 1, kNaN, -1});
  TestTensor b(DType::F32, {4}, {1, kNaN, kNaN, 2});
  TestTensor o(DType::F32, {4});
  for (const char *op : {"max", "min"}) {
    runKernel(op, {&a, &b}, {&o});
    EXPECT_TRUE(std::isnan(o.get(0)) && std::isnan(o.get(1)) && std::isnan(o.get(2))) << op;
    EXPECT_EQ(o.get(3), std::string(op) == "max" ? 2 : -1) << op;
  }
}

TEST(ElementwiseBinary, Pow) {
  auto pw = [](double a, double b) { return std::pow(a, b); };
  // Positive bases, any exponent; f32 and f64; broadcasting.
  for (DType t : {DType::F32, DType::F64}) {
    TestTensor a(t, {4, 5}, randomValues(20, 3, 0.1, 3.0));
    TestTensor b(t, {5}, randomValues(5, 4, -2.0, 2.0));
    TestTensor o(t, {4, 5});
    runKernel("pow", {&a, &b}, {&o});
    std::vector<double> expected(20);
    for (int i = 0; i < 20; ++i)
      expected[i] = pw(a.get(i), b.get(i % 5));
    expectNear(o.values(), expected, 1e-6);
  }
  // Scalar exponent 2 (the squaring fast path), 3 and 0.5, negative bases.
  for (double e : {2.0, 3.0, 0.5}) {
    TestTensor a(DType::F32, {2, 3}, {-2, -1.5, 0, 1, 2.5, 3});
    TestTensor b(DType::F32, {}, {e});
    TestTensor o(DType::F32, {2, 3});
    runKernel("pow", {&a, &b}, {&o});
    for (int i = 0; i < 6; ++i) {
      double r = (float)std::pow((double)(float)a.get(i), e);
      if (std::isnan(r))
        EXPECT_TRUE(std::isnan(o.get(i))) << e;
      else
        EXPECT_NEAR(o.get(i), r, 1e-6 * std::abs(r)) << e << " " << i;
    }
  }
  // An integer exponent with a float base: the result has the base's type.
  {
    TestTensor a(DType::F64, {3}, {1.5, -2, 10});
    TestTensor b(DType::I64, {3}, {2, 3, -1});
    TestTensor o(DType::F64, {3});
    runKernel("pow", {&a, &b}, {&o});
    expectNear(o.values(), {2.25, -8, 0.1}, 1e-15);
  }
  // Integer base.
  {
    TestTensor a(DType::I32, {6}, {2, -3, 5, 1, -1, 7});
    TestTensor b(DType::I32, {6}, {10, 3, 0, -4, -3, -1});
    TestTensor o(DType::I32, {6});
    runKernel("pow", {&a, &b}, {&o});
    EXPECT_EQ(o.values(), (std::vector<double>{1024, -27, 1, 1, -1, 0}));
  }
}

TEST(ElementwiseBinary, Comparisons) {
  std::vector<std::pair<std::string, BinRef>> ops = {
      {"equal", [](double a, double b) { return double(a == b); }},
      {"less", [](double a, double b) { return double(a < b); }},
      {"greater", [](double a, double b) { return double(a > b); }},
  };
  for (DType t : {DType::F32, DType::F64, DType::I64, DType::I32, DType::I8})
    for (auto &[name, ref] : ops)
      for (auto &[sa, sb] : kBroadcastCases)
        checkBinary(name, t, sa, sb, ref, DType::Bool);
  // Equal values are common with integers; floats hit them explicitly.
  TestTensor a(DType::F32, {4}, {1, 2, kNaN, -0.0});
  TestTensor b(DType::F32, {4}, {1, 3, kNaN, 0.0});
  TestTensor o(DType::Bool, {4});
  runKernel("equal", {&a, &b}, {&o});
  EXPECT_EQ(o.values(), (std::vector<double>{1, 0, 0, 1}));
}

TEST(ElementwiseBinary, EqualOnBool) {
  TestTensor a(DType::Bool, {2, 2}, {0, 1, 0, 1});
  TestTensor b(DType::Bool, {2}, {0, 1});
  TestTensor o(DType::Bool, {2, 2});
  runKernel("equal", {&a, &b}, {&o});
  EXPECT_EQ(o.values(), (std::vector<double>{1, 1, 1, 1}));
  TestTensor c(DType::Bool, {2}, {1, 0});
  runKernel("equal", {&a, &c}, {&o});
  EXPECT_EQ(o.values(), (std::vector<double>{0, 0, 0, 0}));
}

TEST(ElementwiseBinary, Errors) {
  TestTensor a(DType::F32, {2, 3}), b(DType::F32, {4}), o(DType::F32, {2, 3});
  EXPECT_NE(kernelError("add", {&a, &b}, {&o}).find("does not broadcast"), std::string::npos);
  TestTensor c(DType::F32, {3}), wide(DType::F32, {4, 2, 3});
  EXPECT_NE(kernelError("add", {&a, &c}, {&wide}).find("not the broadcast"), std::string::npos);
  TestTensor i(DType::I64, {2, 3});
  EXPECT_NE(kernelError("mul", {&a, &i}, {&o}).find("differ"), std::string::npos);
  TestTensor oi(DType::I64, {2, 3});
  EXPECT_NE(kernelError("add", {&a, &a}, {&oi}).find("result must be f32"), std::string::npos);
  TestTensor h(DType::F16, {2, 3});
  EXPECT_NE(kernelError("add", {&h, &h}, {&h}).find("f16 is not supported"), std::string::npos);
  TestTensor bl(DType::Bool, {2, 3});
  EXPECT_NE(kernelError("add", {&bl, &bl}, {&bl}).find("i1"), std::string::npos);
  EXPECT_NE(kernelError("less", {&bl, &bl}, {&bl}).find("i1"), std::string::npos);
  EXPECT_NE(kernelError("less", {&a, &a}, {&o}).find("must be i1"), std::string::npos);
  TestTensor n(DType::I32, {3}, {1, 2, 3}), d(DType::I32, {3}, {1, 0, 1}), q(DType::I32, {3});
  EXPECT_NE(kernelError("div", {&n, &d}, {&q}).find("division by zero"), std::string::npos);
  TestTensor z(DType::I32, {1}, {0}), ne(DType::I32, {1}, {-1}), p(DType::I32, {1});
  EXPECT_NE(kernelError("pow", {&z, &ne}, {&p}).find("negative power"), std::string::npos);
}

TEST(ElementwiseWhere, ThreeWayBroadcast) {
  struct Case {
    Shape c, x, y;
  };
  std::vector<Case> cases = {
      {{3, 4}, {3, 4}, {3, 4}}, {{3, 4}, {}, {4}},      {{4, 1}, {1, 5}, {4, 5}},
      {{2, 1, 3}, {4, 1}, {}},  {{1}, {2, 2}, {2, 1}},  {{300, 257}, {257}, {300, 1}},
  };
  for (DType t : {DType::F32, DType::F64, DType::I64, DType::I8, DType::Bool}) {
    for (const Case &k : cases) {
      SCOPED_TRACE(std::string(nameOf(t)) + " " + ::testing::PrintToString(k.c));
      Shape so = broadcastShape(broadcastShape(k.c, k.x), k.y);
      std::vector<double> cv = randomValues(numel(k.c), 1);
      for (double &v : cv)
        v = v > 0;
      auto vals = [&](int64_t n, uint64_t seed) {
        std::vector<double> v = valuesFor(t, n, seed);
        if (t == DType::Bool)
          for (double &e : v)
            e = e > 0;
        return v;
      };
      TestTensor c(DType::Bool, k.c, cv), x(t, k.x, vals(numel(k.x), 2)),
          y(t, k.y, vals(numel(k.y), 3)), o(t, so);
      ExecEnv env;
      env.threads = 3;
      runKernel("where", {&c, &x, &y}, {&o}, nlohmann::json::object(), env);
      std::vector<double> expected(numel(so));
      for (int64_t i = 0; i < numel(so); ++i)
        expected[i] = c.get(sourceIndex(k.c, so, i)) ? x.get(sourceIndex(k.x, so, i))
                                                     : y.get(sourceIndex(k.y, so, i));
      EXPECT_EQ(o.values(), expected);
    }
  }
}

TEST(ElementwiseWhere, Errors) {
  TestTensor c(DType::F32, {2}), x(DType::F32, {2}), y(DType::F32, {2}), o(DType::F32, {2});
  EXPECT_NE(kernelError("where", {&c, &x, &y}, {&o}).find("condition must be i1"),
            std::string::npos);
  TestTensor cb(DType::Bool, {2}), yi(DType::I32, {2});
  EXPECT_NE(kernelError("where", {&cb, &x, &yi}, {&o}).find("differ"), std::string::npos);
  TestTensor y3(DType::F32, {3});
  EXPECT_NE(kernelError("where", {&cb, &x, &y3}, {&o}).find("broadcast"), std::string::npos);
}

using UnRef = std::function<double(double)>;

void checkUnary(const std::string &op, DType t, UnRef ref, double lo, double hi,
                nlohmann::json attrs = nlohmann::json::object(), double rtol = 1e-6) {
  SCOPED_TRACE(op + " " + nameOf(t));
  for (Shape s : {Shape{}, Shape{7}, Shape{3, 5, 2}, Shape{80000}}) {
    TestTensor x(t, s, randomValues(numel(s), 5, lo, hi));
    if (!isFloatType(t))
      for (int64_t i = 0; i < numel(s); ++i)
        x.set(i, std::round(x.get(i)));
    TestTensor y(t, s);
    ExecEnv env;
    env.threads = 4;
    runKernel(op, {&x}, {&y}, attrs, env);
    std::vector<double> expected(numel(s));
    for (int64_t i = 0; i < numel(s); ++i) {
      double r = ref(x.get(i));
      expected[i] = t == DType::F32 ? (double)(float)r : r;
    }
    if (isFloatType(t))
      expectNear(y.values(), expected, rtol, 1e-7);
    else
      EXPECT_EQ(y.values(), expected);
  }
}

TEST(ElementwiseUnary, FloatFunctions) {
  for (DType t : {DType::F32, DType::F64}) {
    checkUnary("neg", t, [](double x) { return -x; }, -5, 5);
    checkUnary("abs", t, [](double x) { return std::abs(x); }, -5, 5);
    checkUnary("relu", t, [](double x) { return x > 0 ? x : 0; }, -5, 5);
    checkUnary("sqrt", t, [](double x) { return std::sqrt(x); }, 0, 9);
    checkUnary("reciprocal", t, [](double x) { return 1 / x; }, 0.1, 9);
    checkUnary("exp", t, [](double x) { return std::exp(x); }, -20, 20);
    checkUnary("log", t, [](double x) { return std::log(x); }, 0.01, 100);
    checkUnary("tanh", t, [](double x) { return std::tanh(x); }, -10, 10);
    checkUnary("sigmoid", t, [](double x) { return 1 / (1 + std::exp(-x)); }, -30, 30);
    checkUnary("erf", t, [](double x) { return std::erf(x); }, -4, 4);
    checkUnary("leaky_relu", t, [](double x) { return x >= 0 ? x : (double)0.01f * x; }, -5, 5);
    checkUnary("leaky_relu", t, [](double x) { return x >= 0 ? x : 0.2 * x; }, -5, 5,
               {{"alpha", 0.2}});
  }
}

TEST(ElementwiseUnary, TrigonometricAndRounding) {
  for (DType t : {DType::F32, DType::F64}) {
    checkUnary("sin", t, [](double x) { return std::sin(x); }, -7, 7, {}, 1e-5);
    checkUnary("cos", t, [](double x) { return std::cos(x); }, -7, 7, {}, 1e-5);
    checkUnary("tan", t, [](double x) { return std::tan(x); }, -1.4, 1.4, {}, 1e-5);
    checkUnary("asin", t, [](double x) { return std::asin(x); }, -0.99, 0.99);
    checkUnary("acos", t, [](double x) { return std::acos(x); }, -0.99, 0.99);
    checkUnary("atan", t, [](double x) { return std::atan(x); }, -20, 20);
    checkUnary("sinh", t, [](double x) { return std::sinh(x); }, -5, 5);
    checkUnary("cosh", t, [](double x) { return std::cosh(x); }, -5, 5);
    checkUnary("asinh", t, [](double x) { return std::asinh(x); }, -50, 50);
    checkUnary("acosh", t, [](double x) { return std::acosh(x); }, 1, 50);
    checkUnary("atanh", t, [](double x) { return std::atanh(x); }, -0.99, 0.99);
    checkUnary("floor", t, [](double x) { return std::floor(x); }, -5, 5);
    checkUnary("ceil", t, [](double x) { return std::ceil(x); }, -5, 5);
    checkUnary("sign", t, [](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }, -5, 5);
  }
  // Round: halves to even, as numpy.round.
  TestTensor x(DType::F32, {8}, {0.5, 1.5, 2.5, -0.5, -1.5, 2.4, 2.6, -2.6}), y(DType::F32, {8});
  runKernel("round", {&x}, {&y});
  EXPECT_EQ(y.values(), (std::vector<double>{0, 2, 2, -0.0, -2, 2, 3, -3}));
  TestTensor xi(DType::I32, {3}, {-7, 0, 9}), yi(DType::I32, {3});
  runKernel("sign", {&xi}, {&yi});
  EXPECT_EQ(yi.values(), (std::vector<double>{-1, 0, 1}));
}

TEST(ElementwiseBinary, ModSignFollowsTheDivisorOrTheDividend) {
  // numpy.mod (the divisor's sign) and numpy.fmod (the dividend's).
  const std::vector<double> a{7, -7, 7, -7, 0, 5}, b{3, 3, -3, -3, 4, 5};
  const std::vector<double> mod{1, 2, -2, -1, 0, 0}, fmod{1, -1, 1, -1, 0, 0};
  for (DType t : {DType::F32, DType::F64, DType::I64, DType::I32, DType::I8}) {
    SCOPED_TRACE(nameOf(t));
    TestTensor x(t, {6}, a), y(t, {6}, b), o(t, {6});
    runKernel("mod", {&x, &y}, {&o});
    EXPECT_EQ(o.values(), mod);
    runKernel("mod", {&x, &y}, {&o}, {{"fmod", true}});
    EXPECT_EQ(o.values(), fmod);
  }
  TestTensor xf(DType::F64, {2}, {5.5, -5.5}), yf(DType::F64, {1}, {2}), of(DType::F64, {2});
  runKernel("mod", {&xf, &yf}, {&of});
  EXPECT_EQ(of.values(), (std::vector<double>{1.5, 0.5}));
  TestTensor xi(DType::I8, {2}, {-128, 5}), yi(DType::I8, {2}, {-1, 0}), oi(DType::I8, {2});
  EXPECT_NE(kernelError("mod", {&xi, &yi}, {&oi}).find("modulo by zero"), std::string::npos);
}

TEST(ElementwiseUnary, IntegerFunctions) {
  for (DType t : {DType::I64, DType::I32, DType::I16, DType::I8}) {
    checkUnary("neg", t, [](double x) { return -x; }, -100, 100);
    checkUnary("abs", t, [](double x) { return std::abs(x); }, -100, 100);
    checkUnary("relu", t, [](double x) { return x > 0 ? x : 0; }, -100, 100);
  }
  TestTensor x(DType::I8, {2}, {-128, 127}), y(DType::I8, {2});
  runKernel("abs", {&x}, {&y});
  EXPECT_EQ(y.values(), (std::vector<double>{-128, 127})); // wraps like numpy
  runKernel("neg", {&x}, {&y});
  EXPECT_EQ(y.values(), (std::vector<double>{-128, -127}));
}

TEST(ElementwiseUnary, SigmoidIsStableForLargeInputs) {
  for (DType t : {DType::F32, DType::F64}) {
    TestTensor x(t, {6}, {-1000, -100, -30, 30, 100, 1000}), y(t, {6});
    runKernel("sigmoid", {&x}, {&y});
    for (int i = 0; i < 6; ++i)
      ASSERT_FALSE(std::isnan(y.get(i))) << i;
    EXPECT_EQ(y.get(0), 0.0);
    EXPECT_EQ(y.get(5), 1.0);
    // exp(-100) is an f32 subnormal: few significant bits.
    EXPECT_NEAR(y.get(1) / std::exp(-100.0), 1.0, t == DType::F32 ? 0.05 : 1e-12);
    EXPECT_NEAR(y.get(2) / std::exp(-30.0), 1.0, 1e-6);
  }
}

// exp, tanh, sigmoid and erf have their own f32 implementations (no libm):
// sweep their whole range, the branch boundaries, overflow, subnormals and
// the special values against the double functions.
TEST(ElementwiseUnary, F32TranscendentalAccuracy) {
  std::vector<double> pts;
  for (double v = -110; v <= 110; v += 0.0037)
    pts.push_back(v);
  for (double v = 1e-30; v < 2; v *= 1.7) {
    pts.push_back(v);
    pts.push_back(-v);
  }
  for (double v : {0.0, -0.0, 0.6249, 0.625, 0.6251, 0.99999, 1.0, 1.00001, 88.72, 88.7228,
                   88.73, 89.5, -87.3, -87.4, -100.0, -103.9, -104.5, 1e30, -1e30, kInf, -kInf})
    pts.push_back(v);
  const int64_t n = pts.size();
  struct Fn {
    const char *op;
    double (*ref)(double);
  };
  const Fn fns[] = {
      {"exp", [](double x) { return std::exp(x); }},
      {"tanh", [](double x) { return std::tanh(x); }},
      {"sigmoid", [](double x) { return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x)); }},
      {"erf", [](double x) { return std::erf(x); }},
  };
  for (const Fn &f : fns) {
    TestTensor x(DType::F32, {n + 1}, pts), y(DType::F32, {n + 1});
    x.set(n, kNaN);
    ExecEnv env;
    env.threads = 2;
    runKernel(f.op, {&x}, {&y}, nlohmann::json::object(), env);
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      double xi = x.get(i), e = (float)f.ref(xi), a = y.get(i);
      if (std::isinf(e)) {
        ASSERT_EQ(a, e) << f.op << "(" << xi << ")";
        continue;
      }
      // f32 subnormals (below 1.2e-38) carry less relative precision.
      double err = std::abs(a - e) / (std::abs(e) + 1e-37);
      worst = std::max(worst, err);
      ASSERT_LE(err, 1e-6) << f.op << "(" << xi << ") = " << a << ", expected " << e;
    }
    EXPECT_TRUE(std::isnan(y.get(n))) << f.op << "(NaN)";
    EXPECT_LT(worst, 1e-6) << f.op;
  }
}

TEST(ElementwiseUnary, Not) {
  TestTensor x(DType::Bool, {2, 2}, {0, 1, 1, 0}), y(DType::Bool, {2, 2});
  runKernel("not", {&x}, {&y});
  EXPECT_EQ(y.values(), (std::vector<double>{1, 0, 0, 1}));
}

TEST(ElementwiseUnary, Errors) {
  TestTensor i(DType::I32, {3}), io(DType::I32, {3});
  EXPECT_NE(kernelError("exp", {&i}, {&io}).find("expects f32 or f64"), std::string::npos);
  TestTensor f(DType::F32, {3}), g(DType::F32, {4}), d(DType::F64, {3});
  EXPECT_NE(kernelError("tanh", {&f}, {&g}).find("shape"), std::string::npos);
  EXPECT_NE(kernelError("relu", {&f}, {&d}).find("result must be f32"), std::string::npos);
  EXPECT_NE(kernelError("not", {&f}, {&f}).find("must be i1"), std::string::npos);
  TestTensor h(DType::F16, {3});
  EXPECT_NE(kernelError("sqrt", {&h}, {&h}).find("f16 is not supported"), std::string::npos);
}

TEST(ElementwiseClip, BoundsOptional) {
  std::vector<double> v = {-5, -1.5, -0.25, 0, 0.75, 2, 7, kNaN};
  auto clip = [](double x, double lo, double hi) {
    double y = x < lo ? lo : x;
    return y > hi ? hi : y;
  };
  struct Case {
    nlohmann::json attrs;
    double lo, hi;
  };
  std::vector<Case> cases = {
      {{{"min", -1.0}, {"max", 1.0}}, -1, 1},
      {{{"min", 0.0}}, 0, kInf},
      {{{"max", 0.5}}, -kInf, 0.5},
      {nlohmann::json::object(), -kInf, kInf},
      {{{"min", 2.0}, {"max", 1.0}}, 2, 1}, // min > max: everything is max
  };
  for (DType t : {DType::F32, DType::F64}) {
    for (const Case &c : cases) {
      TestTensor x(t, {8}, v), y(t, {8});
      runKernel("clip", {&x}, {&y}, c.attrs);
      for (int i = 0; i < 7; ++i)
        EXPECT_EQ(y.get(i), clip(x.get(i), c.lo, c.hi)) << c.attrs.dump() << " " << i;
      EXPECT_TRUE(std::isnan(y.get(7)));
    }
  }
  // Integers: a fractional bound rounds inwards.
  TestTensor x(DType::I32, {6}, {-5, -2, -1, 1, 3, 9}), y(DType::I32, {6});
  runKernel("clip", {&x}, {&y}, {{"min", -1.5}, {"max", 3.5}});
  EXPECT_EQ(y.values(), (std::vector<double>{-1, -1, -1, 1, 3, 3}));
  TestTensor x8(DType::I8, {3}, {-128, 0, 127}), y8(DType::I8, {3});
  runKernel("clip", {&x8}, {&y8}, {{"min", -1000.0}, {"max", 1e9}});
  EXPECT_EQ(y8.values(), (std::vector<double>{-128, 0, 127}));
  runKernel("clip", {&x8}, {&y8}, {{"min", 5.0}});
  EXPECT_EQ(y8.values(), (std::vector<double>{5, 5, 127}));
}

/// The test's own reading of the cast rules.
double refCast(double v, DType from, DType to) {
  switch (to) {
  case DType::F32: return (double)(float)v;
  case DType::F64: return v;
  case DType::Bool: return v != 0 ? 1 : 0; // NaN != 0
  default: break;
  }
  int bits = (int)sizeOf(to) * 8;
  bool isSigned = to != DType::U8;
  double lo = isSigned ? -std::ldexp(1.0, bits - 1) : 0;
  double hi = isSigned ? std::ldexp(1.0, bits - 1) - 1 : std::ldexp(1.0, bits) - 1;
  if (isFloatType(from)) {
    if (std::isnan(v))
      return 0;
    return std::min(hi, std::max(lo, std::trunc(v)));
  }
  if (v >= lo && v <= hi)
    return v; // in range (also avoids 2^64 + v losing bits in a double)
  double m = std::fmod(v, std::ldexp(1.0, bits));
  if (m < 0)
    m += std::ldexp(1.0, bits);
  if (isSigned && m > hi)
    m -= std::ldexp(1.0, bits);
  return m;
}

TEST(ElementwiseCast, EveryPair) {
  const std::vector<DType> types = {DType::F32, DType::F64, DType::I64, DType::I32,
                                    DType::I16, DType::I8,  DType::U8,  DType::Bool};
  const std::vector<double> probe = {0,    1,     -1,    3.7,    -3.7,   127.9, 128,
                                     -129, 255.5, 256,   300,    -300,   65537, -40000.5,
                                     3e9,  -3e9,  1e19,  -1e19,  kNaN,   kInf,  -kInf,
                                     0.25, -0.0,  1e-30, 2147483647, -2147483648.0};
  for (DType from : types) {
    // Inputs: the probe values as the source type holds them.
    std::vector<double> vals;
    for (double v : probe) {
      if (!isFloatType(from) && (std::isnan(v) || std::isinf(v) || std::abs(v) > 1e18))
        continue;
      vals.push_back(from == DType::Bool ? (v != 0 ? 1 : 0) : v);
    }
    int64_t n = (int64_t)vals.size();
    TestTensor x(from, {n});
    for (int64_t i = 0; i < n; ++i) {
      double v = vals[i];
      if (!isFloatType(from))
        v = refCast(v, DType::F64, from); // in range for the integer source
      x.set(i, v);
    }
    for (DType to : types) {
      TestTensor y(to, {n});
      runKernel("cast", {&x}, {&y});
      for (int64_t i = 0; i < n; ++i) {
        double e = refCast(x.get(i), from, to), a = y.get(i);
        if (std::isnan(e))
          EXPECT_TRUE(std::isnan(a)) << nameOf(from) << "->" << nameOf(to) << " " << x.get(i);
        else
          EXPECT_EQ(a, e) << nameOf(from) << "->" << nameOf(to) << " of " << x.get(i);
      }
    }
  }
}

TEST(ElementwiseCast, Errors) {
  TestTensor x(DType::F32, {3}), y(DType::I32, {4}), h(DType::F16, {3}), z(DType::F32, {3});
  EXPECT_NE(kernelError("cast", {&x}, {&y}).find("shape"), std::string::npos);
  EXPECT_NE(kernelError("cast", {&h}, {&z}).find("f16 is not supported"), std::string::npos);
  EXPECT_NE(kernelError("cast", {&z}, {&h}).find("f16 is not supported"), std::string::npos);
}

// Independent re-implementation of the documented dropout formula.
uint64_t mix(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
bool refKeep(uint64_t seed, uint64_t seedAttr, uint64_t stream, uint64_t step,
             uint64_t counter, double ratio) {
  uint64_t key = mix(mix(mix(seed ^ seedAttr) ^ stream) ^ step);
  double u = (double)(mix(key + counter) >> 40) / 16777216.0;
  return u >= (double)(float)ratio;
}

TEST(ElementwiseDropout, MatchesTheDocumentedFormula) {
  for (DType t : {DType::F32, DType::F64}) {
    const double ratio = (double)0.3f; // an f32 attribute arrives as its double value
    Shape s = {4, 3, 5};
    TestTensor x(t, s, randomValues(60, 9)), y(t, s), m(DType::Bool, s);
    ExecEnv env;
    env.seed = 1234;
    env.step = 5;
    env.sampleOffset = 8;
    env.threads = 2;
    runKernel("dropout", {&x}, {&y, &m}, {{"ratio", ratio}, {"seed", 7}, {"stream", 2}}, env);
    int kept = 0;
    for (int64_t e = 0; e < 60; ++e) {
      bool keep = refKeep(1234, 7, 2, 5, 8 * 15 + e, ratio);
      kept += keep;
      ASSERT_EQ(m.get(e), keep ? 1 : 0) << e;
      double expected = keep ? x.get(e) / (t == DType::F32 ? (double)(float)(1 - ratio) : 1 - ratio) : 0;
      if (t == DType::F32)
        expected = (float)expected;
      ASSERT_NEAR(y.get(e), expected, 1e-7 * std::abs(expected)) << e;
    }
    EXPECT_GT(kept, 20);
    EXPECT_LT(kept, 60);
  }
  // Larger, on several threads: chunk and block borders inside the tensor.
  Shape s = {3, 20011};
  TestTensor x(DType::F32, s, randomValues(60033, 5)), y(DType::F32, s), m(DType::Bool, s);
  ExecEnv env;
  env.seed = 42;
  env.step = 17;
  env.sampleOffset = 5;
  env.threads = 3;
  runKernel("dropout", {&x}, {&y, &m}, {{"ratio", 0.5}}, env);
  for (int64_t e = 0; e < 60033; ++e) {
    bool keep = refKeep(42, 0, 0, 17, 5 * 20011 + e, 0.5);
    ASSERT_EQ(m.get(e), keep ? 1 : 0) << e;
    ASSERT_EQ(y.get(e), keep ? (double)(float)(x.get(e) / 0.5) : 0.0) << e;
  }
}

TEST(ElementwiseDropout, SameMaskWhateverTheBatchSplit) {
  // One batch of 6 samples vs the same samples as two ranks' halves.
  Shape full = {6, 1000}, half = {3, 1000};
  std::vector<double> v = randomValues(6000, 3);
  TestTensor x(DType::F32, full, v), y(DType::F32, full), m(DType::Bool, full);
  nlohmann::json attrs = {{"ratio", 0.5}};
  ExecEnv env;
  env.seed = 99;
  env.step = 3;
  env.threads = 4;
  runKernel("dropout", {&x}, {&y, &m}, attrs, env);
  for (int r = 0; r < 2; ++r) {
    TestTensor xh(DType::F32, half, std::vector<double>(v.begin() + r * 3000, v.begin() + (r + 1) * 3000));
    TestTensor yh(DType::F32, half), mh(DType::Bool, half);
    ExecEnv e2 = env;
    e2.sampleOffset = 3 * r;
    runKernel("dropout", {&xh}, {&yh, &mh}, attrs, e2);
    for (int64_t i = 0; i < 3000; ++i) {
      ASSERT_EQ(mh.get(i), m.get(r * 3000 + i)) << r << " " << i;
      ASSERT_EQ(yh.get(i), y.get(r * 3000 + i)) << r << " " << i;
    }
  }
  // The kept fraction is about 1 - ratio; another step draws another mask.
  double kept = 0;
  for (double b : m.values())
    kept += b;
  EXPECT_NEAR(kept / 6000, 0.5, 0.03);
  TestTensor m2(DType::Bool, full);
  env.step = 4;
  runKernel("dropout", {&x}, {&y, &m2}, attrs, env);
  EXPECT_NE(m.values(), m2.values());
}

TEST(ElementwiseDropout, ModelSplitBlocksDrawTheWholeTensorsMask) {
  // A tensor on one rank, and the same on a 2 x 2 grid (grid_shape [2, 2]:
  // the samples over axis 0, dimension `split` over axis 1, split_dim):
  // each rank's block must get the masks of its elements of the whole
  // tensor. Attention's probabilities [B, heads, T, K] (samples outermost),
  // and a [T, B, heads, K] tensor whose samples are runs inside it (the
  // counters jump between runs and between blocks). K = 20000 crosses the
  // kernel's blocks of 2^14 elements; three threads split the work.
  struct Case {
    Shape whole;
    int64_t samples, split;
  };
  for (const Case &c : {Case{{4, 4, 3, 5}, 0, 1}, Case{{4, 4, 3, 20000}, 0, 1},
                        Case{{3, 4, 4, 50}, 1, 2}}) {
    SCOPED_TRACE(::testing::PrintToString(c.whole));
    const Shape &W = c.whole;
    int64_t n = 1;
    for (int64_t d : W)
      n *= d;
    const int64_t perSample = n / W[0] / W[1] * (c.samples == 0 ? W[1] : 1);
    std::vector<double> v = randomValues(n, 11);
    TestTensor x(DType::F32, W, v), y(DType::F32, W), m(DType::Bool, W);
    nlohmann::json attrs = {{"ratio", 0.4}, {"sample_stride", perSample}};
    ExecEnv env;
    env.seed = 8;
    env.step = 3;
    env.threads = 3;
    env.globalBatch = W[c.samples];
    runKernel("dropout", {&x}, {&y, &m}, attrs, env);
    nlohmann::json block = attrs;
    block["grid_shape"] = {2, 2};
    block["grid_axes"] = {1};
    block["split_dim"] = c.split;
    Shape B = W;
    B[c.samples] /= 2;
    B[c.split] /= 2;
    auto wholeIndex = [&](std::vector<int64_t> at, int64_t dc, int64_t mc) {
      at[c.samples] += dc * B[c.samples];
      at[c.split] += mc * B[c.split];
      int64_t e = 0;
      for (size_t d = 0; d < W.size(); ++d)
        e = e * W[d] + at[d];
      return e;
    };
    for (int r = 0; r < 4; ++r) {
      const int64_t dc = r / 2, mc = r % 2;
      const int64_t nb = n / 4;
      std::vector<std::vector<int64_t>> where(nb);
      std::vector<double> part(nb);
      for (int64_t e = 0; e < nb; ++e) {
        std::vector<int64_t> at(B.size());
        for (int64_t d = (int64_t)B.size() - 1, rest = e; d >= 0; rest /= B[d], --d)
          at[d] = rest % B[d];
        where[e] = at;
        part[e] = v[wholeIndex(at, dc, mc)];
      }
      TestTensor xb(DType::F32, B, part), yb(DType::F32, B), mb(DType::Bool, B);
      ExecEnv e2 = env;
      e2.worldSize = 4;
      e2.rank = r;
      e2.dataRanks = 2;
      e2.sampleOffset = dc * B[c.samples];
      runKernel("dropout", {&xb}, {&yb, &mb}, block, e2);
      for (int64_t e = 0; e < nb; ++e) {
        int64_t w = wholeIndex(where[e], dc, mc);
        ASSERT_EQ(mb.get(e), m.get(w)) << "rank " << r << " element " << e;
        ASSERT_EQ(yb.get(e), y.get(w)) << "rank " << r << " element " << e;
      }
    }
  }
  TestTensor x(DType::F32, {2, 3}), y(DType::F32, {2, 3}), m(DType::Bool, {2, 3});
  EXPECT_NE(kernelError("dropout", {&x}, {&y, &m},
                        {{"ratio", 0.5}, {"grid_shape", {2}}, {"split_dim", 2}})
                .find("dropout: split_dim 2 is not a dimension of its 2-d input"),
            std::string::npos);
}

TEST(ElementwiseDropout, SampleStrideNumbersTheGlobalBatch) {
  // A [T, B, H] = [4, 6, 500] tensor (samples along dimension 1, stride 500:
  // what a sequence-first RNN or a transpose gives) on one rank, and the
  // same samples as two ranks' [4, 3, 500] halves: each rank's element of
  // (t, s, h) must get the mask of global element (t, 3r + s, h).
  const int64_t T = 4, B = 6, H = 500, b = 3;
  std::vector<double> v = randomValues(T * B * H, 9);
  TestTensor x(DType::F32, {T, B, H}, v), y(DType::F32, {T, B, H}),
      m(DType::Bool, {T, B, H});
  nlohmann::json attrs = {{"ratio", 0.3}, {"sample_stride", H}};
  ExecEnv env;
  env.seed = 5;
  env.step = 2;
  env.threads = 3;
  env.globalBatch = B;
  runKernel("dropout", {&x}, {&y, &m}, attrs, env);
  for (int r = 0; r < 2; ++r) {
    std::vector<double> part;
    for (int64_t t = 0; t < T; ++t)
      part.insert(part.end(), v.begin() + (t * B + r * b) * H, v.begin() + (t * B + r * b + b) * H);
    TestTensor xh(DType::F32, {T, b, H}, part), yh(DType::F32, {T, b, H}),
        mh(DType::Bool, {T, b, H});
    ExecEnv e2 = env;
    e2.worldSize = 2;
    e2.dataRanks = 2;
    e2.rank = r;
    e2.sampleOffset = b * r;
    runKernel("dropout", {&xh}, {&yh, &mh}, attrs, e2);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < b * H; ++i) {
        int64_t global = (t * B + r * b) * H + i, local = t * b * H + i;
        ASSERT_EQ(mh.get(local), m.get(global)) << r << " " << t << " " << i;
        ASSERT_EQ(yh.get(local), y.get(global)) << r << " " << t << " " << i;
      }
  }
  // sample_stride 0: the tensor holds no samples (every rank has all of it)
  // and gets the same mask on every rank.
  TestTensor w(DType::F32, {10, 10}, randomValues(100, 4)), wy(DType::F32, {10, 10}),
      wm(DType::Bool, {10, 10}), wm1(DType::Bool, {10, 10});
  ExecEnv e0 = env, e1 = env;
  e1.sampleOffset = 3;
  runKernel("dropout", {&w}, {&wy, &wm}, {{"ratio", 0.5}, {"sample_stride", 0}}, e0);
  runKernel("dropout", {&w}, {&wy, &wm1}, {{"ratio", 0.5}, {"sample_stride", 0}}, e1);
  EXPECT_EQ(wm.values(), wm1.values());
  EXPECT_NE(kernelError("dropout", {&w}, {&wy, &wm}, {{"ratio", 0.5}, {"sample_stride", -1}})
                .find("sample_stride must be >= 0"),
            std::string::npos);
}

TEST(ElementwiseDropout, RatioZeroIsIdentityAndErrors) {
  TestTensor x(DType::F64, {}, {2.5}), y(DType::F64, {}), m(DType::Bool, {});
  runKernel("dropout", {&x}, {&y, &m}, {{"ratio", 0.0}});
  EXPECT_EQ(y.get(0), 2.5);
  EXPECT_EQ(m.get(0), 1);
  EXPECT_NE(kernelError("dropout", {&x}, {&y, &m}).find("'ratio'"), std::string::npos);
  EXPECT_NE(kernelError("dropout", {&x}, {&y, &m}, {{"ratio", 1.5}}).find("ratio must be in"),
            std::string::npos);
  TestTensor mf(DType::F64, {});
  EXPECT_NE(kernelError("dropout", {&x}, {&y, &mf}, {{"ratio", 0.5}}).find("mask must be i1"),
            std::string::npos);
  TestTensor xi(DType::I32, {}), yi(DType::I32, {});
  EXPECT_NE(kernelError("dropout", {&xi}, {&yi, &m}, {{"ratio", 0.5}}).find("f32 or f64"),
            std::string::npos);
}

TEST(ElementwiseDropout, Grad) {
  for (DType t : {DType::F32, DType::F64}) {
    Shape s = {5, 7};
    std::vector<double> mv = randomValues(35, 2);
    for (double &b : mv)
      b = b > 0;
    TestTensor dy(t, s, randomValues(35, 1)), m(DType::Bool, s, mv), dx(t, s);
    const double ratio = (double)0.25f;
    runKernel("dropout_grad", {&dy, &m}, {&dx}, {{"ratio", ratio}});
    std::vector<double> expected(35);
    for (int i = 0; i < 35; ++i)
      expected[i] = mv[i] ? dy.get(i) / (1 - ratio) : 0;
    expectNear(dx.values(), expected, 1e-6);
  }
  TestTensor dy(DType::F32, {3}), m(DType::Bool, {4}), dx(DType::F32, {3});
  EXPECT_NE(kernelError("dropout_grad", {&dy, &m}, {&dx}, {{"ratio", 0.5}}).find("shape"),
            std::string::npos);
}

} // namespace
