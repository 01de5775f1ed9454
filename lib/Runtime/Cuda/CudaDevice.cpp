//===- CudaDevice.cpp - streams, memory, library handles, graph replay ----===//

#include "CudaDevice.h"
#include "NcclCollectives.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace parallax::rt {

namespace {

void check(cudaError_t e, const char *what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

std::string gib(int64_t bytes) {
  std::ostringstream os;
  os.precision(1);
  os << std::fixed << (double)bytes / (1024.0 * 1024.0 * 1024.0) << " GiB";
  return os.str();
}

std::string faultMessage(const DeviceFault &f) {
  std::string v = std::to_string(f.value), b = std::to_string(f.bound);
  switch (f.code) {
  case kFaultIndexOutOfRange:
    return "index " + v + " is out of range [-" + b + ", " + b + ")";
  case kFaultRowOutOfRange:
    return "row " + v + " out of range [0, " + b + ")";
  case kFaultSegmentOutOfRange:
    return "segment id " + v + " out of range [0, " + b + ")";
  case kFaultLabelOutOfRange:
    return "label " + v + " is out of range [0, " + b + ")";
  case kFaultDivisionByZero:
    return f.value == 0 ? "div: integer division by zero (a divisor element is 0)"
                        : "mod: integer modulo by zero (a divisor element is 0)";
  case kFaultZeroToNegative:
    return "pow: integer 0 raised to a negative power (" + v + ")";
  }
  return "device fault " + std::to_string(f.code) + " (value " + v + ", bound " + b + ")";
}

/// cuBLAS's workspace, set once so that it never allocates inside a
/// captured step.
constexpr int64_t kCublasWorkspaceBytes = 32 << 20;

} // namespace

bool cudaDeviceAvailable() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

CudaDevice::CudaDevice(const DeviceOptions &options)
    : Device(DeviceKind::Cuda, MemorySpace::Cuda), tf32_(options.tf32),
      deterministic_(options.deterministic),
      graphAllowed_(options.cudaGraph), transport_(options.collectives) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    const char *visible = std::getenv("CUDA_VISIBLE_DEVICES");
    throw std::runtime_error(
        std::string("no CUDA device is visible to this process (") +
        (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices") +
        (visible ? std::string(", CUDA_VISIBLE_DEVICES=") + visible : std::string()) +
        "); run with --device=cpu and a plan compiled with --target=cpu");
  }
  ordinal_ = options.ordinal >= 0 ? options.ordinal : options.localRank % count;
  if (ordinal_ >= count)
    throw std::runtime_error("--device=cuda:" + std::to_string(ordinal_) + ": only " +
                             std::to_string(count) + " CUDA device(s) are visible");
  check(cudaSetDevice(ordinal_), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, ordinal_), "cudaGetDeviceProperties");
  name_ = prop.name;
  size_t freeBytes = 0, totalBytes = 0;
  check(cudaMemGetInfo(&freeBytes, &totalBytes), "cudaMemGetInfo");
  totalBytes_ = (int64_t)freeBytes;
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaStreamCreateWithFlags(&commStream_, cudaStreamNonBlocking), "cudaStreamCreate");
  if (cublasCreate(&cublas_) != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error("cuBLAS: cannot create a handle on " + description());
  cublasSetStream(cublas_, stream_);
  void *ws = allocate(kCublasWorkspaceBytes);
  cublasSetWorkspace(cublas_, ws, kCublasWorkspaceBytes);
  cublasSetMathMode(cublas_, tf32_ ? CUBLAS_TF32_TENSOR_OP_MATH
                                   : CUBLAS_PEDANTIC_MATH);
  if (cublasLtCreate(&cublasLt_) != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error("cuBLASLt: cannot create a handle on " + description());
  // Host memory the GPU writes (faults) and reads (the step) directly.
  check(cudaHostAlloc(reinterpret_cast<void **>(&stepHost_), sizeof(StepInfo),
                      cudaHostAllocMapped),
        "cudaHostAlloc");
  check(cudaHostGetDevicePointer(reinterpret_cast<void **>(&stepDevice_), stepHost_, 0),
        "cudaHostGetDevicePointer");
  check(cudaHostAlloc(reinterpret_cast<void **>(&faultHost_), sizeof(DeviceFault),
                      cudaHostAllocMapped),
        "cudaHostAlloc");
  check(cudaHostGetDevicePointer(reinterpret_cast<void **>(&faultDevice_), faultHost_, 0),
        "cudaHostGetDevicePointer");
  *stepHost_ = StepInfo{};
  *faultHost_ = DeviceFault{};
}

CudaDevice::~CudaDevice() {
  cudaStreamSynchronize(stream_);
  cudaStreamSynchronize(commStream_);
  nccl_.clear();
  for (cudaEvent_t e : markEvents_)
    if (e)
      cudaEventDestroy(e);
  if (graphExec_)
    cudaGraphExecDestroy(graphExec_);
  if (graph_)
    cudaGraphDestroy(graph_);
  if (cudnn_)
    cudnnDestroy(cudnn_);
  if (cublasLt_)
    cublasLtDestroy(cublasLt_);
  if (cublas_)
    cublasDestroy(cublas_);
  cudaFreeHost(stepHost_);
  cudaFreeHost(faultHost_);
  cudaStreamDestroy(stream_);
  cudaStreamDestroy(commStream_);
  // cuBLAS's workspace and the session's buffers are freed by their owners
  // or with the context at exit.
}

std::string CudaDevice::description() const {
  return "cuda:" + std::to_string(ordinal_) + " (" + name_ + ", " + gib(totalBytes_) +
         " free)";
}

int64_t CudaDevice::memoryBytes() const { return totalBytes_; }

void *CudaDevice::allocate(int64_t bytes) {
  if (bytes <= 0)
    return nullptr;
  void *p = nullptr;
  cudaError_t e = cudaMalloc(&p, (size_t)bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    throw std::runtime_error("out of GPU memory allocating " + std::to_string(bytes) +
                             " bytes on " + description() + " (" +
                             cudaGetErrorString(e) + ")");
  }
  check(cudaMemsetAsync(p, 0, (size_t)bytes, stream_), "cudaMemsetAsync");
  allocations_[static_cast<const char *>(p)] = bytes;
  allocatedBytes_ += bytes;
  peakAllocatedBytes_ = std::max(peakAllocatedBytes_, allocatedBytes_);
  return p;
}

void CudaDevice::deallocate(void *p) noexcept {
  if (p) {
    cudaStreamSynchronize(stream_);
    cudaFree(p);
    if (auto it = allocations_.find(static_cast<const char *>(p)); it != allocations_.end()) {
      allocatedBytes_ -= it->second;
      allocations_.erase(it);
    }
  }
}

const void *CudaDevice::allocationOf(const void *p) const {
  const char *c = static_cast<const char *>(p);
  auto it = allocations_.upper_bound(c);
  if (it == allocations_.begin())
    return nullptr;
  --it;
  return c < it->first + it->second ? it->first : nullptr;
}

void *CudaDevice::allocateHost(int64_t bytes) {
  if (bytes <= 0)
    return nullptr;
  void *p = nullptr;
  check(cudaMallocHost(&p, (size_t)bytes), "cudaMallocHost");
  std::memset(p, 0, (size_t)bytes);
  return p;
}

void CudaDevice::deallocateHost(void *p) noexcept {
  if (p)
    cudaFreeHost(p);
}

void CudaDevice::upload(void *device, const void *host, int64_t bytes) {
  if (bytes <= 0)
    return;
  check(cudaMemcpyAsync(device, host, (size_t)bytes, cudaMemcpyHostToDevice, stream_),
        "upload");
  check(cudaStreamSynchronize(stream_), "upload");
}

void CudaDevice::uploadAsync(void *device, const void *host, int64_t bytes) {
  if (bytes > 0)
    check(cudaMemcpyAsync(device, host, (size_t)bytes, cudaMemcpyHostToDevice, stream_),
          "upload");
}

void CudaDevice::download(void *host, const void *device, int64_t bytes) {
  if (bytes <= 0)
    return;
  check(cudaMemcpyAsync(host, device, (size_t)bytes, cudaMemcpyDeviceToHost, stream_),
        "download");
  synchronize();
}

void CudaDevice::copy(void *dst, const void *src, int64_t bytes) {
  if (bytes > 0)
    check(cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDeviceToDevice, stream_),
          "copy");
}

