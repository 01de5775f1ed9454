//===- ShapeTest.cpp - the Shape CUDA kernels against the CPU's ------------===//
//
// transpose, concat, expand, slice, slice_grad, pad and pad_grad: every
// element type the CPU moves, the strided, widened and tiled copy paths,
// sizes spanning many blocks, and the bind-time errors (same messages).
//
//===----------------------------------------------------------------------===//

#include "CudaKernelTestUtil.h"

namespace parallax::rt::test {
namespace {

using Shape = std::vector<int64_t>;

const std::vector<DType> kAllTypes = {DType::F32, DType::F64, DType::I64, DType::I32,
                                      DType::I16, DType::I8,  DType::U8,  DType::Bool};

/// Distinct values that every type holds exactly.
std::vector<double> distinct(DType t, int64_t n) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) {
    switch (t) {
    case DType::Bool: v[i] = (i * 7 + i / 3) % 2; break;
    case DType::I8: v[i] = (i % 251) - 125; break;
    case DType::U8: v[i] = i % 251; break;
    case DType::I16: v[i] = (i % 30011) - 15000; break;
    case DType::I32:
    case DType::I64: v[i] = (double)i * 3 - 1000; break;
    default: v[i] = (double)i * 0.5 - 7.25; break;
    }
  }
  return v;
}

TestTensor filled(DType t, const Shape &s) { return TestTensor(t, s, distinct(t, numel(s))); }

/// Data movement: the GPU's result must be the CPU's exactly.
void expectSame(const std::string &op, std::vector<TestTensor> ins, std::vector<TestTensor> outs,
                nlohmann::json attrs) {
  expectCudaMatchesCpu(op, std::move(ins), std::move(outs), std::move(attrs), 0, 0);
}

/// The message binding or running `op` on the GPU fails with ("" if none).
std::string gpuError(const std::string &op, std::vector<TestTensor> ins,
                     std::vector<TestTensor> outs, nlohmann::json attrs) {
  CudaDevice &dev = testCudaDevice();
  std::vector<std::unique_ptr<Buffer>> storage;
  auto place = [&](std::vector<TestTensor> &ts) {
    std::vector<TensorView> views;
    for (TestTensor &t : ts) {
      int64_t bytes = t.numElements() * (int64_t)sizeOf(t.dtype);
      storage.push_back(std::make_unique<Buffer>(bytes + 64, &dev));
      dev.upload(storage.back()->data(), t.data(), bytes);
      views.push_back({storage.back()->data(), t.dtype, t.shape, MemorySpace::Cuda});
    }
    return views;
  };
  std::vector<TensorView> gi = place(ins), go = place(outs);
  PlanKernel kernel;
  kernel.op = op;
  kernel.attrs = std::move(attrs);
  ExecEnv env;
  env.step = 1;
  env.device = &dev;
  try {
    KernelArgs args(kernel, gi, go, env);
    args.index = 0;
    KernelFn fn = (*dev.kernels().find(op))(args);
    fn();
    dev.synchronize();
  } catch (const std::exception &e) {
    return e.what();
  }
  return "";
}

/// A bind-time error: the same message on both devices.
void expectSameError(const std::string &op, std::vector<TestTensor> ins,
                     std::vector<TestTensor> outs, nlohmann::json attrs) {
  std::vector<TestTensor> ci = ins, co = outs;
  std::vector<TestTensor *> cip, cop;
  for (TestTensor &t : ci)
    cip.push_back(&t);
  for (TestTensor &t : co)
    cop.push_back(&t);
  std::string cpu = kernelError(op, cip, cop, attrs);
  ASSERT_FALSE(cpu.empty()) << op << " " << attrs.dump();
  EXPECT_EQ(gpuError(op, std::move(ins), std::move(outs), attrs), cpu);
}

