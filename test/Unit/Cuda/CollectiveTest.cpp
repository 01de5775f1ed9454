//===- CollectiveTest.cpp - NCCL collectives and their kernels on a GPU ---===//
//
// One GPU can only hold a world of one NCCL rank (NCCL refuses two ranks on
// one device), so these check what one GPU can: that the device picks NCCL
// for a rank with a GPU of its own, that every NCCL operation and kernel is
// ordered correctly between the compute and communication streams (the
// results of a group of one are the inputs, laid out as the CPU kernels lay
// them out), that a token's wait orders the copies out, that a CUDA graph
// captures both streams, and that --collectives=mpi stages through the host.

#include "CudaKernelTestUtil.h"

#include "parallax/Runtime/Collectives.h"
#include "parallax/Runtime/Comm.h"

#include <cuda_runtime_api.h>

#include <numeric>

namespace parallax::rt::test {
namespace {

/// One world for every test: the device keeps its communicators per group.
Comm &testComm() {
  static std::unique_ptr<Comm> comm = makeLocalComm();
  return *comm;
}

Group &worldGroup() { return testComm().group({1}, {0}); }

class CudaCollective : public CudaKernelTest {};

TEST_F(CudaCollective, OneRankPerGpuUsesNccl) {
  CudaDevice &dev = testCudaDevice();
  Collectives *c = dev.collectives(testComm(), worldGroup());
  ASSERT_NE(c, nullptr);
  EXPECT_STREQ(c->transport(), "nccl");
  EXPECT_EQ(c, dev.collectives(testComm(), worldGroup()));
  EXPECT_NE(dev.executionNote().find("collectives through NCCL"), std::string::npos)
      << dev.executionNote();
}

TEST_F(CudaCollective, OperationsOrderAgainstTheComputeStream) {
  CudaDevice &dev = testCudaDevice();
  Collectives *c = dev.collectives(testComm(), worldGroup());
  ASSERT_NE(c, nullptr);
  const int64_t n = 1 << 16;
  std::vector<float> x(n);
  std::iota(x.begin(), x.end(), 0.5f);
  Buffer a(n * 4, &dev), b(n * 4, &dev);
  auto roundTrip = [&](auto &&start, void *read) {
    dev.uploadAsync(a.data(), x.data(), n * 4); // queued on the compute stream
    start()->wait();
    std::vector<float> got(n);
    dev.download(got.data(), read, n * 4);
    return got;
  };
  EXPECT_EQ(roundTrip([&] { return c->allReduce(a.data(), n, DType::F32, ReduceOp::Sum); }, a.data()), x);
  EXPECT_EQ(roundTrip([&] { return c->allReduce(a.data(), n, DType::F32, ReduceOp::Average); }, a.data()), x);
  EXPECT_EQ(roundTrip([&] { return c->reduceScatterBlock(a.data(), n, DType::F32, ReduceOp::Max); }, a.data()), x);
  EXPECT_EQ(roundTrip([&] { return c->allGatherBlock(a.data(), n * 4); }, a.data()), x);
  EXPECT_EQ(roundTrip([&] { return c->allGather(a.data(), b.data(), n * 4); }, b.data()), x);
  EXPECT_EQ(roundTrip([&] { return c->allToAll(a.data(), b.data(), n * 4); }, b.data()), x);
  // No peers in a group of one: ordered all the same; a peer is an error.
  EXPECT_EQ(roundTrip([&] { return c->sendRecv({}); }, a.data()), x);
  EXPECT_THROW(c->sendRecv({PeerTransfer{1, a.data(), 4, b.data(), 4}}), CommError);
}

ExecEnv ncclEnv(int tokens = 0) {
  ExecEnv env;
  env.comm = &testComm();
  env.pending.assign(tokens, nullptr);
  return env;
}

TEST_F(CudaCollective, AllReduceKernelsMatchTheCpu) {
  TestTensor a(DType::F32, {3, 5}, randomValues(15, 1)), b(DType::F32, {7}, randomValues(7, 2));
  expectCudaMatchesCpu("all_reduce", {a, b}, {TestTensor(DType::F32, {3, 5}), TestTensor(DType::F32, {7})},
                       {{"variables", {"w", "b"}}}, 0, 0, ncclEnv());
  expectCudaMatchesCpu("all_reduce", {a}, {TestTensor(DType::F32, {3, 5})},
                       {{"reduction", "average"}}, 0, 0, ncclEnv());
  TestTensor d(DType::F64, {4}, randomValues(4, 3));
  expectCudaMatchesCpu("all_reduce", {d}, {TestTensor(DType::F64, {4})},
                       {{"reduction", "max"}}, 0, 0, ncclEnv());
}

TEST_F(CudaCollective, AxisKernelsMatchTheCpu) {
  TestTensor x(DType::F32, {2, 3, 4}, randomValues(24, 4));
  for (int axis : {0, 1, 2}) {
    expectCudaMatchesCpu("all_gather", {x}, {TestTensor(DType::F32, {2, 3, 4})},
                         {{"gather_axis", axis}}, 0, 0, ncclEnv());
    expectCudaMatchesCpu("reduce_scatter", {x}, {TestTensor(DType::F32, {2, 3, 4})},
                         {{"scatter_axis", axis}}, 0, 0, ncclEnv());
  }
  // Both kernels refuse what the CPU refuses, with its message.
  expectCudaMatchesCpu("all_gather", {x}, {TestTensor(DType::F32, {2, 3, 4})},
                       {{"gather_axis", 3}}, 0, 0, ncclEnv());
}

TEST_F(CudaCollective, AllToAllKernelMatchesTheCpu) {
  TestTensor x(DType::F32, {2, 3, 4}, randomValues(24, 12));
  for (int split : {0, 1, 2})
    for (int concat : {0, 2})
      expectCudaMatchesCpu("all_to_all", {x}, {TestTensor(DType::F32, {2, 3, 4})},
                           {{"split_axis", split}, {"concat_axis", concat}}, 0, 0, ncclEnv());
  expectCudaMatchesCpu("all_to_all", {x}, {TestTensor(DType::F32, {2, 3, 4})},
                       {{"split_axis", 3}, {"concat_axis", 0}}, 0, 0, ncclEnv());
}

// A group of one: the halo exchange pads with zeros (the GPU's outputs start
// as NaN, so the zeros must be written), the reduce keeps the middle rows;
// NCCL's grouped send/receive runs with no peers.
TEST_F(CudaCollective, HaloKernelsMatchTheCpu) {
  for (DType dt : {DType::F32, DType::F64}) {
    TestTensor x(dt, {2, 3, 4, 5}, randomValues(120, 13));
    for (auto [lo, hi] : {std::pair<int, int>{1, 1}, {1, 0}, {0, 2}}) {
      nlohmann::json attrs = {{"axis", 2}, {"lo", lo}, {"hi", hi}};
      expectCudaMatchesCpu("halo_exchange", {x}, {TestTensor(dt, {2, 3, 4 + lo + hi, 5})},
                           attrs, 0, 0, ncclEnv());
      TestTensor e(dt, {2, 3, 4 + lo + hi, 5}, randomValues(30 * (4 + lo + hi), 14));
      expectCudaMatchesCpu("halo_reduce", {e}, {TestTensor(dt, {2, 3, 4, 5})}, attrs, 0, 0,
                           ncclEnv());
    }
  }
  // A max pool's padding: -inf past the ends.
  TestTensor x(DType::F32, {2, 3, 4, 5}, randomValues(120, 15));
  expectCudaMatchesCpu("halo_exchange", {x}, {TestTensor(DType::F32, {2, 3, 7, 5})},
                       {{"axis", 2}, {"lo", 2}, {"hi", 1}, {"edge", "-inf"}}, 0, 0, ncclEnv());
  // Both refuse what the CPU refuses, with its message.
  expectCudaMatchesCpu("halo_exchange", {x}, {TestTensor(DType::F32, {2, 3, 5, 5})},
                       {{"axis", 2}, {"lo", 1}, {"hi", 1}}, 0, 0, ncclEnv());
}

// --collectives=mpi: the CPU kernel over host copies, the same result.
TEST_F(CudaCollective, HaloExchangeStagesThroughTheHostOverMpi) {
  DeviceOptions o;
  o.kind = DeviceKind::Cuda;
  o.collectives = DeviceOptions::Transport::Mpi;
  CudaDevice dev(o);
  TestTensor x(DType::F32, {2, 3, 4, 5}, randomValues(120, 16));
  std::vector<TestTensor> ins{x}, outs{TestTensor(DType::F32, {2, 3, 6, 5})};
  nlohmann::json attrs = {{"axis", 2}, {"lo", 1}, {"hi", 1}};
  TestTensor want(DType::F32, {2, 3, 6, 5});
  runKernel("halo_exchange", {&x}, {&want}, attrs, ncclEnv());
  CudaTensors gpu(dev);
  std::vector<TensorView> gi = gpu.place(ins), go = gpu.place(outs, /*poison=*/true);
  PlanKernel kernel;
  kernel.op = "halo_exchange";
  kernel.attrs = attrs;
  ExecEnv env = ncclEnv();
  env.device = &dev;
  KernelArgs args(kernel, gi, go, env);
  (*dev.kernels().find("halo_exchange"))(args)();
  dev.synchronize();
  TestTensor got(DType::F32, {2, 3, 6, 5});
  gpu.fetch(go[0], got);
  EXPECT_EQ(got.values(), want.values());
  EXPECT_NE(dev.executionNote().find("halo_exchange through MPI with host staging"),
            std::string::npos)
      << dev.executionNote();
}

TEST_F(CudaCollective, AllGatherVKernelMatchesTheCpu) {
  TestTensor idx(DType::I64, {5}, {3, 0, 9, 9, -1});
  TestTensor rows(DType::F32, {5, 6}, randomValues(30, 5));
  expectCudaMatchesCpu("all_gatherv", {idx, rows},
                       {TestTensor(DType::I64, {5}), TestTensor(DType::F32, {5, 6})}, {}, 0,
                       0, ncclEnv());
}

TEST_F(CudaCollective, SyncBatchNormOverNcclMatchesTheCpu) {
  TestTensor x(DType::F32, {4, 3, 5}, randomValues(60, 6));
  TestTensor scale(DType::F32, {3}, randomValues(3, 7)), bias(DType::F32, {3}, randomValues(3, 8));
  TestTensor mean(DType::F32, {3}, randomValues(3, 9)), var(DType::F32, {3}, {0.5, 1.0, 2.0});
  nlohmann::json sync = {{"training", true}, {"grid", true}, {"grid_shape", {1}},
                         {"unbiased_running_var", true}};
  expectCudaMatchesCpu("batch_norm", {x, scale, bias, mean, var},
                       {TestTensor(DType::F32, {4, 3, 5}), TestTensor(DType::F32, {3}),
                        TestTensor(DType::F32, {3})},
                       sync, 1e-5, 1e-6, ncclEnv());
  TestTensor dy(DType::F32, {4, 3, 5}, randomValues(60, 10));
  expectCudaMatchesCpu("batch_norm_grad", {dy, x, scale},
                       {TestTensor(DType::F32, {4, 3, 5}), TestTensor(DType::F32, {3}),
                        TestTensor(DType::F32, {3})},
                       {{"grid", true}, {"grid_shape", {1}}}, 1e-5, 1e-6, ncclEnv());
  TestTensor xd(DType::F64, {2, 4, 3}, randomValues(24, 11));
  TestTensor c4(DType::F64, {4}, {1, 2, 3, 4});
  expectCudaMatchesCpu("batch_norm", {xd, c4, c4, c4, c4},
                       {TestTensor(DType::F64, {2, 4, 3}), TestTensor(DType::F64, {4}),
                        TestTensor(DType::F64, {4})},
                       sync, 1e-12, 1e-12, ncclEnv());
}

/// Binds `op` (token 0) and its wait on the device over `ins`/`outs`.
struct TokenRun {
  std::vector<std::unique_ptr<Buffer>> storage;
  std::vector<TensorView> ins, outs;
  ExecEnv env = ncclEnv(1);
  PlanKernel reduce, wait;
  KernelFn start, join;

