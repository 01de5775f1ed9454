//===- CudaDevice.h - one NVIDIA GPU as a Device ---------------*- C++ -*-===//
//
// One GPU per rank. Kernels are enqueued on the compute stream in plan
// order; collectives run through NCCL on a communication stream ordered
// against it with events (NcclCollectives.h), or through MPI with host
// staging where NCCL cannot serve (kernels/Collective.cpp). Kernel closures never
// synchronize with the host nor allocate: what a kernel needs besides its
// tensors (cuDNN workspaces, scratch) is allocated when it is bound. So a
// steady-state step can be captured once in a CUDA graph and replayed; what
// changes between steps (the step number, the seed a resumed run restores)
// is read by the kernels from stepInfo(), host memory the GPU maps.
//
// Bad data that only the GPU sees (an index out of range) is reported into
// mapped host memory (DeviceFault) and turned into an error naming the kernel
// at the next synchronize().
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_CUDA_CUDADEVICE_H
#define PARALLAX_RUNTIME_CUDA_CUDADEVICE_H

#include "parallax/Runtime/Device.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace parallax::rt {

/// What changes from step to step, as kernels read it (never captured by
/// value in a closure: a CUDA graph would freeze it).
struct StepInfo {
  int64_t step = 0;
  uint64_t seed = 0;
};

/// The first bad value a kernel met in a step; kernel == 0: none. Codes
/// name the message (faultMessage in CudaDevice.cpp).
struct DeviceFault {
  int64_t kernel = 0; ///< plan index + 1
  int64_t code = 0;
  int64_t value = 0;
  int64_t bound = 0;
};
enum FaultCode : int64_t {
  kFaultIndexOutOfRange = 1, ///< value not in [-bound, bound) (gather, scatter)
  kFaultRowOutOfRange = 2,   ///< value not in [0, bound) (sparse rows)
  kFaultSegmentOutOfRange = 3,
  kFaultLabelOutOfRange = 4,  ///< a loss label not in [0, bound)
  kFaultDivisionByZero = 16,  ///< integer div (value 0) or mod (value 1) by 0
  kFaultZeroToNegative = 17,  ///< integer pow: 0 to a negative exponent (value)
};

class CudaDevice final : public Device {
public:
  explicit CudaDevice(const DeviceOptions &options);
  ~CudaDevice() override;

  std::string description() const override;
  int64_t memoryBytes() const override;
  int64_t peakAllocatedBytes() const override { return peakAllocatedBytes_; }
  void *allocate(int64_t bytes) override;
  void deallocate(void *p) noexcept override;
  void *allocateHost(int64_t bytes) override;
  void deallocateHost(void *p) noexcept override;
  void upload(void *device, const void *host, int64_t bytes) override;
  void uploadAsync(void *device, const void *host, int64_t bytes) override;
  void download(void *host, const void *device, int64_t bytes) override;
  void copy(void *dst, const void *src, int64_t bytes) override;
  const void *allocationOf(const void *p) const override;
  uint64_t mark() override;
  void waitFor(uint64_t mark) override;
  void synchronize() override;
  const KernelRegistry &kernels() const override;
  void runStep(const std::function<void()> &step) override;
  void setStep(int64_t step, uint64_t seed) override;
  void markHostFallback() override { markHostSynchronizing("kernels on the host"); }
  std::string executionNote() const override;
  /// NCCL's communicator for `group`, or null where NCCL cannot serve (the
  /// reason is in executionNote) and kernels stage through MPI. With
  /// --collectives=nccl, a CommError saying why not instead of null.
  Collectives *collectives(Comm &comm, Group &group) override;

