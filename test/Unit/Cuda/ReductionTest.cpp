//===- ReductionTest.cpp - the Reduction CUDA kernels against the CPU's ---===//

#include "CudaKernelTestUtil.h"

#include "../Runtime/KernelTestCases.h"

#include <cmath>
#include <limits>

namespace parallax::rt::test {
namespace {

using namespace cases;
using CudaReduction = CudaKernelTest;

const char *const kReduceOps[] = {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min",
                                  "reduce_prod"};

/// keepdims: 1 = true, 0 = false, -1 = attribute absent (default true).
void checkReduce(const std::string &op, DType t, const Shape &in, std::vector<int64_t> axes,
                 int keepdims, double lo = -1, double hi = 1) {
  SCOPED_TRACE(op + " " + nameOf(t) + " " + ::testing::PrintToString(in) + " axes " +
               ::testing::PrintToString(axes) + " keepdims " + std::to_string(keepdims));
  Shape out = reducedShape(in, axes, keepdims);
  // Products of many factors stay finite near 1.
  if (op == "reduce_prod" && isFloat(t))
    lo = 0.9, hi = 1.1;
  TestTensor x(t, in, randomValues(numel(in), 7, lo, hi)), y(t, out);
  nlohmann::json attrs = {{"axes", axes}};
  if (keepdims >= 0)
    attrs["keepdims"] = keepdims == 1;
  double tol = isFloat(t) ? (t == DType::F32 ? 1e-6 : 1e-12) : 0;
  expectCudaMatchesCpu(op, {x}, {y}, attrs, tol, tol);
}

/// The CPU tests' patterns, and more: a short odd row, and many
/// alternating runs.
const std::vector<ReduceCase> kGpuReduceCases = [] {
  std::vector<ReduceCase> cs = kReduceCases;
  cs.push_back({{7, 45}, {1}});
  cs.push_back({{2, 3, 2, 3, 2, 3, 2, 3, 2}, {0, 2, 4, 6, 8}});
  return cs;
}();

TEST_F(CudaReduction, FloatsEveryPattern) {
  for (const char *op : kReduceOps)
    for (DType t : {DType::F32, DType::F64})
      for (const ReduceCase &c : kGpuReduceCases)
        for (int keep : {-1, 0, 1})
          checkReduce(op, t, c.in, c.axes, keep);
}

TEST_F(CudaReduction, Integers) {
  for (const char *op : kReduceOps)
    for (DType t : {DType::I64, DType::I32, DType::I16, DType::I8, DType::U8})
      for (const ReduceCase &c : kGpuReduceCases)
        checkReduce(op, t, c.in, c.axes, 1, t == DType::U8 ? 0 : -100, 100);
}

/// Sizes that take each kernel (a thread, a warp or a block per output)
/// and the split of long reductions into parts.
TEST_F(CudaReduction, LargeAndSplit) {
  for (const char *op : kReduceOps) {
    checkReduce(op, DType::F32, {1024, 300}, {0}, 1);       // bias gradient: split columns
    checkReduce(op, DType::F64, {100000}, {0}, 0);          // one long row: split blocks
    checkReduce(op, DType::F32, {3, 70001}, {1}, 0);        // few long rows
    checkReduce(op, DType::F32, {100, 1000}, {1}, 1);       // a warp per row
    checkReduce(op, DType::F32, {50, 5000}, {1}, 1);        // a block per row
    checkReduce(op, DType::F32, {8, 100, 300}, {1}, 0);     // middle
    checkReduce(op, DType::F64, {6, 50, 7, 40}, {0, 2}, 1); // general
    checkReduce(op, DType::F32, {20000, 3}, {1}, 1);        // short rows
    checkReduce(op, DType::I64, {3000, 40}, {0}, 1, -100, 100);
    checkReduce(op, DType::I32, {5, 9000}, {1}, 0, -100, 100);
  }
  checkReduce("reduce_sum", DType::F32, {1 << 22}, {0}, 0);
  checkReduce("reduce_mean", DType::F32, {64, 1 << 16}, {0}, 1);
}

/// Runs `op` on the GPU only and returns output 0's values (NaN and
/// infinities, which expectCudaMatchesCpu cannot compare, are checked by
/// the caller). y starts as 42s, so that an element the kernel leaves
/// unwritten shows. Errors (bind time or the device's) propagate.
std::vector<double> runCuda(const std::string &op, std::vector<TestTensor> ins, TestTensor y,
                            nlohmann::json attrs) {
  for (int64_t i = 0; i < y.numElements(); ++i)
    y.set(i, 42);
  return runOnCuda(op, std::move(ins), {std::move(y)}, std::move(attrs))[0].values();
}

TEST_F(CudaReduction, EmptyReductions) {
  const double inf = std::numeric_limits<double>::infinity();
  nlohmann::json attrs = {{"axes", {1}}, {"keepdims", false}};
  TestTensor x(DType::F32, {3, 0}), y(DType::F32, {3});
  for (double v : runCuda("reduce_sum", {x}, y, attrs))
    EXPECT_EQ(v, 0.0);
  for (double v : runCuda("reduce_mean", {x}, y, attrs))
    EXPECT_TRUE(std::isnan(v));
  for (double v : runCuda("reduce_max", {x}, y, attrs))
    EXPECT_EQ(v, -inf);
  for (double v : runCuda("reduce_prod", {x}, y, attrs))
    EXPECT_EQ(v, 1.0);
  TestTensor xi(DType::I32, {0, 2}), yi(DType::I32, {1, 2});
  EXPECT_EQ(runCuda("reduce_mean", {xi}, yi, {{"axes", {0}}}), (std::vector<double>{0, 0}));
  EXPECT_EQ(runCuda("reduce_max", {xi}, yi, {{"axes", {0}}}),
            (std::vector<double>{-2147483648.0, -2147483648.0}));
  // An empty result: nothing to do.
  TestTensor xe(DType::F32, {0, 4}), ye(DType::F32, {0});
  expectCudaMatchesCpu("reduce_sum", {xe}, {ye}, {{"axes", {1}}, {"keepdims", false}});
}

TEST_F(CudaReduction, ProductOfIntegersWraps) {
  const double big = std::ldexp(1.0, 40);
  TestTensor x(DType::I64, {2}, {big, big}), y(DType::I64, {});
  expectCudaMatchesCpu("reduce_prod", {x}, {y}, {{"axes", {0}}, {"keepdims", false}}, 0, 0);
  EXPECT_EQ(runCuda("reduce_prod", {x}, y, {{"axes", {0}}, {"keepdims", false}}),
            (std::vector<double>{0}));
  TestTensor b(DType::I8, {3}, {16, 16, -3}), by(DType::I8, {1});
  EXPECT_EQ(runCuda("reduce_prod", {b}, by, {{"axes", {0}}}), (std::vector<double>{0}));
}

TEST_F(CudaReduction, MinAndMaxPropagateNaN) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  TestTensor x(DType::F64, {2, 3}, {1, nan, 2, 3, -4, 5}), y(DType::F64, {2});
  auto mn = runCuda("reduce_min", {x}, y, {{"axes", {1}}, {"keepdims", false}});
  EXPECT_TRUE(std::isnan(mn[0]));
  EXPECT_EQ(mn[1], -4);
  TestTensor xf(DType::F32, {2, 3}, {1, nan, 2, 3, 4, 5}), yf(DType::F32, {2, 1});
  auto mx = runCuda("reduce_max", {xf}, yf, {{"axes", {1}}});
  EXPECT_TRUE(std::isnan(mx[0]));
  EXPECT_EQ(mx[1], 5);
  TestTensor y0(DType::F32, {1, 3});
  auto mx0 = runCuda("reduce_max", {xf}, y0, {{"axes", {0}}});
  EXPECT_EQ(mx0[0], 3);
  EXPECT_TRUE(std::isnan(mx0[1]));
  // A NaN deep inside rows long enough for the warp and block kernels.
  for (int64_t n : {100, 20000}) {
    TestTensor xl(DType::F32, {2, n}, randomValues(2 * n, 3)), yl(DType::F32, {2});
    xl.set(n + n / 3, nan);
    auto r = runCuda("reduce_max", {xl}, yl, {{"axes", {1}}, {"keepdims", false}});
    EXPECT_FALSE(std::isnan(r[0]));
    EXPECT_TRUE(std::isnan(r[1]));
  }
}

TEST_F(CudaReduction, Errors) {
  TestTensor x(DType::F32, {2, 3}), y(DType::F32, {2, 1}), y2(DType::F32, {2});
  expectCudaMatchesCpu("reduce_sum", {x}, {y}, {{"axes", {2}}});     // out of range
  expectCudaMatchesCpu("reduce_sum", {x}, {y}, {{"axes", {1, -1}}}); // listed twice
  expectCudaMatchesCpu("reduce_sum", {x}, {y}, {{"axes", {1}}, {"keepdims", false}});
  expectCudaMatchesCpu("reduce_mean", {x}, {y2}, {{"axes", {1}}});
  expectCudaMatchesCpu("reduce_max", {x}, {y}); // no axes
  TestTensor b(DType::Bool, {2, 3}), by(DType::Bool, {2, 1});
  expectCudaMatchesCpu("reduce_sum", {b}, {by}, {{"axes", {1}}});
  TestTensor h(DType::F16, {2, 3}), hy(DType::F16, {2, 1});
  expectCudaMatchesCpu("reduce_sum", {h}, {hy}, {{"axes", {1}}});
  TestTensor yi(DType::I32, {2, 1});
  expectCudaMatchesCpu("reduce_sum", {x}, {yi}, {{"axes", {1}}});
}

void checkDensify(DType t, const std::vector<double> &indices, const Shape &rowShape,
                  int64_t rows) {
  SCOPED_TRACE(std::string(nameOf(t)) + " rows " + std::to_string(rows) + " indices " +
               std::to_string(indices.size()));
  int64_t n = indices.size(), width = numel(rowShape);
  Shape vs = {n}, os = {rows};
  vs.insert(vs.end(), rowShape.begin(), rowShape.end());
  os.insert(os.end(), rowShape.begin(), rowShape.end());
  TestTensor idx(DType::I64, {n}, indices);
  TestTensor vals(t, vs, randomValues(n * width, 4, isFloat(t) ? -1 : -100, isFloat(t) ? 1 : 100));
  TestTensor out(t, os);
  // The GPU sums each row in the CPU's order: the results are identical.
  expectCudaMatchesCpu("densify", {idx, vals}, {out}, nlohmann::json::object(), 0, 0);
}

TEST_F(CudaReduction, DensifyAddsRowsSkipsUnused) {
  for (DType t : {DType::F32, DType::F64, DType::I64, DType::I32, DType::I8}) {
    checkDensify(t, {2, -1, 0, 2, 3}, {3, 2}, 4); // duplicates and an unused slot
    checkDensify(t, {1}, {}, 3);                  // rows are scalars
    checkDensify(t, {-1, -1}, {4}, 2);            // nothing used: all zeros
    checkDensify(t, {}, {4}, 2);
    checkDensify(t, {-1}, {4}, 0);
  }
  checkDensify(DType::F32, {5, 1, 5, 9, -1, 0}, {3000}, 10);
  // Many indices over few rows (long runs of duplicates), and many rows.
  std::vector<double> many;
  for (int64_t i = 0; i < 5000; ++i)
    many.push_back((double)((i * 7919) % 37) - (i % 11 == 0 ? 38 + (i % 37) : 0));
  for (double &v : many)
    if (v < 0)
      v = -1;
  checkDensify(DType::F32, many, {33}, 37);
  std::vector<double> spread;
  for (int64_t i = 0; i < 3000; ++i)
    spread.push_back((double)((i * 104729) % 100000));
  checkDensify(DType::F64, spread, {5}, 100000);
}

TEST_F(CudaReduction, DensifyErrors) {
  TestTensor idx(DType::I64, {2}, {0, 4}), vals(DType::F32, {2, 3}), out(DType::F32, {4, 3});
  expectCudaMatchesCpu("densify", {idx, vals}, {out}); // row 4 of 4: reported by the GPU
  TestTensor neg(DType::I64, {2}, {-2, 0});
  expectCudaMatchesCpu("densify", {neg, vals}, {out});
  TestTensor idx32(DType::I32, {2});
  expectCudaMatchesCpu("densify", {idx32, vals}, {out});
  TestTensor idx3(DType::I64, {3});
  expectCudaMatchesCpu("densify", {idx3, vals}, {out});
  TestTensor out2(DType::F32, {4, 2});
  expectCudaMatchesCpu("densify", {idx, vals}, {out2});
  // The fault names the row and the bound, and the device works afterwards.
  std::string message = cudaKernelError("densify", {idx, vals}, {out});
  EXPECT_NE(message.find("row 4 out of range [0, 4)"), std::string::npos) << message;
  TestTensor ok(DType::I64, {2}, {0, 3});
  expectCudaMatchesCpu("densify", {ok, vals}, {out}, nlohmann::json::object(), 0, 0);
}

} // namespace
} // namespace parallax::rt::test
