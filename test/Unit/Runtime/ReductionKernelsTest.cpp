// Tests of the Reduction kernels: reduce_sum, reduce_mean, reduce_max,
// reduce_min and reduce_prod over
// every axis pattern (trailing, leading, middle, general, none, all), and
// densify, against naive references written here.
#include "KernelTestCases.h"

#include <cmath>
#include <limits>

using namespace parallax::rt;
using namespace parallax::rt::test;
using namespace parallax::rt::test::cases;

namespace {

bool isFloatType(DType t) { return t == DType::F32 || t == DType::F64; }

/// `v` wrapped into integer type `t` (two's complement).
double wrapTo(double v, DType t) {
  int bits = (int)sizeOf(t) * 8;
  double lo = t == DType::U8 ? 0 : -std::ldexp(1.0, bits - 1);
  double hi = t == DType::U8 ? std::ldexp(1.0, bits) - 1 : std::ldexp(1.0, bits - 1) - 1;
  if (v >= lo && v <= hi)
    return v; // in range (also avoids 2^64 + v losing bits in a double)
  double m = std::fmod(v, std::ldexp(1.0, bits));
  if (m < 0)
    m += std::ldexp(1.0, bits);
  if (t != DType::U8 && m >= std::ldexp(1.0, bits - 1))
    m -= std::ldexp(1.0, bits);
  return m;
}

/// keepdims: 1 = true, 0 = false, -1 = attribute absent (default true).
void checkReduce(const std::string &op, DType t, const Shape &in, std::vector<int64_t> axes,
                 int keepdims, int threads = 1) {
  SCOPED_TRACE(op + " " + nameOf(t) + " " + ::testing::PrintToString(in) + " axes " +
               ::testing::PrintToString(axes) + " keepdims " + std::to_string(keepdims) +
               " threads " + std::to_string(threads));
  const int64_t rank = in.size();
  std::vector<bool> red = reducedDims(rank, axes);
  Shape out = reducedShape(in, axes, keepdims);
  const bool prod = op == "reduce_prod";
  std::vector<double> v = randomValues(numel(in), 21, -4, 4);
  if (prod) // near 1 (floats) or in {-1, 1, 2} (integers): finite, exact
    for (double &x : v)
      x = isFloatType(t) ? 1.0 + x / 64 : x < -3 ? -1.0 : x < 3.5 ? 1.0 : 2.0;
  else if (!isFloatType(t))
    for (double &x : v)
      x = std::round(x * 10);
  TestTensor x(t, in, v), y(t, out);
  // Poison the output: the kernel must overwrite it.
  for (int64_t i = 0; i < numel(out); ++i)
    y.set(i, 77);

  int64_t on = numel(out);
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> acc(on, op == "reduce_max"   ? -inf
                              : op == "reduce_min" ? inf
                              : prod               ? 1.0
                                                   : 0.0);
  int64_t count = 1;
  for (int64_t d = 0; d < rank; ++d)
    if (red[d])
      count *= in[d];
  for (int64_t i = 0; i < numel(in); ++i) {
    int64_t rem = i, o = 0, mul = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      int64_t id = rem % in[d];
      rem /= in[d];
      if (!red[d]) {
        o += id * mul;
        mul *= in[d];
      }
    }
    double e = x.get(i);
    acc[o] = op == "reduce_max"   ? std::max(acc[o], e)
             : op == "reduce_min" ? std::min(acc[o], e)
             : prod               ? acc[o] * e
                                  : acc[o] + e;
  }
  std::vector<double> expected(on);
  for (int64_t o = 0; o < on; ++o) {
    double r = acc[o];
    if (op == "reduce_mean")
      r = isFloatType(t) ? r / count : std::trunc(r / count);
    if (!isFloatType(t))
      r = wrapTo(r, t);
    if (t == DType::F32)
      r = (float)r;
    expected[o] = r;
  }

  nlohmann::json attrs = {{"axes", axes}};
  if (keepdims >= 0)
    attrs["keepdims"] = keepdims == 1;
  ExecEnv env;
  env.threads = threads;
  runKernel(op, {&x}, {&y}, attrs, env);
  if (isFloatType(t))
    expectNear(y.values(), expected, t == DType::F32 ? 1e-6 : 1e-12, 1e-6);
  else
    ASSERT_EQ(y.values(), expected);
}

