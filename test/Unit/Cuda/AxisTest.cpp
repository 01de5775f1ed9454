//===- AxisTest.cpp - the Axis CUDA kernels against the CPU's --------------===//
//
// Every op on small lines (a thread per line) and long ones (a block per
// line, also with the axis strided), every dtype the CPU takes, ties (which
// index arg_* and top_k keep), NaNs, and the bind-time errors.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelTestUtil.h"

#include <cmath>
#include <limits>

namespace parallax::rt::test {
namespace {

using Shape = std::vector<int64_t>;
using nlohmann::json;

const DType kNumeric[] = {DType::F32, DType::I64, DType::I32, DType::I16,
                          DType::I8,  DType::U8,  DType::F64};

/// Random values fit for `t`: floats in [-2, 2), integers in a small range
/// (non-negative for u8); `coarse` rounds floats so that ties are common.
std::vector<double> valuesFor(DType t, int64_t n, uint64_t seed, bool coarse = false) {
  std::vector<double> v = randomValues(n, seed, -2, 2);
  bool isFloat = t == DType::F32 || t == DType::F64;
  for (double &x : v) {
    if (!isFloat)
      x = std::round(t == DType::U8 ? (x + 2) * 5 : x * 10);
    else if (coarse)
      x = std::round(x * 2) / 2;
  }
  return v;
}

// Shapes and axes: thread per line, block per line (contiguous and strided).
struct LineCase {
  Shape shape;
  int64_t axis;
};
const LineCase kLines[] = {{{3, 4, 5}, 0},   {{3, 4, 5}, 1},  {{3, 4, 5}, -1},
                           {{2, 3001}, 1},   {{5003, 3}, 0},  {{3, 700, 2}, 1},
                           {{9000, 7}, 1},   {{1}, 0}};

TEST_F(CudaKernelTest, CumSumEveryDTypeAxisAndFlag) {
  for (DType t : kNumeric)
    for (const LineCase &c : kLines)
      for (bool exclusive : {false, true})
        for (bool reverse : {false, true}) {
          SCOPED_TRACE(std::string(nameOf(t)) + " " + json(c.shape).dump() + " axis " +
                       std::to_string(c.axis) + (exclusive ? " exclusive" : "") +
                       (reverse ? " reverse" : ""));
          TestTensor x(t, c.shape, valuesFor(t, numel(c.shape), 7)), y(t, c.shape);
          json attrs = {{"axis", c.axis}};
          if (exclusive)
            attrs["exclusive"] = true;
          if (reverse)
            attrs["reverse"] = true;
          expectCudaMatchesCpu("cumsum", {x}, {y}, attrs);
        }
}

TEST_F(CudaKernelTest, CumSumIntegersWrapAsTheCpu) {
  // 300 * 120 overflows i8 and i16 many times over.
  std::vector<double> v(300, 120.0);
  for (DType t : {DType::I8, DType::I16, DType::U8}) {
    TestTensor x(t, {300}, v), y(t, {300});
    expectCudaMatchesCpu("cumsum", {x}, {y}, {{"axis", 0}}, 0, 0);
  }
}

TEST_F(CudaKernelTest, ArgMaxMinTiesAndLastIndex) {
  for (const char *op : {"arg_max", "arg_min"})
    for (DType t : kNumeric)
      for (const LineCase &c : kLines)
        for (bool last : {false, true}) {
          SCOPED_TRACE(std::string(op) + " " + nameOf(t) + " " + json(c.shape).dump() +
                       " axis " + std::to_string(c.axis) + (last ? " last" : ""));
          TestTensor x(t, c.shape, valuesFor(t, numel(c.shape), 11, /*coarse=*/true));
          Shape out = c.shape;
          out[c.axis < 0 ? c.axis + out.size() : c.axis] = 1;
          TestTensor y(DType::I64, out);
          json attrs = {{"axis", c.axis}, {"keepdims", true}};
          if (last)
            attrs["select_last_index"] = true;
          expectCudaMatchesCpu(op, {x}, {y}, attrs, 0, 0);
        }
}

TEST_F(CudaKernelTest, ArgMaxMinFirstNaNWins) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType t : {DType::F32, DType::F64})
    for (const Shape &shape : {Shape{4, 9}, Shape{2, 4000}}) {
      std::vector<double> v = valuesFor(t, numel(shape), 5, true);
      int64_t n = shape[1];
      v[3] = nan;            // line 0: one NaN
      v[n + n / 2] = nan;    // line 1: two NaNs
      v[n + n - 2] = nan;
      for (const char *op : {"arg_max", "arg_min"})
        for (bool last : {false, true}) {
          TestTensor x(t, shape, v), y(DType::I64, {shape[0]});
          json attrs = {{"axis", 1}, {"keepdims", false}};
          if (last)
            attrs["select_last_index"] = true;
          expectCudaMatchesCpu(op, {x}, {y}, attrs, 0, 0);
        }
    }
}

