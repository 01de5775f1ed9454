//===- Conv.cu - CUDA kernels of the Conv family ---------------------------===//
//
// conv, conv_grad_input, conv_grad_filter, max_pool, max_pool_grad,
// avg_pool, avg_pool_grad over x [N, C, spatial...], as the CPU kernels
// (lib/Runtime/Kernels/Conv.cpp, whose bind-time checks and messages are
// repeated here).
//
// Convolutions run on cuDNN's legacy API when it can express them (up to 3
// spatial dims; 1-D as 2-D of height 1): the algorithm is chosen at bind
// time among the GEMM-like ones (FFT and Winograd round differently from the
// CPU's im2col + GEMM), by cudnnGet*Algorithm_v7's heuristics, or with
// --deterministic=off by timing them (cudnnFind*), and its workspace
// allocated then. Pads cuDNN cannot express (begin != end where
// that changes the output size) are made explicit: x is copied into a
// zero-bordered buffer held by the closure (the gradient is cropped out of
// one). Anything else (more spatial dims, sizes past cuDNN's 32-bit limits,
// no usable algorithm) runs direct kernels that accumulate in double.
//
// Pooling is direct: cuDNN's pooling differs from the CPU's semantics
// (ceil_mode, dilations, ties and NaN in the max, the divisor of
// count_include_pad with asymmetric pads). One thread per output gathers its
// window in row-major window order, and the gradients gather per input
// element in the order the CPU accumulates, so the results are the CPU's to
// the bit: no atomics.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelUtil.cuh"

#include "../../Kernels/ConvGeometry.h"
#include "../../Kernels/KernelUtil.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace parallax::rt {

namespace {

using cuda::blocksFor;
using cuda::kThreads;
using cuda::Scratch;

using namespace conv;
using namespace detail;

//===----------------------------------------------------------------------===//
// Device helpers
//===----------------------------------------------------------------------===//

/// Row-major coordinates of `flat` in `sizes` (nd dims).
__device__ inline void unflatten(int64_t flat, int nd, const int64_t *sizes,
                                 int64_t *coord) {
  for (int i = nd - 1; i >= 0; --i) {
    coord[i] = flat % sizes[i];
    flat /= sizes[i];
  }
}

/// Offset in the input plane of window element kk (row-major) of the output
/// at `oc`; false when it lies in the padding.
__device__ inline bool windowTap(const Geo &g, const int64_t *oc, int64_t kk,
                                 int64_t &off) {
  off = 0;
  for (int i = g.nd - 1; i >= 0; --i) {
    int64_t ki = kk % g.k[i];
    kk /= g.k[i];
    int64_t pos = oc[i] * g.s[i] - g.pb[i] + ki * g.d[i];
    if (pos < 0 || pos >= g.in[i])
      return false;
    off += pos * g.inStride[i];
  }
  return true;
}

/// Offset in the output plane of the output whose window element kk
/// (row-major) is the input at `ic`; false when there is none.
__device__ inline bool tapOutput(const Geo &g, const int64_t *ic, int64_t kk,
                                 int64_t &off) {
  off = 0;
  for (int i = g.nd - 1; i >= 0; --i) {
    int64_t ki = kk % g.k[i];
    kk /= g.k[i];
    int64_t t = ic[i] + g.pb[i] - ki * g.d[i];
    if (t < 0 || t % g.s[i] != 0 || t / g.s[i] >= g.out[i])
      return false;
    off += (t / g.s[i]) * g.outStride[i];
  }
  return true;
}

/// Floor division for a positive divisor.
__device__ inline int64_t floorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/// The average pool's divisor of the output at `oc` (the CPU's avgDivisors).
__device__ inline double avgDivisor(const Geo &g, const int64_t *oc,
                                    bool includePad) {
  int64_t n = 1;
  for (int i = 0; i < g.nd; ++i) {
    int64_t start = oc[i] * g.s[i] - g.pb[i];
    int64_t lo = includePad ? start : (start > 0 ? start : 0);
    int64_t end = includePad ? g.in[i] + g.pe[i] : g.in[i];
    int64_t hi = start + g.k[i] < end ? start + g.k[i] : end;
    n *= hi > lo ? hi - lo : 0;
  }
  return (double)n;
}

//===----------------------------------------------------------------------===//
// Direct convolutions (what cuDNN cannot run), accumulating in double
//===----------------------------------------------------------------------===//


template <typename T>
__global__ void convDirect(ConvShapes cs, const T *x, const T *w, const T *b,
                           T *y) {
  const Geo &g = cs.g;
  const int64_t total = cs.n * cs.m * g.outSize;
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total;
       idx += (int64_t)gridDim.x * blockDim.x) {
    int64_t o = idx % g.outSize, nm = idx / g.outSize;
    int64_t m = nm % cs.m, n = nm / cs.m, gi = m / cs.mg;
    int64_t oc[kMaxSpatial];
    unflatten(o, g.nd, g.out, oc);
    const T *xg = x + (n * cs.c + gi * cs.cg) * g.inSize;
    const T *wm = w + m * cs.kc;
    double acc = b ? (double)b[m] : 0.0;
    for (int64_t kk = 0; kk < g.kSize; ++kk) {
      int64_t off;
      if (!windowTap(g, oc, kk, off))
        continue;
      for (int64_t cc = 0; cc < cs.cg; ++cc)
        acc += (double)xg[cc * g.inSize + off] * (double)wm[cc * g.kSize + kk];
    }
    y[idx] = (T)acc;
  }
}

