//===- Reduction.cpp - reduce_{sum,mean,max,min,prod}, densify ------------===//
//
// A reduction's input dimensions are first simplified: size-1 dimensions
// are dropped and adjacent dimensions that are both reduced or both kept are
// merged. Most reductions then have the form [O, R, K] (reduce the middle
// dimension; O or K may be 1): trailing-dimension reductions (row sums,
// global average pooling) are [O, R, 1] and sum contiguous rows; leading-
// dimension reductions (bias gradients, [N, C] over N) are [1, R, K] and add
// whole rows into a block of K accumulators. When there are too few output
// blocks to keep every thread busy, R is split too and the partial results
// combined in a second pass. Anything else (e.g. reducing dimensions 0 and 2
// of 3) takes a general strided loop per output element.
//
// Float inputs accumulate in double and round once; integer inputs
// accumulate in int64 with two's complement wrap-around.
//
//===----------------------------------------------------------------------===//

// Let GCC vectorize loops with selects and sqrt: neither option changes a
// result (they only drop FP exception flags and errno, which nothing reads).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math", "no-math-errno")
#endif

#include "parallax/Runtime/Kernel.h"

#include "KernelUtil.h"
#include "Reducer.h"
#include "ReductionLayout.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace parallax::rt {
namespace {

using namespace detail;


/// Elements of work per task below which loops stay serial.
constexpr int64_t kGrainElements = 1 << 15;
/// Accumulators per column block in the [O, R, K] path (on the stack).
constexpr int64_t kColumnBlock = 256;

/// Reduces a contiguous run with four accumulators (independent chains).
template <typename T, typename Red>
typename Red::A reduceRun(const T *x, int64_t n) {
  using A = typename Red::A;
  A a0 = Red::init(), a1 = Red::init(), a2 = Red::init(), a3 = Red::init();
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    a0 = Red::combine(a0, Red::load(x[i]));
    a1 = Red::combine(a1, Red::load(x[i + 1]));
    a2 = Red::combine(a2, Red::load(x[i + 2]));
    a3 = Red::combine(a3, Red::load(x[i + 3]));
  }
  for (; i < n; ++i)
    a0 = Red::combine(a0, Red::load(x[i]));
  return Red::combine(Red::combine(a0, a1), Red::combine(a2, a3));
}

/// The [O, R, K] reduction. Task (unit, part) covers output row o, column
/// block kb and the rows of part `part` of R.
template <typename T, ReduceKind K> struct OrkReduction {
  using Red = Reducer<T, K>;
  using A = typename Red::A;
  const T *x;
  T *y;
  int64_t O, R, Kc;   // Kc = K
  int64_t kBlocks;    // column blocks per o (1 when K == 1)
  int64_t parts;      // splits of R
  int64_t count;      // elements per output (for the mean)
  int threads;
  int64_t grain;      // tasks per thread below which it stays serial
  std::shared_ptr<std::vector<A>> scratch; // parts * O * K partials

  void task(int64_t t) const {
    const int64_t unit = t / parts, p = t % parts;
    const int64_t o = unit / kBlocks, kb = unit % kBlocks;
    const int64_t r0 = R * p / parts, r1 = R * (p + 1) / parts;
    A *partial = parts > 1 ? scratch->data() + (p * O + o) * Kc : nullptr;
    if (Kc == 1) {
      A acc = reduceRun<T, Red>(x + o * R + r0, r1 - r0);
      if (partial)
        partial[0] = acc;
      else
        y[o] = Red::finish(acc, count);
      return;
    }
    const int64_t k0 = kb * kColumnBlock, kn = std::min(kColumnBlock, Kc - k0);
    A acc[kColumnBlock];
    for (int64_t k = 0; k < kn; ++k)
      acc[k] = Red::init();
    const T *base = x + o * R * Kc + k0;
    for (int64_t r = r0; r < r1; ++r) {
      const T *row = base + r * Kc;
      for (int64_t k = 0; k < kn; ++k)
        acc[k] = Red::combine(acc[k], Red::load(row[k]));
    }
    if (partial) {
      for (int64_t k = 0; k < kn; ++k)
        partial[k0 + k] = acc[k];
    } else {
      T *out = y + o * Kc + k0;
      for (int64_t k = 0; k < kn; ++k)
        out[k] = Red::finish(acc[k], count);
    }
  }

  void run() const {
    const int64_t tasks = O * kBlocks * parts;
    parallelFor(threads, tasks, grain, [this](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t)
        task(t);
    });
    if (parts == 1)
      return;
    const int64_t n = O * Kc;
    parallelFor(threads, n, kGrainElements / parts + 1, [this, n](int64_t begin, int64_t end) {
      const A *s = scratch->data();
      for (int64_t i = begin; i < end; ++i) {
        A acc = s[i];
        for (int64_t p = 1; p < parts; ++p)
          acc = Red::combine(acc, s[p * n + i]);
        y[i] = Red::finish(acc, count);
      }
    });
  }
};