TEST_F(CudaKernelTest, TopKLargestSmallestTiesAndEachAxis) {
  struct Case {
    Shape shape;
    int64_t axis, k;
  };
  const Case cases[] = {{{3, 4, 5}, 0, 2},  {{3, 4, 5}, 1, 4},  {{3, 4, 5}, -1, 1},
                        {{3, 4, 5}, 2, 5},  {{3, 4, 5}, 2, 0},  {{2, 3001}, 1, 17},
                        {{2001, 3}, 0, 40}, {{300, 50}, 1, 50}, {{6}, 0, 3}};
  for (DType t : kNumeric)
    for (const Case &c : cases)
      for (int largest : {-1, 0, 1}) { // -1: the attribute absent
        SCOPED_TRACE(std::string(nameOf(t)) + " " + json(c.shape).dump() + " axis " +
                     std::to_string(c.axis) + " k " + std::to_string(c.k) +
                     " largest " + std::to_string(largest));
        TestTensor x(t, c.shape, valuesFor(t, numel(c.shape), 13, /*coarse=*/true));
        Shape out = c.shape;
        out[c.axis < 0 ? c.axis + out.size() : c.axis] = c.k;
        TestTensor vals(t, out), idx(DType::I64, out);
        json attrs = {{"axis", c.axis}, {"k", c.k}};
        if (largest >= 0)
          attrs["largest"] = (bool)largest;
        expectCudaMatchesCpu("top_k", {x}, {vals, idx}, attrs, 0, 0);
      }
}

TEST_F(CudaKernelTest, TopKSignedZerosAreEqual) {
  // -0 == +0: the lower index first, as on the CPU.
  for (DType t : {DType::F32, DType::F64}) {
    TestTensor x(t, {6}, {0.0, -0.0, 1.0, -0.0, 0.0, -1.0});
    for (bool largest : {true, false}) {
      TestTensor vals(t, {4}), idx(DType::I64, {4});
      expectCudaMatchesCpu("top_k", {x}, {vals, idx},
                           {{"axis", 0}, {"k", 4}, {"largest", largest}}, 0, 0);
    }
  }
}

TEST_F(CudaKernelTest, TopKErrors) {
  TestTensor x(DType::F32, {3, 4}, randomValues(12, 1));
  TestTensor vals(DType::F32, {3, 5}), idx(DType::I64, {3, 5});
  expectCudaMatchesCpu("top_k", {x}, {vals, idx}, {{"axis", 1}, {"k", 5}});
  TestTensor v2(DType::F32, {3, 2}), i2(DType::I64, {3, 3});
  expectCudaMatchesCpu("top_k", {x}, {v2, i2}, {{"axis", 1}, {"k", 2}});
  TestTensor v3(DType::F32, {3, 2}), i3(DType::I64, {3, 2});
  expectCudaMatchesCpu("top_k", {x}, {v3, i3}, {{"axis", 2}, {"k", 2}});
}

TEST_F(CudaKernelTest, AxisBindErrors) {
  TestTensor x(DType::F32, {3, 4}, randomValues(12, 1)), y(DType::F32, {3, 5});
  expectCudaMatchesCpu("cumsum", {x}, {y}, {{"axis", 1}});
  TestTensor y2(DType::F32, {3, 4});
  expectCudaMatchesCpu("cumsum", {x}, {y2}, {{"axis", 3}});
  TestTensor e(DType::F32, {3, 0}), ye(DType::I64, {3});
  expectCudaMatchesCpu("arg_max", {e}, {ye}, {{"axis", 1}});
  TestTensor yf(DType::F32, {3});
  expectCudaMatchesCpu("arg_min", {x}, {yf}, {{"axis", 1}});
  TestTensor b(DType::Bool, {3, 4}), yb(DType::Bool, {3, 4});
  expectCudaMatchesCpu("cumsum", {b}, {yb}, {{"axis", 1}});
}