template <typename T>
__global__ void convGradInputDirect(ConvShapes cs, const T *dy, const T *w,
                                    T *dx) {
  const Geo &g = cs.g;
  const int64_t total = cs.n * cs.c * g.inSize;
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total;
       idx += (int64_t)gridDim.x * blockDim.x) {
    int64_t p = idx % g.inSize, nc = idx / g.inSize;
    int64_t c = nc % cs.c, n = nc / cs.c, gi = c / cs.cg, cc = c % cs.cg;
    int64_t ic[kMaxSpatial];
    unflatten(p, g.nd, g.in, ic);
    double acc = 0;
    for (int64_t kk = 0; kk < g.kSize; ++kk) {
      int64_t off;
      if (!tapOutput(g, ic, kk, off))
        continue;
      for (int64_t mm = 0; mm < cs.mg; ++mm) {
        int64_t m = gi * cs.mg + mm;
        acc += (double)dy[(n * cs.m + m) * g.outSize + off] *
               (double)w[(m * cs.cg + cc) * g.kSize + kk];
      }
    }
    dx[idx] = (T)acc;
  }
}

/// One block per filter element: its threads split the (image, output)
/// pairs and reduce in shared memory.
template <typename T>
__global__ void convGradFilterDirect(ConvShapes cs, const T *x, const T *dy,
                                     T *dw) {
  __shared__ double red[kThreads];
  const Geo &g = cs.g;
  const int64_t total = cs.m * cs.kc, pairs = cs.n * g.outSize;
  for (int64_t e = blockIdx.x; e < total; e += gridDim.x) {
    int64_t kk = e % g.kSize, mc = e / g.kSize;
    int64_t cc = mc % cs.cg, m = mc / cs.cg, c = (m / cs.mg) * cs.cg + cc;
    double acc = 0;
    for (int64_t j = threadIdx.x; j < pairs; j += blockDim.x) {
      int64_t n = j / g.outSize, o = j % g.outSize;
      int64_t oc[kMaxSpatial], off;
      unflatten(o, g.nd, g.out, oc);
      if (windowTap(g, oc, kk, off))
        acc += (double)x[(n * cs.c + c) * g.inSize + off] *
               (double)dy[(n * cs.m + m) * g.outSize + o];
    }
    red[threadIdx.x] = acc;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
      if ((int)threadIdx.x < half)
        red[threadIdx.x] += red[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0)
      dw[e] = (T)red[0];
    __syncthreads(); // red is reused by the next element
  }
}

template <typename T> __global__ void addBias(int64_t total, int64_t outSize,
                                              int64_t m, const T *b, T *y) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x)
    y[i] += b[(i / outSize) % m];
}

//===----------------------------------------------------------------------===//
// Explicit padding for cuDNN
//===----------------------------------------------------------------------===//

/// Where the elements of planes of `in` sit in planes of in + pb + pe.
struct PadMap {
  int nd = 0;
  int64_t in[kMaxSpatial] = {}, pb[kMaxSpatial] = {}, strideP[kMaxSpatial] = {};
  int64_t inSize = 1, inPSize = 1;
};

PadMap padMap(const Geo &g) {
  PadMap pm;
  pm.nd = g.nd;
  for (int i = g.nd - 1; i >= 0; --i) {
    pm.in[i] = g.in[i];
    pm.pb[i] = g.pb[i];
    pm.strideP[i] = pm.inPSize;
    pm.inSize *= g.in[i];
    pm.inPSize *= g.in[i] + g.pb[i] + g.pe[i];
  }
  return pm;
}

/// toPadded: xp[interior] = x (the border stays as allocated: zero);
/// otherwise x = xp[interior] (the crop of a padded gradient).
template <typename T>
__global__ void padCopy(PadMap pm, int64_t planes, bool toPadded, T *x, T *xp) {
  const int64_t total = planes * pm.inSize;
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total;
       idx += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = idx % pm.inSize, plane = idx / pm.inSize, offP = 0;
    for (int i = pm.nd - 1; i >= 0; --i) {
      offP += (r % pm.in[i] + pm.pb[i]) * pm.strideP[i];
      r /= pm.in[i];
    }
    T *p = xp + plane * pm.inPSize + offP;
    if (toPadded)
      *p = x[idx];
    else
      x[idx] = *p;
  }
}

//===----------------------------------------------------------------------===//
// cuDNN convolutions
//===----------------------------------------------------------------------===//