TEST(ReductionReduce, FloatsEveryPattern) {
  for (const char *op : {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"})
    for (DType t : {DType::F32, DType::F64})
      for (const ReduceCase &c : kReduceCases)
        for (int keep : {-1, 0, 1})
          checkReduce(op, t, c.in, c.axes, keep);
}

TEST(ReductionReduce, Integers) {
  for (const char *op : {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"})
    for (DType t : {DType::I64, DType::I32, DType::I16, DType::I8})
      for (const ReduceCase &c : kReduceCases)
        checkReduce(op, t, c.in, c.axes, 1);
}

TEST(ReductionReduce, ParallelAndSplitRows) {
  for (int threads : {2, 4}) {
    for (const char *op : {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"}) {
      checkReduce(op, DType::F32, {1024, 300}, {0}, 1, threads);      // bias gradient
      checkReduce(op, DType::F64, {100000}, {0}, 0, threads);         // one long row
      checkReduce(op, DType::F32, {100, 1000}, {1}, 1, threads);      // many rows
      checkReduce(op, DType::F32, {8, 100, 300}, {1}, 0, threads);    // middle
      checkReduce(op, DType::F64, {6, 50, 7, 40}, {0, 2}, 1, threads); // general
      checkReduce(op, DType::I64, {3000, 40}, {0}, 1, threads);
    }
  }
}

TEST(ReductionReduce, EmptyReductions) {
  TestTensor x(DType::F32, {3, 0}), s(DType::F32, {3}), m(DType::F32, {3}), mx(DType::F32, {3});
  nlohmann::json attrs = {{"axes", {1}}, {"keepdims", false}};
  runKernel("reduce_sum", {&x}, {&s}, attrs);
  runKernel("reduce_mean", {&x}, {&m}, attrs);
  runKernel("reduce_max", {&x}, {&mx}, attrs);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(s.get(i), 0.0);
    EXPECT_TRUE(std::isnan(m.get(i)));
    EXPECT_EQ(mx.get(i), -std::numeric_limits<double>::infinity());
  }
  TestTensor xi(DType::I32, {0, 2}), mi(DType::I32, {1, 2}), mxi(DType::I32, {1, 2});
  runKernel("reduce_mean", {&xi}, {&mi}, {{"axes", {0}}});
  runKernel("reduce_max", {&xi}, {&mxi}, {{"axes", {0}}});
  EXPECT_EQ(mi.values(), (std::vector<double>{0, 0}));
  EXPECT_EQ(mxi.values(), (std::vector<double>{-2147483648.0, -2147483648.0}));
}

TEST(ReductionReduce, ProductOfIntegersWraps) {
  // 2^40 * 2^40 wraps to 0 in int64, as two's complement arithmetic does.
  const double big = std::ldexp(1.0, 40);
  TestTensor x(DType::I64, {2}, {big, big}), y(DType::I64, {});
  runKernel("reduce_prod", {&x}, {&y}, {{"axes", {0}}, {"keepdims", false}});
  EXPECT_EQ(y.get(0), 0.0);
  TestTensor b(DType::I8, {3}, {16, 16, -3}), by(DType::I8, {1});
  runKernel("reduce_prod", {&b}, {&by}, {{"axes", {0}}});
  EXPECT_EQ(by.get(0), 0.0); // 768 = 3 * 256 wraps to 0 in int8
}

TEST(ReductionReduce, MinPropagatesNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  TestTensor x(DType::F64, {2, 3}, {1, nan, 2, 3, -4, 5}), y(DType::F64, {2});
  runKernel("reduce_min", {&x}, {&y}, {{"axes", {1}}, {"keepdims", false}});
  EXPECT_TRUE(std::isnan(y.get(0)));
  EXPECT_EQ(y.get(1), -4);
}

TEST(ReductionReduce, MaxPropagatesNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  TestTensor x(DType::F32, {2, 3}, {1, nan, 2, 3, 4, 5}), y(DType::F32, {2, 1});
  runKernel("reduce_max", {&x}, {&y}, {{"axes", {1}}});
  EXPECT_TRUE(std::isnan(y.get(0)));
  EXPECT_EQ(y.get(1), 5);
  TestTensor y0(DType::F32, {1, 3});
  runKernel("reduce_max", {&x}, {&y0}, {{"axes", {0}}});
  EXPECT_EQ(y0.get(0), 3);
  EXPECT_TRUE(std::isnan(y0.get(1)));
}

TEST(ReductionReduce, Errors) {
  TestTensor x(DType::F32, {2, 3}), y(DType::F32, {2, 1}), y2(DType::F32, {2});
  EXPECT_NE(kernelError("reduce_sum", {&x}, {&y}, {{"axes", {2}}}).find("out of range"),
            std::string::npos);
  EXPECT_NE(kernelError("reduce_sum", {&x}, {&y}, {{"axes", {1, -1}}}).find("listed twice"),
            std::string::npos);
  EXPECT_NE(kernelError("reduce_sum", {&x}, {&y}, {{"axes", {1}}, {"keepdims", false}})
                .find("should be [2]"),
            std::string::npos);
  EXPECT_NE(kernelError("reduce_mean", {&x}, {&y2}, {{"axes", {1}}}).find("should be [2, 1]"),
            std::string::npos);
  EXPECT_NE(kernelError("reduce_max", {&x}, {&y}).find("'axes'"), std::string::npos);
  TestTensor b(DType::Bool, {2, 3}), by(DType::Bool, {2, 1});
  EXPECT_NE(kernelError("reduce_sum", {&b}, {&by}, {{"axes", {1}}}).find("i1"),
            std::string::npos);
  TestTensor h(DType::F16, {2, 3}), hy(DType::F16, {2, 1});
  EXPECT_NE(kernelError("reduce_sum", {&h}, {&hy}, {{"axes", {1}}}).find("f16 is not supported"),
            std::string::npos);
  TestTensor yi(DType::I32, {2, 1});
  EXPECT_NE(kernelError("reduce_sum", {&x}, {&yi}, {{"axes", {1}}}).find("must be f32"),
            std::string::npos);
}

void checkDensify(DType t, const std::vector<double> &indices, const Shape &rowShape,
                  int64_t rows, int threads = 1) {
  SCOPED_TRACE(std::string(nameOf(t)) + " rows " + std::to_string(rows));
  int64_t n = indices.size(), width = numel(rowShape);
  Shape vs = {n}, os = {rows};
  vs.insert(vs.end(), rowShape.begin(), rowShape.end());
  os.insert(os.end(), rowShape.begin(), rowShape.end());
  TestTensor idx(DType::I64, {n}, indices), vals(t, vs, randomValues(n * width, 4)),
      out(t, os, std::vector<double>(rows * width, 5.0)); // garbage to overwrite
  ExecEnv env;
  env.threads = threads;
  runKernel("densify", {&idx, &vals}, {&out}, nlohmann::json::object(), env);
  std::vector<double> expected(rows * width, 0.0);
  for (int64_t i = 0; i < n; ++i)
    if (indices[i] != -1)
      for (int64_t c = 0; c < width; ++c)
        expected[(int64_t)indices[i] * width + c] += vals.get(i * width + c);
  expectNear(out.values(), expected, 1e-6, 1e-7);
}

TEST(ReductionDensify, AddsRowsSkipsUnused) {
  for (DType t : {DType::F32, DType::F64}) {
    checkDensify(t, {2, -1, 0, 2, 3}, {3, 2}, 4);  // duplicates and an unused slot
    checkDensify(t, {1}, {}, 3);                   // rows are scalars
    checkDensify(t, {-1, -1}, {4}, 2);             // nothing used: all zeros
    checkDensify(t, {}, {4}, 2);
  }
  checkDensify(DType::F32, {5, 1, 5, 9, -1, 0}, {3000}, 10, 4);
}

TEST(ReductionDensify, Errors) {
  TestTensor idx(DType::I64, {2}, {0, 4}), vals(DType::F32, {2, 3}), out(DType::F32, {4, 3});
  std::string e = kernelError("densify", {&idx, &vals}, {&out});
  EXPECT_NE(e.find("index 4 at position 1 is outside [0, 4)"), std::string::npos) << e;
  TestTensor neg(DType::I64, {2}, {-2, 0});
  EXPECT_NE(kernelError("densify", {&neg, &vals}, {&out}).find("index -2"), std::string::npos);
  TestTensor idx32(DType::I32, {2});
  EXPECT_NE(kernelError("densify", {&idx32, &vals}, {&out}).find("must be i64"),
            std::string::npos);
  TestTensor idx3(DType::I64, {3});
  EXPECT_NE(kernelError("densify", {&idx3, &vals}, {&out}).find("one row per index"),
            std::string::npos);
  TestTensor out2(DType::F32, {4, 2});
  EXPECT_NE(kernelError("densify", {&idx, &vals}, {&out2}).find("do not match"),
            std::string::npos);
}

} // namespace
