//===- ElementwiseLayout.h - checks of the element-wise kernels -*- C++ -*-===//
//
// The bind-time reading and checking of the Elementwise family's kernels
// (binary ops, where, unary ops, clip, cast, dropout): operand and result
// types and shapes, attributes, the broadcast Geometry, and the choice of
// each op's element functor. The CPU kernels (Elementwise.cpp) and the CUDA
// ones (Cuda/Kernels/Elementwise.cu) both start from these, so that they
// accept the same operands with the same messages.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_KERNELS_ELEMENTWISELAYOUT_H
#define PARALLAX_RUNTIME_KERNELS_ELEMENTWISELAYOUT_H

#include "BroadcastGeometry.h"
#include "ElementwiseMath.h"
#include "KernelUtil.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

namespace parallax::rt::ew {

/// f(T{}) for element type `t`: bool (BoolT) or any numeric type.
template <typename F>
KernelFn dispatchAny(const KernelArgs &args, DType t, const std::string &what,
                     F &&f) {
  if (t == DType::Bool)
    return f(BoolT{});
  return detail::dispatchNumeric(args, t, what, std::forward<F>(f));
}

inline void checkSameShape(const KernelArgs &args, const std::string &what,
                           const TensorView &in, const TensorView &out) {
  if (in.shape != out.shape)
    args.fail(what + ": the result shape " + detail::shapeStr(out.shape) +
              " differs from the input shape " + detail::shapeStr(in.shape));
}

//===----------------------------------------------------------------------===//
// Binary operations and where.
//===----------------------------------------------------------------------===//

enum class Bin { Add, Sub, Mul, Div, Max, Min };
enum class Cmp { Equal, Less, Greater };

/// The arithmetic and comparison ops (both backends register these).
inline constexpr std::pair<const char *, Bin> kArithOps[] = {
    {"add", Bin::Add}, {"sub", Bin::Sub}, {"mul", Bin::Mul},
    {"div", Bin::Div}, {"max", Bin::Max}, {"min", Bin::Min}};
inline constexpr std::pair<const char *, Cmp> kCompareOps[] = {
    {"equal", Cmp::Equal}, {"less", Cmp::Less}, {"greater", Cmp::Greater}};

/// Checks a binary op in(0), in(1) -> out(0): with `sameTypes` the operands
/// share one element type; the result has element type `result`. Returns
/// the broadcast (the result's shape must be the operands' broadcast).
inline Geometry binaryGeometry(const KernelArgs &args, const std::string &name,
                               DType result, bool sameTypes = true) {
  const TensorView &a = args.in(0), &b = args.in(1), &o = args.out(0);
  if (sameTypes && a.dtype != b.dtype)
    args.fail(name + ": operand element types differ (" + nameOf(a.dtype) + " and " +
              nameOf(b.dtype) + ")");
  args.expectDType(o, result, (name + " result").c_str());
  return broadcastGeometry(args, name, o.shape, {&a.shape, &b.shape}, true);
}

/// f(op) with the element functor of arithmetic `kind`; `div` is the
/// backend's division (which reports integer division by zero).
template <typename DivOp, typename F>
KernelFn withArithOp(const KernelArgs &args, const std::string &name, Bin kind,
                     DivOp div, F &&f) {
  switch (kind) {
  case Bin::Add: return f(Add{});
  case Bin::Sub: return f(Sub{});
  case Bin::Mul: return f(Mul{});
  case Bin::Div: return f(div);
  case Bin::Max: return f(Max{});
  case Bin::Min: return f(Min{});
  }
  args.fail(name + ": unknown operation");
}

/// f(op) with the element functor of comparison `kind`.
template <typename F>
KernelFn withCompareOp(const KernelArgs &args, const std::string &name, Cmp kind,
                       F &&f) {
  switch (kind) {
  case Cmp::Equal: return f(Equal{});
  case Cmp::Less: return f(Less{});
  case Cmp::Greater: return f(Greater{});
  }
  args.fail(name + ": unknown comparison");
}

/// Checks that i1 operands of comparison `kind` are only compared for
/// equality.
inline void checkBoolCompare(const KernelArgs &args, const std::string &name, Cmp kind) {
  if (kind != Cmp::Equal)
    args.fail(name + ": i1 operands are not ordered (expects a numeric type)");
}

/// Checks where(condition, x, y) -> out and broadcasts its operands.
inline Geometry whereGeometry(const KernelArgs &args) {
  const TensorView &c = args.in(0), &x = args.in(1), &y = args.in(2), &o = args.out(0);
  args.expectDType(c, DType::Bool, "where condition");
  if (x.dtype != y.dtype)
    args.fail(std::string("where: x and y element types differ (") + nameOf(x.dtype) +
              " and " + nameOf(y.dtype) + ")");
  args.expectDType(o, x.dtype, "where result");
  if (x.dtype == DType::F16 || x.dtype == DType::BF16)
    detail::failType(args, "where", x.dtype, "");
  return broadcastGeometry(args, "where", o.shape, {&c.shape, &x.shape, &y.shape}, true);
}

/// f(U{}) for the unsigned type U of where's element size.
template <typename F> KernelFn withWhereUnit(const KernelArgs &args, F &&f) {
  switch (sizeOf(args.in(1).dtype)) {
  case 1: return f(uint8_t{});
  case 2: return f(uint16_t{});
  case 4: return f(uint32_t{});
  case 8: return f(uint64_t{});
  default: args.fail("where: unsupported element size");
  }
}

//===----------------------------------------------------------------------===//
// Unary operations.
//===----------------------------------------------------------------------===//

/// A unary op of forEachUnaryOp: its element functor, and whether it takes
/// floats only (else any numeric type).
template <typename Op, bool FloatOnly> struct UnaryOp {
  using type = Op;
  static constexpr bool floatOnly = FloatOnly;
};

/// f(UnaryOp<Functor, floatOnly>{}, name, costly) for every plain unary op
/// (one element type and shape in and out); `costly`: a transcendental
/// function, many times an addition's work per element.
template <typename F> void forEachUnaryOp(F &&f) {
  f(UnaryOp<Neg, false>{}, "neg", false);
  f(UnaryOp<Abs, false>{}, "abs", false);
  f(UnaryOp<Relu, false>{}, "relu", false);
  f(UnaryOp<Sqrt, true>{}, "sqrt", false);
  f(UnaryOp<Reciprocal, true>{}, "reciprocal", false);
  f(UnaryOp<Exp, true>{}, "exp", true);
  f(UnaryOp<Log, true>{}, "log", true);
  f(UnaryOp<Tanh, true>{}, "tanh", true);
  f(UnaryOp<Sigmoid, true>{}, "sigmoid", true);
  f(UnaryOp<Erf, true>{}, "erf", true);
  f(UnaryOp<Sin, true>{}, "sin", true);
  f(UnaryOp<Cos, true>{}, "cos", true);
  f(UnaryOp<Tan, true>{}, "tan", true);
  f(UnaryOp<Asin, true>{}, "asin", true);
  f(UnaryOp<Acos, true>{}, "acos", true);
  f(UnaryOp<Atan, true>{}, "atan", true);
  f(UnaryOp<Sinh, true>{}, "sinh", true);
  f(UnaryOp<Cosh, true>{}, "cosh", true);
  f(UnaryOp<Asinh, true>{}, "asinh", true);
  f(UnaryOp<Acosh, true>{}, "acosh", true);
  f(UnaryOp<Atanh, true>{}, "atanh", true);
  f(UnaryOp<Floor, true>{}, "floor", false);
  f(UnaryOp<Ceil, true>{}, "ceil", false);
  f(UnaryOp<Round, true>{}, "round", false);
  f(UnaryOp<Sign, false>{}, "sign", false);
}

/// Checks a unary op in(0) -> out(0) of one element type and shape.
inline void checkUnary(const KernelArgs &args, const std::string &name) {
  const TensorView &x = args.in(0), &y = args.out(0);
  args.expectDType(y, x.dtype, (name + " result").c_str());
  checkSameShape(args, name, x, y);
}

/// Checks leaky_relu and reads its alpha.
inline double leakyReluAlpha(const KernelArgs &args) {
  checkUnary(args, "leaky_relu");
  // The ODS default is the f32 value 0.01.
  return args.f64Or("alpha", (double)0.01f);
}

/// clip's bounds as given (either may be absent).
struct ClipBounds {
  bool hasMin = false, hasMax = false;
  double min = 0, max = 0;

