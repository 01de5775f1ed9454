//===- Norm.cpp - softmax, layer and batch normalisation ------------------===//
//
// px.softmax / px.log_softmax (ONNX opset 13: along one axis) and their
// gradients, px.layer_norm (ONNX LayerNormalization) and its gradient,
// px.batch_norm (ONNX BatchNormalization-15: the biased batch variance in
// the running statistics as in the ONNX reference, or the unbiased one as
// PyTorch keeps it with unbiased_running_var) and its training-mode
// gradient. Sums (denominators, means, variances, parameter gradients) are
// accumulated in double and rounded once.
//
//===----------------------------------------------------------------------===//

#include "parallax/Runtime/Comm.h"
#include "parallax/Runtime/Kernel.h"

#include "CollectiveLayout.h"
#include "KernelUtil.h"
#include "NormLayout.h"
#include "Vec4.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>

namespace parallax::rt {
namespace {

using namespace detail;
using namespace norm;

/// Splits [0, n) into `chunks` contiguous ranges; chunk c is [first, last).
inline void chunkRange(int64_t n, int64_t chunks, int64_t c, int64_t &first,
                       int64_t &last) {
  first = n * c / chunks;
  last = n * (c + 1) / chunks;
}

//===----------------------------------------------------------------------===//
// Contiguous row sums (the 4-wide primitives are in Vec4.h).
//===----------------------------------------------------------------------===//

typedef double v2d __attribute__((vector_size(16)));

template <bool Square>
double rowSumFloat(const float *x, int64_t n, double shift) {
  if (Square) {
    // Deviations from the float-rounded shift s; as the shift is the mean
    // m, sum (x - m)^2 = sum (x - s)^2 - n * (m - s)^2.
    double sum = 0;
    int64_t j = 0;
    v4f s = splat((float)shift);
    while (j + 4 <= n) {
      v4f acc = splat(0.0f);
      int64_t end = std::min<int64_t>(n, j + 32);
      for (; j + 4 <= end; j += 4) {
        v4f d = load4(x + j) - s;
        acc += d * d;
      }
      sum += hsum(acc);
    }
    for (; j < n; ++j) {
      double d = (double)x[j] - (double)(float)shift;
      sum += d * d;
    }
    double delta = shift - (double)(float)shift;
    return sum - (double)n * delta * delta;
  }
  // Plain sums (means) accumulate in double lanes: the data may sit far
  // from zero, where float partial sums would lose the mean's low digits.
  v2d a0 = {0.0, 0.0}, a1 = {0.0, 0.0};
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    v4f v = load4(x + j);
    a0 += v2d{v[0], v[1]};
    a1 += v2d{v[2], v[3]};
  }
  double sum = (a0[0] + a1[0]) + (a0[1] + a1[1]);
  for (; j < n; ++j)
    sum += x[j];
  return sum;
}

/// Sum of x[0, n), or (Square) of (x - shift)^2, in double.
template <bool Square, typename T>
double rowSum(const T *x, int64_t n, double shift = 0) {
  if constexpr (std::is_same_v<T, float>) {
    return rowSumFloat<Square>(x, n, shift);
  } else {
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      double v = Square ? (double)x[j] - shift : (double)x[j];
      sum += Square ? v * v : v;
    }
    return sum;
  }
}

