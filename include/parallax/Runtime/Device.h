//===- Device.h - where a session's tensors live and its kernels run -*- C++ -*-===//
//
// The runtime's one device seam, shaped like IREE's HAL device and
// PyTorch's c10d backends: a Device owns memory of one space, moves bytes
// between it and the host, queues kernels in order and waits for them, and
// names the kernel registry whose closures run on it. The session and the
// tools only talk to this interface; lib/Runtime/Cpu and lib/Runtime/Cuda
// implement it.
//
// Kernels bound for a device are closures like the CPU's (Kernel.h): on the
// CPU they run to completion when called; on a GPU they enqueue work on the
// device's compute stream and return, and synchronize() is where the host
// learns that a step finished (and whether a kernel reported bad data).
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_DEVICE_H
#define PARALLAX_RUNTIME_DEVICE_H

#include "parallax/Runtime/Collectives.h"
#include "parallax/Runtime/Kernel.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

namespace parallax::rt {

/// What a plan is compiled for and a device is (the plan's "target").
enum class DeviceKind : uint8_t { Cpu, Cuda };
const char *nameOf(DeviceKind kind);
/// "cpu" or "cuda"; nullopt for anything else.
std::optional<DeviceKind> parseDeviceKind(const std::string &name);

/// How parallax-run --device, --tf32, --deterministic and --cuda-graph
/// configure a device.
struct DeviceOptions {
  DeviceKind kind = DeviceKind::Cpu;
  /// Which GPU: -1 picks the rank's local rank modulo the GPUs visible.
  int ordinal = -1;
  /// Ranks sharing this machine and this rank's place among them (Open
  /// MPI's local rank), for the default ordinal.
  int localRank = 0;
  /// cuBLAS may use TF32 tensor cores for f32 products (off: results match
  /// the CPU's within f32 rounding).
  bool tf32 = false;
  /// cuDNN's convolutions take the algorithms that give the same bits on
  /// every run where there is one (off: the fastest cuDNN times at bind,
  /// which may sum with atomics).
  bool deterministic = true;
  /// Capture the steady-state step in a CUDA graph when the plan allows it.
  bool cudaGraph = true;
  /// How a GPU's collectives travel (--collectives): NCCL where every rank
  /// has a GPU of its own (auto), NCCL or an error saying why not (nccl),
  /// or MPI with host staging (mpi).
  enum class Transport : uint8_t { Auto, Nccl, Mpi } collectives = Transport::Auto;
};

/// "auto", "nccl" or "mpi"; std::invalid_argument naming the text otherwise.
DeviceOptions::Transport parseTransport(const std::string &name);

/// "cpu", "cuda" or "cuda:N" into options.kind/ordinal; throws
/// RuntimeError-like std::invalid_argument naming the text otherwise.
void parseDeviceSpec(const std::string &spec, DeviceOptions &options);

/// A kernel failure the host learns of at synchronize(): which kernel.
class DeviceError : public std::runtime_error {
public:
  DeviceError(int64_t kernel, const std::string &message)
      : std::runtime_error(message), kernel(kernel) {}
  int64_t kernel; ///< plan index, -1 when unknown
};

class Device {
public:
  virtual ~Device();

  DeviceKind kind() const { return kind_; }
  MemorySpace space() const { return space_; }
  /// For reports and errors: "cpu", "cuda:0 (NVIDIA H200, 139.8 GiB)".
  virtual std::string description() const = 0;
  /// Bytes this device can hold for a session (0: unknown).
  virtual int64_t memoryBytes() const = 0;

  /// Zero-filled storage of `bytes`, aligned to alignmentOf(bytes) on the
  /// host (a GPU's to at least 256 bytes); throws
  /// std::runtime_error naming the size when the device is out of memory.
  virtual void *allocate(int64_t bytes) = 0;
  virtual void deallocate(void *p) noexcept = 0;
  /// The most bytes allocate() has held at once on a device with memory of
  /// its own (the metrics' device_memory_bytes; PyTorch's
  /// max_memory_allocated is its peer), 0 on the host, whose peak is the
  /// process's resident memory.
  virtual int64_t peakAllocatedBytes() const { return 0; }
  /// Host memory that transfers to and from this device are fastest from
  /// (pinned on a GPU); zero-filled.
  virtual void *allocateHost(int64_t bytes);
  virtual void deallocateHost(void *p) noexcept;