uint64_t CudaDevice::mark() {
  uint64_t m = ++marks_;
  cudaEvent_t &e = markEvents_[m % 4];
  if (!e)
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  check(cudaEventRecord(e, stream_), "cudaEventRecord");
  return m;
}

void CudaDevice::waitFor(uint64_t mark) {
  // A failed kernel is reported by the next synchronize(), naming it.
  if (mark > 0)
    cudaEventSynchronize(markEvents_[mark % 4]);
}

void CudaDevice::checkFault() {
  if (faultHost_->kernel == 0)
    return;
  DeviceFault f = *faultHost_;
  *faultHost_ = DeviceFault{};
  throw DeviceError(f.kernel - 1, faultMessage(f));
}

cudaError_t CudaDevice::waitForStream() {
  if (nccl_.empty() || collectiveTimeout_ <= 0)
    return cudaStreamSynchronize(stream_);
  // A peer that died or stopped leaves NCCL's kernels spinning forever: poll
  // instead of blocking, and end the communicators when it takes too long.
  auto start = std::chrono::steady_clock::now();
  for (int spins = 0;; ++spins) {
    cudaError_t e = cudaStreamQuery(stream_);
    if (e != cudaErrorNotReady)
      return e;
    for (auto &[group, c] : nccl_)
      if (std::string error = ncclAsyncError(*c); !error.empty()) {
        for (auto &entry : nccl_)
          abortNccl(*entry.second);
        throw DeviceError(-1, "NCCL failed on a group of " +
                                  std::to_string(group->size()) + ": " + error);
      }
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > collectiveTimeout_) {
      for (auto &entry : nccl_)
        abortNccl(*entry.second);
      throw DeviceError(-1, "a step's NCCL collectives did not complete within " +
                                std::to_string((int)collectiveTimeout_) +
                                " s: a rank stopped or died (NCCL does not say which; "
                                "--collectives=mpi names it)");
    }
    if (spins > 1000)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    else
      std::this_thread::yield();
  }
}

