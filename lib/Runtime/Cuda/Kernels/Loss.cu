//===- Loss.cu - CUDA kernels of the Loss family ---------------------------===//
//
// softmax_cross_entropy_loss, nll_loss and their gradients on a GPU, with
// the CPU kernels' semantics (lib/Runtime/Kernels/Loss.cpp) and bind-time
// checks (Kernels/LossLayout.h): scores viewed as [N, C, D], a "line" is
// one (n, d) whose C class values are D apart; an element labelled
// ignore_index contributes 0 to the loss and to the mean's
// denominator (the sum of the other elements' class weights, on this rank:
// not the global batch). Per-line losses and weights go to scratch and are
// summed in double by one block in a fixed order, so the result does not
// depend on the launch. A label outside [0, C) is reported as a device fault
// (the CPU throws) and the line is treated as ignored.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelUtil.cuh"

#include "../../Kernels/KernelUtil.h"
#include "../../Kernels/LossLayout.h"

#include <math_constants.h>

#include <algorithm>

namespace parallax::rt {
namespace {

using namespace cuda;
using namespace loss;

/// Threads of the one-block reductions (and at most of a line's block).
constexpr int kReduceThreads = 1024;

/// What the kernels need of the setup, passed by value.
struct LossDims {
  int64_t n, c, d, lines;
  bool hasIgnore;
  int64_t ignoreIndex;
  int64_t kernel; ///< the plan index, for faults
  /// The classes a label may name (the whole tensor's on a block of them,
  /// the real ones of padded scores) and the block's first class (0 when
  /// whole).
  int64_t labelRange, classOffset;
};

/// The class of line l, or -1 when it is ignored or (reported) out of range.
template <typename I>
__device__ inline int64_t classOf(const I *labels, int64_t l, const LossDims &s,
                                  DeviceFault *fault, bool report) {
  int64_t label = (int64_t)labels[l];
  if (s.hasIgnore && label == s.ignoreIndex)
    return -1;
  if (label < 0 || label >= s.labelRange) {
    if (report)
      reportFault(fault, s.kernel, kFaultLabelOutOfRange, label, s.labelRange);
    return -1;
  }
  return label;
}

/// The kernels' view of the factory's setup.
LossDims dimsOf(const LossSetup &s, const KernelArgs &args) {
  return {s.n,           s.c,           s.d,      s.n * s.d,     s.hasIgnore,
          s.ignoreIndex, args.index,    s.labelRange, s.classOffset};
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

/// The line's loss (value, weight): to loss[l] without a reduction, else to
/// lineLoss[l] and lineW[l]. On a block of the classes a class of another
/// rank's (not `here`) adds nothing but counts in the mean's weight.
template <typename T>
__device__ inline void storeLine(int64_t l, int64_t cls, T logProbOfCls,
                                 const T *w, T *loss, double *lineLoss,
                                 double *lineW, bool here = true) {
  double wl = cls < 0 ? 0.0 : (w ? (double)w[cls] : 1.0);
  double value = cls < 0 || !here ? 0.0 : -(double)logProbOfCls * wl;
  if (lineLoss) {
    lineLoss[l] = value;
    lineW[l] = wl;
  } else {
    loss[l] = (T)value;
  }
}

/// softmax_cross_entropy_loss with contiguous classes (D == 1): one block
/// per line writes its log-probabilities and loss.
template <typename T, typename I>
__global__ void __launch_bounds__(kReduceThreads)
    sceLineBlockKernel(const T *x, const I *labels, const T *w, T *logProb,
                       T *loss, double *lineLoss, double *lineW, LossDims s,
                       DeviceFault *fault) {
  for (int64_t l = blockIdx.x; l < s.lines; l += gridDim.x) {
    const T *xr = x + l * s.c;
    T *yr = logProb + l * s.c;
    // The label's score, read before any log-probability is written.
    int64_t cls = -1;
    T xc = T(0);
    if (threadIdx.x == 0) {
      cls = classOf(labels, l, s, fault, true);
      xc = cls < 0 ? T(0) : xr[cls];
    }
    double mx = -CUDART_INF;
    for (int64_t k = threadIdx.x; k < s.c; k += blockDim.x)
      mx = nanMax(mx, (double)xr[k]);
    T tm = (T)groupReduce<true>(mx);
    double sum = 0;
    for (int64_t k = threadIdx.x; k < s.c; k += blockDim.x)
      sum += (double)expT(subRn(xr[k], tm));
    sum = groupReduce<false>(sum);
    T shift = (T)((double)tm + log(sum));
    for (int64_t k = threadIdx.x; k < s.c; k += blockDim.x)
      yr[k] = subRn(xr[k], shift);
    if (threadIdx.x == 0)
      storeLine(l, cls, subRn(xc, shift), w, loss, lineLoss, lineW);
  }
}

/// softmax_cross_entropy_loss with D > 1: one thread per line (neighbouring
/// lines are neighbours in memory).
template <typename T, typename I>
__global__ void sceLineThreadKernel(const T *x, const I *labels, const T *w,
                                    T *logProb, T *loss, double *lineLoss,
                                    double *lineW, LossDims s,
                                    DeviceFault *fault) {
  for (int64_t l = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; l < s.lines;
       l += (int64_t)gridDim.x * blockDim.x) {
    int64_t base = (l / s.d) * s.c * s.d + l % s.d;
    const T *xr = x + base;
    T *yr = logProb + base;
    int64_t cls = classOf(labels, l, s, fault, true);
    T xc = cls < 0 ? T(0) : xr[cls * s.d];
    double mx = -CUDART_INF;
    for (int64_t k = 0; k < s.c; ++k)
      mx = nanMax(mx, (double)xr[k * s.d]);
    T tm = (T)mx;
    double sum = 0;
    for (int64_t k = 0; k < s.c; ++k)
      sum += (double)expT(subRn(xr[k * s.d], tm));
    T shift = (T)((double)tm + log(sum));
    for (int64_t k = 0; k < s.c; ++k)
      yr[k * s.d] = subRn(xr[k * s.d], shift);
    storeLine(l, cls, subRn(xc, shift), w, loss, lineLoss, lineW);
  }
}

/// nll_loss: the input already holds log-probabilities.
template <typename T, typename I>
__global__ void nllLineKernel(const T *in, const I *labels, const T *w, T *loss,
                              double *lineLoss, double *lineW, LossDims s,
                              DeviceFault *fault) {
  for (int64_t l = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; l < s.lines;
       l += (int64_t)gridDim.x * blockDim.x) {
    int64_t base = (l / s.d) * s.c * s.d + l % s.d;
    int64_t cls = classOf(labels, l, s, fault, true), local = cls - s.classOffset;
    bool here = cls >= 0 && local >= 0 && local < s.c;
    T lp = here ? in[base + local * s.d] : T(0);
    storeLine(l, cls, lp, w, loss, lineLoss, lineW, here);
  }
}

/// loss[0]: the sum of the line losses, or their mean over the total weight
/// (0/0 = NaN when every line is ignored, as in ONNX and PyTorch); one block.
template <typename T>
__global__ void __launch_bounds__(kReduceThreads)
    reduceLossKernel(const double *lineLoss, const double *lineW, int64_t lines,
                     bool mean, T *loss) {
  double total = 0, totalW = 0;
  for (int64_t l = threadIdx.x; l < lines; l += blockDim.x) {
    total += lineLoss[l];
    totalW += lineW[l];
  }
  total = groupReduce<false>(total);
  totalW = groupReduce<false>(totalW);
  if (threadIdx.x == 0)
    loss[0] = (T)(mean ? total / totalW : total);
}

template <typename T, typename I, bool LogSoftmax>
KernelFn lossTyped(KernelArgs &args, const LossSetup &setup) {
  CudaDevice &dev = cudaDeviceOf(args);
  const T *in = args.in(0).as<T>();
  const I *labels = args.in(1).as<I>();
  const T *w = args.hasIn(2) ? args.in(2).as<T>() : nullptr;
  T *loss = args.out(0).as<T>();
  T *logProb = LogSoftmax ? args.out(1).as<T>() : nullptr;
  LossDims s = dimsOf(setup, args);
  Reduction reduction = setup.reduction;
  Scratch lineBuf;
  double *lineLoss = nullptr, *lineW = nullptr;
  if (reduction != Reduction::None) {
    lineBuf = scratch(dev, std::max<int64_t>(1, 2 * s.lines) * 8);
    lineLoss = static_cast<double *>(lineBuf->data());
    lineW = lineLoss + s.lines;
  }
  unsigned blockThreads = s.c <= 256 ? 32 : s.c <= 4096 ? 256 : 1024;
  unsigned lineBlocks = blocksFor(s.lines, 1); // a block per line
  DeviceFault *fault = dev.fault();
  cudaStream_t stream = dev.stream();
  return [=] {
    (void)lineBuf;
    if (s.lines > 0) {
      if (!LogSoftmax)
        nllLineKernel<T, I><<<blocksFor(s.lines), kThreads, 0, stream>>>(
            in, labels, w, loss, lineLoss, lineW, s, fault);
      else if (s.d == 1)
        sceLineBlockKernel<T, I><<<lineBlocks, blockThreads, 0, stream>>>(
            in, labels, w, logProb, loss, lineLoss, lineW, s, fault);
      else
        sceLineThreadKernel<T, I><<<blocksFor(s.lines), kThreads, 0, stream>>>(
            in, labels, w, logProb, loss, lineLoss, lineW, s, fault);
      PX_CUDA_LAUNCHED();
    }
    if (reduction != Reduction::None) {
      reduceLossKernel<T><<<1, kReduceThreads, 0, stream>>>(
          lineLoss, lineW, s.lines, reduction == Reduction::Mean, loss);
      PX_CUDA_LAUNCHED();
    }
  };
}

template <bool LogSoftmax> KernelFn lossFactory(KernelArgs &args) {
  const char *op = LogSoftmax ? "softmax_cross_entropy_loss" : "nll_loss";
  if (LogSoftmax && args.has("grid_shape"))
    args.fail(std::string(op) + ": a block of the classes is partitioned into "
              "log-softmax and nll_loss, not computed here");
  LossSetup s = lossForwardSetup(args, LogSoftmax, op);
  return dispatchLoss(s, [&](auto t, auto i) {
    return lossTyped<decltype(t), decltype(i), LogSoftmax>(args, s);
  });
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

/// The mean's dloss' = dloss / total weight (0 for zero total weight, where
/// every contribution is 0 or ignored); one block.
template <typename T, typename I>
__global__ void __launch_bounds__(kReduceThreads)
    meanScaleKernel(const T *dloss, const I *labels, const T *w, LossDims s,
                    DeviceFault *fault, double *scale) {
  double totalW = 0;
  for (int64_t l = threadIdx.x; l < s.lines; l += blockDim.x) {
    int64_t cls = classOf(labels, l, s, fault, true);
    if (cls >= 0)
      totalW += w ? (double)w[cls] : 1.0;
  }
  totalW = groupReduce<false>(totalW);
  if (threadIdx.x == 0)
    scale[0] = totalW == 0 ? 0.0 : (double)dloss[0] / totalW;
}

/// Softmax: dscores = (exp(log_prob) - onehot) * w * dloss'; otherwise
/// dinput = -onehot * w * dloss'. One thread per element.
template <typename T, typename I, bool Softmax>
__global__ void lossGradKernel(const T *dloss, const T *logProb,
                               const I *labels, const T *w, const double *scale,
                               Reduction reduction, T *out, LossDims s,
                               DeviceFault *fault) {
  int64_t total = s.lines * s.c, cd = s.c * s.d;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t nn = i / cd, rem = i - nn * cd, k = rem / s.d, dd = rem - k * s.d;
    int64_t l = nn * s.d + dd;
    int64_t cls = classOf(labels, l, s, fault, k == 0);
    int64_t local = cls - s.classOffset; // k is a class of the block
    double f = 0;
    if (cls >= 0) {
      double wl = w ? (double)w[cls] : 1.0;
      double dl = reduction == Reduction::None  ? (double)dloss[l]
                  : reduction == Reduction::Sum ? (double)dloss[0]
                                                : scale[0];
      f = wl * dl;
    }
    if (cls < 0 || f == 0) {
      out[i] = T(0);
      continue;
    }
    if constexpr (Softmax) {
      T e = expT(logProb[i]);
      out[i] = k == local ? (T)(((double)e - 1.0) * f) : mulRn(e, (T)f);
    } else {
      out[i] = k == local ? -(T)f : T(0);
    }
  }
}

template <typename T, typename I, bool Softmax>
KernelFn lossGradTyped(KernelArgs &args, const LossSetup &setup) {
  // softmax_cross_entropy_loss_grad(dloss, log_prob, labels, weights?)
  // nll_loss_grad(dloss, target, weight?)
  CudaDevice &dev = cudaDeviceOf(args);
  const int li = Softmax ? 2 : 1;
  const T *dloss = args.in(0).as<T>();
  const T *logProb = Softmax ? args.in(1).as<T>() : nullptr;
  const I *labels = args.in(li).as<I>();
  const T *w = args.hasIn(li + 1) ? args.in(li + 1).as<T>() : nullptr;
  T *out = args.out(0).as<T>();
  LossDims s = dimsOf(setup, args);
  Reduction reduction = setup.reduction;
  Scratch scaleBuf = scratch(dev, 8);
  double *scale = static_cast<double *>(scaleBuf->data());
  DeviceFault *fault = dev.fault();
  cudaStream_t stream = dev.stream();
  int64_t total = s.lines * s.c;
  return [=] {
    (void)scaleBuf;
    if (reduction == Reduction::Mean) {
      meanScaleKernel<T, I>
          <<<1, kReduceThreads, 0, stream>>>(dloss, labels, w, s, fault, scale);
      PX_CUDA_LAUNCHED();
    }
    if (total > 0) {
      lossGradKernel<T, I, Softmax><<<blocksFor(total), kThreads, 0, stream>>>(
          dloss, logProb, labels, w, scale, reduction, out, s, fault);
      PX_CUDA_LAUNCHED();
    }
  };
}

template <bool Softmax> KernelFn lossGradFactory(KernelArgs &args) {
  const char *op =
      Softmax ? "softmax_cross_entropy_loss_grad" : "nll_loss_grad";
  LossSetup s = lossGradSetup(args, Softmax, op);
  return dispatchLoss(s, [&](auto t, auto i) {
    return lossGradTyped<decltype(t), decltype(i), Softmax>(args, s);
  });
}

} // namespace

void registerCudaLossKernels(KernelRegistry &r) {
  PX_ADD_LOSS_KERNELS(r);
}

} // namespace parallax::rt