/// Returns sum(a * (b - shift)) and sets sumA = sum(a), in double. Floats
/// subtract the float-rounded shift s and correct: sum(a * (b - shift)) =
/// sum(a * (b - s)) - (shift - s) * sum(a).
template <typename T>
double dotShift(const T *a, const T *b, int64_t n, double shift,
                double &sumA) {
  double dot = 0, sa = 0;
  int64_t j = 0;
  T s = (T)shift;
  if constexpr (std::is_same_v<T, float>) {
    v4f vs = splat(s);
    while (j + 4 <= n) {
      v4f accA = splat(0.0f), accD = splat(0.0f);
      int64_t end = std::min<int64_t>(n, j + 32);
      for (; j + 4 <= end; j += 4) {
        v4f va = load4(a + j);
        accA += va;
        accD += va * (load4(b + j) - vs);
      }
      sa += hsum(accA);
      dot += hsum(accD);
    }
  }
  for (; j < n; ++j) {
    sa += a[j];
    dot += (double)a[j] * (double)(b[j] - s);
  }
  sumA = sa;
  return dot - (shift - (double)s) * sa;
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax and their gradients
//===----------------------------------------------------------------------===//

/// One line of `len` elements `stride` apart. Stride is a template argument
/// when it is 1 so that the contiguous case vectorises.
template <typename T, AxisKind K, bool Unit>
inline void axisLine(const T *a, const T *b, T *out, int64_t len,
                     int64_t stride) {
  const int64_t s = Unit ? 1 : stride;
  if constexpr (K == AxisKind::Softmax || K == AxisKind::LogSoftmax) {
    const T *x = a;
    if constexpr (Unit) {
      T mx = rowMax(x, len);
      if constexpr (K == AxisKind::Softmax) {
        double sum = expShiftSum(x, mx, out, len);
        T inv = (T)(1.0 / sum);
        for (int64_t j = 0; j < len; ++j)
          out[j] *= inv;
      } else {
        double sum = expShiftSum(x, mx, (T *)nullptr, len);
        T shift = (T)((double)mx + std::log(sum));
        for (int64_t j = 0; j < len; ++j)
          out[j] = x[j] - shift;
      }
      return;
    }
    T mx = -std::numeric_limits<T>::infinity();
    for (int64_t j = 0; j < len; ++j)
      mx = std::max(mx, x[j * s]);
    double sum = 0;
    if constexpr (K == AxisKind::Softmax) {
      for (int64_t j = 0; j < len; ++j) {
        T e = std::exp(x[j * s] - mx);
        out[j * s] = e;
        sum += e;
      }
      T inv = (T)(1.0 / sum);
      for (int64_t j = 0; j < len; ++j)
        out[j * s] *= inv;
    } else {
      for (int64_t j = 0; j < len; ++j)
        sum += std::exp(x[j * s] - mx);
      T shift = (T)((double)mx + std::log(sum));
      for (int64_t j = 0; j < len; ++j)
        out[j * s] = x[j * s] - shift;
    }
  } else if constexpr (K == AxisKind::SoftmaxGrad) {
    const T *y = a, *dy = b;
    double sum = 0, unused;
    if constexpr (Unit)
      sum = dotShift(dy, y, len, 0.0, unused);
    else
      for (int64_t j = 0; j < len; ++j)
        sum += (double)dy[j * s] * (double)y[j * s];
    T ts = (T)sum;
    for (int64_t j = 0; j < len; ++j)
      out[j * s] = y[j * s] * (dy[j * s] - ts);
  } else {
    const T *y = a, *dy = b;
    if constexpr (Unit) {
      T ts = (T)rowSum<false>(dy, len);
      expShiftSum(y, T(0), out, len);
      for (int64_t j = 0; j < len; ++j)
        out[j] = dy[j] - out[j] * ts;
      return;
    }
    double sum = 0;
    for (int64_t j = 0; j < len; ++j)
      sum += dy[j * s];
    T ts = (T)sum;
    for (int64_t j = 0; j < len; ++j)
      out[j * s] = dy[j * s] - std::exp(y[j * s]) * ts;
  }
}

template <typename T, AxisKind K>
KernelFn axisTyped(KernelArgs &args, int64_t axis) {
  const TensorView &in0 = args.in(0), &out = args.out(0);
  const T *a = in0.as<T>();
  const T *b = (K == AxisKind::SoftmaxGrad || K == AxisKind::LogSoftmaxGrad)
                   ? args.in(1).as<T>()
                   : nullptr;
  T *y = out.as<T>();
  int64_t outer = product(in0.shape, 0, axis), len = in0.dim(axis);
  int64_t inner = product(in0.shape, axis + 1, in0.shape.size());
  int64_t lines = outer * inner;
  int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(len, 1));
  int threads = args.env.threads;
  if (inner == 1)
    return [=] {
      parallelFor(threads, lines, grain, [&](int64_t l0, int64_t l1) {
        for (int64_t l = l0; l < l1; ++l)
          axisLine<T, K, true>(a + l * len, b ? b + l * len : nullptr,
                               y + l * len, len, 1);
      });
    };
  return [=] {
    parallelFor(threads, lines, grain, [&](int64_t l0, int64_t l1) {
      for (int64_t l = l0; l < l1; ++l) {
        int64_t base = (l / inner) * len * inner + l % inner;
        axisLine<T, K, false>(a + base, b ? b + base : nullptr, y + base, len,
                              inner);
      }
    });
  };
}