enum class ConvOp { Forward, BackwardData, BackwardFilter };

/// The most workspace an algorithm may take; a hungrier one is skipped.
constexpr size_t kMaxWorkspace = size_t(512) << 20;

/// Descriptors, algorithm and buffers of one bound cuDNN convolution.
struct CudnnConv {
  cudnnHandle_t handle = nullptr;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = 0;
  size_t wsBytes = 0;
  Scratch ws;
  /// Pads made explicit: x (or the gradient of x) in a padded buffer.
  bool padded = false;
  PadMap pm;
  Scratch xpad;

  void *workspace() const { return ws ? ws->data() : nullptr; }

  CudnnConv() = default;
  CudnnConv(const CudnnConv &) = delete;
  CudnnConv &operator=(const CudnnConv &) = delete;
  ~CudnnConv() {
    if (conv)
      cudnnDestroyConvolutionDescriptor(conv);
    if (w)
      cudnnDestroyFilterDescriptor(w);
    if (y)
      cudnnDestroyTensorDescriptor(y);
    if (x)
      cudnnDestroyTensorDescriptor(x);
  }
};

bool setTensor(cudnnTensorDescriptor_t desc, cudnnDataType_t dt,
               const std::vector<int> &dims) {
  std::vector<int> strides(dims.size());
  int64_t s = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = (int)s;
    s *= dims[i];
  }
  return cudnnSetTensorNdDescriptor(desc, dt, (int)dims.size(), dims.data(),
                                    strides.data()) == CUDNN_STATUS_SUCCESS;
}

/// Picks an algorithm among perf (best first, by heuristics or timing):
/// allowed (GEMM-like), no tensor-op math unless TF32 is allowed, workspace
/// within kMaxWorkspace; deterministic ones first unless `anyOrder`.
template <typename Perf, typename Allowed, typename WsSize>
bool pickAlgo(const std::vector<Perf> &perf, int count, bool tf32, bool anyOrder,
              Allowed allowed, WsSize wsSize, int &algo, size_t &ws,
              cudnnMathType_t &math) {
  for (int pass = anyOrder ? 1 : 0; pass < 2; ++pass)
    for (int i = 0; i < count; ++i) {
      const Perf &p = perf[i];
      if (p.status != CUDNN_STATUS_SUCCESS || !allowed(p.algo))
        continue;
      if (pass == 0 && p.determinism != CUDNN_DETERMINISTIC)
        continue;
      if (!tf32 && (p.mathType == CUDNN_TENSOR_OP_MATH ||
                    p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
        continue;
      size_t bytes = 0;
      if (wsSize(p.algo, bytes) != CUDNN_STATUS_SUCCESS || bytes > kMaxWorkspace)
        continue;
      algo = (int)p.algo;
      ws = bytes;
      math = tf32 ? p.mathType : CUDNN_FMA_MATH;
      return true;
    }
  return false;
}

/// Chooses the algorithm of `op` for the descriptors in `cc`. With
/// `anyOrder` (--deterministic=off) cuDNN times every algorithm on scratch
/// buffers it allocates (cudnnFind*, PyTorch's cudnn.benchmark) and the
/// fastest allowed one wins, since its heuristics' first was measured
/// slower on some layers (tv_resnet18); otherwise its heuristics rank
/// them, which gives every run the same choice.
bool chooseAlgo(CudnnConv &cc, ConvOp op, bool tf32, bool anyOrder,
                cudnnMathType_t &math) {
  cudnnHandle_t h = cc.handle;
  int max = 0, count = 0;
  if (op == ConvOp::Forward) {
    if (cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max) != CUDNN_STATUS_SUCCESS ||
        max < 1)
      return false;
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(max);
    // Find allocates its own buffers: where it cannot, the heuristics.
    if ((!anyOrder || cudnnFindConvolutionForwardAlgorithm(h, cc.x, cc.w, cc.conv, cc.y, max,
                                                           &count, perf.data()) !=
                          CUDNN_STATUS_SUCCESS) &&
        cudnnGetConvolutionForwardAlgorithm_v7(h, cc.x, cc.w, cc.conv, cc.y, max, &count,
                                               perf.data()) != CUDNN_STATUS_SUCCESS)
      return false;
    auto allowed = [](cudnnConvolutionFwdAlgo_t a) {
      return a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
             a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
             a == CUDNN_CONVOLUTION_FWD_ALGO_GEMM ||
             a == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT;
    };
    auto wsSize = [&](cudnnConvolutionFwdAlgo_t a, size_t &bytes) {
      return cudnnGetConvolutionForwardWorkspaceSize(h, cc.x, cc.w, cc.conv, cc.y,
                                                     a, &bytes);
    };
    return pickAlgo(perf, count, tf32, anyOrder, allowed, wsSize, cc.algo, cc.wsBytes, math);
  }
  if (op == ConvOp::BackwardData) {
    if (cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max) !=
            CUDNN_STATUS_SUCCESS ||
        max < 1)
      return false;
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(max);
    if ((!anyOrder ||
         cudnnFindConvolutionBackwardDataAlgorithm(h, cc.w, cc.y, cc.conv, cc.x, max, &count,
                                                   perf.data()) != CUDNN_STATUS_SUCCESS) &&
        cudnnGetConvolutionBackwardDataAlgorithm_v7(h, cc.w, cc.y, cc.conv, cc.x, max, &count,
                                                    perf.data()) != CUDNN_STATUS_SUCCESS)
      return false;
    auto allowed = [](cudnnConvolutionBwdDataAlgo_t a) {
      return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 ||
             a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
    };
    auto wsSize = [&](cudnnConvolutionBwdDataAlgo_t a, size_t &bytes) {
      return cudnnGetConvolutionBackwardDataWorkspaceSize(h, cc.w, cc.y, cc.conv,
                                                          cc.x, a, &bytes);
    };
    return pickAlgo(perf, count, tf32, anyOrder, allowed, wsSize, cc.algo, cc.wsBytes, math);
  }
  if (cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max) !=
          CUDNN_STATUS_SUCCESS ||
      max < 1)
    return false;
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(max);
  if ((!anyOrder ||
       cudnnFindConvolutionBackwardFilterAlgorithm(h, cc.x, cc.y, cc.conv, cc.w, max, &count,
                                                   perf.data()) != CUDNN_STATUS_SUCCESS) &&
      cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, cc.x, cc.y, cc.conv, cc.w, max, &count,
                                                    perf.data()) != CUDNN_STATUS_SUCCESS)
    return false;
  auto allowed = [](cudnnConvolutionBwdFilterAlgo_t a) {
    return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 ||
           a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 ||
           a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
  };
  auto wsSize = [&](cudnnConvolutionBwdFilterAlgo_t a, size_t &bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, cc.x, cc.y, cc.conv,
                                                          cc.w, a, &bytes);
  };
  return pickAlgo(perf, count, tf32, anyOrder, allowed, wsSize, cc.algo, cc.wsBytes, math);
}

