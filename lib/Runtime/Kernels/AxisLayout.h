//===- AxisLayout.h - what an Axis-family kernel runs along -----*- C++ -*-===//
//
// The bind-time reading and checking of cumsum, arg_max/arg_min, top_k and
// segment_reduce(_grad): the [outer, n, inner] lines around the axis, the
// attributes and the segment sizes. The CPU kernels (Axis.cpp) and the CUDA
// ones (Cuda/Kernels/Axis.cu) both start from these, so that they accept the
// same operands with the same messages; the PX_HD pieces are the element
// rules both compute with.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_KERNELS_AXISLAYOUT_H
#define PARALLAX_RUNTIME_KERNELS_AXISLAYOUT_H

#include "HostDevice.h"
#include "KernelUtil.h"

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace parallax::rt::detail {

/// [outer, n, inner] of a shape around an axis: each (outer, inner) pair is
/// one line of n elements, `inner` apart. A plain struct: the GPU takes it
/// by value.
struct Lines {
  int64_t outer = 1, n = 1, inner = 1;
  PX_HD int64_t count() const { return outer * inner; }
  /// Offset of line `l`'s first element.
  PX_HD int64_t base(int64_t l) const { return (l / inner) * n * inner + l % inner; }
};

inline Lines linesOf(const std::vector<int64_t> &shape, int64_t axis) {
  Lines g;
  g.n = shape[axis];
  g.outer = product(shape, 0, axis);
  g.inner = product(shape, axis + 1, shape.size());
  return g;
}

//===----------------------------------------------------------------------===//
// cumsum.
//===----------------------------------------------------------------------===//

struct CumsumLayout {
  Lines lines;
  bool exclusive = false, reverse = false;
};

inline CumsumLayout cumsumLayout(const KernelArgs &args) {
  const TensorView &x = args.in(0), &y = args.out(0);
  args.expectDType(y, x.dtype, "cumsum result");
  if (x.shape != y.shape)
    args.fail("cumsum: the result shape " + shapeStr(y.shape) +
              " differs from the input shape " + shapeStr(x.shape));
  const int64_t axis = normalizeAxis(args, args.i64("axis"), x.rank(), "cumsum");
  CumsumLayout l;
  l.exclusive = args.flag("exclusive"), l.reverse = args.flag("reverse");
  l.lines = linesOf(x.shape, axis);
  return l;
}

/// cumsum's accumulator: floats accumulate in double; integers wrap as
/// two's complement.
template <typename T>
using CumsumAcc = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;

template <typename T> PX_HD inline CumsumAcc<T> cumsumWiden(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return (double)v;
  else
    return (uint64_t)(int64_t)v;
}

/// The running sum over elements [k0, k1) of the line at `b` (counted from
/// the line's end with `reverse`), starting from `acc`.
template <typename T>
PX_HD inline void cumsumRange(const T *in, T *out, const Lines &g, int64_t b,
                              int64_t k0, int64_t k1, CumsumAcc<T> acc,
                              bool exclusive, bool reverse) {
  for (int64_t k = k0; k < k1; ++k) {
    const int64_t i = b + (reverse ? g.n - 1 - k : k) * g.inner;
    const CumsumAcc<T> v = cumsumWiden(in[i]);
    if (exclusive) {
      out[i] = (T)acc;
      acc += v;
    } else {
      acc += v;
      out[i] = (T)acc;
    }
  }
}

//===----------------------------------------------------------------------===//
// arg_max, arg_min.
//===----------------------------------------------------------------------===//

/// Whether `v` replaces `best` as the extreme: NaN wins (and the first NaN
/// stays, as numpy.argmax); ties replace only with `last`.
template <bool Max, typename T> PX_HD inline bool better(T v, T best, bool last) {
  if constexpr (std::is_floating_point_v<T>) {
    if (best != best)
      return false;
    if (v != v)
      return true;
  }
  if (last)
    return Max ? v >= best : v <= best;
  return Max ? v > best : v < best;
}

/// The index of the line at `b`'s extreme, scanning in order.
template <bool Max, typename T>
PX_HD inline int64_t argLine(const T *in, const Lines &g, int64_t b, bool last) {
  int64_t best = 0;
  for (int64_t k = 1; k < g.n; ++k)
    if (better<Max>(in[b + k * g.inner], in[b + best * g.inner], last))
      best = k;
  return best;
}

struct ArgLayout {
  Lines lines;
  /// select_last_index.
  bool last = false;
};

/// `name` (arg_max or arg_min) names the op in messages.
inline ArgLayout argLayout(const KernelArgs &args, const std::string &name) {
  const TensorView &x = args.in(0), &y = args.out(0);
  args.expectDType(y, DType::I64, (name + " result").c_str());
  const int64_t axis = normalizeAxis(args, args.i64Or("axis", 0), x.rank(), name);
  ArgLayout l;
  l.lines = linesOf(x.shape, axis);
  if (l.lines.n == 0)
    args.fail(name + ": the reduced axis is empty");
  if (y.numElements() != l.lines.count())
    args.fail(name + ": the result shape " + shapeStr(y.shape) + " should have " +
              std::to_string(l.lines.count()) + " elements");
  l.last = args.flag("select_last_index");
  return l;
}

//===----------------------------------------------------------------------===//
// top_k.
//===----------------------------------------------------------------------===//

struct TopKLayout {
  Lines lines;
  int64_t k = 0;
  bool largest = true;
};

inline TopKLayout topKLayout(const KernelArgs &args) {
  const TensorView &x = args.in(0), &values = args.out(0), &indices = args.out(1);
  args.expectDType(values, x.dtype, "top_k values");
  args.expectDType(indices, DType::I64, "top_k indices");
  const int64_t axis = normalizeAxis(args, args.i64Or("axis", -1), x.rank(), "top_k");
  TopKLayout l;
  l.k = args.i64("k");
  l.lines = linesOf(x.shape, axis);
  if (l.k < 0 || l.k > l.lines.n)
    args.fail("top_k: k = " + std::to_string(l.k) + " is outside [0, " +
              std::to_string(l.lines.n) + "]");
  std::vector<int64_t> expected = x.shape;
  expected[axis] = l.k;
  if (values.shape != expected || indices.shape != expected)
    args.fail("top_k: results must have shape " + shapeStr(expected));
  l.largest = !args.has("largest") || args.flag("largest");
  return l;
}

//===----------------------------------------------------------------------===//
// segment_reduce, segment_reduce_grad.
//===----------------------------------------------------------------------===//

enum class Segment { Sum, Mean, Max };

/// A bound clamped as ONNX Slice clamps it (step 1): negative counts from
/// the end, then into [0, rows].
PX_HD inline int64_t clampBound(int64_t v, int64_t rows) {
  if (v < 0)
    v += rows;
  return v < 0 ? 0 : v > rows ? rows : v;
}

/// The row in [r0, r1) (r0 < r1) of the first maximum of column c of the
/// [rows, width] matrix x, NaN winning: the row max mode's gradient goes to.
template <typename T>
PX_HD inline int64_t segmentArgMax(const T *x, int64_t width, int64_t c, int64_t r0,
                                   int64_t r1) {
  int64_t best = r0;
  for (int64_t r = r0 + 1; r < r1; ++r) {
    const T v = x[r * width + c], b = x[best * width + c];
    if (b == b && (v > b || v != v))
      best = r;
  }
  return best;
}

/// Segments of a [rows, width] matrix (data's trailing dimensions are the
/// width): m of them, row ranges [starts[i], ends[i]).
struct SegmentLayout {
  Segment mode = Segment::Sum;
  int64_t rows = 0, m = 0, width = 0;
};

inline Segment segmentMode(const KernelArgs &args, const std::string &what) {
  std::string mode = args.str("mode");
  if (mode == "sum")
    return Segment::Sum;
  if (mode == "mean")
    return Segment::Mean;
  if (mode == "max")
    return Segment::Max;
  args.fail(what + ": mode must be sum, mean or max, got '" + mode + "'");
}

/// Checks data [rows, ...], starts/ends [M] i64 and `other` [M, ...].
inline void checkSegments(const KernelArgs &args, const std::string &what,
                          const TensorView &data, const TensorView &starts,
                          const TensorView &ends, const TensorView &other) {
  args.expectDType(starts, DType::I64, (what + " starts").c_str());
  args.expectDType(ends, DType::I64, (what + " ends").c_str());
  if (starts.rank() != 1 || ends.shape != starts.shape || data.rank() < 1)
    args.fail(what + ": needs starts and ends of one shape [M] and data of rank "
              ">= 1, got " + shapeStr(starts.shape) + ", " + shapeStr(ends.shape) +
              ", " + shapeStr(data.shape));
  std::vector<int64_t> expected{starts.shape[0]};
  expected.insert(expected.end(), data.shape.begin() + 1, data.shape.end());
  if (other.shape != expected)
    args.fail(what + ": expected shape " + shapeStr(expected) + ", got " +
              shapeStr(other.shape));
}

/// segment_reduce(data, starts, ends) -> out.
inline SegmentLayout segmentReduceLayout(const KernelArgs &args) {
  const TensorView &data = args.in(0), &starts = args.in(1), &ends = args.in(2),
                   &out = args.out(0);
  args.expectDType(out, data.dtype, "segment_reduce result");
  checkSegments(args, "segment_reduce", data, starts, ends, out);
  SegmentLayout l;
  l.mode = segmentMode(args, "segment_reduce");
  l.rows = data.shape[0], l.m = starts.shape[0];
  l.width = l.rows ? data.numElements() / l.rows
                   : product(data.shape, 1, data.shape.size());
  return l;
}

/// segment_reduce_grad(dy, data, starts, ends) -> dx.
inline SegmentLayout segmentReduceGradLayout(const KernelArgs &args) {
  const TensorView &dy = args.in(0), &data = args.in(1), &starts = args.in(2),
                   &ends = args.in(3), &dx = args.out(0);
  args.expectDType(dy, data.dtype, "segment_reduce_grad dy");
  args.expectDType(dx, data.dtype, "segment_reduce_grad result");
  checkSegments(args, "segment_reduce_grad", data, starts, ends, dy);
  if (dx.shape != data.shape)
    args.fail("segment_reduce_grad: the result shape " + shapeStr(dx.shape) +
              " differs from the data's " + shapeStr(data.shape));
  SegmentLayout l;
  l.mode = segmentMode(args, "segment_reduce_grad");
  l.rows = data.shape[0], l.m = starts.shape[0];
  l.width = l.rows ? data.numElements() / l.rows : 0;
  return l;
}

} // namespace parallax::rt::detail

#endif // PARALLAX_RUNTIME_KERNELS_AXISLAYOUT_H