template <AxisKind K> KernelFn axisFactory(KernelArgs &args) {
  int64_t axis = axisOf(args, K);
  return args.in(0).dtype == DType::F32 ? axisTyped<float, K>(args, axis)
                                        : axisTyped<double, K>(args, axis);
}

//===----------------------------------------------------------------------===//
// layer_norm and layer_norm_grad
//===----------------------------------------------------------------------===//

/// A parameter as one value per normalised element: the tensor itself, or
/// a scratch copy expanded through the broadcast map.
template <typename T> struct Param {
  const T *data = nullptr;
  std::shared_ptr<std::vector<int64_t>> map;
  std::shared_ptr<std::vector<T>> expanded;

  Param() = default;
  Param(const T *data, std::vector<int64_t> m) : data(data) {
    if (!m.empty()) {
      expanded = std::make_shared<std::vector<T>>(m.size());
      map = std::make_shared<std::vector<int64_t>>(std::move(m));
    }
  }
  /// Call once per run, before reading.
  const T *get() const {
    if (!map)
      return data;
    T *e = expanded->data();
    const int64_t *m = map->data();
    for (size_t j = 0; j < map->size(); ++j)
      e[j] = data[m[j]];
    return e;
  }
};

template <typename T> KernelFn layerNormTyped(KernelArgs &args) {
  LayerNormLayout l = layerNormLayout(args);
  const LayerNormShape &s = l.shape;
  Param<T> scale(args.in(1).as<T>(), std::move(l.scaleMap));
  bool hasBias = l.hasBias;
  Param<T> bias;
  if (hasBias)
    bias = Param<T>(args.in(2).as<T>(), std::move(l.biasMap));
  double eps = l.eps;
  const T *xp = args.in(0).as<T>();
  T *y = args.out(0).as<T>(), *mean = args.out(1).as<T>(),
    *invStd = args.out(2).as<T>();
  int64_t rows = s.rows, len = s.len;
  int threads = args.env.threads;
  int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(len, 1));
  return [=] {
    const T *sc = scale.get();
    const T *bi = hasBias ? bias.get() : nullptr;
    parallelFor(threads, rows, grain, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T *xr = xp + r * len;
        T *yr = y + r * len;
        double mu = rowSum<false>(xr, len) / (double)len;
        double sq = rowSum<true>(xr, len, mu);
        double inv = 1.0 / std::sqrt(sq / (double)len + eps);
        mean[r] = (T)mu;
        invStd[r] = (T)inv;
        T m = (T)mu, iv = (T)inv;
        if (bi)
          for (int64_t j = 0; j < len; ++j)
            yr[j] = (xr[j] - m) * iv * sc[j] + bi[j];
        else
          for (int64_t j = 0; j < len; ++j)
            yr[j] = (xr[j] - m) * iv * sc[j];
      }
    });
  };
}

KernelFn layerNormFactory(KernelArgs &args) {
  auto typed = [&](auto t) { return layerNormTyped<decltype(t)>(args); };
  return dispatchNormFloat(args, args.in(0).dtype, "layer_norm", typed);
}