TEST_F(CudaKernelTest, ShapeTransposeAllTypesAndPaths) {
  auto check = [](DType t, const Shape &in, const Shape &perm) {
    SCOPED_TRACE(std::string(nameOf(t)) + " " + ::testing::PrintToString(in) + " perm " +
                 ::testing::PrintToString(perm));
    Shape out(in.size());
    for (size_t i = 0; i < in.size(); ++i)
      out[i] = in[perm[i]];
    expectSame("transpose", {filled(t, in)}, {TestTensor(t, out)}, {{"perm", perm}});
  };
  for (DType t : kAllTypes) {
    check(t, {}, {});
    check(t, {5}, {0});
    check(t, {3, 4}, {1, 0});
    check(t, {37, 70}, {1, 0});                // tiled, partial tiles
    check(t, {2, 3, 45, 33}, {0, 1, 3, 2});    // swap the last two (tiled)
    check(t, {2, 3, 4, 5}, {0, 2, 1, 3});      // last dim stays: widened rows
    check(t, {4, 9, 10}, {2, 0, 1});
    check(t, {4, 9, 10}, {1, 2, 0});
    check(t, {2, 1, 3, 1, 4}, {4, 3, 0, 2, 1}); // size-1 dims
    check(t, {2, 3, 2, 3, 2, 2}, {5, 1, 3, 0, 4, 2});
    check(t, {3, 0, 4}, {2, 1, 0}); // empty
  }
  // Many blocks and many tiles.
  check(DType::F32, {300, 513}, {1, 0});
  check(DType::F64, {4, 8, 64, 100}, {0, 1, 3, 2});
  check(DType::I64, {8, 128, 8, 64}, {0, 2, 1, 3});
  check(DType::F32, {20, 30, 40}, {2, 0, 1});
  check(DType::F32, {3, 1000, 7}, {2, 1, 0}); // strided, not tiled (7 < 8)
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
    int64_t a = axis < 0 ? axis + (int64_t)ins[0].size() : axis;
    Shape out = ins[0];
    out[a] = 0;
    std::vector<TestTensor> xs;
    int64_t seed = 0;
    for (const Shape &s : ins) {
      out[a] += s[a];
      std::vector<double> v = distinct(t, numel(s) + seed);
      xs.emplace_back(t, s, std::vector<double>(v.begin() + seed, v.end()));
      seed += 17;
    }
    expectSame("concat", xs, {TestTensor(t, out)}, {{"axis", axis}});
  };
  for (DType t : kAllTypes) {
    check(t, {{2, 3}, {4, 3}}, 0);
    check(t, {{2, 3}, {2, 1}, {2, 5}}, 1);
    check(t, {{2, 3}, {2, 1}, {2, 5}}, -1);
    check(t, {{2, 3, 4}, {2, 2, 4}, {2, 0, 4}, {2, 1, 4}}, -2); // an empty part
    check(t, {{5}}, 0);
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
  for (DType t : kAllTypes) {
    check(t, {}, {2, 3});
    check(t, {3}, {4, 3});
    check(t, {4, 1}, {4, 5});
    check(t, {1, 3, 1}, {2, 3, 4});
    check(t, {2, 3}, {2, 3});
    check(t, {3, 1}, {2, 2, 3, 5});
    check(t, {1}, {0, 3});
  }
  check(DType::F32, {1, 300, 1}, {8, 300, 64});
  check(DType::F64, {1, 1000}, {70, 1000});
}

TEST_F(CudaKernelTest, ShapeExpandErrors) {
  TestTensor x(DType::F32, {3}), y(DType::F32, {4, 2}), z(DType::F32, {3, 4});
  expectSameError("expand", {x}, {y}, nlohmann::json::object());
  expectSameError("expand", {z}, {x}, nlohmann::json::object());
}

struct SliceCase {
  Shape in, out, starts, steps;
};

const std::vector<SliceCase> kSliceCases = {
    {{10}, {3}, {2}, {1}},
    {{10}, {4}, {9}, {-2}},
    {{10}, {10}, {9}, {-1}}, // reverse
    {{6, 8}, {2, 8}, {3, 0}, {1, 1}},
    {{6, 8}, {6, 3}, {0, 1}, {1, 3}},
    {{6, 8}, {3, 4}, {5, 7}, {-2, -2}},
    {{4, 5, 6}, {2, 5, 3}, {1, 0, 5}, {2, 1, -2}},
    {{4, 5, 6}, {4, 0, 6}, {0, 0, 0}, {1, 1, 1}}, // empty
    {{2, 1, 7}, {2, 1, 2}, {0, 0, 6}, {1, 1, -5}},
    {{}, {}, {}, {}},
    {{64, 512}, {32, 200}, {63, 10}, {-2, 2}},     // many blocks
    {{300, 96}, {100, 64}, {50, 16}, {2, 1}},      // widened rows
    {{1000, 37}, {999, 37}, {1, 0}, {1, 1}},       // contiguous, odd rows
};

TEST_F(CudaKernelTest, ShapeSliceAndGrad) {
  for (DType t : kAllTypes)
    for (const SliceCase &c : kSliceCases) {
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

struct PadCase {
  Shape in;
  std::vector<int64_t> pads;
};

const std::vector<PadCase> kPadCases = {
    {{5}, {2, 3}},
    {{3, 4}, {1, 2, 2, 1}},
    {{2, 3, 4}, {0, 1, 2, 0, 2, 3}},
    {{2, 3, 5, 6}, {0, 0, 1, 1, 0, 0, 1, 1}},
    {{3, 6}, {-1, 2, 0, -3}}, // negative pads crop
    {{4, 4}, {0, 0, 0, 0}},
    {{8, 16, 33, 40}, {0, 0, 3, 2, 0, 0, 2, 4}}, // many blocks
};

Shape paddedShape(const PadCase &c) {
  const size_t rank = c.in.size();
  Shape out(rank);
  for (size_t d = 0; d < rank; ++d)
    out[d] = c.in[d] + c.pads[d] + c.pads[rank + d];
  return out;
}

TEST_F(CudaKernelTest, ShapePadModesAndTypes) {
  for (const char *mode : {"constant", "reflect", "edge"})
    for (DType t : kAllTypes)
      for (const PadCase &c : kPadCases) {
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
      for (const PadCase &c : kPadCases) {
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
