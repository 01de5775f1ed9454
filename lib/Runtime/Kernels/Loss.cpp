//===- Loss.cpp - softmax cross entropy and negative log likelihood -------===//
//
// px.softmax_cross_entropy_loss and px.nll_loss (ONNX SoftmaxCrossEntropyLoss
// and NegativeLogLikelihoodLoss) and their gradients. Scores are viewed as
// [N, C, D] with D the product of the trailing dims, labels as [N, D]; a
// "line" is one (n, d): its C class values are D apart.
//
// As in the ONNX reference implementations, an element whose label equals
// ignore_index contributes 0 to the loss and 0 to the mean's denominator,
// which is the sum of the class weights of the other elements (their count
// without weights). Per-element losses go to a scratch buffer and are summed
// in double, serially, so the result does not depend on the thread count.
//
//===----------------------------------------------------------------------===//

#include "parallax/Runtime/Kernel.h"

#include "KernelUtil.h"
#include "LossLayout.h"
#include "Vec4.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>

namespace parallax::rt {
namespace {

using namespace detail;
using namespace loss;

/// The class of line `line`, or -1 when it is ignored; throws for a label
/// outside [0, C) (C the whole tensor's classes on a block of them, the
/// real ones of padded scores).
template <typename I>
inline int64_t classOf(const I *labels, int64_t line, const LossSetup &s,
                       const char *op) {
  int64_t label = (int64_t)labels[line];
  if (s.hasIgnore && label == s.ignoreIndex)
    return -1;
  if (label < 0 || label >= s.labelRange) {
    std::string msg = std::string(op) + ": label " + std::to_string(label) +
                      " (at position " + std::to_string(line) +
                      " of the labels) is out of range [0, " +
                      std::to_string(s.labelRange) + ")";
    if (s.hasIgnore)
      msg += " and is not ignore_index " + std::to_string(s.ignoreIndex);
    throw KernelError(msg);
  }
  return label;
}

/// Class `cls` in a block of the classes (-1 when another rank's, or for
/// an ignored line).
inline int64_t inBlock(int64_t cls, const LossSetup &s) {
  int64_t local = cls - s.classOffset;
  return cls >= 0 && local >= 0 && local < s.c ? local : -1;
}

//===----------------------------------------------------------------------===//
// Forward: softmax_cross_entropy_loss and nll_loss
//===----------------------------------------------------------------------===//

/// LogSoftmax: true for softmax_cross_entropy_loss (which also writes
/// log_prob), false for nll_loss (whose input already is log-probabilities).
template <typename T, typename I, bool LogSoftmax>
KernelFn lossTyped(KernelArgs &args, const LossSetup &s, const char *op) {
  const T *in = args.in(0).as<T>();
  const I *labels = args.in(1).as<I>();
  const T *w = args.hasIn(2) ? args.in(2).as<T>() : nullptr;
  T *loss = args.out(0).as<T>();
  T *logProb = LogSoftmax ? args.out(1).as<T>() : nullptr;
  int64_t lines = s.n * s.d;
  // Per-line loss and weight, summed after the parallel loop.
  auto scratch = std::make_shared<std::vector<double>>(
      s.reduction == Reduction::None ? 0 : 2 * lines);
  int threads = args.env.threads;
  int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(s.c, 1));
  return [=] {
    // No scratch without a reduction (and no arithmetic on its null data).
    double *lineLoss = scratch->data();
    double *lineW = lineLoss ? lineLoss + lines : nullptr;
    parallelFor(threads, lines, grain, [&](int64_t l0, int64_t l1) {
      for (int64_t l = l0; l < l1; ++l) {
        int64_t nn = l / s.d, dd = l % s.d;
        int64_t base = nn * s.c * s.d + dd; // class k at base + k * s.d
        const T *lp = in;
        if constexpr (LogSoftmax) {
          const T *x = in + base;
          T *y = logProb + base;
          if (s.d == 1) { // contiguous classes
            T mx = rowMax(x, s.c);
            double sum = expShiftSum(x, mx, (T *)nullptr, s.c);
            T shift = (T)((double)mx + std::log(sum));
            for (int64_t k = 0; k < s.c; ++k)
              y[k] = x[k] - shift;
          } else {
            T mx = -std::numeric_limits<T>::infinity();
            bool nan = false;
            for (int64_t k = 0; k < s.c; ++k) {
              mx = std::max(mx, x[k * s.d]);
              nan |= x[k * s.d] != x[k * s.d];
            }
            if (nan)
              mx = std::numeric_limits<T>::quiet_NaN();
            double sum = 0;
            for (int64_t k = 0; k < s.c; ++k)
              sum += std::exp(x[k * s.d] - mx);
            T shift = (T)((double)mx + std::log(sum));
            for (int64_t k = 0; k < s.c; ++k)
              y[k * s.d] = x[k * s.d] - shift;
          }
          lp = logProb;
        }
        int64_t cls = classOf(labels, l, s, op), local = inBlock(cls, s);
        double wl = cls < 0 ? 0.0 : (w ? (double)w[cls] : 1.0);
        // On a block, another rank's class adds nothing here but still
        // counts in the mean's denominator.
        double value = local < 0 ? 0.0 : -(double)lp[base + local * s.d] * wl;
        if (s.reduction == Reduction::None) {
          loss[l] = (T)value;
        } else {
          lineLoss[l] = value;
          lineW[l] = wl;
        }
      }
    });
    if (s.reduction == Reduction::None)
      return;
    double total = 0, totalW = 0;
    for (int64_t l = 0; l < lines; ++l) {
      total += lineLoss[l];
      totalW += lineW[l];
    }
    // Mean over zero total weight is 0/0 = NaN, as in ONNX and PyTorch.
    loss[0] = (T)(s.reduction == Reduction::Sum ? total : total / totalW);
  };
}

template <bool LogSoftmax> KernelFn lossFactory(KernelArgs &args) {
  const char *op = LogSoftmax ? "softmax_cross_entropy_loss" : "nll_loss";
  if (LogSoftmax && args.has("grid_shape"))
    args.fail(std::string(op) + ": a block of the classes is partitioned into "
              "log-softmax and nll_loss, not computed here");
  LossSetup s = lossForwardSetup(args, LogSoftmax, op);
  return dispatchLoss(s, [&](auto t, auto i) {
    return lossTyped<decltype(t), decltype(i), LogSoftmax>(args, s, op);
  });
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

/// Softmax: dscores = (exp(log_prob) - onehot) * w * dloss', the
/// gradient of softmax_cross_entropy_loss; otherwise dinput = -onehot * w *
/// dloss', the gradient of nll_loss. dloss' is dloss / total weight for
/// mean, dloss for sum, dloss[n, d] for none.
template <typename T, typename I, bool Softmax>
KernelFn lossGradTyped(KernelArgs &args, const LossSetup &s, const char *op) {
  // softmax_cross_entropy_loss_grad(dloss, log_prob, labels, weights?)
  // nll_loss_grad(dloss, target, weight?)
  const int li = Softmax ? 2 : 1;
  const T *dloss = args.in(0).as<T>();
  const T *logProb = Softmax ? args.in(1).as<T>() : nullptr;
  const I *labels = args.in(li).as<I>();
  const T *w = args.hasIn(li + 1) ? args.in(li + 1).as<T>() : nullptr;
  T *out = args.out(0).as<T>();
  int64_t lines = s.n * s.d;
  int threads = args.env.threads;
  int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(s.c, 1));
  return [=] {
    double scale = 0; // dloss' for sum and mean
    if (s.reduction == Reduction::Mean) {
      double totalW = 0;
      for (int64_t l = 0; l < lines; ++l) {
        int64_t cls = classOf(labels, l, s, op);
        if (cls >= 0)
          totalW += w ? (double)w[cls] : 1.0;
      }
      // With zero total weight every contribution has weight 0 (or is
      // ignored): the gradient is zero rather than 0 * inf.
      scale = totalW == 0 ? 0.0 : (double)dloss[0] / totalW;
    } else if (s.reduction == Reduction::Sum) {
      scale = (double)dloss[0];
    }
    parallelFor(threads, lines, grain, [&](int64_t l0, int64_t l1) {
      for (int64_t l = l0; l < l1; ++l) {
        int64_t nn = l / s.d, dd = l % s.d;
        int64_t base = nn * s.c * s.d + dd;
        T *o = out + base;
        int64_t cls = classOf(labels, l, s, op);
        double f = 0;
        if (cls >= 0) {
          double wl = w ? (double)w[cls] : 1.0;
          f = wl * (s.reduction == Reduction::None ? (double)dloss[l] : scale);
        }
        if (cls < 0 || f == 0) {
          for (int64_t k = 0; k < s.c; ++k)
            o[k * s.d] = T(0);
          continue;
        }
        T tf = (T)f;
        if constexpr (Softmax) {
          const T *lp = logProb + base;
          if (s.d == 1) {
            expShiftSum(lp, T(0), o, s.c);
            for (int64_t k = 0; k < s.c; ++k)
              o[k] *= tf;
          } else {
            for (int64_t k = 0; k < s.c; ++k)
              o[k * s.d] = std::exp(lp[k * s.d]) * tf;
          }
          if (int64_t local = inBlock(cls, s); local >= 0)
            o[local * s.d] = (T)(((double)std::exp(lp[local * s.d]) - 1.0) * f);
        } else {
          for (int64_t k = 0; k < s.c; ++k)
            o[k * s.d] = T(0);
          if (int64_t local = inBlock(cls, s); local >= 0)
            o[local * s.d] = -tf;
        }
      }
    });
  };
}

template <bool Softmax> KernelFn lossGradFactory(KernelArgs &args) {
  const char *op = Softmax ? "softmax_cross_entropy_loss_grad" : "nll_loss_grad";
  LossSetup s = lossGradSetup(args, Softmax, op);
  return dispatchLoss(s, [&](auto t, auto i) {
    return lossGradTyped<decltype(t), decltype(i), Softmax>(args, s, op);
  });
}

} // namespace

void registerLossKernels(KernelRegistry &r) {
  PX_ADD_LOSS_KERNELS(r);
}

} // namespace parallax::rt