/// sg = sum(dy * scale), sgx = sum(dy * scale * xhat) over one row, where
/// xhat = (x - m) * iv.
template <typename T>
void gradSums(const T *x, const T *dy, const T *sc, T m, T iv, int64_t n,
              double &sg, double &sgx) {
  sg = sgx = 0;
  int64_t j = 0;
  if constexpr (std::is_same_v<T, float>) {
    v4f vm = splat(m), vi = splat(iv);
    while (j + 4 <= n) {
      v4f a = splat(0.0f), b = splat(0.0f);
      int64_t end = std::min<int64_t>(n, j + 32);
      for (; j + 4 <= end; j += 4) {
        v4f g = load4(dy + j) * load4(sc + j);
        a += g;
        b += g * ((load4(x + j) - vm) * vi);
      }
      sg += hsum(a);
      sgx += hsum(b);
    }
  }
  for (; j < n; ++j) {
    T g = dy[j] * sc[j];
    sg += g;
    sgx += (double)g * ((x[j] - m) * iv);
  }
}

template <typename T> KernelFn layerNormGradTyped(KernelArgs &args) {
  const TensorView &dy = args.in(0), &x = args.in(1), &scaleT = args.in(2);
  LayerNormGradLayout l = layerNormGradLayout(args);
  const LayerNormShape &s = l.shape;
  std::vector<int64_t> &map = l.scaleMap;
  Param<T> scale(scaleT.as<T>(), map);
  auto pmap = std::make_shared<std::vector<int64_t>>(std::move(map));
  int64_t rows = s.rows, len = s.len, nScale = l.nScale;
  int threads = args.env.threads;
  // Row chunks, each with its own partial sums of dscale and dbias.
  int64_t chunks = std::max<int64_t>(
      1, std::min<int64_t>(threads, rows * len / 16384));
  chunks = std::min<int64_t>(chunks, std::max<int64_t>(rows, 1));
  auto partial = std::make_shared<std::vector<double>>(chunks * 2 * len);
  auto reduced = std::make_shared<std::vector<double>>(2 * nScale);
  const T *dyp = dy.as<T>(), *xp = x.as<T>(), *meanp = args.in(3).as<T>(),
          *invp = args.in(4).as<T>();
  T *dx = args.out(0).as<T>(), *dscale = args.out(1).as<T>(),
    *dbias = args.out(2).as<T>();
  return [=] {
    const T *sc = scale.get();
    double *part = partial->data();
    parallelFor(threads, chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        double *ds = part + c * 2 * len, *db = ds + len;
        std::fill(ds, ds + 2 * len, 0.0);
        int64_t first, last;
        chunkRange(rows, chunks, c, first, last);
        for (int64_t r = first; r < last; ++r) {
          const T *xr = xp + r * len, *dyr = dyp + r * len;
          T *dxr = dx + r * len;
          T m = meanp[r], iv = invp[r];
          double sg, sgx;
          gradSums(xr, dyr, sc, m, iv, len, sg, sgx);
          for (int64_t j = 0; j < len; ++j) {
            T xh = (xr[j] - m) * iv;
            ds[j] += (double)dyr[j] * xh;
            db[j] += dyr[j];
          }
          T mg = (T)(sg / (double)len), mgx = (T)(sgx / (double)len);
          for (int64_t j = 0; j < len; ++j) {
            T xh = (xr[j] - m) * iv;
            dxr[j] = iv * (dyr[j] * sc[j] - mg - xh * mgx);
          }
        }
      }
    });
    // Sum the chunks, then fold the normalised shape onto scale's shape.
    double *red = reduced->data();
    std::fill(red, red + 2 * nScale, 0.0);
    const std::vector<int64_t> &m = *pmap;
    for (int64_t c = 0; c < chunks; ++c) {
      const double *ds = part + c * 2 * len, *db = ds + len;
      for (int64_t j = 0; j < len; ++j) {
        int64_t k = m.empty() ? j : m[j];
        red[k] += ds[j];
        red[nScale + k] += db[j];
      }
    }
    for (int64_t k = 0; k < nScale; ++k) {
      dscale[k] = (T)red[k];
      dbias[k] = (T)red[nScale + k];
    }
  };
}