/// cuDNN's form of the convolution of cd, pads in the descriptor or (padded)
/// in x; null when cuDNN cannot run it.
std::shared_ptr<CudnnConv> tryCudnn(CudaDevice &dev, const ConvShapes &cd,
                                    DType dtype, ConvOp op, bool padded) {
  const Geo &g = cd.g;
  if (g.nd > 3 || cd.n < 1 || cd.c < 1 || cd.m < 1)
    return nullptr;
  // Dims as cuDNN takes them: int, at least 2 spatial, elements below 2^31.
  std::vector<int64_t> xd{cd.n, cd.c}, yd{cd.n, cd.m}, wd{cd.m, cd.cg}, pad, str, dil;
  if (g.nd == 1) {
    xd.push_back(1);
    yd.push_back(1);
    wd.push_back(1);
    pad.push_back(0);
    str.push_back(1);
    dil.push_back(1);
  }
  for (int i = 0; i < g.nd; ++i) {
    xd.push_back(padded ? g.in[i] + g.pb[i] + g.pe[i] : g.in[i]);
    yd.push_back(g.out[i]);
    wd.push_back(g.k[i]);
    pad.push_back(padded ? 0 : g.pb[i]);
    str.push_back(g.s[i]);
    dil.push_back(g.d[i]);
  }
  auto toInt = [](const std::vector<int64_t> &v, std::vector<int> &out) {
    int64_t elems = 1;
    for (int64_t e : v) {
      if (e > INT_MAX)
        return false;
      out.push_back((int)e);
      elems *= e;
    }
    return elems < INT_MAX;
  };
  std::vector<int> xi, yi, wi, padi, stri, dili;
  if (!toInt(xd, xi) || !toInt(yd, yi) || !toInt(wd, wi) || !toInt(str, stri) ||
      !toInt(dil, dili))
    return nullptr;
  for (int64_t p : pad) {
    if (p > INT_MAX)
      return nullptr;
    padi.push_back((int)p);
  }

  auto cc = std::make_shared<CudnnConv>();
  try {
    cc->handle = dev.cudnn();
  } catch (const std::exception &) {
    return nullptr;
  }
  cudnnDataType_t dt = dtype == DType::F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  if (cudnnCreateTensorDescriptor(&cc->x) != CUDNN_STATUS_SUCCESS ||
      cudnnCreateTensorDescriptor(&cc->y) != CUDNN_STATUS_SUCCESS ||
      cudnnCreateFilterDescriptor(&cc->w) != CUDNN_STATUS_SUCCESS ||
      cudnnCreateConvolutionDescriptor(&cc->conv) != CUDNN_STATUS_SUCCESS)
    return nullptr;
  if (!setTensor(cc->x, dt, xi) || !setTensor(cc->y, dt, yi) ||
      cudnnSetFilterNdDescriptor(cc->w, dt, CUDNN_TENSOR_NCHW, (int)wi.size(),
                                 wi.data()) != CUDNN_STATUS_SUCCESS ||
      cudnnSetConvolutionNdDescriptor(cc->conv, (int)padi.size(), padi.data(),
                                      stri.data(), dili.data(),
                                      CUDNN_CROSS_CORRELATION,
                                      dt) != CUDNN_STATUS_SUCCESS ||
      cudnnSetConvolutionGroupCount(cc->conv, (int)cd.group) != CUDNN_STATUS_SUCCESS)
    return nullptr;
  // FMA math forbids TF32, so f32 results match the CPU's within rounding.
  const bool tf32 = dev.tf32() && dtype == DType::F32;
  if (cudnnSetConvolutionMathType(cc->conv, tf32 ? CUDNN_DEFAULT_MATH
                                                 : CUDNN_FMA_MATH) !=
      CUDNN_STATUS_SUCCESS)
    return nullptr;
  // cuDNN pads both ends alike: usable when the output is the same.
  std::vector<int> outDims(yi.size());
  if (cudnnGetConvolutionNdForwardOutputDim(cc->conv, cc->x, cc->w, (int)outDims.size(),
                                            outDims.data()) != CUDNN_STATUS_SUCCESS ||
      outDims != yi)
    return nullptr;
  cudnnMathType_t math = CUDNN_FMA_MATH;
  if (!chooseAlgo(*cc, op, tf32, !dev.deterministic(), math) ||
      cudnnSetConvolutionMathType(cc->conv, math) != CUDNN_STATUS_SUCCESS)
    return nullptr;
  try {
    if (cc->wsBytes > 0)
      cc->ws = cuda::scratch(dev, (int64_t)cc->wsBytes);
    cc->padded = padded;
    if (padded) {
      cc->pm = padMap(g);
      cc->xpad = cuda::scratch(dev, cd.n * cd.c * cc->pm.inPSize *
                                        (int64_t)sizeOf(dtype));
    }
  } catch (const std::exception &) {
    return nullptr; // out of memory: the direct kernels need none
  }
  return cc;
}

