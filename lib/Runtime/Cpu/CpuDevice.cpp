//===- CpuDevice.cpp - the host as a Device -------------------------------===//
//
// Kernels run when their closures are called, memory is aligned host memory
// and every transfer is a memcpy: the session's CPU path pays one virtual
// call per allocation and none per kernel.
//
//===----------------------------------------------------------------------===//

#include "parallax/Runtime/Device.h"
#include "parallax/Runtime/MachineMemory.h"

#include <cstdlib>
#include <cstring>

namespace parallax::rt {

namespace {

class CpuDevice final : public Device {
public:
  CpuDevice() : Device(DeviceKind::Cpu, MemorySpace::Host) {}

  std::string description() const override { return "cpu"; }
  int64_t memoryBytes() const override { return usableMemoryBytes(); }

  void *allocate(int64_t bytes) override { return allocateAlignedHost(bytes); }
  void deallocate(void *p) noexcept override { std::free(p); }

  void upload(void *device, const void *host, int64_t bytes) override {
    if (bytes > 0)
      std::memmove(device, host, bytes);
  }
  void download(void *host, const void *device, int64_t bytes) override {
    if (bytes > 0)
      std::memmove(host, device, bytes);
  }
  void copy(void *dst, const void *src, int64_t bytes) override {
    if (bytes > 0)
      std::memmove(dst, src, bytes);
  }
  void synchronize() override {}
  const KernelRegistry &kernels() const override { return KernelRegistry::global(); }
};

} // namespace

std::unique_ptr<Device> makeCpuDevice() { return std::make_unique<CpuDevice>(); }

} // namespace parallax::rt