  int ordinal() const { return ordinal_; }
  cudaStream_t stream() const { return stream_; }
  /// Where collectives run (NCCL, host staging), ordered with events.
  cudaStream_t commStream() const { return commStream_; }
  cublasHandle_t cublas() const { return cublas_; }
  cublasLtHandle_t cublasLt() const { return cublasLt_; }
  /// Created on first use (the plans without convolutions never load cuDNN).
  cudnnHandle_t cudnn();
  bool tf32() const { return tf32_; }
  bool deterministic() const { return deterministic_; }
  /// Device-visible step number and seed; the session writes them before
  /// each step.
  StepInfo *stepInfoHost() const { return stepHost_; }
  const StepInfo *stepInfo() const { return stepDevice_; }
  DeviceFault *fault() const { return faultDevice_; }
  /// Kernels that must run on the host in the middle of a step (a
  /// collective staged through host memory for MPI) call this when bound: a
  /// CUDA graph cannot capture them, so the step is not captured.
  void markHostSynchronizing(const std::string &why);
  const std::string &hostSyncReason() const { return hostSyncReason_; }
  /// Bytes a kernel's NCCL collectives move each step, added to comm's
  /// traffic under `variable` as every step begins (setStep), whether its
  /// kernels run, are captured or replayed (a replay runs no closure): in
  /// one job on the communication thread, where the host transports count
  /// theirs.
  void countTrafficEveryStep(Comm &comm, std::string variable, int64_t sent,
                             int64_t received);
  /// Whether the last step ran as a replay of a captured graph.
  bool replaying() const { return graphExec_ != nullptr; }

private:
  void checkFault();
  /// cudaStreamSynchronize, or with NCCL communicators and a collective
  /// timeout a poll that ends them when a peer never comes.
  cudaError_t waitForStream();

  int ordinal_ = 0;
  std::string name_;
  int64_t totalBytes_ = 0;
  bool tf32_ = false, deterministic_ = true, graphAllowed_ = true;
  cudaStream_t stream_ = nullptr, commStream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t cublasLt_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  StepInfo *stepHost_ = nullptr, *stepDevice_ = nullptr;
  DeviceFault *faultHost_ = nullptr, *faultDevice_ = nullptr;
  std::string hostSyncReason_;
  int stepsSeen_ = 0;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t graphExec_ = nullptr;
  DeviceOptions::Transport transport_ = DeviceOptions::Transport::Auto;
  /// Why collectives do not use NCCL ("" when they do); decided at the
  /// first collective.
  std::optional<std::string> ncclRefused_;
  double collectiveTimeout_ = 0;
  std::map<const Group *, std::unique_ptr<Collectives>> nccl_;
  struct StepTraffic {
    std::string variable;
    int64_t sent, received;
  };
  Comm *trafficComm_ = nullptr;
  std::vector<StepTraffic> stepTraffic_;
  /// mark()'s events, reused in turn: waiting for an older mark whose
  /// event was recorded again waits for a later point, which is safe.
  /// Every allocation's start and size (allocationOf).
  std::map<const char *, int64_t> allocations_;
  int64_t allocatedBytes_ = 0, peakAllocatedBytes_ = 0;
  cudaEvent_t markEvents_[4] = {};
  uint64_t marks_ = 0;
};

std::unique_ptr<Device> makeCudaDevice(const DeviceOptions &options);

/// Whether a CUDA device is visible to this process (tests skip without).
bool cudaDeviceAvailable();

/// The CUDA device a kernel is bound for; KernelError when it is not one.
CudaDevice &cudaDeviceOf(const KernelArgs &args);

/// Every CUDA kernel family (lib/Runtime/Cuda/Kernels/*.cu).
void registerAllCudaKernels(KernelRegistry &registry);
void registerCudaElementwiseKernels(KernelRegistry &registry);
void registerCudaShapeKernels(KernelRegistry &registry);
void registerCudaIndexingKernels(KernelRegistry &registry);
void registerCudaLinalgKernels(KernelRegistry &registry);
void registerCudaReductionKernels(KernelRegistry &registry);
void registerCudaAxisKernels(KernelRegistry &registry);
void registerCudaNormKernels(KernelRegistry &registry);
void registerCudaLossKernels(KernelRegistry &registry);
void registerCudaConvKernels(KernelRegistry &registry);
void registerCudaOptimizerKernels(KernelRegistry &registry);
void registerCudaRnnKernels(KernelRegistry &registry);
void registerCudaCollectiveKernels(KernelRegistry &registry);

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_CUDA_CUDADEVICE_H