/// Any other pattern: per output element, walk the reduced dimensions.
template <typename T, ReduceKind K> struct GeneralReduction {
  using Red = Reducer<T, K>;
  using A = typename Red::A;
  const T *x;
  T *y;
  int nk = 0, nr = 0;
  int64_t kdims[kMaxReducedDims], kstrides[kMaxReducedDims]; // kept dims (output order)
  int64_t rdims[kMaxReducedDims], rstrides[kMaxReducedDims]; // reduced dims
  int64_t outN, count;
  int threads;

  void run() const {
    const int64_t grain = std::max<int64_t>(1, kGrainElements / std::max<int64_t>(count, 1));
    parallelFor(threads, outN, grain, [this](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        int64_t base = 0, rem = o;
        for (int d = nk - 1; d >= 0; --d) {
          base += (rem % kdims[d]) * kstrides[d];
          rem /= kdims[d];
        }
        A acc = Red::init();
        const int64_t inner = rdims[nr - 1], is = rstrides[nr - 1];
        int64_t idx[kMaxReducedDims] = {};
        int64_t off = base;
        const int64_t outerCount = inner ? count / inner : 0;
        for (int64_t c = 0; c < outerCount; ++c) {
          if (is == 1) {
            acc = Red::combine(acc, reduceRun<T, Red>(x + off, inner));
          } else {
            for (int64_t i = 0; i < inner; ++i)
              acc = Red::combine(acc, Red::load(x[off + i * is]));
          }
          for (int d = nr - 2; d >= 0; --d) {
            off += rstrides[d];
            if (++idx[d] < rdims[d])
              break;
            off -= rstrides[d] * rdims[d];
            idx[d] = 0;
          }
        }
        y[o] = Red::finish(acc, count);
      }
    });
  }
};

template <typename T, ReduceKind K>
KernelFn makeReduction(const KernelArgs &args, const TensorView &x,
                       const TensorView &y, const std::vector<int64_t> &dims,
                       const std::vector<bool> &reduced,
                       const std::vector<int64_t> &strides, int64_t count) {
  const int threads = args.env.threads;
  const int64_t outN = y.numElements();
  std::string pattern;
  for (size_t i = 0; i < dims.size(); ++i)
    pattern += reduced[i] ? 'R' : 'K';
  int64_t O = 1, R = 1, Kc = 1;
  bool ork = true;
  if (pattern == "R")
    R = dims[0];
  else if (pattern == "KR")
    O = dims[0], R = dims[1];
  else if (pattern == "RK")
    R = dims[0], Kc = dims[1];
  else if (pattern == "KRK")
    O = dims[0], R = dims[1], Kc = dims[2];
  else
    ork = false;

  if (ork) {
    auto st = std::make_shared<OrkReduction<T, K>>();
    OrkReduction<T, K> &s = *st;
    s.x = x.as<const T>();
    s.y = y.as<T>();
    s.O = O, s.R = R, s.Kc = Kc;
    s.kBlocks = (Kc + kColumnBlock - 1) / kColumnBlock;
    s.count = count;
    s.threads = threads;
    const int64_t units = O * s.kBlocks;
    const int64_t unitWork = R * std::min(Kc, kColumnBlock);
    s.parts = 1;
    if (units < threads && R > 1) {
      int64_t want = (threads + units - 1) / units;
      int64_t minRows = std::max<int64_t>(1, kGrainElements / std::max<int64_t>(1, std::min(Kc, kColumnBlock)));
      s.parts = std::max<int64_t>(1, std::min(want, R / minRows));
    }
    if (s.parts > 1)
      s.scratch = std::make_shared<std::vector<typename Reducer<T, K>::A>>(
          (size_t)(s.parts * O * Kc));
    s.grain = std::max<int64_t>(1, kGrainElements * s.parts / std::max<int64_t>(unitWork, 1));
    return [st] { st->run(); };
  }

  auto st = std::make_shared<GeneralReduction<T, K>>();
  GeneralReduction<T, K> &s = *st;
  s.x = x.as<const T>();
  s.y = y.as<T>();
  for (size_t i = 0; i < dims.size(); ++i) {
    if (reduced[i]) {
      s.rdims[s.nr] = dims[i];
      s.rstrides[s.nr++] = strides[i];
    } else {
      s.kdims[s.nk] = dims[i];
      s.kstrides[s.nk++] = strides[i];
    }
  }
  s.outN = outN;
  s.count = count;
  s.threads = threads;
  return [st] { st->run(); };
}

