//===- IndexingTest.cpp - the Indexing CUDA kernels against the CPU's ------===//
//
// gather, gather_elements, scatter_add and scatter_elements_add: every
// element type the CPU accepts, i32 and i64 indices (negative ones counted
// from the end), axes, sizes spanning many blocks, both scatter_elements_add
// paths, and the errors: bind-time ones with the CPU's messages, an index out
// of range reported by the GPU at synchronize().
//
//===----------------------------------------------------------------------===//

#include "CudaKernelTestUtil.h"

#include "../Runtime/KernelTestCases.h"


namespace parallax::rt::test {
namespace {

using namespace cases;

int64_t normAxis(int64_t axis, size_t rank) { return axis < 0 ? axis + (int64_t)rank : axis; }

/// Bad data: both devices fail, the GPU at synchronize() with a message
/// containing `gpuText`; then a good run on the same device succeeds (the
/// fault was cleared).
void expectDataError(const std::string &op, std::vector<TestTensor> ins,
                     std::vector<TestTensor> outs, nlohmann::json attrs,
                     const std::string &gpuText) {
  std::string cpu = kernelErrorOn(op, ins, outs, attrs);
  EXPECT_FALSE(cpu.empty()) << op;
  std::string gpu = cudaKernelError(op, std::move(ins), std::move(outs), attrs);
  EXPECT_NE(gpu.find(gpuText), std::string::npos) << gpu << " (CPU: " << cpu << ")";
}

//===----------------------------------------------------------------------===//
// gather
//===----------------------------------------------------------------------===//

void checkGather(DType dt, DType it, const Shape &ds, const Shape &is, int64_t axis,
                 bool setAxis = true) {
  SCOPED_TRACE(::testing::Message() << nameOf(dt) << "/" << nameOf(it) << " "
                                    << ::testing::PrintToString(ds) << " "
                                    << ::testing::PrintToString(is) << " axis " << axis);
  int64_t a = normAxis(axis, ds.size());
  TestTensor data(dt, ds, smallValues(numel(ds), 7, dt));
  TestTensor idx(it, is, randomIndices(numel(is), 8, -ds[a], ds[a] - 1));
  nlohmann::json attrs = nlohmann::json::object();
  if (setAxis)
    attrs["axis"] = axis;
  expectCudaMatchesCpu("gather", {data, idx}, {TestTensor(dt, gatherShape(ds, is, a))}, attrs,
                       0, 0);
}

TEST_F(CudaKernelTest, IndexingGatherEmbeddingRows) {
  for (DType it : {DType::I64, DType::I32}) {
    for (const GatherRowsCase &c : kGatherRowsCases)
      checkGather(c.dt, it, c.data, c.idx, 0);
    checkGather(DType::F32, it, {1000, 64}, {50, 40}, 0); // 16-byte units, many blocks
    checkGather(DType::F64, it, {300, 33}, {777}, 0);
  }
  checkGather(DType::F32, DType::I64, {9, 4}, {5, 2}, 0, /*setAxis=*/false);
}

TEST_F(CudaKernelTest, IndexingGatherOtherAxesAndTypes) {
  for (DType dt : {DType::F32, DType::F64, DType::I64, DType::I32, DType::I16, DType::I8,
                   DType::U8, DType::Bool}) {
    checkGather(dt, DType::I64, {2, 5, 3}, {4}, 1);
    checkGather(dt, DType::I32, {2, 5, 3}, {2, 2}, -2);
    checkGather(dt, DType::I64, {2, 3, 4}, {3}, -1); // one element per row
    checkGather(dt, DType::I32, {3, 4}, {2, 2}, 1);
    checkGather(dt, DType::I64, {3, 8, 16}, {5}, 1);  // rows of 16 elements
  }
  checkGather(DType::F32, DType::I64, {20, 30, 5}, {7}, 1);
  checkGather(DType::F64, DType::I32, {20, 300}, {70}, -1);
  checkGather(DType::I8, DType::I64, {64, 1000}, {3, 100}, 1);
}

TEST_F(CudaKernelTest, IndexingGatherF16IsCopiedBitwise) {
  CudaDevice &dev = testCudaDevice();
  std::vector<uint16_t> table = {0x3c00, 0x3c01, 0x3c02, 0x3c03, 0x7e01, 0x3c05};
  std::vector<int64_t> ids = {2, -3};
  Buffer d(64, &dev), i(64, &dev), o(64, &dev);
  dev.upload(d.data(), table.data(), 12);
  dev.upload(i.data(), ids.data(), 16);
  PlanKernel kernel;
  kernel.op = "gather";
  kernel.attrs = nlohmann::json::object();
  ExecEnv env;
  env.device = &dev;
  KernelArgs args(kernel,
                  {{d.data(), DType::F16, {3, 2}, MemorySpace::Cuda},
                   {i.data(), DType::I64, {2}, MemorySpace::Cuda}},
                  {{o.data(), DType::F16, {2, 2}, MemorySpace::Cuda}}, env);
  (*dev.kernels().find("gather"))(args)();
  dev.synchronize();
  std::vector<uint16_t> out(4);
  dev.download(out.data(), o.data(), 8);
  EXPECT_EQ(out, (std::vector<uint16_t>{0x7e01, 0x3c05, 0x3c00, 0x3c01}));
}

TEST_F(CudaKernelTest, IndexingGatherErrors) {
  TestTensor data(DType::F32, {5, 3}, randomValues(15, 1)), out(DType::F32, {2, 3});
  expectDataError("gather", {data, TestTensor(DType::I64, {2}, {1, 5})}, {out},
                  nlohmann::json::object(), "index 5 is out of range [-5, 5)");
  expectDataError("gather", {data, TestTensor(DType::I32, {2}, {-6, 0})}, {out},
                  nlohmann::json::object(), "index -6 is out of range [-5, 5)");
  // A table padded to 5 rows of which 4 are real (the plan's "rows").
  expectDataError("gather", {data, TestTensor(DType::I64, {2}, {1, 4})}, {out},
                  {{"rows", 4}}, "index 4 is out of range [-4, 4)");
  // A bad index far into a large gather.
  TestTensor big(DType::F32, {100, 8}), bigIdx(DType::I64, {4000});
  for (int i = 0; i < 4000; ++i)
    bigIdx.set(i, i % 100);
  bigIdx.set(3999, 100);
  expectDataError("gather", {big, bigIdx}, {TestTensor(DType::F32, {4000, 8})},
                  nlohmann::json::object(), "index 100 is out of range [-100, 100)");
  // An embedding lookup refuses negative ids; without the flag they count
  // from the end.
  TestTensor ids(DType::I64, {4}, {0, 4, -1, -1});
  expectDataError("gather", {data, ids}, {TestTensor(DType::F32, {4, 3})},
                  {{"nonnegative_ids", true}}, "-1");
  expectCudaMatchesCpu("gather", {data, ids}, {TestTensor(DType::F32, {4, 3})},
                       nlohmann::json::object(), 0, 0);
  // After a fault, the device runs the next kernel normally.
  TestTensor ok(DType::I64, {2}, {-5, 4});
  EXPECT_EQ(cudaKernelError("gather", {data, ok}, {out}, nlohmann::json::object()), "");
  expectSameError("gather", {data, ok}, {out}, {{"axis", 2}});
  expectSameError("gather", {data, TestTensor(DType::F32, {2})}, {out});
  expectSameError("gather", {data, ok}, {TestTensor(DType::F32, {3, 2})});
  expectSameError("gather", {data, ok}, {TestTensor(DType::F64, {2, 3})});
  expectSameError("gather", {TestTensor(DType::F32, {}), ok}, {out});
}

//===----------------------------------------------------------------------===//
// gather_elements
//===----------------------------------------------------------------------===//

void checkGatherElements(DType dt, DType it, const Shape &ds, const Shape &is, int64_t axis) {
  SCOPED_TRACE(::testing::Message() << nameOf(dt) << "/" << nameOf(it) << " "
                                    << ::testing::PrintToString(ds) << " "
                                    << ::testing::PrintToString(is) << " axis " << axis);
  int64_t a = normAxis(axis, ds.size());
  TestTensor data(dt, ds, smallValues(numel(ds), 11, dt));
  TestTensor idx(it, is, randomIndices(numel(is), 12, -ds[a], ds[a] - 1));
  expectCudaMatchesCpu("gather_elements", {data, idx}, {TestTensor(dt, is)}, {{"axis", axis}},
                       0, 0);
}

TEST_F(CudaKernelTest, IndexingGatherElements) {
  for (DType it : {DType::I64, DType::I32}) {
    checkGatherElements(DType::F32, it, {3, 4}, {2, 4}, 0);
    checkGatherElements(DType::F32, it, {3, 4}, {3, 6}, 1);
    checkGatherElements(DType::F64, it, {3, 4}, {2, 3}, -1);
    checkGatherElements(DType::I64, it, {2, 5, 3}, {2, 7, 2}, 1);
    checkGatherElements(DType::I32, it, {2, 5, 3}, {2, 7, 2}, 1);
    checkGatherElements(DType::I16, it, {4}, {6}, 0);
    checkGatherElements(DType::I8, it, {2, 5, 3}, {1, 2, 3}, 0);
    checkGatherElements(DType::U8, it, {2, 5, 3}, {2, 5, 4}, 2);
    checkGatherElements(DType::Bool, it, {2, 5, 3}, {2, 5, 4}, 2);
  }
  checkGatherElements(DType::F32, DType::I64, {30, 40, 6}, {30, 40, 5}, 2);
  checkGatherElements(DType::F64, DType::I32, {300, 257}, {299, 100}, 0);
}

TEST_F(CudaKernelTest, IndexingGatherElementsErrors) {
  TestTensor data(DType::F32, {3, 4}, randomValues(12, 2));
  expectDataError("gather_elements", {data, TestTensor(DType::I64, {2, 4}, {0, 1, 2, 3, 0, -3, 1, 2})},
                  {TestTensor(DType::F32, {2, 4})}, nlohmann::json::object(),
                  "index 3 is out of range [-3, 3)");
  TestTensor good(DType::I64, {2, 4});
  expectSameError("gather_elements", {data, TestTensor(DType::I64, {2, 4, 1})},
                  {TestTensor(DType::F32, {2, 4, 1})});
  expectSameError("gather_elements", {data, TestTensor(DType::I64, {2, 5})},
                  {TestTensor(DType::F32, {2, 5})});
  expectSameError("gather_elements", {data, good}, {TestTensor(DType::F32, {2, 4})},
                  {{"axis", -3}});
  expectSameError("gather_elements", {data, good}, {TestTensor(DType::F32, {4, 2})});
  expectSameError("gather_elements", {data, TestTensor(DType::F64, {2, 4})},
                  {TestTensor(DType::F32, {2, 4})});
}

//===----------------------------------------------------------------------===//
// scatter_add, scatter_elements_add
//===----------------------------------------------------------------------===//

void checkScatterAdd(DType dt, DType it, const Shape &os, const Shape &is, int64_t axis,
                     int64_t lo = -2, int64_t hi = 2) {
  SCOPED_TRACE(::testing::Message() << nameOf(dt) << "/" << nameOf(it) << " "
                                    << ::testing::PrintToString(os) << " "
                                    << ::testing::PrintToString(is) << " axis " << axis);
  int64_t a = normAxis(axis, os.size());
  Shape us = gatherShape(os, is, a);
  TestTensor idx(it, is, randomIndices(numel(is), 15, std::max(lo, -os[a]), std::min(hi, os[a] - 1)));
  TestTensor upd(dt, us, randomValues(numel(us), 16));
  // Atomic adds: repeated indices sum in another order than the CPU's.
  expectCudaMatchesCpu("scatter_add", {idx, upd},
                       {TestTensor(dt, os, std::vector<double>(numel(os), 99))},
                       {{"axis", axis}}, dt == DType::F32 ? 1e-5 : 1e-12, 1e-5);
}

TEST_F(CudaKernelTest, IndexingScatterAdd) {
  for (DType dt : {DType::F32, DType::F64})
    for (DType it : {DType::I64, DType::I32}) {
      for (const ScatterAddCase &c : kScatterAddCases)
        checkScatterAdd(dt, it, c.out, c.idx, c.axis);
      checkScatterAdd(dt, it, {1000, 64}, {3000}, 0, -1000, 999); // embedding gradient
      checkScatterAdd(dt, it, {10, 64}, {300}, 0, -10, 9);        // many repeats
      checkScatterAdd(dt, it, {50, 9, 3}, {4, 5}, -2);
    }
}

void checkScatterElementsAdd(DType dt, DType it, const Shape &os, const Shape &is, int64_t axis,
                             int64_t lo = -2, int64_t hi = 1) {
  SCOPED_TRACE(::testing::Message() << nameOf(dt) << "/" << nameOf(it) << " "
                                    << ::testing::PrintToString(os) << " "
                                    << ::testing::PrintToString(is) << " axis " << axis);
  int64_t a = normAxis(axis, os.size());
  TestTensor idx(it, is, randomIndices(numel(is), 13, std::max(lo, -os[a]), std::min(hi, os[a] - 1)));
  TestTensor upd(dt, is, randomValues(numel(is), 14));
  expectCudaMatchesCpu("scatter_elements_add", {idx, upd},
                       {TestTensor(dt, os, std::vector<double>(numel(os), 99))},
                       {{"axis", axis}}, dt == DType::F32 ? 1e-5 : 1e-12, 1e-5);
}

TEST_F(CudaKernelTest, IndexingScatterElementsAdd) {
  for (DType dt : {DType::F32, DType::F64})
    for (DType it : {DType::I64, DType::I32}) {
      // Short lines: one thread per line.
      for (const ScatterElementsCase &c : kScatterElementsCases)
        checkScatterElementsAdd(dt, it, c.out, c.idx, c.axis);
      // Longer lines, few of them: atomic adds.
      checkScatterElementsAdd(dt, it, {40, 30, 4}, {40, 30, 9}, 2);
      checkScatterElementsAdd(dt, it, {4, 300}, {20, 300}, 0);
      checkScatterElementsAdd(dt, it, {3, 50}, {3, 5000}, 1, -50, 49);
      // Many lines: one thread per line.
      checkScatterElementsAdd(dt, it, {200, 10, 100}, {200, 12, 100}, 1, -10, 9);
    }
}

TEST_F(CudaKernelTest, IndexingScatterErrors) {
  TestTensor upd(DType::F32, {3, 2}, randomValues(6, 3)), out(DType::F32, {4, 2});
  expectDataError("scatter_add", {TestTensor(DType::I64, {3}, {0, -1, 4}), upd}, {out},
                  nlohmann::json::object(), "index 4 is out of range [-4, 4)");
  expectDataError("scatter_add", {TestTensor(DType::I32, {3}, {0, -5, 3}), upd}, {out},
                  nlohmann::json::object(), "index -5 is out of range [-4, 4)");
  TestTensor idx(DType::I64, {3}, {0, -1, 3});
  expectSameError("scatter_add", {idx, TestTensor(DType::F32, {2, 2})}, {out});
  expectSameError("scatter_add", {idx, upd}, {out}, {{"axis", 5}});
  expectSameError("scatter_add", {idx, TestTensor(DType::I64, {3, 2})},
                  {TestTensor(DType::I64, {4, 2})});
  expectSameError("scatter_add", {idx, upd}, {TestTensor(DType::F64, {4, 2})});
  expectSameError("scatter_add", {TestTensor(DType::F32, {3}), upd}, {out});

  TestTensor eidx(DType::I64, {2, 2}, {0, 1, 2, 3}), eupd(DType::F32, {2, 2}, {1, 2, 3, 4});
  expectDataError("scatter_elements_add", {eidx, eupd}, {TestTensor(DType::F32, {3, 3})},
                  nlohmann::json::object(), "index 3 is out of range [-3, 3)");
  // The atomic path reports too.
  TestTensor lidx(DType::I64, {2, 100}), lupd(DType::F64, {2, 100}, randomValues(200, 4));
  lidx.set(150, -101);
  expectDataError("scatter_elements_add", {lidx, lupd}, {TestTensor(DType::F64, {2, 100})},
                  {{"axis", 1}}, "index -101 is out of range [-100, 100)");
  expectSameError("scatter_elements_add", {eidx, TestTensor(DType::F32, {2, 3})},
                  {TestTensor(DType::F32, {3, 3})});
  expectSameError("scatter_elements_add", {eidx, TestTensor(DType::I32, {2, 2})},
                  {TestTensor(DType::I32, {3, 3})});
  eidx.set(3, 0);
  expectSameError("scatter_elements_add", {eidx, eupd}, {TestTensor(DType::F32, {1, 3})},
                  {{"axis", 1}});
}

} // namespace
} // namespace parallax::rt::test
