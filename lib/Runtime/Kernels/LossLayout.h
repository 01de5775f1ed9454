//===- LossLayout.h - what a loss kernel reads and checks -------*- C++ -*-===//
//
// The bind-time reading and checking of softmax_cross_entropy_loss, nll_loss
// and their gradients: scores viewed as [N, C, D] with D the product of the
// trailing dims, labels as [N, D], the reduction and ignore_index, checked
// against the kernel's tensors. The CPU kernels (Loss.cpp) and the CUDA
// kernels (Cuda/Kernels/Loss.cu) both start from it, with the same messages.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_KERNELS_LOSSLAYOUT_H
#define PARALLAX_RUNTIME_KERNELS_LOSSLAYOUT_H

#include "KernelUtil.h"

#include <cstdint>
#include <string>
#include <vector>

namespace parallax::rt::loss {

using detail::shapeStr;

enum class Reduction { None, Sum, Mean };

/// What the factories of all four kernels check and precompute.
struct LossSetup {
  int64_t n = 0, c = 0, d = 1;
  Reduction reduction = Reduction::Mean;
  bool hasIgnore = false;
  int64_t ignoreIndex = 0;
  /// A block of the classes (`grid_shape`: nll_loss and the softmax cross
  /// entropy's gradient of a vocabulary-parallel loss): the whole tensor's
  /// class count and this block's first class. c is the block's.
  int64_t wholeC = 0, classOffset = 0;
  /// The classes a label may name: wholeC, or the real ones of padded
  /// scores (a padded vocabulary: the plan's "classes").
  int64_t labelRange = 0;
  std::vector<int64_t> labelShape; ///< [N, D...]: also the "none" loss shape
  DType labelType = DType::I64;
  DType floatType = DType::F32;
};

/// `scores` is the [N, C, D...] tensor (scores, log_prob, input or dinput);
/// `labels` the [N, D...] one; `weights` optional, [C].
inline LossSetup lossSetup(const KernelArgs &args, const TensorView &scores,
                           const TensorView &labels, const TensorView *weights,
                           const std::string &op) {
  LossSetup s;
  std::string red = args.strOr("reduction", "mean");
  if (red == "none")
    s.reduction = Reduction::None;
  else if (red == "sum")
    s.reduction = Reduction::Sum;
  else if (red == "mean")
    s.reduction = Reduction::Mean;
  else
    args.fail(op + ": reduction must be none, sum or mean, got '" + red + "'");
  if (args.has("ignore_index")) {
    s.hasIgnore = true;
    s.ignoreIndex = args.i64("ignore_index");
  }
  if (scores.dtype != DType::F32 && scores.dtype != DType::F64)
    args.fail(op + ": element type " + nameOf(scores.dtype) +
              " is not supported by the CPU runtime");
  s.floatType = scores.dtype;
  if (scores.rank() < 2)
    args.fail(op + ": scores must have rank >= 2 ([N, C, ...]), got " +
              shapeStr(scores.shape));
  s.n = scores.dim(0);
  s.c = s.wholeC = scores.dim(1);
  if (args.has("grid_shape")) {
    if (weights)
      args.fail(op + ": a block of the classes takes no class weights");
    const detail::BlockPlace place = detail::blockPlaceOf(args, op.c_str());
    s.classOffset = place.index * s.c;
    s.wholeC = s.c * place.count;
  }
  s.labelRange = s.wholeC;
  if (args.has("classes")) {
    s.labelRange = args.i64("classes");
    if (s.labelRange < 1 || s.labelRange > s.wholeC)
      args.fail(op + ": classes " + std::to_string(s.labelRange) + " of scores of " +
                std::to_string(s.wholeC));
  }
  s.labelShape = {s.n};
  for (int64_t i = 2; i < scores.rank(); ++i) {
    s.labelShape.push_back(scores.dim(i));
    s.d *= scores.dim(i);
  }
  if (labels.dtype != DType::I64 && labels.dtype != DType::I32)
    args.fail(op + ": labels must be i32 or i64, got " + nameOf(labels.dtype));
  s.labelType = labels.dtype;
  if (labels.shape != s.labelShape)
    args.fail(op + ": labels must have shape " + shapeStr(s.labelShape) +
              " for scores " + shapeStr(scores.shape) + ", got " +
              shapeStr(labels.shape));
  if (weights && (weights->dtype != scores.dtype ||
                  weights->shape != std::vector<int64_t>{s.c}))
    args.fail(op + ": weights must be " + nameOf(scores.dtype) + " [" +
              std::to_string(s.c) + "], got " + nameOf(weights->dtype) + " " +
              shapeStr(weights->shape));
  return s;
}

/// The loss's (or dloss's) shape for the reduction.
inline void checkLossShape(const KernelArgs &args, const LossSetup &s,
                           const TensorView &loss, const std::string &op,
                           const char *what) {
  std::vector<int64_t> expected =
      s.reduction == Reduction::None ? s.labelShape : std::vector<int64_t>{};
  if (loss.dtype != s.floatType || loss.shape != expected)
    args.fail(op + ": " + what + " must be " + nameOf(s.floatType) + " " +
              shapeStr(expected) + ", got " + nameOf(loss.dtype) + " " +
              shapeStr(loss.shape));
}

/// Fails unless `t` (named `what`) has the element type and shape of
/// `scores`.
inline void expectLikeScores(const KernelArgs &args, const TensorView &t,
                             const TensorView &scores, const std::string &op,
                             const char *what) {
  if (t.dtype != scores.dtype || t.shape != scores.shape)
    args.fail(op + ": " + what + " must be " + nameOf(scores.dtype) + " " +
              shapeStr(scores.shape) + ", got " + nameOf(t.dtype) + " " +
              shapeStr(t.shape));
}

/// softmax_cross_entropy_loss(scores, labels, weights?) -> (loss, log_prob)
/// (LogSoftmax) or nll_loss(input, target, weight?) -> loss, checked.
inline LossSetup lossForwardSetup(const KernelArgs &args, bool logSoftmax,
                                  const std::string &op) {
  const TensorView &scores = args.in(0), &labels = args.in(1);
  const TensorView *weights = args.hasIn(2) ? &args.in(2) : nullptr;
  LossSetup s = lossSetup(args, scores, labels, weights, op);
  checkLossShape(args, s, args.out(0), op, "loss");
  if (logSoftmax)
    expectLikeScores(args, args.out(1), scores, op, "log_prob");
  return s;
}

/// softmax_cross_entropy_loss_grad(dloss, log_prob, labels, weights?)
/// (Softmax) or nll_loss_grad(dloss, target, weight?) -> the scores'
/// gradient, checked.
inline LossSetup lossGradSetup(const KernelArgs &args, bool softmax,
                               const std::string &op) {
  const int li = softmax ? 2 : 1;
  const TensorView &dloss = args.in(0), &labels = args.in(li);
  const TensorView &scores = softmax ? args.in(1) : args.out(0);
  const TensorView *weights = args.hasIn(li + 1) ? &args.in(li + 1) : nullptr;
  LossSetup s = lossSetup(args, scores, labels, weights, op);
  checkLossShape(args, s, dloss, op, "dloss");
  expectLikeScores(args, args.out(0), scores, op, "the result");
  return s;
}

/// f(T{}, I{}) for the setup's float type T and label type I.
template <typename F> KernelFn dispatchLoss(const LossSetup &s, F &&f) {
  bool i64 = s.labelType == DType::I64;
  if (s.floatType == DType::F32)
    return i64 ? f(float{}, int64_t{}) : f(float{}, int32_t{});
  return i64 ? f(double{}, int64_t{}) : f(double{}, int32_t{});
}

} // namespace parallax::rt::loss

/// Registers a backend's loss kernels into REGISTRY from the factory
/// templates lossFactory<LogSoftmax> and lossGradFactory<Softmax> of the
/// file that expands it.
#define PX_ADD_LOSS_KERNELS(REGISTRY)                                          \
  do {                                                                         \
    (REGISTRY).add("softmax_cross_entropy_loss", lossFactory<true>);           \
    (REGISTRY).add("nll_loss", lossFactory<false>);                            \
    (REGISTRY).add("softmax_cross_entropy_loss_grad", lossGradFactory<true>);  \
    (REGISTRY).add("nll_loss_grad", lossGradFactory<false>);                   \
  } while (false)

#endif // PARALLAX_RUNTIME_KERNELS_LOSSLAYOUT_H
