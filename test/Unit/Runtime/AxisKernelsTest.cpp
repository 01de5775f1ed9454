// Tests of the Axis kernels (cumsum, arg_max/arg_min, top_k,
// segment_reduce and its gradient) against naive references written here.
#include "KernelTestUtil.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

using namespace parallax::rt;
using namespace parallax::rt::test;

namespace {

using Shape = std::vector<int64_t>;


/// (outer, n, inner) of `s` around `axis`.
void lines(const Shape &s, int64_t axis, int64_t &outer, int64_t &n, int64_t &inner) {
  outer = 1, inner = 1, n = s[axis];
  for (int64_t d = 0; d < axis; ++d)
    outer *= s[d];
  for (int64_t d = axis + 1; d < (int64_t)s.size(); ++d)
    inner *= s[d];
}

TEST(AxisCumSum, EveryAxisAndFlag) {
  const Shape shape{3, 4, 5};
  std::vector<double> v = randomValues(numel(shape), 7, -2, 2);
  for (DType t : {DType::F32, DType::F64, DType::I64, DType::I32})
    for (int64_t axis : {0, 1, 2, -1})
      for (bool exclusive : {false, true})
        for (bool reverse : {false, true})
          for (int threads : {1, 3}) {
            SCOPED_TRACE(std::string(nameOf(t)) + " axis " + std::to_string(axis) +
                         (exclusive ? " exclusive" : "") + (reverse ? " reverse" : ""));
            std::vector<double> in = v;
            if (t == DType::I64 || t == DType::I32)
              for (double &x : in)
                x = std::round(x * 10);
            TestTensor x(t, shape, in), y(t, shape);
            int64_t a = axis < 0 ? axis + 3 : axis, outer, n, inner;
            lines(shape, a, outer, n, inner);
            std::vector<double> expected(numel(shape));
            for (int64_t o = 0; o < outer; ++o)
              for (int64_t i = 0; i < inner; ++i) {
                double acc = 0;
                for (int64_t k = 0; k < n; ++k) {
                  int64_t kk = reverse ? n - 1 - k : k;
                  int64_t at = (o * n + kk) * inner + i;
                  double e = x.get(at);
                  if (exclusive) {
                    expected[at] = acc;
                    acc += e;
                  } else {
                    acc += e;
                    expected[at] = acc;
                  }
                }
              }
            if (t == DType::F32)
              for (double &e : expected)
                e = (float)e;
            nlohmann::json attrs = {{"axis", axis}};
            if (exclusive)
              attrs["exclusive"] = true;
            if (reverse)
              attrs["reverse"] = true;
            ExecEnv env;
            env.threads = threads;
            runKernel("cumsum", {&x}, {&y}, attrs, env);
            expectNear(y.values(), expected, 1e-6, 1e-6);
          }
}

TEST(AxisArg, MaxMinTiesAndLastIndex) {
  // Ties: the first index, or the last with select_last_index.
  TestTensor x(DType::F32, {2, 4}, {1, 3, 3, 0, -1, -5, 2, -5});
  TestTensor y(DType::I64, {2, 1});
  runKernel("arg_max", {&x}, {&y}, {{"axis", 1}, {"keepdims", true}});
  EXPECT_EQ(y.values(), (std::vector<double>{1, 2}));
  runKernel("arg_max", {&x}, {&y}, {{"axis", 1}, {"select_last_index", true}});
  EXPECT_EQ(y.values(), (std::vector<double>{2, 2}));
  runKernel("arg_min", {&x}, {&y}, {{"axis", -1}});
  EXPECT_EQ(y.values(), (std::vector<double>{3, 1}));
  runKernel("arg_min", {&x}, {&y}, {{"axis", -1}, {"select_last_index", true}});
  EXPECT_EQ(y.values(), (std::vector<double>{3, 3}));
  TestTensor y0(DType::I64, {4});
  runKernel("arg_max", {&x}, {&y0}, {{"axis", 0}, {"keepdims", false}});
  EXPECT_EQ(y0.values(), (std::vector<double>{0, 0, 0, 0}));
  // NaN wins, the first one.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  TestTensor xn(DType::F64, {4}, {1, nan, 7, nan}), yn(DType::I64, {});
  runKernel("arg_max", {&xn}, {&yn}, {{"axis", 0}, {"keepdims", false}});
  EXPECT_EQ(yn.get(0), 1);
  // Integers, on a middle axis with several threads.
  const Shape shape{5, 33, 7};
  std::vector<double> v = randomValues(numel(shape), 3, -100, 100);
  for (double &e : v)
    e = std::round(e);
  TestTensor xi(DType::I32, shape, v), yi(DType::I64, {5, 7});
  ExecEnv env;
  env.threads = 4;
  runKernel("arg_max", {&xi}, {&yi}, {{"axis", 1}, {"keepdims", false}}, env);
  for (int64_t o = 0; o < 5; ++o)
    for (int64_t i = 0; i < 7; ++i) {
      int64_t best = 0;
      for (int64_t k = 1; k < 33; ++k)
        if (v[(o * 33 + k) * 7 + i] > v[(o * 33 + best) * 7 + i])
          best = k;
      ASSERT_EQ(yi.get(o * 7 + i), best);
    }
}

TEST(AxisTopK, LargestAndSmallestOnEachAxis) {
  const Shape shape{3, 6, 4};
  std::vector<double> v = randomValues(numel(shape), 11, -3, 3);
  v[0] = v[4]; // a tie along axis 1 (elements (0,0,0) and (0,1,0))
  for (int64_t axis : {0, 1, 2})
    for (bool largest : {true, false}) {
      SCOPED_TRACE("axis " + std::to_string(axis) + (largest ? " largest" : " smallest"));
      int64_t k = 2, outer, n, inner;
      lines(shape, axis, outer, n, inner);
      Shape out = shape;
      out[axis] = k;
      TestTensor x(DType::F64, shape, v), vals(DType::F64, out), idx(DType::I64, out);
      runKernel("top_k", {&x}, {&vals, &idx},
                {{"k", k}, {"axis", axis}, {"largest", largest}});
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          std::vector<int64_t> order(n);
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
            double va = v[(o * n + a) * inner + i], vb = v[(o * n + b) * inner + i];
            return largest ? va > vb : va < vb;
          });
          for (int64_t r = 0; r < k; ++r) {
            int64_t at = (o * k + r) * inner + i;
            ASSERT_EQ(idx.get(at), order[r]);
            ASSERT_EQ(vals.get(at), v[(o * n + order[r]) * inner + i]);
          }
        }
    }
  TestTensor x(DType::F32, {4}), vals(DType::F32, {5}), idx(DType::I64, {5});
  EXPECT_NE(kernelError("top_k", {&x}, {&vals, &idx}, {{"k", 5}}).find("outside [0, 4]"),
            std::string::npos);
}