void CudaDevice::synchronize() {
  cudaError_t e = waitForStream();
  if (e != cudaSuccess)
    throw DeviceError(-1, std::string("a CUDA kernel failed: ") + cudaGetErrorString(e));
  checkFault();
}

cudnnHandle_t CudaDevice::cudnn() {
  if (!cudnn_) {
    cudnnStatus_t s = cudnnCreate(&cudnn_);
    if (s != CUDNN_STATUS_SUCCESS)
      throw std::runtime_error(std::string("cuDNN: cannot create a handle: ") +
                               cudnnGetErrorString(s));
    cudnnSetStream(cudnn_, stream_);
  }
  return cudnn_;
}

std::string CudaDevice::executionNote() const {
  std::string s = std::string("TF32 ") + (tf32_ ? "on" : "off") +
                  (deterministic_ ? "" : ", nondeterministic convolutions") + ", CUDA graph ";
  if (!graphAllowed_)
    s += "off (--cuda-graph=off)";
  else if (!hostSyncReason_.empty())
    s += "off (" + hostSyncReason_ + ")";
  else
    s += "from step 3";
  if (ncclRefused_)
    s += ncclRefused_->empty() ? ", collectives through NCCL"
                               : ", collectives through MPI with host staging (" +
                                     *ncclRefused_ + ")";
  return s;
}

