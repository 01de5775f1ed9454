//===- NormLayout.h - what a Norm family kernel reads -----------*- C++ -*-===//
//
// The bind-time reading and checking of the Norm family's tensors and
// attributes (softmax and log_softmax along an axis, layer_norm, batch_norm
// and their gradients): the shapes, parameter broadcast maps and attributes
// the CPU kernels (Norm.cpp) and the CUDA kernels (Cuda/Kernels/Norm.cu) both
// start from, with the same messages.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_KERNELS_NORMLAYOUT_H
#define PARALLAX_RUNTIME_KERNELS_NORMLAYOUT_H

#include "KernelUtil.h"

#include <cstdint>
#include <string>
#include <vector>

namespace parallax::rt::norm {

using detail::normalizeAxis;
using detail::product;
using detail::shapeStr;

/// Fails unless `dt` is f32 or f64.
inline void checkFloat(const KernelArgs &args, DType dt,
                       const std::string &op) {
  if (dt != DType::F32 && dt != DType::F64)
    args.fail(op + ": element type " + nameOf(dt) +
              " is not supported by the CPU runtime");
}

/// Fails unless `t` has the element type and shape of `like`.
inline void expectLike(const KernelArgs &args, const TensorView &t,
                       const TensorView &like, const std::string &op,
                       const char *what, const char *likeName) {
  if (t.dtype != like.dtype || t.shape != like.shape)
    args.fail(op + ": " + what + " must be " + nameOf(like.dtype) + " " +
              shapeStr(like.shape) + " like " + likeName + ", got " +
              nameOf(t.dtype) + " " + shapeStr(t.shape));
}

/// Fails unless `t` is `dt` `shape`.
inline void expectShape(const KernelArgs &args, const TensorView &t, DType dt,
                        const std::vector<int64_t> &shape,
                        const std::string &op, const char *what) {
  if (t.dtype != dt || t.shape != shape)
    args.fail(op + ": " + what + " must be " + nameOf(dt) + " " +
              shapeStr(shape) + ", got " + nameOf(t.dtype) + " " +
              shapeStr(t.shape));
}

/// f(T{}) for the C++ type T of `dt`, which must be f32 or f64.
template <typename F>
KernelFn dispatchNormFloat(const KernelArgs &args, DType dt,
                           const std::string &op, F &&f) {
  checkFloat(args, dt, op);
  if (dt == DType::F32)
    return f(float{});
  return f(double{});
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax and their gradients
//===----------------------------------------------------------------------===//

enum class AxisKind { Softmax, LogSoftmax, SoftmaxGrad, LogSoftmaxGrad };

/// The kernel's inputs and result checked; returns the non-negative axis.
inline int64_t axisOf(const KernelArgs &args, AxisKind k) {
  static const char *names[] = {"softmax", "log_softmax", "softmax_grad",
                                "log_softmax_grad"};
  std::string op = names[(int)k];
  const TensorView &in0 = args.in(0), &out = args.out(0);
  checkFloat(args, in0.dtype, op);
  if (k == AxisKind::SoftmaxGrad || k == AxisKind::LogSoftmaxGrad)
    expectLike(args, args.in(1), in0, op, "dy", "y");
  expectLike(args, out, in0, op, "the result", "the input");
  return normalizeAxis(args, args.i64Or("axis", -1), in0.rank(), op);
}

//===----------------------------------------------------------------------===//
// layer_norm and layer_norm_grad
//===----------------------------------------------------------------------===//

/// For a parameter (scale, bias) broadcast to the normalised shape: empty
/// when it already has one element per normalised element, else the
/// parameter's flat index for each normalised flat index.
inline std::vector<int64_t> broadcastMap(const KernelArgs &args,
                                         const TensorView &p,
                                         const std::vector<int64_t> &normalized,
                                         const std::string &op,
                                         const char *name) {
  int64_t pr = p.rank(), nr = (int64_t)normalized.size();
  bool ok = pr <= nr;
  for (int64_t d = 0; ok && d < pr; ++d) {
    int64_t pd = p.dim(pr - 1 - d), nd = normalized[nr - 1 - d];
    ok = pd == nd || pd == 1;
  }
  if (!ok)
    args.fail(op + ": " + name + " of shape " + shapeStr(p.shape) +
              " does not broadcast to the normalised shape " +
              shapeStr(normalized));
  int64_t len = product(normalized, 0, normalized.size());
  if (p.numElements() == len)
    return {};
  // Strides of p aligned to the normalised dims (0 where broadcast).
  std::vector<int64_t> ps = stridesOf(p.shape), str(nr, 0);
  for (int64_t d = 0; d < pr; ++d)
    if (p.dim(d) != 1)
      str[nr - pr + d] = ps[d];
  std::vector<int64_t> map(len);
  std::vector<int64_t> idx(nr, 0);
  for (int64_t j = 0; j < len; ++j) {
    int64_t off = 0;
    for (int64_t d = 0; d < nr; ++d)
      off += idx[d] * str[d];
    map[j] = off;
    for (int64_t d = nr; d-- > 0;) {
      if (++idx[d] < normalized[d])
        break;
      idx[d] = 0;
    }
  }
  return map;
}

/// x viewed as [rows, len] with len the normalised elements (from "axis"),
/// and the shape of the per-row statistics (mean, inv_std_dev).
struct LayerNormShape {
  int64_t axis, rows, len;
  std::vector<int64_t> normalized, stats;
};

inline LayerNormShape layerNormShape(const KernelArgs &args,
                                     const TensorView &x,
                                     const std::string &op) {
  LayerNormShape s;
  s.axis = normalizeAxis(args, args.i64Or("axis", -1), x.rank(), op);
  s.rows = product(x.shape, 0, s.axis);
  s.len = product(x.shape, s.axis, x.shape.size());
  s.normalized.assign(x.shape.begin() + s.axis, x.shape.end());
  s.stats = x.shape;
  for (size_t d = s.axis; d < s.stats.size(); ++d)
    s.stats[d] = 1;
  return s;
}

/// layer_norm(x, scale, bias?) -> (y, mean, inv_std_dev), checked.
struct LayerNormLayout {
  LayerNormShape shape;
  /// broadcastMap of scale and (when hasBias) bias.
  std::vector<int64_t> scaleMap, biasMap;
  bool hasBias = false;
  double eps = 1e-5;
};

inline LayerNormLayout layerNormLayout(const KernelArgs &args) {
  const std::string op = "layer_norm";
  const TensorView &x = args.in(0);
  LayerNormLayout l;
  l.shape = layerNormShape(args, x, op);
  expectShape(args, args.in(1), x.dtype, args.in(1).shape, op, "scale");
  l.scaleMap = broadcastMap(args, args.in(1), l.shape.normalized, op, "scale");
  l.hasBias = args.hasIn(2);
  if (l.hasBias) {
    expectShape(args, args.in(2), x.dtype, args.in(2).shape, op, "bias");
    l.biasMap = broadcastMap(args, args.in(2), l.shape.normalized, op, "bias");
  }
  expectShape(args, args.out(0), x.dtype, x.shape, op, "y");
  expectShape(args, args.out(1), x.dtype, l.shape.stats, op, "mean");
  expectShape(args, args.out(2), x.dtype, l.shape.stats, op, "inv_std_dev");
  l.eps = args.f64Or("epsilon", 1e-5);
  return l;
}

/// layer_norm_grad(dy, x, scale, mean, inv_std_dev) -> (dx, dscale, dbias),
/// checked.
struct LayerNormGradLayout {
  LayerNormShape shape;
  /// broadcastMap of scale.
  std::vector<int64_t> scaleMap;
  int64_t nScale = 0;
};

inline LayerNormGradLayout layerNormGradLayout(const KernelArgs &args) {
  const std::string op = "layer_norm_grad";
  const TensorView &dy = args.in(0), &x = args.in(1), &scaleT = args.in(2);
  LayerNormGradLayout l;
  l.shape = layerNormShape(args, x, op);
  expectLike(args, dy, x, op, "dy", "x");
  expectShape(args, scaleT, x.dtype, scaleT.shape, op, "scale");
  l.scaleMap = broadcastMap(args, scaleT, l.shape.normalized, op, "scale");
  expectShape(args, args.in(3), x.dtype, l.shape.stats, op, "mean");
  expectShape(args, args.in(4), x.dtype, l.shape.stats, op, "inv_std_dev");
  expectShape(args, args.out(0), x.dtype, x.shape, op, "dx");
  expectShape(args, args.out(1), x.dtype, scaleT.shape, op, "dscale");
  expectShape(args, args.out(2), x.dtype, scaleT.shape, op, "dbias");
  l.nScale = scaleT.numElements();
  return l;
}

//===----------------------------------------------------------------------===//
// batch_norm and batch_norm_grad
//===----------------------------------------------------------------------===//

/// x viewed as [N, C, spatial].
struct BatchShape {
  int64_t n, c, spatial;
};

inline BatchShape batchShape(const KernelArgs &args, const TensorView &x,
                             const std::string &op) {
  if (x.rank() < 2)
    args.fail(op + ": x must be [N, C, ...], got " + shapeStr(x.shape));
  return {x.dim(0), x.dim(1), product(x.shape, 2, x.shape.size())};
}

/// batch_norm(x, scale, bias, input_mean, input_var) -> (y, running_mean,
/// running_var), checked.
struct BatchNormLayout {
  BatchShape shape;
  double eps = 1e-5, momentum = 0.9;
  bool training = false;
};

inline BatchNormLayout batchNormLayout(const KernelArgs &args) {
  const std::string op = "batch_norm";
  const TensorView &x = args.in(0);
  BatchNormLayout l;
  BatchShape &s = l.shape;
  s = batchShape(args, x, op);
  std::vector<int64_t> cs{s.c};
  const char *names[] = {"scale", "bias", "input_mean", "input_var"};
  for (int i = 1; i <= 4; ++i)
    expectShape(args, args.in(i), x.dtype, cs, op, names[i - 1]);
  expectShape(args, args.out(0), x.dtype, x.shape, op, "y");
  expectShape(args, args.out(1), x.dtype, cs, op, "running_mean");
  expectShape(args, args.out(2), x.dtype, cs, op, "running_var");
  l.eps = args.f64Or("epsilon", 1e-5);
  l.momentum = args.f64Or("momentum", 0.9);
  l.training = args.flag("training");
  if (l.training && s.n * s.spatial == 0 && s.c > 0)
    args.fail(op + ": training needs at least one value per channel, x is " +
              shapeStr(x.shape));
  return l;
}

/// The running variance's factor: n / (n - 1) for the unbiased variance
/// (PyTorch, "unbiased_running_var"), with `total` values per channel in the
/// whole (synchronized) batch; 1 otherwise.
inline double runningVarFactor(const KernelArgs &args, const BatchNormLayout &l,
                               double total) {
  if (!l.training || !args.flag("unbiased_running_var"))
    return 1.0;
  if (total < 2)
    args.fail(std::string("batch_norm") +
              ": the unbiased running variance needs more than 1 value per "
              "channel in the batch, x is " +
              shapeStr(args.in(0).shape));
  return total / (total - 1);
}

/// batch_norm_grad(dy, x, scale) -> (dx, dscale, dbias), checked; returns
/// x's shape. "epsilon" is read by the caller.
inline BatchShape batchNormGradShape(const KernelArgs &args) {
  const std::string op = "batch_norm_grad";
  const TensorView &dy = args.in(0), &x = args.in(1);
  BatchShape s = batchShape(args, x, op);
  std::vector<int64_t> cs{s.c};
  expectLike(args, dy, x, op, "dy", "x");
  expectShape(args, args.in(2), x.dtype, cs, op, "scale");
  expectShape(args, args.out(0), x.dtype, x.shape, op, "dx");
  expectShape(args, args.out(1), x.dtype, cs, op, "dscale");
  expectShape(args, args.out(2), x.dtype, cs, op, "dbias");
  if (s.n * s.spatial == 0 && s.c > 0)
    args.fail(op + ": needs at least one value per channel, x is " +
              shapeStr(x.shape));
  return s;
}

} // namespace parallax::rt::norm

/// Registers a backend's Norm kernels into REGISTRY from the factories
/// axisFactory<AxisKind>, layerNormFactory, layerNormGradFactory,
/// batchNormFactory and batchNormGradFactory of the file that expands it.
#define PX_ADD_NORM_KERNELS(REGISTRY)                                          \
  do {                                                                         \
    using ::parallax::rt::norm::AxisKind;                                      \
    (REGISTRY).add("softmax", axisFactory<AxisKind::Softmax>);                 \
    (REGISTRY).add("log_softmax", axisFactory<AxisKind::LogSoftmax>);          \
    (REGISTRY).add("softmax_grad", axisFactory<AxisKind::SoftmaxGrad>);        \
    (REGISTRY).add("log_softmax_grad", axisFactory<AxisKind::LogSoftmaxGrad>); \
    (REGISTRY).add("layer_norm", layerNormFactory);                            \
    (REGISTRY).add("layer_norm_grad", layerNormGradFactory);                   \
    (REGISTRY).add("batch_norm", batchNormFactory);                            \
    (REGISTRY).add("batch_norm_grad", batchNormGradFactory);                   \
  } while (false)

#endif // PARALLAX_RUNTIME_KERNELS_NORMLAYOUT_H