/// Reference segment reduction of data [rows, width].
std::vector<double> segments(const std::vector<double> &data, int64_t rows, int64_t width,
                             const std::vector<int64_t> &s, const std::vector<int64_t> &e,
                             const std::string &mode) {
  auto clampBound = [&](int64_t v) {
    if (v < 0)
      v += rows;
    return std::clamp<int64_t>(v, 0, rows);
  };
  std::vector<double> out(s.size() * width, 0.0);
  for (size_t m = 0; m < s.size(); ++m) {
    int64_t r0 = clampBound(s[m]), r1 = clampBound(e[m]);
    if (r1 <= r0)
      continue;
    for (int64_t c = 0; c < width; ++c) {
      double acc = mode == "max" ? -INFINITY : 0.0;
      for (int64_t r = r0; r < r1; ++r)
        acc = mode == "max" ? std::max(acc, data[r * width + c]) : acc + data[r * width + c];
      out[m * width + c] = mode == "mean" ? acc / (r1 - r0) : acc;
    }
  }
  return out;
}

TEST(AxisSegmentReduce, BagsOfEveryKind) {
  // Bags as nn.EmbeddingBag's offsets make them, plus an empty bag, an
  // overlapping one, one past the end (clamped) and one from the end.
  const int64_t rows = 9, width = 5;
  const std::vector<int64_t> s{0, 3, 3, 1, 7, -2}, e{3, 3, 7, 5, 20, 9};
  std::vector<double> data = randomValues(rows * width, 5, -2, 2);
  for (const char *mode : {"sum", "mean", "max"})
    for (DType t : {DType::F32, DType::F64})
      for (int threads : {1, 4}) {
        SCOPED_TRACE(std::string(mode) + " " + nameOf(t));
        TestTensor x(t, {rows, width}, data), st(DType::I64, {6}), en(DType::I64, {6}),
            y(t, {6, width});
        for (int i = 0; i < 6; ++i) {
          st.set(i, (double)s[i]);
          en.set(i, (double)e[i]);
        }
        ExecEnv env;
        env.threads = threads;
        runKernel("segment_reduce", {&x, &st, &en}, {&y}, {{"mode", mode}}, env);
        expectNear(y.values(), segments(x.values(), rows, width, s, e, mode), 1e-6, 1e-6);
      }
}

TEST(AxisSegmentReduce, GradientMatchesFiniteDifferences) {
  const int64_t rows = 7, width = 3;
  const std::vector<int64_t> s{0, 2, 1, 5, 4}, e{2, 6, 4, 5, 7};
  std::vector<double> data = randomValues(rows * width, 9, -2, 2);
  std::vector<double> dy = randomValues(s.size() * width, 10, -1, 1);
  for (const char *mode : {"sum", "mean", "max"}) {
    SCOPED_TRACE(mode);
    TestTensor x(DType::F64, {rows, width}, data), st(DType::I64, {5}), en(DType::I64, {5}),
        g(DType::F64, {5, width}, dy), dx(DType::F64, {rows, width});
    for (int i = 0; i < 5; ++i) {
      st.set(i, (double)s[i]);
      en.set(i, (double)e[i]);
    }
    runKernel("segment_reduce_grad", {&g, &x, &st, &en}, {&dx}, {{"mode", mode}});
    const double h = 1e-6;
    for (int64_t i = 0; i < rows * width; ++i) {
      std::vector<double> plus = data, minus = data;
      plus[i] += h;
      minus[i] -= h;
      auto fp = segments(plus, rows, width, s, e, mode);
      auto fm = segments(minus, rows, width, s, e, mode);
      double numeric = 0;
      for (size_t k = 0; k < dy.size(); ++k)
        numeric += dy[k] * (fp[k] - fm[k]) / (2 * h);
      ASSERT_NEAR(dx.get(i), numeric, 1e-6) << "element " << i;
    }
  }
}

TEST(AxisSegmentReduce, Errors) {
  TestTensor x(DType::F32, {4, 2}), s(DType::I64, {3}), e(DType::I64, {2}), y(DType::F32, {3, 2});
  EXPECT_NE(kernelError("segment_reduce", {&x, &s, &e}, {&y}, {{"mode", "sum"}})
                .find("one shape [M]"),
            std::string::npos);
  TestTensor e3(DType::I64, {3});
  EXPECT_NE(kernelError("segment_reduce", {&x, &s, &e3}, {&y}, {{"mode", "prod"}})
                .find("mode must be sum, mean or max"),
            std::string::npos);
}

} // namespace
