//===- OptimizerRules.h - what the CPU and CUDA optimizers share -*- C++ -*-===//
//
// The update rules' kinds and hyperparameters, the per-step scalars (on the
// host for the CPU, on the device for CUDA, where the step is read at run
// time), and the bind-time checks of sgd/momentum/adam/adagrad/assign with
// the weight-update shard a rank updates: one definition for both backends,
// so that they accept the same kernels with the same messages.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_KERNELS_OPTIMIZERRULES_H
#define PARALLAX_RUNTIME_KERNELS_OPTIMIZERRULES_H

#include "HostDevice.h"

#include "parallax/Runtime/Kernel.h"

#include <cmath>
#include <cstdint>
#include <optional>

namespace parallax::rt::opt {

enum class Kind { Sgd, Momentum, Adam, Adagrad };

const char *kindName(Kind k);
/// State tensors of a kind (velocity; m and v; sum).
int stateCount(Kind k);

/// Hyperparameters as read from the attributes (doubles).
struct Hyper {
  double lr = 0, wd = 0, momentum = 0, beta1 = 0, beta2 = 0, eps = 0;
  bool nesterov = false;
};

/// Per-step scalars in the element type, computed as torch does (in double,
/// then rounded once to T).
template <typename T> struct Scalars {
  T negLr, wd, mu, b1, omb1, b2, omb2, eps, bc2sqrt, negStep;
  bool hasWd, nesterov;
};

template <typename T>
PX_HD Scalars<T> scalarsFor(Kind kind, const Hyper &h, int64_t step, bool sparse) {
  Scalars<T> s{};
  s.negLr = T(-h.lr);
  s.wd = T(h.wd);
  s.hasWd = h.wd != 0.0;
  s.mu = T(h.momentum);
  s.nesterov = h.nesterov;
  s.eps = T(h.eps);
  if (kind == Kind::Adam) {
    s.b1 = T(h.beta1);
    s.omb1 = T(1.0 - h.beta1);
    s.b2 = T(h.beta2);
    s.omb2 = T(1.0 - h.beta2);
    double bc1 = 1.0 - pow(h.beta1, (double)step);
    double bc2 = 1.0 - pow(h.beta2, (double)step);
    s.bc2sqrt = T(sqrt(bc2));
    double stepSize = sparse ? h.lr * sqrt(bc2) / bc1 : h.lr / bc1;
    s.negStep = T(-stepSize);
  }
  return s;
}

/// An optimizer kernel's inputs and attributes, checked: whether its
/// gradient is sparse (indices, rows), and its hyperparameters.
struct OptimizerCheck {
  bool sparse = false;
  Hyper h;
};
OptimizerCheck checkOptimizer(const KernelArgs &args, Kind k);

/// Weight-update sharding: the gradient's all-reduce was only a
/// reduce-scatter, and this rank updates the elements that fall in its
/// block [r*S, (r+1)*S) of the bucket (the variable lies at byte
/// shard_offset of it); all_gather_variables distributes the rest. In
/// elements: the variable's [lo, hi), where that range's state starts (a
/// full-size state is indexed like the variable, a sharded one, one block,
/// by the element's place in block r), and where its gradient is relative
/// to the gradient input: the element's place in block r, which the
/// reduce-scatter left at the start of the bucket
/// (Comm::reduceScatterBlock), so r*S bytes before the variable's own
/// gradient, still inside the bucket. nullopt without shard_offset.
struct UpdateShard {
  int64_t lo = 0, hi = 0, state = 0, grad = 0;
};
std::optional<UpdateShard> updateShard(KernelArgs &args, bool sparse);

/// assign's inputs (variable, value), checked.
void checkAssign(const KernelArgs &args);

/// The memory an update of kind K touches, read at bind time: the variable
/// and its states (offset to this rank's shard when the update is sharded)
/// and a dense gradient of n elements, or a sparse one: nIdx indices into
/// the variable's `varRows` rows of rowSize elements.
template <typename T> struct UpdateOperands {
  T *w = nullptr, *s0 = nullptr, *s1 = nullptr;
  bool sparse = false;
  /// A shard with no elements: nothing to do.
  bool empty = false;
  const T *g = nullptr;
  int64_t n = 0;
  const int64_t *idx = nullptr;
  const T *rows = nullptr;
  int64_t nIdx = 0, varRows = 0, rowSize = 1;
};

template <typename T>
UpdateOperands<T> readUpdate(KernelArgs &args, Kind k, bool sparse) {
  UpdateOperands<T> o;
  const TensorView &var = args.in(0);
  int ns = stateCount(k);
  o.w = var.as<T>();
  o.s0 = ns > 0 ? args.in(1).as<T>() : nullptr;
  o.s1 = ns > 1 ? args.in(2).as<T>() : nullptr;
  size_t gi = 1 + ns;
  if (std::optional<UpdateShard> u = updateShard(args, sparse)) {
    if (u->hi <= u->lo) {
      o.empty = true;
      return o;
    }
    o.w += u->lo;
    o.s0 = o.s0 ? o.s0 + u->state : nullptr;
    o.s1 = o.s1 ? o.s1 + u->state : nullptr;
    o.g = args.in(gi).as<T>() + u->grad;
    o.n = u->hi - u->lo;
    return o;
  }
  o.sparse = sparse;
  if (!sparse) {
    o.g = args.in(gi).as<T>();
    o.n = var.numElements();
    return o;
  }
  const TensorView &idx = args.in(gi), &rows = args.in(gi + 1);
  for (size_t i = 1; i < var.shape.size(); ++i)
    o.rowSize *= var.shape[i];
  o.idx = idx.as<int64_t>();
  o.rows = rows.as<T>();
  o.nIdx = idx.numElements();
  o.varRows = var.dim(0);
  return o;
}

} // namespace parallax::rt::opt

/// Registers a backend's optimizer kernels into REGISTRY: sgd, momentum,
/// adam and adagrad from the factory template optimizerFactory<Kind> and
/// assign from assignFactory, of the file that expands it.
#define PX_ADD_OPTIMIZER_KERNELS(REGISTRY)                                     \
  do {                                                                         \
    using ::parallax::rt::opt::Kind;                                           \
    (REGISTRY).add("sgd", optimizerFactory<Kind::Sgd>);                        \
    (REGISTRY).add("momentum", optimizerFactory<Kind::Momentum>);              \
    (REGISTRY).add("adam", optimizerFactory<Kind::Adam>);                      \
    (REGISTRY).add("adagrad", optimizerFactory<Kind::Adagrad>);                \
    (REGISTRY).add("assign", assignFactory);                                   \
  } while (false)

#endif // PARALLAX_RUNTIME_KERNELS_OPTIMIZERRULES_H
