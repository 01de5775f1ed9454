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

#include "AxisLayout.h"
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
  const CumsumLayout l = cumsumLayout(args);
  const bool exclusive = l.exclusive, reverse = l.reverse;
  const Lines g = l.lines;
  const int threads = args.env.threads;
  return dispatchNumeric(args, x.dtype, "cumsum", [&](auto tag) -> KernelFn {
    using T = decltype(tag);
    const T *in = x.as<const T>();
    T *out = y.as<T>();
    return [=] {
      forLines(threads, g, [&](int64_t l) {
        cumsumRange(in, out, g, g.base(l), 0, g.n, CumsumAcc<T>(0), exclusive,
                    reverse);
      });
    };
  });
}

//===----------------------------------------------------------------------===//
// arg_max, arg_min.
//===----------------------------------------------------------------------===//

template <bool Max> KernelFactory argFactory(std::string name) {
  return [name](KernelArgs &args) -> KernelFn {
    const TensorView &x = args.in(0), &y = args.out(0);
    const ArgLayout layout = argLayout(args, name);
    const Lines g = layout.lines;
    const bool last = layout.last;
    const int threads = args.env.threads;
    int64_t *out = y.as<int64_t>();
    return dispatchNumeric(args, x.dtype, name, [&](auto tag) -> KernelFn {
      using T = decltype(tag);
      const T *in = x.as<const T>();
      return [=] {
        forLines(threads, g,
                 [&](int64_t l) { out[l] = argLine<Max>(in, g, g.base(l), last); });
      };
    });
  };
}

//===----------------------------------------------------------------------===//
// top_k.
//===----------------------------------------------------------------------===//

KernelFn topKFactory(KernelArgs &args) {
  const TensorView &x = args.in(0), &values = args.out(0), &indices = args.out(1);
  const TopKLayout layout = topKLayout(args);
  const Lines g = layout.lines;
  const int64_t k = layout.k;
  const bool largest = layout.largest;
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

KernelFn segmentReduceFactory(KernelArgs &args) {
  const TensorView &data = args.in(0), &starts = args.in(1), &ends = args.in(2),
                   &out = args.out(0);
  const SegmentLayout l = segmentReduceLayout(args);
  const Segment mode = l.mode;
  const int64_t rows = l.rows, m = l.m, width = l.width;
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
  const SegmentLayout l = segmentReduceGradLayout(args);
  const Segment mode = l.mode;
  const int64_t rows = l.rows, m = l.m, width = l.width;
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
            for (int64_t c = c0; c < c1; ++c) // the first maximum takes it
              out[segmentArgMax(x, width, c, r0, r1) * width + c] += gi[c];
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
