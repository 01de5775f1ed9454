//===- Optimizer.cpp - optimizer updates and state assignment -------------===//
//
// sgd, momentum, adam, adagrad and assign write their variable inputs in
// place and have no outputs. Updates follow torch.optim's single-tensor CPU
// code (PyTorch 1.13) operation by operation, in the element type, with a
// fused multiply-add wherever PyTorch's AVX2 kernels fuse one (add with
// alpha, addcmul), so that f32 runs agree with PyTorch to the last bit in
// practice (on an AVX2 machine, where PyTorch fuses them):
//
//   g' = g + wd * w                                  (weight decay)
//   sgd:      w = w + (-lr) * g'
//   momentum: buf = buf * mu + g';  w = w + (-lr) * (nesterov ? g' + mu * buf : buf)
//   adam:     m = m * b1 + (1 - b1) * g';  v = v * b2 + (1 - b2) * g' * g'
//             w = w + (-lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)
//   adagrad:  s = s + g' * g';  w = w + (-lr) * g' / (sqrt(s) + eps)
//
// A sparse gradient arrives as two inputs, indices (i64 [n], -1 = unused
// slot) and rows [n, variable.shape[1:]...]. Its rows are coalesced (repeated
// indices summed in position order, as torch's coalesce) and only those rows
// change (lazily: torch.optim.SparseAdam's update for adam, torch's sparse
// Adagrad for adagrad); weight decay applies to the touched rows only, once
// per row. (sgd without weight decay adds each entry in turn, as PyTorch's
// dense += sparse does; the sum is the same.)
// Coalescing sorts (row, position) pairs in a buffer owned by the closure, so
// a step allocates nothing.
//
//===----------------------------------------------------------------------===//

#include "parallax/Runtime/Kernel.h"

#include "KernelUtil.h"
#include "OptimizerRules.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace parallax::rt {