KernelFn layerNormGradFactory(KernelArgs &args) {
  auto typed = [&](auto t) { return layerNormGradTyped<decltype(t)>(args); };
  return dispatchNormFloat(args, args.in(1).dtype, "layer_norm_grad", typed);
}

//===----------------------------------------------------------------------===//
// batch_norm and batch_norm_grad
//===----------------------------------------------------------------------===//

/// Mean and biased variance of channel `ch` (two passes, in double).
template <typename T>
void channelStats(const T *x, const BatchShape &s, int64_t ch, double &mean,
                  double &var) {
  double sum = 0;
  for (int64_t n = 0; n < s.n; ++n)
    sum += rowSum<false>(x + (n * s.c + ch) * s.spatial, s.spatial);
  double count = (double)(s.n * s.spatial);
  mean = sum / count;
  double sq = 0;
  for (int64_t n = 0; n < s.n; ++n)
    sq += rowSum<true>(x + (n * s.c + ch) * s.spatial, s.spatial, mean);
  var = sq / count;
}

/// Synchronized batch norm: sums over channels are added up over the group
/// of the op's grid (its grid_axes), so statistics are those of the group's
/// whole batch. Returns null for a local batch norm.
std::function<void(std::vector<double> &)> groupSum(KernelArgs &args) {
  if (!args.has("grid"))
    return nullptr;
  Comm *comm = args.env.comm;
  Group *group = &batchNormGroup(args);
  auto info = std::make_shared<JobInfo>(jobInfoOf(args));
  info->name = "all_reduce";
  info->description = "the batch statistics' all_reduce of " + info->description;
  return [comm, group, info](std::vector<double> &v) {
    try {
      comm->run([&] {
        comm->allreduce(*group, v.data(), (int64_t)v.size(), DType::F64,
                        ReduceOp::Sum);
        // Counted as all-reduces are: the ring volume, 2 (G-1)/G of it.
        int64_t g = group->size(), bytes = (int64_t)(v.size() * sizeof(double));
        int64_t ring = ringBytes(bytes, (int)g);
        comm->traffic.add("(batchnorm)", ring, ring);
      }, info.get());
    } catch (const CommError &e) {
      throw KernelError(e.what());
    }
  };
}

/// Per-channel mean and biased variance of x over N and the spatial dims,
/// over the whole group when `across` is set (two passes, in double).
template <typename T>
void batchStats(const T *x, const BatchShape &s, int threads, int64_t grain,
                const std::function<void(std::vector<double> &)> &across,
                int groupSize, std::vector<double> &mean, std::vector<double> &var) {
  mean.assign(s.c, 0.0);
  var.assign(s.c, 0.0);
  double count = (double)(s.n * s.spatial) * groupSize;
  parallelFor(threads, s.c, grain, [&](int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch)
      for (int64_t n = 0; n < s.n; ++n)
        mean[ch] += rowSum<false>(x + (n * s.c + ch) * s.spatial, s.spatial);
  });
  if (across)
    across(mean);
  for (double &m : mean)
    m /= count;
  parallelFor(threads, s.c, grain, [&](int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch)
      for (int64_t n = 0; n < s.n; ++n)
        var[ch] += rowSum<true>(x + (n * s.c + ch) * s.spatial, s.spatial, mean[ch]);
  });
  if (across)
    across(var);
  for (double &v : var)
    v /= count;
}

/// Ranks whose batches a synchronized batch norm's statistics cover.
int groupSizeOf(KernelArgs &args) {
  return args.has("grid") ? batchNormGroup(args).size() : 1;
}