std::shared_ptr<CudnnConv> makeCudnn(CudaDevice &dev, const ConvShapes &cd,
                                     DType dtype, ConvOp op) {
  if (auto cc = tryCudnn(dev, cd, dtype, op, /*padded=*/false))
    return cc;
  bool anyPad = false;
  for (int i = 0; i < cd.g.nd; ++i)
    anyPad = anyPad || cd.g.pb[i] || cd.g.pe[i];
  return anyPad ? tryCudnn(dev, cd, dtype, op, /*padded=*/true) : nullptr;
}

template <typename T>
void launchPadCopy(cudaStream_t stream, const CudnnConv &cc, int64_t planes,
                   bool toPadded, T *x) {
  int64_t total = planes * cc.pm.inSize;
  if (total <= 0)
    return;
  padCopy<T><<<blocksFor(total), kThreads, 0, stream>>>(
      cc.pm, planes, toPadded, x, static_cast<T *>(cc.xpad->data()));
  PX_CUDA_LAUNCHED();
}

/// What cuDNN reads as x: x itself, or its copy into the padded buffer when
/// the pads are explicit.
template <typename T>
const T *cudnnInput(cudaStream_t stream, const CudnnConv &cc, int64_t planes,
                    const T *x) {
  if (!cc.padded)
    return x;
  launchPadCopy(stream, cc, planes, true, const_cast<T *>(x));
  return static_cast<const T *>(cc.xpad->data());
}

//===----------------------------------------------------------------------===//
// Convolution factories
//===----------------------------------------------------------------------===//

template <typename T>
KernelFn convKernel(KernelArgs &args, const ConvShapes &cd) {
  CudaDevice &dev = cudaDeviceOf(args);
  const T *x = args.in(0).as<T>(), *w = args.in(1).as<T>();
  const T *b = args.hasIn(2) ? args.in(2).as<T>() : nullptr;
  T *y = args.out(0).as<T>();
  cudaStream_t stream = dev.stream();
  const int64_t total = cd.n * cd.m * cd.g.outSize, outSize = cd.g.outSize, m = cd.m;
  std::shared_ptr<CudnnConv> cc = makeCudnn(dev, cd, args.in(0).dtype, ConvOp::Forward);
  if (!cc) {
    return [=]() {
      if (total <= 0)
        return;
      convDirect<T><<<blocksFor(total), kThreads, 0, stream>>>(cd, x, w, b, y);
      PX_CUDA_LAUNCHED();
    };
  }
  return [=]() {
    const T *xin = cudnnInput(stream, *cc, cd.n * cd.c, x);
    T one = 1, zero = 0;
    PX_CUDNN_CHECK(cudnnConvolutionForward(
        cc->handle, &one, cc->x, xin, cc->w, w, cc->conv,
        (cudnnConvolutionFwdAlgo_t)cc->algo, cc->workspace(),
        cc->wsBytes, &zero, cc->y, y));
    if (b) {
      addBias<T><<<blocksFor(total), kThreads, 0, stream>>>(total, outSize, m, b, y);
      PX_CUDA_LAUNCHED();
    }
  };
}