namespace {

constexpr int64_t kGrain = 1 << 15;

using namespace opt;

/// a * b + c rounded once, as the fused multiply-adds of PyTorch's AVX2
/// kernels (add with alpha, addcmul). For f32 the double product is exact, so
/// only a double-rounding tie (about 2^-29 of cases) can differ from fmaf;
/// unlike std::fma without -mfma this stays inline and vectorizes.
inline float madd(float a, float b, float c) {
  return float(double(a) * double(b) + double(c));
}
inline double madd(double a, double b, double c) { return std::fma(a, b, c); }

/// One element's update given its (coalesced) gradient g. `s0`/`s1` are the
/// state elements (velocity; m and v; sum).
/// Element i of w and the state arrays s0, s1 (unused ones may be null).
/// Weight decay and nesterov are template flags, so that the update loops
/// have no branches and vectorize.
template <Kind K, bool Sparse, bool Wd, bool Nesterov, typename T>
inline void updateElement(const Scalars<T> &c, T *wp, T *s0p, T *s1p,
                          int64_t i, T g) {
  T &w = wp[i];
  T *s0 = K == Kind::Sgd ? nullptr : s0p + i;
  T *s1 = K == Kind::Adam ? s1p + i : nullptr;
  if constexpr (Wd)
    g = madd(w, c.wd, g); // grad.add(param, alpha=wd)
  if constexpr (K == Kind::Sgd) {
    w = madd(g, c.negLr, w); // param.add_(grad, alpha=-lr)
  } else if constexpr (K == Kind::Momentum) {
    T buf = *s0 * c.mu;
    buf = buf + g; // buf.mul_(momentum).add_(grad)
    *s0 = buf;
    T d = Nesterov ? madd(buf, c.mu, g) : buf;
    w = madd(d, c.negLr, w);
  } else if constexpr (K == Kind::Adam) {
    if constexpr (!Sparse) {
      T m = *s0 * c.b1;
      m = madd(g, c.omb1, m); // exp_avg.mul_(b1).add_(grad, alpha=1 - b1)
      T v = *s1 * c.b2;
      T sg = c.omb2 * g;
      v = madd(sg, g, v); // exp_avg_sq.mul_(b2).addcmul_(grad, grad, 1 - b2)
      *s0 = m;
      *s1 = v;
      T denom = std::sqrt(v) / c.bc2sqrt + c.eps;
      w = w + c.negStep * m / denom;
    } else {
      // torch.optim.SparseAdam: old += (new - old) * (1 - b).
      T oldM = *s0, oldV = *s1;
      T um = (g - oldM) * c.omb1;
      T uv = (g * g - oldV) * c.omb2;
      *s0 = oldM + um;
      *s1 = oldV + uv;
      T numer = um + oldM;
      T denom = std::sqrt(uv + oldV) + c.eps;
      w = w + c.negStep * (numer / denom);
    }
  } else { // Adagrad
    if constexpr (!Sparse) {
      T sum = madd(g, g, *s0); // state_sum.addcmul_(grad, grad)
      *s0 = sum;
      T stdv = std::sqrt(sum) + c.eps;
      w = w + c.negLr * g / stdv; // param.addcdiv_(grad, std, -lr)
    } else {
      T g2 = g * g;
      T sum = *s0 + g2; // state_sum.add_(sparse(grad^2))
      *s0 = sum;
      T stdv = std::sqrt(sum) + c.eps;
      w = madd(g / stdv, c.negLr, w); // param.add_(sparse(g / std), -lr)
    }
  }
}

/// Updates elements [0, len) of w, s0, s1 from g. The compiler does not
/// vectorize sqrt (errno), so adam's and adagrad's f32 updates have an SSE2
/// loop, with exactly the scalar code's operations (sqrtps and divps are
/// correctly rounded like their scalar forms).
template <Kind K, bool Sparse, bool Wd, bool Nesterov, typename T>
inline void updateSpan(const Scalars<T> &c, T *w, T *s0, T *s1, const T *g,
                       int64_t len) {
  int64_t i = 0;
#if defined(__SSE2__)
  if constexpr (std::is_same_v<T, float> &&
                ((K == Kind::Adam && !Sparse) || K == Kind::Adagrad)) {
    // a * b + c rounded once: exact products in double.
    auto madd4 = [](__m128 a, __m128 b, __m128 c) {
      __m128d lo = _mm_add_pd(_mm_mul_pd(_mm_cvtps_pd(a), _mm_cvtps_pd(b)),
                              _mm_cvtps_pd(c));
      __m128d hi = _mm_add_pd(
          _mm_mul_pd(_mm_cvtps_pd(_mm_movehl_ps(a, a)),
                     _mm_cvtps_pd(_mm_movehl_ps(b, b))),
          _mm_cvtps_pd(_mm_movehl_ps(c, c)));
      return _mm_movelh_ps(_mm_cvtpd_ps(lo), _mm_cvtpd_ps(hi));
    };
    const __m128 wd = _mm_set1_ps(c.wd), eps = _mm_set1_ps(c.eps);
    for (; i + 4 <= len; i += 4) {
      __m128 gv = _mm_loadu_ps(g + i), wv = _mm_loadu_ps(w + i);
      if constexpr (Wd)
        gv = madd4(wv, wd, gv);
      if constexpr (K == Kind::Adam) {
        __m128 m = _mm_mul_ps(_mm_loadu_ps(s0 + i), _mm_set1_ps(c.b1));
        m = madd4(gv, _mm_set1_ps(c.omb1), m);
        __m128 v = _mm_mul_ps(_mm_loadu_ps(s1 + i), _mm_set1_ps(c.b2));
        v = madd4(_mm_mul_ps(_mm_set1_ps(c.omb2), gv), gv, v);
        _mm_storeu_ps(s0 + i, m);
        _mm_storeu_ps(s1 + i, v);
        __m128 denom = _mm_add_ps(
            _mm_div_ps(_mm_sqrt_ps(v), _mm_set1_ps(c.bc2sqrt)), eps);
        wv = _mm_add_ps(
            wv, _mm_div_ps(_mm_mul_ps(_mm_set1_ps(c.negStep), m), denom));
      } else if constexpr (!Sparse) { // dense adagrad
        __m128 sum = madd4(gv, gv, _mm_loadu_ps(s0 + i));
        _mm_storeu_ps(s0 + i, sum);
        __m128 stdv = _mm_add_ps(_mm_sqrt_ps(sum), eps);
        wv = _mm_add_ps(
            wv, _mm_div_ps(_mm_mul_ps(_mm_set1_ps(c.negLr), gv), stdv));
      } else { // sparse adagrad
        __m128 sum = _mm_add_ps(_mm_loadu_ps(s0 + i), _mm_mul_ps(gv, gv));
        _mm_storeu_ps(s0 + i, sum);
        __m128 stdv = _mm_add_ps(_mm_sqrt_ps(sum), eps);
        wv = madd4(_mm_div_ps(gv, stdv), _mm_set1_ps(c.negLr), wv);
      }
      _mm_storeu_ps(w + i, wv);
    }
  }
#endif
  for (; i < len; ++i)
    updateElement<K, Sparse, Wd, Nesterov, T>(c, w, s0, s1, i, g[i]);
}

/// Calls f(wd, nesterov) with both flags as std::integral_constant.
template <typename T, typename F>
inline void withFlags(const Scalars<T> &c, F &&f) {
  using Y = std::true_type;
  using N = std::false_type;
  if (c.hasWd) {
    if (c.nesterov)
      f(Y{}, Y{});
    else
      f(Y{}, N{});
  } else {
    if (c.nesterov)
      f(N{}, Y{});
    else
      f(N{}, N{});
  }
}

/// The sorted (row, position) pairs of a sparse gradient and its unique rows.
struct Coalesced {
  std::vector<std::pair<int64_t, int64_t>> pairs;
  std::vector<int64_t> begin; ///< unique row u: pairs[begin[u], begin[u + 1])

