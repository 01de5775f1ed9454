//===- CudaKernelUtil.cuh - what every CUDA kernel family uses -*- CUDA -*-===//
//
// Conventions of lib/Runtime/Cuda/Kernels (see CudaDevice.h for why):
// - a factory checks and precomputes at bind time exactly as the CPU
//   kernel's does (same messages), allocates any scratch there (a Buffer on
//   the device, owned by the closure) and returns a closure that only
//   enqueues work on dev.stream();
// - a closure never synchronizes with the host, never allocates and never
//   reads device memory from the host; the step number and seed come from
//   dev.stepInfo() inside the device code;
// - bad data the GPU finds is reported with reportFault and becomes an
//   error naming the kernel at the next synchronize().
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_CUDA_KERNELS_CUDAKERNELUTIL_CUH
#define PARALLAX_RUNTIME_CUDA_KERNELS_CUDAKERNELUTIL_CUH

#include "../CudaDevice.h"

#include <cuda_runtime.h>
#include <math_constants.h>

#include <cstdint>
#include <memory>
#include <string>

namespace parallax::rt::cuda {

/// Throws KernelError naming the CUDA call and its error.
[[noreturn]] void throwCudaError(const char *call, int error, const char *what);

/// Runs `call` (spelled `text`), whose result of type Status is `ok` on
/// success, and throws with toString's description otherwise.
#define PX_STATUS_CHECK_(call, text, Status, ok, toString)                     \
  do {                                                                         \
    Status pxSt_ = (call);                                                     \
    if (pxSt_ != ok)                                                           \
      ::parallax::rt::cuda::throwCudaError(text, (int)pxSt_, toString(pxSt_)); \
  } while (0)
#define PX_CUDA_CHECK(call)                                                    \
  PX_STATUS_CHECK_(call, #call, cudaError_t, cudaSuccess, cudaGetErrorString)
#define PX_CUBLAS_CHECK(call)                                                  \
  PX_STATUS_CHECK_(call, #call, cublasStatus_t, CUBLAS_STATUS_SUCCESS,         \
                   cublasGetStatusString)
#define PX_CUDNN_CHECK(call)                                                   \
  PX_STATUS_CHECK_(call, #call, cudnnStatus_t, CUDNN_STATUS_SUCCESS,           \
                   cudnnGetErrorString)
/// After every launch: a bad configuration is reported here, not later.
#define PX_CUDA_LAUNCHED() PX_CUDA_CHECK(cudaGetLastError())

constexpr int kThreads = 256;

/// Blocks for a grid-stride loop over n elements: enough to fill the GPU,
/// never more than the grid allows.
inline unsigned blocksFor(int64_t n, int threads = kThreads) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1)
    b = 1;
  return (unsigned)(b > 65535 * 8 ? 65535 * 8 : b);
}

template <typename F> __global__ void forEachKernel(int64_t n, F f) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    f(i);
}

/// Runs f(i) for i in [0, n) on `stream` (f: a __device__ lambda, which
/// --extended-lambda allows); nothing for n == 0.
template <typename F> void forEach(cudaStream_t stream, int64_t n, F f) {
  if (n <= 0)
    return;
  forEachKernel<<<blocksFor(n), kThreads, 0, stream>>>(n, f);
  PX_CUDA_LAUNCHED();
}

//===----------------------------------------------------------------------===//
// Device arithmetic as the CPU kernels round it
//===----------------------------------------------------------------------===//

// Correctly rounded operations that nvcc never contracts into a fused
// multiply-add the CPU (SSE2, no FMA) keeps apart.
__device__ inline float mulRn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mulRn(double a, double b) { return __dmul_rn(a, b); }
__device__ inline float addRn(float a, float b) { return __fadd_rn(a, b); }
__device__ inline double addRn(double a, double b) { return __dadd_rn(a, b); }
__device__ inline float subRn(float a, float b) { return __fsub_rn(a, b); }
__device__ inline double subRn(double a, double b) { return __dsub_rn(a, b); }
__device__ inline float divRn(float a, float b) { return __fdiv_rn(a, b); }
__device__ inline double divRn(double a, double b) { return __ddiv_rn(a, b); }
__device__ inline float sqrtRn(float a) { return __fsqrt_rn(a); }
__device__ inline double sqrtRn(double a) { return __dsqrt_rn(a); }
/// exp in the element type (expf for float, as the CPU's std::exp).
__device__ inline float expT(float v) { return expf(v); }
__device__ inline double expT(double v) { return exp(v); }

/// Maximum that propagates NaN (as the CPU's rowMax and log-softmax do).
__device__ inline double nanMax(double a, double b) {
  return (a != a || a > b) ? a : b;
}

/// Rows per block at most of a groupReduce (its shared buffer's first
/// dimension).
constexpr int kMaxRowsPerBlock = 8;

/// Reduces v over the blockDim.x threads (a multiple of 32, at most 1024) of
/// this thread's row threadIdx.y (blockDim.y <= kMaxRowsPerBlock); Max: the
/// NaN-propagating maximum, else the sum. Every thread of the block must
/// call it, and every thread gets the result.
template <bool Max> __device__ double groupReduce(double v) {
  __shared__ double red[kMaxRowsPerBlock][32];
  for (int o = 16; o > 0; o >>= 1) {
    double w = __shfl_xor_sync(0xffffffffu, v, o);
    v = Max ? nanMax(v, w) : v + w;
  }
  if (blockDim.x == 32)
    return v;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads(); // red may still be read by the previous reduction
  if (lane == 0)
    red[threadIdx.y][warp] = v;
  __syncthreads();
  v = lane < warps ? red[threadIdx.y][lane] : (Max ? -CUDART_INF : 0.0);
  for (int o = 16; o > 0; o >>= 1) {
    double w = __shfl_xor_sync(0xffffffffu, v, o);
    v = Max ? nanMax(v, w) : v + w;
  }
  return v;
}

/// Records the first fault of a step (later ones are dropped).
__device__ inline void reportFault(DeviceFault *fault, int64_t kernel,
                                   int64_t code, int64_t value, int64_t bound) {
  unsigned long long *k = reinterpret_cast<unsigned long long *>(&fault->kernel);
  if (atomicCAS(k, 0ull, (unsigned long long)(kernel + 1)) == 0ull) {
    fault->code = code;
    fault->value = value;
    fault->bound = bound;
  }
}

/// Device scratch owned by a closure (allocated at bind time).
using Scratch = std::shared_ptr<Buffer>;
inline Scratch scratch(CudaDevice &dev, int64_t bytes) {
  return std::make_shared<Buffer>(bytes, &dev);
}

/// Device copy of a small host array (shapes, strides) made at bind time.
template <typename T>
Scratch deviceArray(CudaDevice &dev, const std::vector<T> &values) {
  Scratch s = scratch(dev, (int64_t)(values.size() * sizeof(T)) + 8);
  if (!values.empty())
    dev.upload(s->data(), values.data(), (int64_t)(values.size() * sizeof(T)));
  return s;
}

/// Fixed-rank strides for kernels that index by coordinates (up to 8 dims,
/// as the CPU kernels' broadcasting allows), passed by value.
constexpr int kMaxDims = 8;
struct Dims {
  int rank = 0;
  int64_t size[kMaxDims] = {};
  int64_t stride[kMaxDims] = {};
};

} // namespace parallax::rt::cuda

#endif // PARALLAX_RUNTIME_CUDA_KERNELS_CUDAKERNELUTIL_CUH
