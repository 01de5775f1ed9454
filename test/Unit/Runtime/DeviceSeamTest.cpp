//===- DeviceSeamTest.cpp - device names, plan targets, the CPU device ----===//

#include "parallax/Runtime/Comm.h"
#include "parallax/Runtime/Device.h"
#include "parallax/Runtime/Plan.h"
#include "parallax/Runtime/PlanAlignment.h"
#include "parallax/Runtime/Session.h"

#include "../../../lib/Runtime/HostStaged.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>
#include <stdexcept>

namespace parallax::rt {
namespace {

TEST(DeviceSeam, ParsesDeviceSpecs) {
  DeviceOptions o;
  parseDeviceSpec("cuda:3", o);
  EXPECT_EQ(o.kind, DeviceKind::Cuda);
  EXPECT_EQ(o.ordinal, 3);
  parseDeviceSpec("cpu", o);
  EXPECT_EQ(o.kind, DeviceKind::Cpu);
  EXPECT_EQ(o.ordinal, -1);
  for (const char *bad : {"gpu", "cuda:", "cuda:x", "cpu:0", "cuda:-1", ""}) {
    try {
      parseDeviceSpec(bad, o);
      ADD_FAILURE() << bad << " accepted";
    } catch (const std::invalid_argument &e) {
      EXPECT_NE(std::string(e.what()).find("expected cpu, cuda or cuda:N"), std::string::npos);
    }
  }
}

TEST(DeviceSeam, CpuDeviceMovesBytesAndZeroes) {
  auto dev = makeCpuDevice();
  EXPECT_EQ(dev->space(), MemorySpace::Host);
  Buffer a(100, dev.get()), b(100, dev.get());
  for (int i = 0; i < 100; ++i)
    ASSERT_EQ(static_cast<char *>(a.data())[i], 0);
  char host[100];
  for (int i = 0; i < 100; ++i)
    host[i] = (char)i;
  dev->upload(a.data(), host, 100);
  dev->copy(b.data(), a.data(), 100);
  char back[100] = {};
  dev->download(back, b.data(), 100);
  EXPECT_EQ(std::memcmp(host, back, 100), 0);
}

// Buffers of a page or more start on a page, so that a kernel's streams
// share their offset within a page; smaller ones on 64 bytes.
TEST(DeviceSeam, HostBuffersOfAPageStartOnAPage) {
  auto dev = makeCpuDevice();
  std::vector<Buffer> small, large;
  for (int64_t bytes : {1, 100, 4095}) // several, so that one could fall off
    for (int i = 0; i < 4; ++i)
      small.emplace_back(bytes, dev.get());
  for (int64_t bytes : {4096, 5000, (3 << 20) + 200})
    for (int i = 0; i < 2; ++i)
      large.emplace_back(bytes, dev.get());
  for (const Buffer &b : small)
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kPlanAlignment, 0u) << b.size();
  for (const Buffer &b : large) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kPageAlignment, 0u) << b.size();
    const char *p = static_cast<const char *>(b.data());
    EXPECT_TRUE(std::all_of(p, p + b.size(), [](char c) { return c == 0; })) << b.size();
  }
}

TEST(DeviceSeam, PlansKeepTheirTargetAndRefuseUnknownOnes) {
  Plan p;
  p.mode = Plan::Mode::Inference;
  p.target = "cuda";
  Plan q = parsePlan(serializePlan(p), "p.pxplan");
  EXPECT_EQ(q.target, "cuda");
  Plan bad = p;
  bad.target = "tpu";
  try {
    parsePlan(serializePlan(bad), "bad.pxplan");
    ADD_FAILURE() << "a plan for 'tpu' was accepted";
  } catch (const PlanError &e) {
    EXPECT_NE(std::string(e.what()).find("unknown target 'tpu'"), std::string::npos) << e.what();
  }
}

TEST(DeviceSeam, SessionRefusesAPlanForAnotherTarget) {
  Plan p;
  p.mode = Plan::Mode::Inference;
  p.target = "cuda";
  try {
    Session s(p, SessionOptions{});
    ADD_FAILURE() << "a CUDA plan ran on the CPU";
  } catch (const PlanError &e) {
    EXPECT_NE(std::string(e.what()).find("compiled for --target=cuda, but this run's device is "
                                         "cpu; recompile with --target=cpu or run with "
                                         "--device=cuda"),
              std::string::npos)
        << e.what();
  }
}

TEST(DeviceSeam, NamesWhyThereIsNoCudaDevice) {
  DeviceOptions o;
  o.kind = DeviceKind::Cuda;
  if (!cudaBackendBuilt()) {
    try {
      makeDevice(o);
      ADD_FAILURE() << "a CUDA device without the CUDA backend";
    } catch (const std::runtime_error &e) {
      EXPECT_NE(std::string(e.what()).find("built without the CUDA backend"), std::string::npos);
    }
    return;
  }
  try {
    makeDevice(o);
  } catch (const std::runtime_error &e) {
    // No GPU here: the message says so and what to do instead.
    EXPECT_NE(std::string(e.what()).find("--device=cpu"), std::string::npos) << e.what();
  }
}