Collectives *CudaDevice::collectives(Comm &comm, Group &group) {
  if (!ncclRefused_) {
    // Every rank decides at its first collective, over the world.
    if (transport_ == DeviceOptions::Transport::Mpi)
      ncclRefused_ = "--collectives=mpi";
    else
      ncclRefused_ = ncclRefusal(*this, comm);
    collectiveTimeout_ = comm.timeout();
    if (transport_ == DeviceOptions::Transport::Nccl && !ncclRefused_->empty())
      throw CommError("--collectives=nccl: " + *ncclRefused_ +
                      " (one GPU per rank, or --collectives=mpi)");
  }
  if (!ncclRefused_->empty())
    return nullptr;
  std::unique_ptr<Collectives> &c = nccl_[&group];
  if (!c)
    c = makeNcclCollectives(*this, comm, group);
  return c.get();
}

void CudaDevice::markHostSynchronizing(const std::string &why) {
  if (hostSyncReason_.empty())
    hostSyncReason_ = why;
}

void CudaDevice::setStep(int64_t step, uint64_t seed) {
  // The previous step's kernels read these: the session calls this once
  // that step is done.
  stepHost_->step = step;
  stepHost_->seed = seed;
  if (!stepTraffic_.empty()) {
    Comm *comm = trafficComm_;
    const std::vector<StepTraffic> *counts = &stepTraffic_;
    comm->submit([comm, counts] {
          for (const StepTraffic &t : *counts)
            comm->traffic.add(t.variable, t.sent, t.received);
        })->wait();
  }
}

void CudaDevice::countTrafficEveryStep(Comm &comm, std::string variable, int64_t sent,
                                       int64_t received) {
  trafficComm_ = &comm;
  stepTraffic_.push_back({std::move(variable), sent, received});
}

void CudaDevice::runStep(const std::function<void()> &step) {
  ++stepsSeen_;
  // The first steps run eagerly: libraries initialise lazily on first use
  // (allocations a capture cannot hold), and a plan that fails should fail
  // with its kernel's message, not inside a graph.
  if (!graphAllowed_ || !hostSyncReason_.empty() || stepsSeen_ < 3) {
    step();
    return;
  }
  if (!graphExec_) {
    check(cudaStreamSynchronize(stream_), "before capture");
    check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
          "cudaStreamBeginCapture");
    try {
      step();
    } catch (...) {
      cudaGraph_t g = nullptr;
      cudaStreamEndCapture(stream_, &g);
      if (g)
        cudaGraphDestroy(g);
      throw;
    }
    check(cudaStreamEndCapture(stream_, &graph_), "cudaStreamEndCapture");
    check(cudaGraphInstantiate(&graphExec_, graph_, 0), "cudaGraphInstantiate");
  }
  check(cudaGraphLaunch(graphExec_, stream_), "cudaGraphLaunch");
}

std::unique_ptr<Device> makeCudaDevice(const DeviceOptions &options) {
  return std::make_unique<CudaDevice>(options);
}

CudaDevice &cudaDeviceOf(const KernelArgs &args) {
  auto *dev = dynamic_cast<CudaDevice *>(args.env.device);
  if (!dev)
    args.fail("a CUDA kernel bound without a CUDA device");
  return *dev;
}

const KernelRegistry &CudaDevice::kernels() const {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    registerAllCudaKernels(r);
    return r;
  }();
  return registry;
}

void registerAllCudaKernels(KernelRegistry &r) {
  registerCudaElementwiseKernels(r);
  registerCudaShapeKernels(r);
  registerCudaIndexingKernels(r);
  registerCudaLinalgKernels(r);
  registerCudaReductionKernels(r);
  registerCudaAxisKernels(r);
  registerCudaNormKernels(r);
  registerCudaLossKernels(r);
  registerCudaConvKernels(r);
  registerCudaOptimizerKernels(r);
  registerCudaRnnKernels(r);
  registerCudaCollectiveKernels(r);
}

namespace cuda {
[[noreturn]] void throwCudaError(const char *call, int error, const char *what) {
  throw KernelError(std::string(call) + " failed: " + what + " (" +
                    std::to_string(error) + ")");
}
} // namespace cuda

} // namespace parallax::rt