  /// The functor for element type T: an absent bound is the type's limit;
  /// an integer x satisfies x >= min iff x >= ceil(min).
  template <typename T> Clip<T> clipOf() const {
    T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    if constexpr (std::is_floating_point_v<T>) {
      lo = -std::numeric_limits<T>::infinity();
      hi = std::numeric_limits<T>::infinity();
      if (hasMin)
        lo = (T)min;
      if (hasMax)
        hi = (T)max;
    } else {
      if (hasMin)
        lo = saturatingCast<T>(std::ceil(min));
      if (hasMax)
        hi = saturatingCast<T>(std::floor(max));
    }
    return Clip<T>{lo, hi};
  }
};

/// Checks clip and reads its bounds.
inline ClipBounds clipBounds(const KernelArgs &args) {
  checkUnary(args, "clip");
  ClipBounds c;
  c.hasMin = args.has("min"), c.hasMax = args.has("max");
  c.min = c.hasMin ? args.f64("min") : 0.0, c.max = c.hasMax ? args.f64("max") : 0.0;
  if ((c.hasMin && std::isnan(c.min)) || (c.hasMax && std::isnan(c.max)))
    args.fail("clip: a NaN bound");
  return c;
}

/// Checks not (i1 -> i1).
inline void checkNot(const KernelArgs &args) {
  const TensorView &x = args.in(0), &y = args.out(0);
  args.expectDType(x, DType::Bool, "not input");
  args.expectDType(y, DType::Bool, "not result");
  checkSameShape(args, "not", x, y);
}

/// Checks cast; returns whether it is a plain copy (one element type that
/// the copy serves).
inline bool castCopies(const KernelArgs &args) {
  const TensorView &x = args.in(0), &y = args.out(0);
  checkSameShape(args, "cast", x, y);
  return x.dtype == y.dtype && x.dtype != DType::F16 && x.dtype != DType::BF16;
}

//===----------------------------------------------------------------------===//
// dropout and dropout_grad (Elementwise.cpp documents the mask formula).
//===----------------------------------------------------------------------===//

inline double checkedRatio(const KernelArgs &args, const char *what) {
  double ratio = args.f64("ratio");
  if (!(ratio >= 0.0 && ratio <= 1.0))
    args.fail(std::string(what) + ": ratio must be in [0, 1], got " +
              std::to_string(ratio));
  return ratio;
}

/// dropout(x) -> (y, mask) as bound: its attributes and the run structure
/// of this rank's samples.
struct DropoutLayout {
  double ratio = 0;
  uint64_t seedAttr = 0, stream = 0;
  /// Elements, elements per sample (M), elements of one run of this rank's
  /// samples (the whole tensor when the samples are the outermost
  /// dimension). perSample and run count the elements of the whole tensor
  /// when this is a block of a model split.
  int64_t n = 0, perSample = 0, run = 0;
  /// A block of a model split (`split_dim`, `grid_axes`): see
  /// dropoutWholeIndex; blockRun 0 otherwise.
  int64_t blockRun = 0, wholeRun = 0, blockOffset = 0;
};

inline DropoutLayout dropoutLayout(const KernelArgs &args) {
  const TensorView &x = args.in(0), &y = args.out(0), &m = args.out(1);
  DropoutLayout l;
  l.ratio = checkedRatio(args, "dropout");
  l.seedAttr = (uint64_t)args.i64Or("seed", 0);
  l.stream = (uint64_t)args.i64Or("stream", 0);
  args.expectDType(y, x.dtype, "dropout output");
  args.expectDType(m, DType::Bool, "dropout mask");
  checkSameShape(args, "dropout", x, y);
  checkSameShape(args, "dropout mask", x, m);
  l.n = x.numElements();
  // The whole tensor's element count and first dimension (a block's grow
  // by the ranks its split dimension spans).
  int64_t n = l.n, dim0 = x.rank() ? x.shape[0] : 1;
  if (args.has("split_dim")) {
    const int64_t d = args.i64Or("split_dim", 0);
    if (d < 0 || d >= x.rank())
      args.fail("dropout: split_dim " + std::to_string(d) + " is not a dimension of its " +
                std::to_string(x.rank()) + "-d input");
    const detail::BlockPlace place = detail::blockPlaceOf(args, "dropout");
    const int64_t parts = place.count;
    l.blockRun = x.shape[d] * detail::product(x.shape, (size_t)d + 1, x.shape.size());
    l.wholeRun = l.blockRun * parts;
    l.blockOffset = place.index * l.blockRun;
    n *= parts;
    if (d == 0)
      dim0 *= parts;
  }
  const int64_t perSample =
      args.has("sample_stride") ? args.i64Or("sample_stride", 0) : dim0 > 0 ? n / dim0 : 0;
  if (perSample < 0)
    args.fail("dropout: sample_stride must be >= 0");
  const int64_t localBatch = args.env.globalBatch / std::max(args.env.dataRanks, 1);
  l.perSample = perSample;
  l.run = args.has("sample_stride") && perSample > 0 && localBatch > 0 &&
                  n % (perSample * localBatch) == 0
              ? perSample * localBatch
              : n;
  return l;
}

/// Checks dropout_grad(dy, mask) -> dx and reads its ratio.
inline double dropoutGradRatio(const KernelArgs &args) {
  const TensorView &dy = args.in(0), &m = args.in(1), &dx = args.out(0);
  const double ratio = checkedRatio(args, "dropout_grad");
  args.expectDType(m, DType::Bool, "dropout_grad mask");
  args.expectDType(dx, dy.dtype, "dropout_grad result");
  checkSameShape(args, "dropout_grad mask", dy, m);
  checkSameShape(args, "dropout_grad", dy, dx);
  return ratio;
}

} // namespace parallax::rt::ew

#endif // PARALLAX_RUNTIME_KERNELS_ELEMENTWISELAYOUT_H