  TokenRun(const std::vector<float> &x) {
    CudaDevice &dev = testCudaDevice();
    for (int i = 0; i < 2; ++i) {
      storage.push_back(std::make_unique<Buffer>(x.size() * 4, &dev));
      (i ? outs : ins).push_back(TensorView{storage.back()->data(), DType::F32,
                                            {(int64_t)x.size()}, MemorySpace::Cuda});
    }
    dev.upload(ins[0].data, x.data(), x.size() * 4);
    env.device = &dev;
    reduce.op = "all_reduce";
    reduce.attrs = {{"token", 0}};
    wait.op = "wait";
    wait.attrs = {{"token", 0}};
    KernelArgs r(reduce, ins, outs, env), w(wait, {}, {}, env);
    start = (*dev.kernels().find("all_reduce"))(r);
    join = (*dev.kernels().find("wait"))(w);
  }
  std::vector<float> result() {
    std::vector<float> got(outs[0].numElements());
    testCudaDevice().download(got.data(), outs[0].data, got.size() * 4);
    return got;
  }
};

TEST_F(CudaCollective, TheWaitKernelOrdersTheCopiesOut) {
  std::vector<float> x(1000);
  std::iota(x.begin(), x.end(), -3.0f);
  TokenRun run(x);
  run.start();
  run.join();
  testCudaDevice().synchronize();
  EXPECT_EQ(run.result(), x);
  // A wait without a started collective is an error, not a hang.
  try {
    run.join();
    FAIL() << "waited for nothing";
  } catch (const KernelError &e) {
    EXPECT_NE(std::string(e.what()).find("no collective was started for token 0"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(CudaCollective, AGraphCapturesBothStreams) {
  std::vector<float> x(4096);
  std::iota(x.begin(), x.end(), 1.0f);
  TokenRun run(x);
  CudaDevice &dev = testCudaDevice();
  dev.synchronize();
  cudaStream_t s = dev.stream();
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  run.start();
  run.join();
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  dev.synchronize();
  EXPECT_EQ(run.result(), x);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST_F(CudaCollective, MpiTransportStagesThroughTheHost) {
  DeviceOptions o;
  o.kind = DeviceKind::Cuda;
  o.collectives = DeviceOptions::Transport::Mpi;
  CudaDevice dev(o);
  EXPECT_EQ(dev.collectives(testComm(), worldGroup()), nullptr);
  EXPECT_NE(dev.executionNote().find("MPI with host staging (--collectives=mpi)"),
            std::string::npos)
      << dev.executionNote();
}

} // namespace
} // namespace parallax::rt::test