  explicit Coalesced(int64_t n) {
    pairs.reserve(n);
    begin.reserve(n + 1);
  }

  void build(const int64_t *idx, int64_t n, int64_t rows, const char *op) {
    pairs.clear();
    begin.clear();
    for (int64_t p = 0; p < n; ++p) {
      int64_t r = idx[p];
      if (r == -1)
        continue;
      if (r < 0 || r >= rows)
        throw KernelError(std::string(op) + ": sparse gradient index " +
                          std::to_string(r) + " at position " +
                          std::to_string(p) + " is out of range [0, " +
                          std::to_string(rows) +
                          ") (-1 marks an unused slot)");
      pairs.emplace_back(r, p);
    }
    bool sorted = true;
    for (size_t i = 1; i < pairs.size() && sorted; ++i)
      sorted = pairs[i - 1].first < pairs[i].first;
    if (!sorted)
      std::sort(pairs.begin(), pairs.end());
    for (size_t i = 0; i < pairs.size(); ++i)
      if (i == 0 || pairs[i].first != pairs[i - 1].first)
        begin.push_back((int64_t)i);
    begin.push_back((int64_t)pairs.size());
  }
  int64_t uniqueRows() const { return (int64_t)begin.size() - 1; }
};

template <Kind K, typename T>
KernelFn makeDense(const Hyper &h, T *w, T *s0, T *s1, const T *g, int64_t n,
                   ExecEnv *env) {
  int threads = env->threads;
  return [=]() {
    if (K == Kind::Adam && env->step < 1)
      throw KernelError("adam: the step number must be >= 1, got " +
                        std::to_string(env->step));
    Scalars<T> c = scalarsFor<T>(K, h, env->step, /*sparse=*/false);
    withFlags(c, [&](auto wd, auto nesterov) {
      parallelFor(threads, n, kGrain, [&](int64_t b, int64_t e) {
        detail::ScopedFlushDenormals flush;
        updateSpan<K, false, decltype(wd)::value, decltype(nesterov)::value, T>(
            c, w + b, s0 ? s0 + b : nullptr, s1 ? s1 + b : nullptr, g + b, e - b);
      });
    });
  };
}

template <Kind K, typename T>
KernelFn makeSparse(const Hyper &h, T *w, T *s0, T *s1, const int64_t *idx,
                    const T *values, int64_t n, int64_t rows, int64_t rowSize,
                    ExecEnv *env) {
  int threads = env->threads;
  auto co = std::make_shared<Coalesced>(n);
  const char *op = kindName(K);
  return [=]() {
    if (K == Kind::Adam && env->step < 1)
      throw KernelError("adam: the step number must be >= 1, got " +
                        std::to_string(env->step));
    Scalars<T> c = scalarsFor<T>(K, h, env->step, /*sparse=*/true);
    co->build(idx, n, rows, op);
    const Coalesced &cs = *co;
    int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(rowSize, 1));
    withFlags(c, [&](auto wd, auto nesterov) {
    parallelFor(threads, cs.uniqueRows(), grain, [&](int64_t u0, int64_t u1) {
      detail::ScopedFlushDenormals flush;
      for (int64_t u = u0; u < u1; ++u) {
        int64_t b = cs.begin[u], e = cs.begin[u + 1];
        int64_t off = cs.pairs[b].first * rowSize;
        const T *first = values + cs.pairs[b].second * rowSize;
        T *wr = w + off, *s0r = s0 ? s0 + off : nullptr,
          *s1r = s1 ? s1 + off : nullptr;
        if constexpr (K == Kind::Sgd && !decltype(wd)::value) {
          {
            // param.add_(sparse_grad, alpha=-lr): one update per entry, in
            // position order (the same sum, rounded as PyTorch rounds it).
            for (int64_t q = b; q < e; ++q) {
              const T *v = values + cs.pairs[q].second * rowSize;
              for (int64_t j = 0; j < rowSize; ++j)
                wr[j] = madd(v[j], c.negLr, wr[j]);
            }
            continue;
          }
        }
        if (e - b == 1) { // a row named once: its values are the gradient
          updateSpan<K, true, decltype(wd)::value, decltype(nesterov)::value, T>(
              c, wr, s0r, s1r, first, rowSize);
          continue;
        }
        for (int64_t j = 0; j < rowSize; ++j) {
          T g = first[j];
          for (int64_t q = b + 1; q < e; ++q)
            g += values[cs.pairs[q].second * rowSize + j];
          updateElement<K, true, decltype(wd)::value, decltype(nesterov)::value, T>(
              c, wr, s0r, s1r, j, g);
        }
      }
    });
    });
  };
}