template <typename T> KernelFn batchNormTyped(KernelArgs &args) {
  const TensorView &x = args.in(0);
  BatchNormLayout l = batchNormLayout(args);
  const BatchShape s = l.shape;
  double eps = l.eps, momentum = l.momentum;
  bool training = l.training;
  auto across = groupSum(args);
  int groupSize = groupSizeOf(args);
  // n values per channel in the whole (synchronized) batch.
  double unbias = runningVarFactor(
      args, l, (double)(s.n * s.spatial) * (across ? groupSize : 1));
  const T *xp = x.as<T>(), *scale = args.in(1).as<T>(),
          *bias = args.in(2).as<T>(), *inMean = args.in(3).as<T>(),
          *inVar = args.in(4).as<T>();
  T *y = args.out(0).as<T>(), *runMean = args.out(1).as<T>(),
    *runVar = args.out(2).as<T>();
  int threads = args.env.threads;
  // y = a[c] * x + b[c]
  auto coef = std::make_shared<std::vector<T>>(2 * s.c);
  int64_t planes = s.n * s.c;
  int64_t planeGrain = std::max<int64_t>(1, 16384 / std::max<int64_t>(s.spatial, 1));
  int64_t chanGrain =
      std::max<int64_t>(1, 16384 / std::max<int64_t>(s.n * s.spatial, 1));
  return [=] {
    T *a = coef->data(), *b = a + s.c;
    if (training && across) {
      std::vector<double> means, vars;
      batchStats(xp, s, threads, chanGrain, across, groupSize, means, vars);
      for (int64_t ch = 0; ch < s.c; ++ch) {
        double inv = 1.0 / std::sqrt(vars[ch] + eps);
        a[ch] = (T)((double)scale[ch] * inv);
        b[ch] = (T)((double)bias[ch] - means[ch] * (double)scale[ch] * inv);
        runMean[ch] = (T)(momentum * inMean[ch] + (1.0 - momentum) * means[ch]);
        runVar[ch] = (T)(momentum * inVar[ch] + (1.0 - momentum) * vars[ch] * unbias);
      }
    } else if (training) {
      parallelFor(threads, s.c, chanGrain, [&](int64_t c0, int64_t c1) {
        for (int64_t ch = c0; ch < c1; ++ch) {
          double mean, var;
          channelStats(xp, s, ch, mean, var);
          double inv = 1.0 / std::sqrt(var + eps);
          a[ch] = (T)((double)scale[ch] * inv);
          b[ch] = (T)((double)bias[ch] - mean * (double)scale[ch] * inv);
          runMean[ch] = (T)(momentum * inMean[ch] + (1.0 - momentum) * mean);
          runVar[ch] = (T)(momentum * inVar[ch] + (1.0 - momentum) * var * unbias);
        }
      });
    } else {
      for (int64_t ch = 0; ch < s.c; ++ch) {
        double inv = 1.0 / std::sqrt((double)inVar[ch] + eps);
        a[ch] = (T)((double)scale[ch] * inv);
        b[ch] = (T)((double)bias[ch] - (double)inMean[ch] * scale[ch] * inv);
        runMean[ch] = inMean[ch];
        runVar[ch] = inVar[ch];
      }
    }
    parallelFor(threads, planes, planeGrain, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        int64_t ch = p % s.c;
        T ac = a[ch], bc = b[ch];
        const T *xr = xp + p * s.spatial;
        T *yr = y + p * s.spatial;
        for (int64_t i = 0; i < s.spatial; ++i)
          yr[i] = ac * xr[i] + bc;
      }
    });
  };
}

KernelFn batchNormFactory(KernelArgs &args) {
  auto typed = [&](auto t) { return batchNormTyped<decltype(t)>(args); };
  return dispatchNormFloat(args, args.in(0).dtype, "batch_norm", typed);
}