KernelFactory reduceFactory(std::string name, ReduceKind kind) {
  return [name, kind](KernelArgs &args) -> KernelFn {
    const TensorView &x = args.in(0), &y = args.out(0);
    const ReductionLayout layout = reductionLayout(args, name);
    const std::vector<int64_t> &dims = layout.dims, &strides = layout.strides;
    const std::vector<bool> &reduced = layout.reduced;
    const int64_t count = layout.count;
    const int threads = args.env.threads;
    if (reductionCopies(layout, x.dtype)) {
      // Nothing (or only size-1 dimensions) reduced: a copy.
      const void *src = x.data;
      void *dst = y.data;
      const int64_t bytes = x.bytes();
      return [src, dst, bytes, threads] {
        parallelFor(threads, bytes, 1 << 18, [=](int64_t b, int64_t e) {
          std::memcpy((char *)dst + b, (const char *)src + b, e - b);
        });
      };
    }
    return dispatchNumeric(args, x.dtype, name, [&](auto tag) -> KernelFn {
      using T = decltype(tag);
      if (y.numElements() == 0)
        return [] {};
      return dispatchReduceKind(args, kind, name, [&](auto k) -> KernelFn {
        return makeReduction<T, decltype(k)::value>(args, x, y, dims, reduced, strides,
                                                    count);
      });
    });
  };
}

//===----------------------------------------------------------------------===//
// densify(indices, values) -> dense.
//===----------------------------------------------------------------------===//

template <typename T>
KernelFn makeDensify(const TensorView &idx, const TensorView &vals,
                     const TensorView &out, int threads) {
  struct State {
    const int64_t *idx;
    const T *vals;
    T *out;
    int64_t n, rows, width;
    int threads;
  };
  auto st = std::make_shared<State>(State{idx.as<const int64_t>(), vals.as<const T>(),
                                          out.as<T>(), idx.numElements(), out.shape[0],
                                          out.shape[0] ? out.numElements() / out.shape[0] : 0,
                                          threads});
  return [st] {
    const State &s = *st;
    for (int64_t i = 0; i < s.n; ++i) {
      int64_t r = s.idx[i];
      if (r != -1 && (r < 0 || r >= s.rows))
        throw KernelError("densify: index " + std::to_string(r) + " at position " +
                          std::to_string(i) + " is outside [0, " +
                          std::to_string(s.rows) + ") (and is not -1)");
    }
    const int64_t total = s.rows * s.width;
    parallelFor(s.threads, total, 1 << 18, [&s](int64_t b, int64_t e) {
      std::memset(s.out + b, 0, (e - b) * sizeof(T));
    });
    // Rows may repeat: threads split the columns, never the rows.
    const int64_t colBlock = 1024;
    const int64_t blocks = (s.width + colBlock - 1) / colBlock;
    const int64_t grain = std::max<int64_t>(1, kGrainElements / std::max<int64_t>(1, s.n * colBlock));
    parallelFor(s.threads, blocks, grain, [&s](int64_t b, int64_t e) {
      const int64_t c0 = b * colBlock, c1 = std::min(s.width, e * colBlock);
      for (int64_t i = 0; i < s.n; ++i) {
        int64_t r = s.idx[i];
        if (r == -1)
          continue;
        T *dst = s.out + r * s.width;
        const T *src = s.vals + i * s.width;
        for (int64_t c = c0; c < c1; ++c)
          dst[c] += src[c];
      }
    });
  };
}

KernelFn densifyFactory(KernelArgs &args) {
  const TensorView &idx = args.in(0), &vals = args.in(1), &out = args.out(0);
  checkDensify(args);
  const int threads = args.env.threads;
  return dispatchNumeric(args, vals.dtype, "densify", [&](auto tag) -> KernelFn {
    using T = decltype(tag);
    return makeDensify<T>(idx, vals, out, threads);
  });
}

} // namespace

void registerReductionKernels(KernelRegistry &r) {
  for (const auto &[name, kind] : detail::kReduceOps)
    r.add(name, reduceFactory(name, kind));
  r.add("densify", densifyFactory);
}

} // namespace parallax::rt