template <Kind K, typename T>
KernelFn bindTyped(KernelArgs &args, const Hyper &h, bool sparse) {
  UpdateOperands<T> o = readUpdate<T>(args, K, sparse);
  if (o.empty)
    return [] {};
  if (!o.sparse)
    return makeDense<K, T>(h, o.w, o.s0, o.s1, o.g, o.n, &args.env);
  return makeSparse<K, T>(h, o.w, o.s0, o.s1, o.idx, o.rows, o.nIdx, o.varRows,
                          o.rowSize, &args.env);
}

template <Kind K> KernelFn optimizerFactory(KernelArgs &args) {
  OptimizerCheck c = checkOptimizer(args, K);
  return args.in(0).dtype == DType::F32 ? bindTyped<K, float>(args, c.h, c.sparse)
                                        : bindTyped<K, double>(args, c.h, c.sparse);
}

KernelFn assignFactory(KernelArgs &args) {
  checkAssign(args);
  const TensorView &var = args.in(0), &value = args.in(1);
  char *dst = static_cast<char *>(var.data);
  const char *src = static_cast<const char *>(value.data);
  int64_t bytes = var.bytes();
  int threads = args.env.threads;
  return [=]() {
    if (dst == src)
      return;
    parallelFor(threads, bytes, 1 << 20, [&](int64_t b, int64_t e) {
      std::memmove(dst + b, src + b, e - b);
    });
  };
}

} // namespace

void registerOptimizerKernels(KernelRegistry &r) {
  PX_ADD_OPTIMIZER_KERNELS(r);
}

} // namespace parallax::rt