/// Bags: in order, overlapping, empty, negative (counted from the end) and
/// beyond the rows (clamped), as the CPU clamps them.
void segmentBounds(int64_t rows, int64_t m, std::vector<double> &starts,
                   std::vector<double> &ends) {
  std::vector<double> r = randomValues(2 * m, 17, 0, 1);
  for (int64_t i = 0; i < m; ++i) {
    int64_t s = (int64_t)(r[2 * i] * rows), len = (int64_t)(r[2 * i + 1] * 6);
    starts.push_back((double)s);
    ends.push_back((double)(s + len));
  }
  if (m >= 4) {
    starts[1] = -3, ends[1] = -1;         // from the end
    starts[2] = rows - 2, ends[2] = rows + 5; // clamped
    starts[3] = 4, ends[3] = 2;           // empty
  }
}

/// A segment_reduce problem: coarse data (ties in max, whose first maximum
/// takes the gradient), the bags' bounds, and the output's shape.
struct SegmentRun {
  TestTensor x, starts, ends;
  Shape out;
};

/// Calls f(dtype, mode, run) for every float type, mode and case.
template <typename F> void forEachSegmentCase(F f) {
  struct Case {
    Shape data;
    int64_t m;
  };
  const Case cases[] = {{{20, 3}, 7}, {{30, 2, 5}, 9}, {{3000, 67}, 400}, {{8, 1}, 4}};
  for (DType t : {DType::F32, DType::F64})
    for (const Case &c : cases)
      for (const char *mode : {"sum", "mean", "max"}) {
        SCOPED_TRACE(std::string(nameOf(t)) + " " + json(c.data).dump() + " " + mode);
        std::vector<double> s, e;
        segmentBounds(c.data[0], c.m, s, e);
        Shape out = c.data;
        out[0] = c.m;
        SegmentRun r{TestTensor(t, c.data, valuesFor(t, numel(c.data), 3, /*coarse=*/true)),
                     TestTensor(DType::I64, {c.m}, s), TestTensor(DType::I64, {c.m}, e), out};
        f(t, mode, r);
      }
}

TEST_F(CudaKernelTest, SegmentReduceEveryModeAndDType) {
  forEachSegmentCase([](DType t, const char *mode, const SegmentRun &r) {
    expectCudaMatchesCpu("segment_reduce", {r.x, r.starts, r.ends}, {TestTensor(t, r.out)},
                         {{"mode", mode}});
  });
}

TEST_F(CudaKernelTest, SegmentReduceMaxNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  TestTensor x(DType::F32, {5, 2}, {1, nan, nan, 2, 3, 4, 0, nan, 5, 1});
  TestTensor st(DType::I64, {2}, {0, 2}), en(DType::I64, {2}, {3, 5});
  TestTensor y(DType::F32, {2, 2});
  expectCudaMatchesCpu("segment_reduce", {x, st, en}, {y}, {{"mode", "max"}});
}

TEST_F(CudaKernelTest, SegmentReduceGradEveryModeAndDType) {
  forEachSegmentCase([](DType t, const char *mode, const SegmentRun &r) {
    TestTensor dy(t, r.out, randomValues(numel(r.out), 9));
    expectCudaMatchesCpu("segment_reduce_grad", {dy, r.x, r.starts, r.ends},
                         {TestTensor(t, r.x.shape)}, {{"mode", mode}});
  });
}

TEST_F(CudaKernelTest, SegmentReduceErrors) {
  TestTensor x(DType::F32, {6, 2}, randomValues(12, 1));
  TestTensor st(DType::I64, {2}, {0, 2}), en(DType::I64, {2}, {2, 6});
  TestTensor y(DType::F32, {2, 2}), bad(DType::F32, {3, 2});
  expectCudaMatchesCpu("segment_reduce", {x, st, en}, {y}, {{"mode", "min"}});
  expectCudaMatchesCpu("segment_reduce", {x, st, en}, {bad}, {{"mode", "sum"}});
  TestTensor en3(DType::I64, {3}, {1, 2, 3});
  expectCudaMatchesCpu("segment_reduce", {x, st, en3}, {y}, {{"mode", "sum"}});
  TestTensor xi(DType::I32, {6, 2}), yi(DType::I32, {2, 2});
  expectCudaMatchesCpu("segment_reduce", {xi, st, en}, {yi}, {{"mode", "sum"}});
  TestTensor dy(DType::F32, {2, 2}, randomValues(4, 2)), dx(DType::F32, {5, 2});
  expectCudaMatchesCpu("segment_reduce_grad", {dy, x, st, en}, {dx}, {{"mode", "sum"}});
}

} // namespace
} // namespace parallax::rt::test