template <typename T>
KernelFn convGradInputKernel(KernelArgs &args, const ConvShapes &cd) {
  CudaDevice &dev = cudaDeviceOf(args);
  const T *dy = args.in(0).as<T>(), *w = args.in(1).as<T>();
  T *dx = args.out(0).as<T>();
  cudaStream_t stream = dev.stream();
  const int64_t total = cd.n * cd.c * cd.g.inSize;
  std::shared_ptr<CudnnConv> cc =
      makeCudnn(dev, cd, args.in(0).dtype, ConvOp::BackwardData);
  if (!cc) {
    return [=]() {
      if (total <= 0)
        return;
      convGradInputDirect<T><<<blocksFor(total), kThreads, 0, stream>>>(cd, dy, w, dx);
      PX_CUDA_LAUNCHED();
    };
  }
  return [=]() {
    T *out = cc->padded ? static_cast<T *>(cc->xpad->data()) : dx;
    T one = 1, zero = 0;
    PX_CUDNN_CHECK(cudnnConvolutionBackwardData(
        cc->handle, &one, cc->w, w, cc->y, dy, cc->conv,
        (cudnnConvolutionBwdDataAlgo_t)cc->algo, cc->workspace(),
        cc->wsBytes, &zero, cc->x, out));
    if (cc->padded)
      launchPadCopy(stream, *cc, cd.n * cd.c, false, dx);
  };
}

template <typename T>
KernelFn convGradFilterKernel(KernelArgs &args, const ConvShapes &cd) {
  CudaDevice &dev = cudaDeviceOf(args);
  const T *x = args.in(0).as<T>(), *dy = args.in(1).as<T>();
  T *dw = args.out(0).as<T>();
  cudaStream_t stream = dev.stream();
  const int64_t total = cd.m * cd.kc;
  std::shared_ptr<CudnnConv> cc =
      makeCudnn(dev, cd, args.in(0).dtype, ConvOp::BackwardFilter);
  if (!cc) {
    return [=]() {
      if (total <= 0)
        return;
      unsigned blocks = (unsigned)std::min<int64_t>(total, 65535 * 16);
      convGradFilterDirect<T><<<blocks, kThreads, 0, stream>>>(cd, x, dy, dw);
      PX_CUDA_LAUNCHED();
    };
  }
  return [=]() {
    const T *xin = cudnnInput(stream, *cc, cd.n * cd.c, x);
    T one = 1, zero = 0;
    PX_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
        cc->handle, &one, cc->x, xin, cc->y, dy, cc->conv,
        (cudnnConvolutionBwdFilterAlgo_t)cc->algo, cc->workspace(),
        cc->wsBytes, &zero, cc->w, dw));
  };
}

KernelFn convFactory(KernelArgs &args) {
  ConvShapes cd = readConvShapes(args, ConvKind::Forward);
  return args.in(0).dtype == DType::F32 ? convKernel<float>(args, cd)
                                        : convKernel<double>(args, cd);
}

KernelFn convGradInputFactory(KernelArgs &args) {
  ConvShapes cd = readConvShapes(args, ConvKind::GradInput);
  return args.in(0).dtype == DType::F32 ? convGradInputKernel<float>(args, cd)
                                        : convGradInputKernel<double>(args, cd);
}

KernelFn convGradFilterFactory(KernelArgs &args) {
  ConvShapes cd = readConvShapes(args, ConvKind::GradFilter);
  return args.in(0).dtype == DType::F32 ? convGradFilterKernel<float>(args, cd)
                                        : convGradFilterKernel<double>(args, cd);
}

//===----------------------------------------------------------------------===//
// Pooling (the CPU's semantics; see the file comment of Kernels/Conv.cpp)
//===----------------------------------------------------------------------===//

/// The max of each window in row-major window order: a value replaces it
/// when greater, or NaN (NaN propagates); a window entirely in the padding
/// gives the lowest finite value.
template <typename T>
__global__ void maxPoolFwd(Geo g, int64_t planes, const T *x, T *y) {
  const int64_t total = planes * g.outSize;
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total;
       idx += (int64_t)gridDim.x * blockDim.x) {
    int64_t o = idx % g.outSize, p = idx / g.outSize;
    int64_t oc[kMaxSpatial];
    unflatten(o, g.nd, g.out, oc);
    const T *xp = x + p * g.inSize;
    T best = -std::numeric_limits<T>::infinity();
    bool any = false;
    for (int64_t kk = 0; kk < g.kSize; ++kk) {
      int64_t off;
      if (!windowTap(g, oc, kk, off))
        continue;
      T v = xp[off];
      any = true;
      if (v > best || v != v)
        best = v;
    }
    y[idx] = any ? best : std::numeric_limits<T>::lowest();
  }
}

