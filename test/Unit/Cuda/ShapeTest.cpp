//===- ShapeTest.cpp - the Shape CUDA kernels against the CPU's ------------===//
//
// transpose, concat, expand, slice, slice_grad, pad and pad_grad: every
// element type the CPU moves, the strided, widened and tiled copy paths,
// sizes spanning many blocks, and the bind-time errors (same messages).
//
//===----------------------------------------------------------------------===//

#include "CudaKernelTestUtil.h"

#include "../Runtime/KernelTestCases.h"

namespace parallax::rt::test {
namespace {

using namespace cases;

TestTensor filled(DType t, const Shape &s) { return TestTensor(t, s, distinct(t, numel(s))); }

/// Data movement: the GPU's result must be the CPU's exactly.
void expectSame(const std::string &op, std::vector<TestTensor> ins, std::vector<TestTensor> outs,
                nlohmann::json attrs) {
  expectCudaMatchesCpu(op, std::move(ins), std::move(outs), std::move(attrs), 0, 0);
}

TEST_F(CudaKernelTest, ShapeTransposeAllTypesAndPaths) {
  auto check = [](DType t, const TransposeCase &c) {
    SCOPED_TRACE(std::string(nameOf(t)) + " " + ::testing::PrintToString(c.in) + " perm " +
                 ::testing::PrintToString(c.perm));
    expectSame("transpose", {filled(t, c.in)}, {TestTensor(t, transposedShape(c))},
               {{"perm", c.perm}});
  };
  for (DType t : kAllTypes)
    for (const TransposeCase &c : kTransposeCases)
      check(t, c);
  // Many blocks and many tiles.
  for (const auto &[t, c] : kLargeTransposeCases)
    check(t, c);
  check(DType::F32, {{3, 1000, 7}, {2, 1, 0}}); // strided, not tiled (7 < 8)
}

TEST_F(CudaKernelTest, ShapeTransposeErrors) {
  TestTensor x(DType::F32, {2, 3}), y(DType::F32, {3, 2}), z(DType::F32, {2, 3});
  expectSameError("transpose", {x}, {y}, nlohmann::json::object());
  expectSameError("transpose", {x}, {y}, {{"perm", {0}}});
  expectSameError("transpose", {x}, {y}, {{"perm", {1, 1}}});
  expectSameError("transpose", {x}, {z}, {{"perm", {1, 0}}});
  expectSameError("transpose", {x}, {TestTensor(DType::I32, {3, 2})}, {{"perm", {1, 0}}});
  expectSameError("transpose", {TestTensor(DType::F16, {2, 3})}, {TestTensor(DType::F16, {3, 2})},
                  {{"perm", {1, 0}}});
}

TEST_F(CudaKernelTest, ShapeConcatAxesAndTypes) {
  auto check = [](DType t, const std::vector<Shape> &ins, int64_t axis) {
    SCOPED_TRACE(std::string(nameOf(t)) + " axis " + std::to_string(axis));
    expectSame("concat", concatInputs(t, ins), {TestTensor(t, concatShape(ins, axis))},
               {{"axis", axis}});
  };
  for (DType t : kAllTypes) {
    for (const ConcatCase &c : kConcatCases)
      check(t, c.ins, c.axis);
    check(t, {{0, 4}, {0, 4}}, 1); // empty result
  }
  check(DType::F32, {{400, 64}, {400, 200}}, 1); // 16-byte units
  check(DType::F32, {{400, 63}, {400, 201}}, 1); // 4-byte units
  check(DType::I8, {{1000, 3}, {1000, 16}, {1000, 5}}, 1);
  std::vector<Shape> many;
  for (int k = 0; k < 40; ++k)
    many.push_back({7, 1 + k % 5, 3});
  check(DType::F64, many, 1);
}

TEST_F(CudaKernelTest, ShapeConcatErrors) {
  TestTensor a(DType::F32, {2, 3}), b(DType::F32, {3, 3}), y(DType::F32, {5, 3});
  expectSameError("concat", {a, b}, {y}, {{"axis", 1}});
  expectSameError("concat", {a, b}, {y}, {{"axis", 2}});
  expectSameError("concat", {a, b}, {y}, nlohmann::json::object());
  expectSameError("concat", {a, b}, {TestTensor(DType::F32, {6, 3})}, {{"axis", 0}});
  expectSameError("concat", {a, TestTensor(DType::I32, {3, 3})}, {y}, {{"axis", 0}});
}

TEST_F(CudaKernelTest, ShapeExpandBroadcasts) {
  auto check = [](DType t, const Shape &in, const Shape &out) {
    SCOPED_TRACE(std::string(nameOf(t)) + " " + ::testing::PrintToString(in) + " -> " +
                 ::testing::PrintToString(out));
    expectSame("expand", {filled(t, in)}, {TestTensor(t, out)}, nlohmann::json::object());
  };
  for (DType t : kAllTypes)
    for (const auto &[in, out] : kExpandCases)
      check(t, in, out);
  check(DType::F32, {1, 300, 1}, {8, 300, 64});
  check(DType::F64, {1, 1000}, {70, 1000});
}

TEST_F(CudaKernelTest, ShapeExpandErrors) {
  TestTensor x(DType::F32, {3}), y(DType::F32, {4, 2}), z(DType::F32, {3, 4});
  expectSameError("expand", {x}, {y}, nlohmann::json::object());
  expectSameError("expand", {z}, {x}, nlohmann::json::object());
}

/// The CPU tests' cases, and larger ones.
std::vector<SliceCase> gpuSliceCases() {
  std::vector<SliceCase> cs = kSliceCases;
  cs.push_back({{64, 512}, {32, 200}, {63, 10}, {-2, 2}}); // many blocks
  cs.push_back({{300, 96}, {100, 64}, {50, 16}, {2, 1}});  // widened rows
  cs.push_back({{1000, 37}, {999, 37}, {1, 0}, {1, 1}});   // contiguous, odd rows
  return cs;
}

TEST_F(CudaKernelTest, ShapeSliceAndGrad) {
  for (DType t : kAllTypes)
    for (const SliceCase &c : gpuSliceCases()) {
      SCOPED_TRACE(std::string(nameOf(t)) + " " + ::testing::PrintToString(c.in) + " starts " +
                   ::testing::PrintToString(c.starts) + " steps " +
                   ::testing::PrintToString(c.steps));
      nlohmann::json attrs = {{"starts", c.starts}, {"steps", c.steps}};
      expectSame("slice", {filled(t, c.in)}, {TestTensor(t, c.out)}, attrs);
      // The CPU's dx starts as garbage that the kernel must zero; the GPU's
      // as NaN.
      expectSame("slice_grad", {filled(t, c.out)},
                 {TestTensor(t, c.in, std::vector<double>(numel(c.in), 1))}, attrs);
    }
}

TEST_F(CudaKernelTest, ShapeSliceErrors) {
  TestTensor x(DType::F32, {10}), y(DType::F32, {4});
  expectSameError("slice", {x}, {y}, {{"starts", {8}}, {"steps", {1}}});
  expectSameError("slice", {x}, {y}, {{"starts", {2}}, {"steps", {-1}}});
  expectSameError("slice", {x}, {y}, {{"starts", {0}}, {"steps", {0}}});
  expectSameError("slice", {x}, {y}, {{"starts", {0, 0}}, {"steps", {1, 1}}});
  expectSameError("slice", {x}, {y}, {{"starts", {0}}, {"steps", {4611686018427387904}}});
  expectSameError("slice", {x}, {y}, {{"steps", {1}}});
  expectSameError("slice", {x}, {TestTensor(DType::F32, {2, 2})}, {{"starts", {0}}, {"steps", {1}}});
  expectSameError("slice_grad", {y}, {x}, {{"starts", {9}}, {"steps", {2}}});
}

/// The CPU tests' cases, and one spanning many blocks.
std::vector<PadCase> gpuPadCases() {
  std::vector<PadCase> cs = kPadCases;
  cs.push_back({{8, 16, 33, 40}, {0, 0, 3, 2, 0, 0, 2, 4}});
  return cs;
}

TEST_F(CudaKernelTest, ShapePadModesAndTypes) {
  for (const char *mode : {"constant", "reflect", "edge"})
    for (DType t : kAllTypes)
      for (const PadCase &c : gpuPadCases()) {
        SCOPED_TRACE(std::string(mode) + " " + nameOf(t) + " " + ::testing::PrintToString(c.in) +
                     " pads " + ::testing::PrintToString(c.pads));
        const double fill = t == DType::Bool ? 1 : 7;
        expectSame("pad", {filled(t, c.in)}, {TestTensor(t, paddedShape(c))},
                   {{"pads", c.pads}, {"mode", mode}, {"value", fill}});
      }
  // The default value and mode, and a fractional fill for integers.
  expectSame("pad", {filled(DType::F32, {3, 4})}, {TestTensor(DType::F32, {5, 7})},
             {{"pads", {1, 2, 1, 1}}});
  expectSame("pad", {filled(DType::I32, {3, 4})}, {TestTensor(DType::I32, {5, 7})},
             {{"pads", {1, 2, 1, 1}}, {"value", -2.5}});
  expectSame("pad", {filled(DType::F64, {})}, {TestTensor(DType::F64, {})},
             {{"pads", nlohmann::json::array()}});
}

TEST_F(CudaKernelTest, ShapePadGradAddsBackToTheSource) {
  for (const char *mode : {"constant", "reflect", "edge"})
    for (DType t : {DType::F32, DType::F64})
      for (const PadCase &c : gpuPadCases()) {
        SCOPED_TRACE(std::string(mode) + " " + nameOf(t) + " " + ::testing::PrintToString(c.in) +
                     " pads " + ::testing::PrintToString(c.pads));
        Shape out = paddedShape(c);
        TestTensor dy(t, out, randomValues(numel(out), 3));
        expectCudaMatchesCpu("pad_grad", {dy},
                             {TestTensor(t, c.in, std::vector<double>(numel(c.in), 5))},
                             {{"pads", c.pads}, {"mode", mode}});
      }
  // Edge padding much wider than the input: many contributions per element.
  TestTensor dy(DType::F32, {40, 300}, randomValues(40 * 300, 4));
  expectCudaMatchesCpu("pad_grad", {dy}, {TestTensor(DType::F32, {4, 3})},
                       {{"pads", {20, 150, 16, 147}}, {"mode", "edge"}});
}

TEST_F(CudaKernelTest, ShapePadErrors) {
  TestTensor x(DType::F32, {3}), y(DType::F32, {9});
  expectSameError("pad", {x}, {y}, {{"pads", {3, 3}}, {"mode", "reflect"}});
  expectSameError("pad", {x}, {y}, {{"pads", {3, 3}}, {"mode", "wrap"}});
  expectSameError("pad", {x}, {y}, {{"pads", {3, 2}}});
  expectSameError("pad", {x}, {y}, {{"pads", {3}}});
  expectSameError("pad", {x}, {y}, {{"pads", {3, 3}}, {"mode", "reflect"}});
  expectSameError("pad_grad", {y}, {x}, {{"pads", {3, 2}}});
  expectSameError("pad_grad", {TestTensor(DType::I32, {9})}, {TestTensor(DType::I32, {3})},
                  {{"pads", {3, 3}}});
  expectSameError("pad_grad", {TestTensor(DType::F32, {})}, {TestTensor(DType::F32, {})},
                  {{"pads", nlohmann::json::array()}});
}

} // namespace
} // namespace parallax::rt::test