  /// Byte moves, ordered after every kernel queued before them; upload and
  /// download return once the host memory may be reused or read.
  virtual void upload(void *device, const void *host, int64_t bytes) = 0;
  virtual void download(void *host, const void *device, int64_t bytes) = 0;
  /// An upload that may still be in flight when it returns: the host
  /// memory must stay untouched until the next synchronize().
  virtual void uploadAsync(void *device, const void *host, int64_t bytes) {
    upload(device, host, bytes);
  }
  virtual void copy(void *dst, const void *src, int64_t bytes) = 0;

  /// The start of the allocation (made by allocate()) that holds `p`, or
  /// null when none does: host-staged copies (HostStaged.h) may span
  /// several tensors only inside one allocation, as a device copy may not
  /// cross from one allocation into the next.
  virtual const void *allocationOf(const void *p) const {
    (void)p;
    return nullptr;
  }

  /// A point in the device's queue (everything queued so far), and a wait
  /// of the host until the device has passed it: how the host knows that an
  /// uploadAsync's host memory may be written again without waiting for
  /// the whole queue. The CPU has always passed it.
  virtual uint64_t mark() { return 0; }
  virtual void waitFor(uint64_t mark) { (void)mark; }

  /// Waits until every queued kernel and copy has finished. Throws
  /// std::runtime_error with the device's message when a kernel failed or
  /// reported bad data (an index out of range), naming the kernel.
  virtual void synchronize() = 0;

  /// The kernels that run on this device, by op name.
  virtual const KernelRegistry &kernels() const = 0;

  /// Runs one step's work (`step` queues it); a GPU may capture it once in
  /// a graph and replay that instead. The default calls it.
  virtual void runStep(const std::function<void()> &step) { step(); }
  /// The step about to run and the run's seed, for kernels that read them
  /// on the device.
  virtual void setStep(int64_t step, uint64_t seed) {
    (void)step;
    (void)seed;
  }
  /// Some kernels run on the host over staged copies (the session found no
  /// kernel of the device's own): a GPU then cannot capture the step.
  virtual void markHostFallback() {}
  /// How steps run, for the run's report ("CUDA graph: off (all_reduce
  /// through MPI with host staging)"); empty when there is nothing to say.
  virtual std::string executionNote() const { return ""; }

  /// The collectives of `group` (of `comm`) on this device's memory, made
  /// on first use and kept: the host's transports on the CPU; NCCL on a
  /// GPU, or null where it cannot serve (ranks sharing a GPU, or
  /// --collectives=mpi) and kernels stage through host memory instead.
  /// Making them may be collective over the group: every rank asks for the
  /// same groups in the same order (kernels are bound in plan order).
  virtual Collectives *collectives(Comm &comm, Group &group);

protected:
  Device(DeviceKind kind, MemorySpace space) : kind_(kind), space_(space) {}

private:
  DeviceKind kind_;
  MemorySpace space_;
  std::map<const Group *, std::unique_ptr<Collectives>> hostCollectives_;
};

/// The host: kernels run when called, memory is the process's.
std::unique_ptr<Device> makeCpuDevice();

/// Whether this parallax-run was built with the CUDA backend.
bool cudaBackendBuilt();

/// The device `options` name; throws std::runtime_error saying why not (no
/// CUDA backend in this build, no GPU visible, a bad ordinal).
std::unique_ptr<Device> makeDevice(const DeviceOptions &options);

/// Zero-filled host memory aligned to alignmentOf(bytes) (std::free
/// releases it); throws std::runtime_error naming the size when there is none.
void *allocateAlignedHost(int64_t bytes);

/// Storage of `bytes` on `device` (host memory when null), zero-filled and
/// freed with it.
class Buffer {
public:
  Buffer() = default;
  explicit Buffer(int64_t bytes, Device *device = nullptr);
  Buffer(Buffer &&) noexcept;
  Buffer &operator=(Buffer &&) noexcept;
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  ~Buffer();
  void *data() const { return ptr; }
  int64_t size() const { return bytes; }

private:
  void *ptr = nullptr;
  int64_t bytes = 0;
  Device *device = nullptr;
};

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_DEVICE_H