/// The position in its plane of each window's maximum (the CPU's
/// windowMaxArg: an element is taken when greater, or NaN, or the first of
/// its window; -1 for a window entirely in the padding).
template <typename T, typename I>
__global__ void maxPoolArg(Geo g, int64_t planes, const T *x, I *arg) {
  const int64_t total = planes * g.outSize;
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total;
       idx += (int64_t)gridDim.x * blockDim.x) {
    int64_t o = idx % g.outSize, p = idx / g.outSize;
    int64_t oc[kMaxSpatial];
    unflatten(o, g.nd, g.out, oc);
    const T *xp = x + p * g.inSize;
    T best = -std::numeric_limits<T>::infinity();
    I a = -1;
    for (int64_t kk = 0; kk < g.kSize; ++kk) {
      int64_t off;
      if (!windowTap(g, oc, kk, off))
        continue;
      T v = xp[off];
      if (v > best || v != v || a < 0) {
        best = v;
        a = (I)off;
      }
    }
    arg[idx] = a;
  }
}

/// dx[i] = the sum of dy over the outputs whose maximum is i, in increasing
/// output order (the CPU's order of accumulation).
template <typename T, typename I>
__global__ void maxPoolBwd(Geo g, int64_t planes, const I *arg, const T *dy,
                           T *dx) {
  const int64_t total = planes * g.inSize;
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total;
       idx += (int64_t)gridDim.x * blockDim.x) {
    int64_t pos = idx % g.inSize, p = idx / g.inSize;
    int64_t ic[kMaxSpatial], lo[kMaxSpatial], hi[kMaxSpatial], oc[kMaxSpatial];
    unflatten(pos, g.nd, g.in, ic);
    bool any = true;
    for (int i = 0; i < g.nd; ++i) {
      // Outputs o with o * s = ic + pb - k * d for some k < K.
      int64_t top = ic[i] + g.pb[i];
      int64_t a = top - (g.k[i] - 1) * g.d[i];
      lo[i] = a > 0 ? (a + g.s[i] - 1) / g.s[i] : 0;
      hi[i] = floorDiv(top, g.s[i]);
      if (hi[i] > g.out[i] - 1)
        hi[i] = g.out[i] - 1;
      any = any && lo[i] <= hi[i];
      oc[i] = lo[i];
    }
    T acc = 0;
    const I *ap = arg + p * g.outSize;
    const T *dyp = dy + p * g.outSize;
    while (any) {
      bool hit = true;
      int64_t o = 0;
      for (int i = 0; i < g.nd; ++i) {
        hit = hit && (ic[i] + g.pb[i] - oc[i] * g.s[i]) % g.d[i] == 0;
        o += oc[i] * g.outStride[i];
      }
      if (hit && (int64_t)ap[o] == pos)
        acc += dyp[o];
      int i = g.nd - 1;
      for (; i >= 0; --i) {
        if (++oc[i] <= hi[i])
          break;
        oc[i] = lo[i];
      }
      if (i < 0)
        break;
    }
    dx[idx] = acc;
  }
}

/// The window sums in T in row-major window order, then divided in double.
template <typename T>
__global__ void avgPoolFwd(Geo g, int64_t planes, bool includePad, const T *x,
                           T *y) {
  const int64_t total = planes * g.outSize;
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total;
       idx += (int64_t)gridDim.x * blockDim.x) {
    int64_t o = idx % g.outSize, p = idx / g.outSize;
    int64_t oc[kMaxSpatial];
    unflatten(o, g.nd, g.out, oc);
    const T *xp = x + p * g.inSize;
    T sum = 0;
    for (int64_t kk = 0; kk < g.kSize; ++kk) {
      int64_t off;
      if (windowTap(g, oc, kk, off))
        sum += xp[off];
    }
    double div = avgDivisor(g, oc, includePad);
    y[idx] = div > 0 ? (T)((double)sum / div) : T(0);
  }
}

/// dx[i] = the sum over window elements kk (in order) of T(dy[o] / div[o])
/// for the output o whose element kk is i: the CPU's order.
template <typename T>
__global__ void avgPoolBwd(Geo g, int64_t planes, bool includePad, const T *dy,
                           T *dx) {
  const int64_t total = planes * g.inSize;
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total;
       idx += (int64_t)gridDim.x * blockDim.x) {
    int64_t pos = idx % g.inSize, p = idx / g.inSize;
    int64_t ic[kMaxSpatial], oc[kMaxSpatial];
    unflatten(pos, g.nd, g.in, ic);
    const T *dyp = dy + p * g.outSize;
    T acc = 0;
    for (int64_t kk = 0; kk < g.kSize; ++kk) {
      int64_t o;
      if (!tapOutput(g, ic, kk, o))
        continue;
      unflatten(o, g.nd, g.out, oc);
      double div = avgDivisor(g, oc, includePad);
      double inv = div > 0 ? 1.0 / div : 0.0;
      acc += (T)((double)dyp[o] * inv);
    }
    dx[idx] = acc;
  }
}

