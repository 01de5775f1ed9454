//===- CudaKernelTestUtil.h - a CUDA kernel against its CPU twin -*- C++ -*-===//
//
// The GPU kernels are checked against the CPU kernels, which have their own
// reference tests: the same op, attributes and random inputs on both, and
// every output (and every input, which optimizers update in place) must
// agree within f32 rounding. The GPU's outputs start as NaN so that an
// element a kernel forgets to write cannot pass.
//
// Tests derive from CudaKernelTest, which skips (ctest reports it) when no
// GPU is visible.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_TEST_UNIT_CUDA_CUDAKERNELTESTUTIL_H
#define PARALLAX_TEST_UNIT_CUDA_CUDAKERNELTESTUTIL_H

#include "../Runtime/KernelTestUtil.h"

#include "../../../lib/Runtime/Cuda/CudaDevice.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>

namespace parallax::rt::test {

/// One device for the whole test program.
inline CudaDevice &testCudaDevice() {
  static std::unique_ptr<CudaDevice> device = [] {
    DeviceOptions o;
    o.kind = DeviceKind::Cuda;
    o.cudaGraph = false;
    return std::make_unique<CudaDevice>(o);
  }();
  return *device;
}

class CudaKernelTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (!cudaDeviceAvailable())
      GTEST_SKIP() << "no CUDA device visible";
  }
};

/// Runs `op` on the CPU and on the GPU over copies of `inputs` and
/// `outputs` and compares every tensor afterwards: |gpu - cpu| <= atol +
/// rtol * |cpu|. Returns the GPU's message if its kernel failed (then the
/// CPU's must fail too, with the same message).
inline void expectCudaMatchesCpu(const std::string &op, std::vector<TestTensor> inputs,
                                 std::vector<TestTensor> outputs,
                                 nlohmann::json attrs = nlohmann::json::object(),
                                 double rtol = 1e-5, double atol = 1e-6,
                                 ExecEnv env = {}) {
  if (env.step == 0)
    env.step = 1;
  // CPU.
  std::vector<TestTensor> cpuIns = inputs, cpuOuts = outputs;
  std::vector<TestTensor *> ci, co;
  for (TestTensor &t : cpuIns)
    ci.push_back(&t);
  for (TestTensor &t : cpuOuts)
    co.push_back(&t);
  std::string cpuError;
  try {
    runKernel(op, ci, co, attrs, env);
  } catch (const KernelError &e) {
    cpuError = e.what();
  }
  // GPU.
  CudaDevice &dev = testCudaDevice();
  const KernelFactory *factory = dev.kernels().find(op);
  ASSERT_NE(factory, nullptr) << "no CUDA kernel '" << op << "'";
  std::vector<std::unique_ptr<Buffer>> storage;
  auto toDevice = [&](TestTensor &t, bool poison) {
    if (t.absent)
      return TensorView{};
    int64_t bytes = t.numElements() * (int64_t)sizeOf(t.dtype);
    storage.push_back(std::make_unique<Buffer>(bytes + 64, &dev));
    if (poison) {
      std::vector<char> nan(bytes, (char)0xFF);
      dev.upload(storage.back()->data(), nan.data(), bytes);
    } else {
      dev.upload(storage.back()->data(), t.data(), bytes);
    }
    return TensorView{storage.back()->data(), t.dtype, t.shape, MemorySpace::Cuda};
  };
  std::vector<TensorView> gi, go;
  for (TestTensor &t : inputs)
    gi.push_back(toDevice(t, false));
  for (TestTensor &t : outputs)
    go.push_back(toDevice(t, true));
  PlanKernel kernel;
  kernel.op = op;
  kernel.attrs = attrs;
  env.device = &dev;
  dev.stepInfoHost()->step = env.step;
  dev.stepInfoHost()->seed = env.seed;
  std::string gpuError;
  try {
    KernelArgs args(kernel, gi, go, env);
    args.index = 0;
    KernelFn fn = (*factory)(args);
    fn();
    dev.synchronize();
  } catch (const std::exception &e) {
    gpuError = e.what();
  }
  if (!cpuError.empty() || !gpuError.empty()) {
    EXPECT_FALSE(cpuError.empty()) << op << ": only the GPU failed: " << gpuError;
    EXPECT_FALSE(gpuError.empty()) << op << ": only the CPU failed: " << cpuError;
    return;
  }
  auto compare = [&](TestTensor &cpu, const TensorView &gpu, const std::string &what) {
    if (cpu.absent)
      return;
    TestTensor back(cpu.dtype, cpu.shape);
    dev.download(back.data(), gpu.data, cpu.numElements() * (int64_t)sizeOf(cpu.dtype));
    // NaN and infinities (inputs some tests give on purpose) match
    // themselves; everything else within the tolerance.
    std::vector<double> a = back.values(), e = cpu.values();
    for (size_t k = 0; k < a.size() && k < e.size(); ++k)
      if (a[k] == e[k] || (std::isnan(a[k]) && std::isnan(e[k])))
        a[k] = e[k] = 0;
    expectNear(a, e, rtol, atol, op + " " + what);
  };
  for (size_t i = 0; i < outputs.size(); ++i)
    compare(cpuOuts[i], go[i], "output " + std::to_string(i));
  for (size_t i = 0; i < inputs.size(); ++i)
    compare(cpuIns[i], gi[i], "input " + std::to_string(i) + " (after the kernel)");
}

} // namespace parallax::rt::test

#endif // PARALLAX_TEST_UNIT_CUDA_CUDAKERNELTESTUTIL_H