/// Host memory posing as a device with two allocations side by side (as
/// small cudaMallocs may lie), whose copies may not cross from one into the
/// other (CUDA refuses them: "invalid argument").
class AdjacentAllocations final : public Device {
public:
  AdjacentAllocations() : Device(DeviceKind::Cuda, MemorySpace::Cuda) {}
  alignas(64) char memory[512] = {};

  std::string description() const override { return "two adjacent allocations"; }
  int64_t memoryBytes() const override { return sizeof memory; }
  void *allocate(int64_t) override { throw std::logic_error("not used"); }
  void deallocate(void *) noexcept override {}
  void upload(void *d, const void *h, int64_t n) override {
    within(d, n);
    std::memcpy(d, h, n);
  }
  void download(void *h, const void *d, int64_t n) override {
    within(d, n);
    std::memcpy(h, d, n);
  }
  void copy(void *dst, const void *src, int64_t n) override {
    within(src, n);
    within(dst, n);
    std::memmove(dst, src, n);
  }
  void synchronize() override {}
  const KernelRegistry &kernels() const override { return KernelRegistry::global(); }
  const void *allocationOf(const void *p) const override {
    const char *c = static_cast<const char *>(p);
    if (c < memory || c >= memory + sizeof memory)
      return nullptr;
    return c < memory + 256 ? memory : memory + 256;
  }

private:
  void within(const void *p, int64_t n) const {
    if (n > 0 && allocationOf(p) != allocationOf(static_cast<const char *>(p) + n - 1))
      throw std::runtime_error("a copy crosses from one allocation into the next");
  }
};

// A synchronized batch norm's scale and bias are two small variables that
// the GPU may place back to back: staged through the host, each keeps a
// copy of its own (one copy across both was "CUDA: download: invalid
// argument" on the H200).
TEST(DeviceSeam, HostStagingKeepsAdjacentAllocationsApart) {
  AdjacentAllocations dev;
  float *a = reinterpret_cast<float *>(dev.memory);
  float *b = reinterpret_cast<float *>(dev.memory + 256);
  for (int i = 0; i < 64; ++i) {
    a[i] = (float)i;
    b[i] = 100.0f;
  }
  TensorView ta{a, DType::F32, {64}, MemorySpace::Cuda};
  TensorView tb{b, DType::F32, {64}, MemorySpace::Cuda};
  ExecEnv env;
  env.device = &dev;
  PlanKernel kernel;
  kernel.op = "add";
  KernelArgs args(kernel, {ta, tb}, {ta}, env); // in place on a
  KernelFn run = hostStaged(*KernelRegistry::global().find("add"))(args);
  run();
  for (int i = 0; i < 64; ++i)
    ASSERT_EQ(a[i], 100.0f + (float)i) << i;
  for (int i = 0; i < 64; ++i)
    ASSERT_EQ(b[i], 100.0f) << i;
}

/// Host memory posing as a device, recording the largest copy either way.
class RecordingDevice final : public Device {
public:
  RecordingDevice() : Device(DeviceKind::Cuda, MemorySpace::Cuda) {}
  alignas(64) char memory[512] = {};
  int64_t largestCopy = 0;

  std::string description() const override { return "a recording device"; }
  int64_t memoryBytes() const override { return sizeof memory; }
  void *allocate(int64_t) override { throw std::logic_error("not used"); }
  void deallocate(void *) noexcept override {}
  void upload(void *d, const void *h, int64_t n) override {
    largestCopy = std::max(largestCopy, n);
    std::memcpy(d, h, n);
  }
  void download(void *h, const void *d, int64_t n) override {
    largestCopy = std::max(largestCopy, n);
    std::memcpy(h, d, n);
  }
  void copy(void *dst, const void *src, int64_t n) override { std::memmove(dst, src, n); }
  void synchronize() override {}
  const KernelRegistry &kernels() const override { return KernelRegistry::global(); }
  const void *allocationOf(const void *p) const override { return memory; }
};

// A sharded bucket's reduce-scatter and all_gather_variables work on G
// blocks of shard_bytes from the bucket's start, padding included: staged
// through the host, the copy must cover all of it, not only the tensors
// (the host copy was the tensors' 64 bytes and the collective wrote past
// it: "double free or corruption" on the H100 with 4 ranks sharing it).
TEST(DeviceSeam, HostStagingCoversAShardedBucketsPadding) {
  auto comm = makeLocalComm();
  ExecEnv env;
  env.comm = comm.get();
  for (const char *op : {"all_reduce", "all_gather_variables"}) {
    RecordingDevice dev;
    env.device = &dev;
    TensorView t{dev.memory, DType::F32, {16}, MemorySpace::Cuda};
    PlanKernel kernel;
    kernel.op = op;
    kernel.attrs = {{"shard_bytes", 128}};
    if (kernel.op == "all_reduce") {
      kernel.attrs["in_place"] = true;
      kernel.attrs["shard_update"] = true;
    } else {
      kernel.attrs["offsets"] = {0};
    }
    bool reduce = kernel.op == "all_reduce";
    KernelArgs args(kernel, {t}, reduce ? std::vector<TensorView>{t} : std::vector<TensorView>{},
                    env);
    KernelFn run = hostStaged(*KernelRegistry::global().find(op))(args);
    run();
    EXPECT_EQ(dev.largestCopy, 128) << op;
  }
}