template <typename T>
KernelFn maxPoolKernel(KernelArgs &args, const PoolDims &pd) {
  CudaDevice &dev = cudaDeviceOf(args);
  const T *x = args.in(0).as<T>();
  T *y = args.out(0).as<T>();
  cudaStream_t stream = dev.stream();
  const Geo g = pd.g;
  const int64_t planes = pd.planes, total = planes * g.outSize;
  return [=]() {
    if (total <= 0)
      return;
    maxPoolFwd<T><<<blocksFor(total), kThreads, 0, stream>>>(g, planes, x, y);
    PX_CUDA_LAUNCHED();
  };
}

template <typename T, typename I>
KernelFn maxPoolGradTyped(KernelArgs &args, const PoolDims &pd) {
  CudaDevice &dev = cudaDeviceOf(args);
  const T *x = args.in(0).as<T>(), *dy = args.in(1).as<T>();
  T *dx = args.out(0).as<T>();
  cudaStream_t stream = dev.stream();
  const Geo g = pd.g;
  const int64_t planes = pd.planes, outs = planes * g.outSize, ins = planes * g.inSize;
  // Each output's argmax, found before the gather.
  Scratch argBuf = cuda::scratch(dev, std::max<int64_t>(outs, 1) * (int64_t)sizeof(I));
  return [=]() {
    I *arg = static_cast<I *>(argBuf->data());
    if (outs > 0) {
      maxPoolArg<T, I><<<blocksFor(outs), kThreads, 0, stream>>>(g, planes, x, arg);
      PX_CUDA_LAUNCHED();
    }
    if (ins > 0) {
      maxPoolBwd<T, I><<<blocksFor(ins), kThreads, 0, stream>>>(g, planes, arg, dy, dx);
      PX_CUDA_LAUNCHED();
    }
  };
}

template <typename T>
KernelFn maxPoolGradKernel(KernelArgs &args, const PoolDims &pd) {
  if (pd.g.inSize <= std::numeric_limits<int32_t>::max())
    return maxPoolGradTyped<T, int32_t>(args, pd);
  return maxPoolGradTyped<T, int64_t>(args, pd);
}

template <typename T>
KernelFn avgPoolKernel(KernelArgs &args, const PoolDims &pd) {
  CudaDevice &dev = cudaDeviceOf(args);
  const T *x = args.in(0).as<T>();
  T *y = args.out(0).as<T>();
  cudaStream_t stream = dev.stream();
  const Geo g = pd.g;
  const int64_t planes = pd.planes, total = planes * g.outSize;
  const bool includePad = pd.countIncludePad;
  return [=]() {
    if (total <= 0)
      return;
    avgPoolFwd<T><<<blocksFor(total), kThreads, 0, stream>>>(g, planes, includePad, x, y);
    PX_CUDA_LAUNCHED();
  };
}

template <typename T>
KernelFn avgPoolGradKernel(KernelArgs &args, const PoolDims &pd) {
  CudaDevice &dev = cudaDeviceOf(args);
  const T *dy = args.in(0).as<T>();
  T *dx = args.out(0).as<T>();
  cudaStream_t stream = dev.stream();
  const Geo g = pd.g;
  const int64_t planes = pd.planes, total = planes * g.inSize;
  const bool includePad = pd.countIncludePad;
  return [=]() {
    if (total <= 0)
      return;
    avgPoolBwd<T><<<blocksFor(total), kThreads, 0, stream>>>(g, planes, includePad, dy, dx);
    PX_CUDA_LAUNCHED();
  };
}

KernelFn maxPoolFactory(KernelArgs &args) {
  PoolDims pd = readPoolDims(args, PoolKind::Max);
  return args.in(0).dtype == DType::F32 ? maxPoolKernel<float>(args, pd)
                                        : maxPoolKernel<double>(args, pd);
}

KernelFn maxPoolGradFactory(KernelArgs &args) {
  PoolDims pd = readPoolDims(args, PoolKind::MaxGrad);
  return args.in(0).dtype == DType::F32 ? maxPoolGradKernel<float>(args, pd)
                                        : maxPoolGradKernel<double>(args, pd);
}

KernelFn avgPoolFactory(KernelArgs &args) {
  PoolDims pd = readPoolDims(args, PoolKind::Avg);
  return args.in(0).dtype == DType::F32 ? avgPoolKernel<float>(args, pd)
                                        : avgPoolKernel<double>(args, pd);
}

KernelFn avgPoolGradFactory(KernelArgs &args) {
  PoolDims pd = readPoolDims(args, PoolKind::AvgGrad);
  return args.in(0).dtype == DType::F32 ? avgPoolGradKernel<float>(args, pd)
                                        : avgPoolGradKernel<double>(args, pd);
}

} // namespace

void registerCudaConvKernels(KernelRegistry &r) {
  PX_ADD_CONV_KERNELS(r);
}

} // namespace parallax::rt