template <typename T> KernelFn batchNormGradTyped(KernelArgs &args) {
  const TensorView &dy = args.in(0), &x = args.in(1);
  const BatchShape s = batchNormGradShape(args);
  double eps = args.f64Or("epsilon", 1e-5);
  const T *dyp = dy.as<T>(), *xp = x.as<T>(), *scale = args.in(2).as<T>();
  T *dx = args.out(0).as<T>(), *dscale = args.out(1).as<T>(),
    *dbias = args.out(2).as<T>();
  int threads = args.env.threads;
  int64_t chanGrain =
      std::max<int64_t>(1, 8192 / std::max<int64_t>(s.n * s.spatial, 1));
  auto across = groupSum(args);
  int groupSize = groupSizeOf(args);
  if (across)
    return [=] {
      // SyncBatchNorm: global statistics, and dx from the global sums of dy
      // and dy * xhat; dscale and dbias stay this rank's sums (the gradient
      // all-reduce averages them).
      std::vector<double> means, vars, sums(2 * s.c, 0.0);
      batchStats(xp, s, threads, chanGrain, across, groupSize, means, vars);
      parallelFor(threads, s.c, chanGrain, [&](int64_t c0, int64_t c1) {
        for (int64_t ch = c0; ch < c1; ++ch)
          for (int64_t n = 0; n < s.n; ++n) {
            int64_t off = (n * s.c + ch) * s.spatial;
            double part;
            sums[s.c + ch] += dotShift(dyp + off, xp + off, s.spatial, means[ch], part);
            sums[ch] += part;
          }
      });
      for (int64_t ch = 0; ch < s.c; ++ch) {
        double inv = 1.0 / std::sqrt(vars[ch] + eps);
        dbias[ch] = (T)sums[ch];
        dscale[ch] = (T)(sums[s.c + ch] * inv);
      }
      across(sums);
      double count = (double)(s.n * s.spatial) * groupSize;
      parallelFor(threads, s.c, chanGrain, [&](int64_t c0, int64_t c1) {
        for (int64_t ch = c0; ch < c1; ++ch) {
          double inv = 1.0 / std::sqrt(vars[ch] + eps);
          T k = (T)((double)scale[ch] * inv), mdy = (T)(sums[ch] / count),
            m = (T)means[ch], iv = (T)inv, mdx = (T)(sums[s.c + ch] * inv / count);
          for (int64_t n = 0; n < s.n; ++n) {
            int64_t off = (n * s.c + ch) * s.spatial;
            for (int64_t i = 0; i < s.spatial; ++i) {
              T xh = (xp[off + i] - m) * iv;
              dx[off + i] = k * (dyp[off + i] - mdy - xh * mdx);
            }
          }
        }
      });
    };
  return [=] {
    parallelFor(threads, s.c, chanGrain, [&](int64_t c0, int64_t c1) {
      for (int64_t ch = c0; ch < c1; ++ch) {
        double mean, var;
        channelStats(xp, s, ch, mean, var);
        double inv = 1.0 / std::sqrt(var + eps);
        double sdy = 0, sdyx = 0;
        for (int64_t n = 0; n < s.n; ++n) {
          int64_t off = (n * s.c + ch) * s.spatial;
          double part;
          sdyx += dotShift(dyp + off, xp + off, s.spatial, mean, part);
          sdy += part;
        }
        double ds = sdyx * inv, count = (double)(s.n * s.spatial);
        dbias[ch] = (T)sdy;
        dscale[ch] = (T)ds;
        // dx = scale * inv * (dy - mean(dy) - xhat * mean(dy * xhat))
        T k = (T)((double)scale[ch] * inv), mdy = (T)(sdy / count),
          m = (T)mean, iv = (T)inv, mdx = (T)(ds / count);
        for (int64_t n = 0; n < s.n; ++n) {
          int64_t off = (n * s.c + ch) * s.spatial;
          for (int64_t i = 0; i < s.spatial; ++i) {
            T xh = (xp[off + i] - m) * iv;
            dx[off + i] = k * (dyp[off + i] - mdy - xh * mdx);
          }
        }
      }
    });
  };
}

KernelFn batchNormGradFactory(KernelArgs &args) {
  auto typed = [&](auto t) { return batchNormGradTyped<decltype(t)>(args); };
  return dispatchNormFloat(args, args.in(1).dtype, "batch_norm_grad", typed);
}

} // namespace

void registerNormKernels(KernelRegistry &r) {
  PX_ADD_NORM_KERNELS(r);
}

} // namespace parallax::rt