// An asynchronous kernel staged through the host sends back only its
// outputs when its wait runs: an input less than an alignment from an
// output shares their host copy, and by the wait its memory may hold
// another tensor (the plan frees an input after the kernel that reads it).
TEST(DeviceSeam, HostStagingSendsBackOnlyTheOutputsAtTheWait) {
  auto comm = makeLocalComm();
  ExecEnv env;
  env.comm = comm.get();
  env.pending.resize(1);
  RecordingDevice dev;
  env.device = &dev;
  float *in = reinterpret_cast<float *>(dev.memory);
  for (int i = 0; i < 16; ++i)
    in[i] = (float)i;
  TensorView x{dev.memory, DType::F32, {16}, MemorySpace::Cuda};
  TensorView y{dev.memory + 64, DType::F32, {16}, MemorySpace::Cuda};
  PlanKernel kernel;
  kernel.op = "all_reduce";
  kernel.attrs = {{"token", 0}};
  KernelArgs args(kernel, {x}, {y}, env);
  KernelFn run = hostStaged(*KernelRegistry::global().find("all_reduce"))(args);
  run();
  std::memset(dev.memory, 0x7f, 64); // another tensor in the input's memory
  env.pending[0]->wait();
  for (int i = 0; i < 64; ++i)
    ASSERT_EQ(dev.memory[i], 0x7f) << "byte " << i << " of the reused input";
  const float *out = reinterpret_cast<const float *>(dev.memory + 64);
  for (int i = 0; i < 16; ++i)
    ASSERT_EQ(out[i], (float)i) << i;
}

/// Host memory posing as a GPU whose queue runs only when the host waits
/// for it: uploads, kernels and copies are queued in order and run at
/// waitFor (up to its mark), synchronize, or a download.
class DeferredQueue final : public Device {
public:
  DeferredQueue() : Device(DeviceKind::Cuda, MemorySpace::Cuda) {}

  std::string description() const override { return "a deferred queue"; }
  int64_t memoryBytes() const override { return 0; }
  void *allocate(int64_t bytes) override { return allocateAlignedHost(bytes); }
  void deallocate(void *p) noexcept override { std::free(p); }
  void upload(void *d, const void *h, int64_t n) override {
    synchronize();
    std::memcpy(d, h, n);
  }
  void uploadAsync(void *d, const void *h, int64_t n) override {
    queue.push_back([d, h, n] { std::memcpy(d, h, n); });
  }
  void download(void *h, const void *d, int64_t n) override {
    synchronize();
    std::memcpy(h, d, n);
  }
  void copy(void *dst, const void *src, int64_t n) override {
    queue.push_back([dst, src, n] { std::memmove(dst, src, n); });
  }
  void synchronize() override { runUpTo(queue.size()); }
  const KernelRegistry &kernels() const override { return KernelRegistry::global(); }
  void runStep(const std::function<void()> &step) override { queue.push_back(step); }
  uint64_t mark() override { return queue.size(); }
  void waitFor(uint64_t m) override { runUpTo(m); }

private:
  void runUpTo(size_t end) {
    for (; done < end; ++done)
      queue[done]();
  }
  std::vector<std::function<void()>> queue;
  size_t done = 0;
};

// A GPU session hands out the other staging buffer while a step's upload
// may still be queued, so that the host fills the next batch meanwhile
// (parallax-run's loop): every step must still compute on its own batch.
TEST(DeviceSeam, DoubleBufferedInputsKeepEachStepsBatch) {
  Plan p;
  p.mode = Plan::Mode::Inference;
  p.target = "cuda";
  p.inputs.push_back(PlanInput{"x", DType::F32, {4}, 0, "normal", 0});
  p.tensors.push_back({"x", DType::F32, {4}, PlanTensor::Kind::Input, 0, 0});
  p.tensors.push_back({"y", DType::F32, {4}, PlanTensor::Kind::Arena, 0, -1});
  p.arenaBytes = kPlanAlignment;
  PlanKernel add;
  add.op = "add";
  add.inputs = {0, 0};
  add.outputs = {1};
  p.kernels.push_back(add);
  p.outputs.push_back({"y", 1});
  DeferredQueue dev;
  SessionOptions o;
  o.device = &dev;
  Session session(p, o);
  auto fill = [&](int step) {
    float *x = session.input(0).as<float>();
    for (int i = 0; i < 4; ++i)
      x[i] = (float)(10 * step + i);
  };
  fill(0);
  for (int step = 0; step < 5; ++step) {
    session.runStep();
    fill(step + 1); // while the step is (still) queued
    const float *y = session.output(0).as<float>();
    for (int i = 0; i < 4; ++i)
      ASSERT_EQ(y[i], 2.0f * (float)(10 * step + i)) << "step " << step << ", element " << i;
  }
}

} // namespace
} // namespace parallax::rt
