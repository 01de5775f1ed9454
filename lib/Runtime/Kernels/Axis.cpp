//===- Axis.cpp - cumsum, arg_max/arg_min, top_k, segment_reduce ----------===//
//
// Ops that run along one axis of their input. The input is viewed as
// [outer, n, inner] around the axis (n = the axis' size), and each
// (outer, inner) pair is one independent line of n elements, n apart in
// memory by `inner`; threads split the lines.
//
// segment_reduce (nn.EmbeddingBag's bags) reduces row ranges of a
// [rows, width] matrix: its forward pass splits the ranges over threads,
// its gradient (where ranges may overlap) the columns.
//
//===----------------------------------------------------------------------===//

#include "parallax/Runtime/Kernel.h"

#include "KernelUtil.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

namespace parallax::rt {
namespace {

using namespace detail;

/// Lines below which a loop stays serial (each line is n elements).
constexpr int64_t kGrainElements = 1 << 14;

/// [outer, n, inner] of `shape` around `axis`.
struct Lines {
  int64_t outer = 1, n = 1, inner = 1;
  int64_t count() const { return outer * inner; }
  /// Offset of line `l`'s first element.
  int64_t base(int64_t l) const { return (l / inner) * n * inner + l % inner; }
};

Lines linesOf(const std::vector<int64_t> &shape, int64_t axis) {
  Lines g;
  g.n = shape[axis];
  g.outer = product(shape, 0, axis);
  g.inner = product(shape, axis + 1, shape.size());
  return g;
}

/// Runs body(line) for every line, threads splitting the lines.
template <typename Body>
void forLines(int threads, const Lines &g, Body &&body) {
  const int64_t grain = std::max<int64_t>(1, kGrainElements / std::max<int64_t>(g.n, 1));
  parallelFor(threads, g.count(), grain, [&](int64_t begin, int64_t end) {
    for (int64_t l = begin; l < end; ++l)
      body(l);
  });
}

//===----------------------------------------------------------------------===//
// cumsum.
//===----------------------------------------------------------------------===//

KernelFn cumsumFactory(KernelArgs &args) {
  const TensorView &x = args.in(0), &y = args.out(0);
  args.expectDType(y, x.dtype, "cumsum result");
  if (x.shape != y.shape)
    args.fail("cumsum: the result shape " + shapeStr(y.shape) +
              " differs from the input shape " + shapeStr(x.shape));
  const int64_t axis = normalizeAxis(args, args.i64("axis"), x.rank(), "cumsum");
  const bool exclusive = args.flag("exclusive"), reverse = args.flag("reverse");
  const Lines g = linesOf(x.shape, axis);
  const int threads = args.env.threads;
  return dispatchNumeric(args, x.dtype, "cumsum", [&](auto tag) -> KernelFn {
    using T = decltype(tag);
    // Floats accumulate in double; integers wrap as two's complement.
    using A = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;
    const T *in = x.as<const T>();
    T *out = y.as<T>();
    return [=] {
      forLines(threads, g, [&](int64_t l) {
        const int64_t b = g.base(l);
        A acc = 0;
        for (int64_t k = 0; k < g.n; ++k) {
          const int64_t i = b + (reverse ? g.n - 1 - k : k) * g.inner;
          const A v = std::is_floating_point_v<T> ? (A)in[i] : (A)(int64_t)in[i];
          if (exclusive) {
            out[i] = (T)acc;
            acc += v;
          } else {
            acc += v;
            out[i] = (T)acc;
          }
        }
      });
    };
  });
}

//===----------------------------------------------------------------------===//
// arg_max, arg_min.
//===----------------------------------------------------------------------===//

/// Whether `v` replaces `best` as the extreme: NaN wins (and the first NaN
/// stays, as numpy.argmax); ties replace only with `last`.
template <bool Max, typename T> inline bool better(T v, T best, bool last) {
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

template <bool Max> KernelFactory argFactory(std::string name) {
  return [name](KernelArgs &args) -> KernelFn {
    const TensorView &x = args.in(0), &y = args.out(0);
    args.expectDType(y, DType::I64, (name + " result").c_str());
    const int64_t axis = normalizeAxis(args, args.i64Or("axis", 0), x.rank(), name);
    const Lines g = linesOf(x.shape, axis);
    if (g.n == 0)
      args.fail(name + ": the reduced axis is empty");
    if (y.numElements() != g.count())
      args.fail(name + ": the result shape " + shapeStr(y.shape) + " should have " +
                std::to_string(g.count()) + " elements");
    const bool last = args.flag("select_last_index");
    const int threads = args.env.threads;
    int64_t *out = y.as<int64_t>();
    return dispatchNumeric(args, x.dtype, name, [&](auto tag) -> KernelFn {
      using T = decltype(tag);
      const T *in = x.as<const T>();
      return [=] {
        forLines(threads, g, [&](int64_t l) {
          const int64_t b = g.base(l);
          int64_t best = 0;
          for (int64_t k = 1; k < g.n; ++k)
            if (better<Max>(in[b + k * g.inner], in[b + best * g.inner], last))
              best = k;
          out[l] = best;
        });
      };
    });
  };
}

//===----------------------------------------------------------------------===//
// top_k.
//===----------------------------------------------------------------------===//

KernelFn topKFactory(KernelArgs &args) {
  const TensorView &x = args.in(0), &values = args.out(0), &indices = args.out(1);
  args.expectDType(values, x.dtype, "top_k values");
  args.expectDType(indices, DType::I64, "top_k indices");
  const int64_t axis = normalizeAxis(args, args.i64Or("axis", -1), x.rank(), "top_k");
  const int64_t k = args.i64("k");
  const Lines g = linesOf(x.shape, axis);
  if (k < 0 || k > g.n)
    args.fail("top_k: k = " + std::to_string(k) + " is outside [0, " +
              std::to_string(g.n) + "]");
  std::vector<int64_t> expected = x.shape;
  expected[axis] = k;
  if (values.shape != expected || indices.shape != expected)
    args.fail("top_k: results must have shape " + shapeStr(expected));
  const bool largest = !args.has("largest") || args.flag("largest");
  const int threads = args.env.threads;
  int64_t *outIdx = indices.as<int64_t>();
  return dispatchNumeric(args, x.dtype, "top_k", [&](auto tag) -> KernelFn {
    using T = decltype(tag);
    const T *in = x.as<const T>();
    T *outVal = values.as<T>();
    return [=] {
      forLines(threads, g, [&](int64_t l) {
        const int64_t b = g.base(l);
        std::vector<int64_t> order(g.n);
        std::iota(order.begin(), order.end(), 0);
        // Equal values keep their index order (ONNX: the lower index first).
        auto before = [&](int64_t i, int64_t j) {
          T a = in[b + i * g.inner], c = in[b + j * g.inner];
          if (a != c)
            return largest ? a > c : a < c;
          return i < j;
        };
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        const int64_t ob = (l / g.inner) * k * g.inner + l % g.inner;
        for (int64_t r = 0; r < k; ++r) {
          outVal[ob + r * g.inner] = in[b + order[r] * g.inner];
          outIdx[ob + r * g.inner] = order[r];
        }
      });
    };
  });
}

//===----------------------------------------------------------------------===//
// segment_reduce, segment_reduce_grad.
//===----------------------------------------------------------------------===//

enum class Segment { Sum, Mean, Max };

Segment segmentMode(const KernelArgs &args, const std::string &what) {
  std::string mode = args.str("mode");
  if (mode == "sum")
    return Segment::Sum;
  if (mode == "mean")
    return Segment::Mean;
  if (mode == "max")
    return Segment::Max;
  args.fail(what + ": mode must be sum, mean or max, got '" + mode + "'");
}

/// A bound clamped as ONNX Slice clamps it (step 1): negative counts from
/// the end, then into [0, rows].
inline int64_t clampBound(int64_t v, int64_t rows) {
  if (v < 0)
    v += rows;
  return std::clamp<int64_t>(v, 0, rows);
}

/// Checks data [rows, ...], starts/ends [M] i64 and `other` [M, ...].
void checkSegments(const KernelArgs &args, const std::string &what,
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

KernelFn segmentReduceFactory(KernelArgs &args) {
  const TensorView &data = args.in(0), &starts = args.in(1), &ends = args.in(2),
                   &out = args.out(0);
  args.expectDType(out, data.dtype, "segment_reduce result");
  checkSegments(args, "segment_reduce", data, starts, ends, out);
  const Segment mode = segmentMode(args, "segment_reduce");
  const int64_t rows = data.shape[0], m = starts.shape[0];
  const int64_t width = rows ? data.numElements() / rows : product(data.shape, 1, data.shape.size());
  const int threads = args.env.threads;
  const int64_t *s = starts.as<const int64_t>(), *e = ends.as<const int64_t>();
  return dispatchFloat(args, data.dtype, "segment_reduce", [&](auto tag) -> KernelFn {
    using T = decltype(tag);
    const T *x = data.as<const T>();
    T *y = out.as<T>();
    return [=] {
      const int64_t grain = std::max<int64_t>(1, kGrainElements / std::max<int64_t>(width, 1));
      parallelFor(threads, m, grain, [&](int64_t begin, int64_t end) {
        std::vector<double> acc(width);
        for (int64_t i = begin; i < end; ++i) {
          const int64_t r0 = clampBound(s[i], rows), r1 = clampBound(e[i], rows);
          T *dst = y + i * width;
          if (r1 <= r0) { // an empty bag is zeros, as nn.EmbeddingBag
            std::fill(dst, dst + width, T(0));
            continue;
          }
          if (mode == Segment::Max) {
            std::copy(x + r0 * width, x + (r0 + 1) * width, dst);
            for (int64_t r = r0 + 1; r < r1; ++r) {
              const T *row = x + r * width;
              for (int64_t c = 0; c < width; ++c)
                if (row[c] > dst[c] || row[c] != row[c])
                  dst[c] = row[c];
            }
            continue;
          }
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t r = r0; r < r1; ++r) {
            const T *row = x + r * width;
            for (int64_t c = 0; c < width; ++c)
              acc[c] += row[c];
          }
          const double scale = mode == Segment::Mean ? 1.0 / (double)(r1 - r0) : 1.0;
          for (int64_t c = 0; c < width; ++c)
            dst[c] = (T)(acc[c] * scale);
        }
      });
    };
  });
}

KernelFn segmentReduceGradFactory(KernelArgs &args) {
  const TensorView &dy = args.in(0), &data = args.in(1), &starts = args.in(2),
                   &ends = args.in(3), &dx = args.out(0);
  args.expectDType(dy, data.dtype, "segment_reduce_grad dy");
  args.expectDType(dx, data.dtype, "segment_reduce_grad result");
  checkSegments(args, "segment_reduce_grad", data, starts, ends, dy);
  if (dx.shape != data.shape)
    args.fail("segment_reduce_grad: the result shape " + shapeStr(dx.shape) +
              " differs from the data's " + shapeStr(data.shape));
  const Segment mode = segmentMode(args, "segment_reduce_grad");
  const int64_t rows = data.shape[0], m = starts.shape[0];
  const int64_t width = rows ? data.numElements() / rows : 0;
  const int threads = args.env.threads;
  const int64_t *s = starts.as<const int64_t>(), *e = ends.as<const int64_t>();
  return dispatchFloat(args, data.dtype, "segment_reduce_grad", [&](auto tag) -> KernelFn {
    using T = decltype(tag);
    const T *g = dy.as<const T>(), *x = data.as<const T>();
    T *out = dx.as<T>();
    return [=] {
      std::fill(out, out + rows * width, T(0));
      // Ranges may overlap: threads split the columns, never the rows.
      constexpr int64_t kColumns = 256;
      const int64_t blocks = (width + kColumns - 1) / kColumns;
      const int64_t grain = std::max<int64_t>(1, kGrainElements / std::max<int64_t>(rows * kColumns, 1));
      parallelFor(threads, blocks, grain, [&](int64_t begin, int64_t end) {
        const int64_t c0 = begin * kColumns, c1 = std::min(width, end * kColumns);
        for (int64_t i = 0; i < m; ++i) {
          const int64_t r0 = clampBound(s[i], rows), r1 = clampBound(e[i], rows);
          if (r1 <= r0)
            continue;
          const T *gi = g + i * width;
          if (mode == Segment::Max) {
            for (int64_t c = c0; c < c1; ++c) {
              int64_t best = r0; // the first maximum takes the gradient
              for (int64_t r = r0 + 1; r < r1; ++r) {
                T v = x[r * width + c], b = x[best * width + c];
                if (b == b && (v > b || v != v))
                  best = r;
              }
              out[best * width + c] += gi[c];
            }
            continue;
          }
          const T scale = mode == Segment::Mean ? T(1) / (T)(r1 - r0) : T(1);
          for (int64_t r = r0; r < r1; ++r) {
            T *row = out + r * width;
            for (int64_t c = c0; c < c1; ++c)
              row[c] += gi[c] * scale;
          }
        }
      });
    };
  });
}

} // namespace

void registerAxisKernels(KernelRegistry &r) {
  r.add("cumsum", cumsumFactory);
  r.add("arg_max", argFactory<true>("arg_max"));
  r.add("arg_min", argFactory<false>("arg_min"));
  r.add("top_k", topKFactory);
  r.add("segment_reduce", segmentReduceFactory);
  r.add("segment_reduce_grad", segmentReduceGradFactory);
}

} // namespace parallax::rt
