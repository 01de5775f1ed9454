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
#include <stdexcept>
#include <string>
#include <vector>

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

/// Device copies of test tensors, freed with this object.
class CudaTensors {
public:
  explicit CudaTensors(CudaDevice &dev) : dev_(dev) {}

  /// A device copy of `t`, or, if `poison`, a tensor of its shape whose
  /// bytes are all 0xFF (NaN for floats); an absent operand stays absent.
  TensorView place(TestTensor &t, bool poison = false) {
    if (t.absent)
      return TensorView{};
    int64_t bytes = t.numElements() * (int64_t)sizeOf(t.dtype);
    storage_.push_back(std::make_unique<Buffer>(bytes + 64, &dev_));
    if (poison) {
      std::vector<char> nan(bytes, (char)0xFF);
      dev_.upload(storage_.back()->data(), nan.data(), bytes);
    } else {
      dev_.upload(storage_.back()->data(), t.data(), bytes);
    }
    return TensorView{storage_.back()->data(), t.dtype, t.shape, MemorySpace::Cuda};
  }
  std::vector<TensorView> place(std::vector<TestTensor> &ts, bool poison = false) {
    std::vector<TensorView> views;
    for (TestTensor &t : ts)
      views.push_back(place(t, poison));
    return views;
  }

  /// Copies the device tensor `gpu` back into `t` (of the same shape).
  void fetch(const TensorView &gpu, TestTensor &t) {
    if (!t.absent)
      dev_.download(t.data(), gpu.data, t.numElements() * (int64_t)sizeOf(t.dtype));
  }

private:
  CudaDevice &dev_;
  std::vector<std::unique_ptr<Buffer>> storage_;
};

/// Binds `op` with `attrs` on the test device over device tensors, runs it
/// once and synchronizes. Errors (bind time, run time or the device's
/// reported at synchronize()) propagate.
inline void runCudaKernel(const std::string &op, const std::vector<TensorView> &ins,
                          const std::vector<TensorView> &outs, nlohmann::json attrs,
                          ExecEnv env = {}) {
  CudaDevice &dev = testCudaDevice();
  const KernelFactory *factory = dev.kernels().find(op);
  if (!factory)
    throw std::runtime_error("no CUDA kernel '" + op + "'");
  if (env.step == 0)
    env.step = 1;
  PlanKernel kernel;
  kernel.op = op;
  kernel.attrs = std::move(attrs);
  env.device = &dev;
  dev.stepInfoHost()->step = env.step;
  dev.stepInfoHost()->seed = env.seed;
  KernelArgs args(kernel, ins, outs, env);
  args.index = 0;
  KernelFn fn = (*factory)(args);
  fn();
  dev.synchronize();
}

/// Runs `op` on the GPU only (no CPU run) over copies of `inputs` and of
/// `outputs` (as given: their values are what the GPU's outputs start as)
/// and returns the outputs with the GPU's results: for values that
/// expectCudaMatchesCpu cannot compare (NaN, infinities), which the caller
/// checks. Errors propagate.
inline std::vector<TestTensor> runOnCuda(const std::string &op, std::vector<TestTensor> inputs,
                                         std::vector<TestTensor> outputs,
                                         nlohmann::json attrs = nlohmann::json::object()) {
  CudaTensors gpu(testCudaDevice());
  std::vector<TensorView> gi = gpu.place(inputs), go = gpu.place(outputs);
  runCudaKernel(op, gi, go, std::move(attrs));
  for (size_t i = 0; i < outputs.size(); ++i)
    gpu.fetch(go[i], outputs[i]);
  return outputs;
}

/// The message binding or running `op` on the GPU fails with ("" if none).
inline std::string cudaKernelError(const std::string &op, std::vector<TestTensor> inputs,
                                   std::vector<TestTensor> outputs,
                                   nlohmann::json attrs = nlohmann::json::object()) {
  try {
    runOnCuda(op, std::move(inputs), std::move(outputs), std::move(attrs));
  } catch (const std::exception &e) {
    return e.what();
  }
  return "";
}

/// A bind-time error: the CPU fails, and the GPU with the same message.
inline void expectSameError(const std::string &op, std::vector<TestTensor> inputs,
                            std::vector<TestTensor> outputs,
                            nlohmann::json attrs = nlohmann::json::object()) {
  std::string cpu = kernelErrorOn(op, inputs, outputs, attrs);
  ASSERT_FALSE(cpu.empty()) << op << " " << attrs.dump();
  EXPECT_EQ(cudaKernelError(op, std::move(inputs), std::move(outputs), attrs), cpu);
}

/// Runs `op` on the CPU and on the GPU over copies of `inputs` and
/// `outputs` and compares every tensor afterwards: |gpu - cpu| <= atol +
/// rtol * |cpu|. If either kernel fails, the other must fail too.
inline void expectCudaMatchesCpu(const std::string &op, std::vector<TestTensor> inputs,
                                 std::vector<TestTensor> outputs,
                                 nlohmann::json attrs = nlohmann::json::object(),
                                 double rtol = 1e-5, double atol = 1e-6,
                                 ExecEnv env = {}) {
  if (env.step == 0)
    env.step = 1;
  // CPU.
  std::vector<TestTensor> cpuIns = inputs, cpuOuts = outputs;
  std::string cpuError;
  try {
    runKernel(op, pointersTo(cpuIns), pointersTo(cpuOuts), attrs, env);
  } catch (const KernelError &e) {
    cpuError = e.what();
  }
  // GPU: outputs start as NaN.
  ASSERT_NE(testCudaDevice().kernels().find(op), nullptr) << "no CUDA kernel '" << op << "'";
  CudaTensors gpu(testCudaDevice());
  std::vector<TensorView> gi = gpu.place(inputs), go = gpu.place(outputs, /*poison=*/true);
  std::string gpuError;
  try {
    runCudaKernel(op, gi, go, attrs, env);
  } catch (const std::exception &e) {
    gpuError = e.what();
  }
  if (!cpuError.empty() || !gpuError.empty()) {
    EXPECT_FALSE(cpuError.empty()) << op << ": only the GPU failed: " << gpuError;
    EXPECT_FALSE(gpuError.empty()) << op << ": only the CPU failed: " << cpuError;
    return;
  }
  auto compare = [&](TestTensor &cpu, const TensorView &view, const std::string &what) {
    if (cpu.absent)
      return;
    TestTensor back(cpu.dtype, cpu.shape);
    gpu.fetch(view, back);
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
