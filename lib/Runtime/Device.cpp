//===- Device.cpp - device names, the factory, device buffers -------------===//

#include "parallax/Runtime/Device.h"
#include "parallax/Runtime/Collectives.h"
#include "parallax/Runtime/PlanAlignment.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#ifdef PARALLAX_HAVE_CUDA
#include "Cuda/CudaDevice.h"
#endif

namespace parallax::rt {

Device::~Device() = default;

Collectives *Device::collectives(Comm &comm, Group &group) {
  std::unique_ptr<Collectives> &c = hostCollectives_[&group];
  if (!c)
    c = makeHostCollectives(comm, group);
  return c.get();
}

DeviceOptions::Transport parseTransport(const std::string &name) {
  if (name == "auto")
    return DeviceOptions::Transport::Auto;
  if (name == "nccl")
    return DeviceOptions::Transport::Nccl;
  if (name == "mpi")
    return DeviceOptions::Transport::Mpi;
  throw std::invalid_argument("unknown collectives transport '" + name +
                              "' (expected auto, nccl or mpi)");
}

void *allocateAlignedHost(int64_t bytes) {
  if (bytes <= 0)
    return nullptr;
  int64_t alignment = alignmentOf(bytes);
  size_t rounded = size_t(alignUp(bytes, alignment));
  void *p = std::aligned_alloc(size_t(alignment), rounded);
  if (!p)
    throw std::runtime_error("out of memory allocating " + std::to_string(bytes) +
                             " bytes of host memory");
  std::memset(p, 0, rounded);
  return p;
}

void *Device::allocateHost(int64_t bytes) { return allocateAlignedHost(bytes); }
void Device::deallocateHost(void *p) noexcept { std::free(p); }

const char *nameOf(DeviceKind kind) {
  switch (kind) {
  case DeviceKind::Cpu: return "cpu";
  case DeviceKind::Cuda: return "cuda";
  }
  return "?";
}

std::optional<DeviceKind> parseDeviceKind(const std::string &name) {
  if (name == "cpu")
    return DeviceKind::Cpu;
  if (name == "cuda")
    return DeviceKind::Cuda;
  return std::nullopt;
}

void parseDeviceSpec(const std::string &spec, DeviceOptions &options) {
  std::string kind = spec.substr(0, spec.find(':'));
  std::optional<DeviceKind> k = parseDeviceKind(kind);
  if (!k)
    throw std::invalid_argument("unknown device '" + spec +
                                "' (expected cpu, cuda or cuda:N)");
  options.kind = *k;
  options.ordinal = -1;
  if (kind.size() == spec.size())
    return;
  std::string n = spec.substr(kind.size() + 1);
  if (*k != DeviceKind::Cuda || n.empty() ||
      n.find_first_not_of("0123456789") != std::string::npos || n.size() > 4)
    throw std::invalid_argument("unknown device '" + spec +
                                "' (expected cpu, cuda or cuda:N)");
  options.ordinal = std::stoi(n);
}

bool cudaBackendBuilt() {
#ifdef PARALLAX_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Device> makeDevice(const DeviceOptions &options) {
  switch (options.kind) {
  case DeviceKind::Cpu:
    return makeCpuDevice();
  case DeviceKind::Cuda:
#ifdef PARALLAX_HAVE_CUDA
    return makeCudaDevice(options);
#else
    throw std::runtime_error(
        "this parallax-run was built without the CUDA backend (no CUDA "
        "toolkit was found when it was configured): rebuild on a machine with "
        "CUDA, or run with --device=cpu a plan compiled with --target=cpu");
#endif
  }
  throw std::runtime_error("unknown device kind");
}

Buffer::Buffer(int64_t size, Device *dev) : bytes(size), device(dev) {
  if (size <= 0)
    return;
  ptr = device ? device->allocate(size) : allocateAlignedHost(size);
}
Buffer::Buffer(Buffer &&o) noexcept : ptr(o.ptr), bytes(o.bytes), device(o.device) {
  o.ptr = nullptr;
  o.bytes = 0;
}
Buffer &Buffer::operator=(Buffer &&o) noexcept {
  std::swap(ptr, o.ptr);
  std::swap(bytes, o.bytes);
  std::swap(device, o.device);
  return *this;
}
Buffer::~Buffer() {
  if (device)
    device->deallocate(ptr);
  else
    std::free(ptr);
}

} // namespace parallax::rt
