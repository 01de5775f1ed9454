//===- Elementwise.cpp - broadcasting binary ops, unary ops, cast, dropout ===//
//
// Binary ops broadcast their operands to the result shape with numpy rules.
// The factory turns the shapes into a Geometry: the result's dimensions with
// size-1 dimensions dropped and adjacent dimensions merged wherever every
// operand is contiguous across them, plus each operand's stride (0 where it
// is broadcast) per merged dimension. Same-shape operands become one
// contiguous dimension, a single-element operand a stride-0 dimension, and
// the bias case [N, C] + [C] two dimensions whose inner one has strides
// (1, 1) or (1, 0); the innermost stride of every operand is always 0 or 1,
// so the inner loops below are plain (vectorizable) contiguous loops. The
// general N-d case walks the outer dimensions with an odometer.
//
//===----------------------------------------------------------------------===//

// Let GCC vectorize loops with selects and sqrt: neither option changes a
// result (they only drop FP exception flags and errno, which nothing reads).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math", "no-math-errno")
#endif

#include "parallax/Runtime/Kernel.h"

#include "BroadcastGeometry.h"
#include "ElementwiseLayout.h"
#include "ElementwiseMath.h"
#include "KernelUtil.h"
#include "parallax/Runtime/Random.h"

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
using ew::Bin;
using ew::Cmp;
using ew::dispatchAny;
using ew::Geometry;
using ew::kMaxDims;
using ew::kMaxOperands;
using ew::Storage;
/// Elements per thread below which a loop stays serial.
constexpr int64_t kCheapGrain = 1 << 15;  // add, mul, compare, copy-like
constexpr int64_t kCostlyGrain = 1 << 12; // exp, tanh, erf, pow, dropout

//===----------------------------------------------------------------------===//
// Broadcast geometry.
//===----------------------------------------------------------------------===//

/// Calls seg(outOffset, operandOffsets, length, innerStrides) for the runs
/// of the innermost dimension that cover result elements [begin, end).
template <typename Seg>
inline void forSegments(const Geometry &g, int64_t begin, int64_t end,
                        Seg &&seg) {
  const int nd = g.nd, nin = g.nin;
  const int64_t inner = g.dims[nd - 1];
  int64_t idx[kMaxDims] = {};
  int64_t row[kMaxOperands] = {}, off[kMaxOperands] = {},
          inc[kMaxOperands] = {};
  int64_t r = begin / inner, j = begin % inner;
  for (int d = nd - 2; d >= 0; --d) {
    idx[d] = r % g.dims[d];
    r /= g.dims[d];
    for (int k = 0; k < nin; ++k)
      row[k] += idx[d] * g.strides[k][d];
  }
  for (int k = 0; k < nin; ++k)
    inc[k] = g.strides[k][nd - 1];
  int64_t pos = begin;
  while (pos < end) {
    int64_t len = std::min(inner - j, end - pos);
    for (int k = 0; k < nin; ++k)
      off[k] = row[k] + j * inc[k];
    seg(pos, off, len, inc);
    pos += len;
    j = 0;
    if (pos >= end)
      break;
    for (int d = nd - 2; d >= 0; --d) {
      for (int k = 0; k < nin; ++k)
        row[k] += g.strides[k][d];
      if (++idx[d] < g.dims[d])
        break;
      for (int k = 0; k < nin; ++k)
        row[k] -= g.strides[k][d] * g.dims[d];
      idx[d] = 0;
    }
  }
}

//===----------------------------------------------------------------------===//
// Binary operations.
//===----------------------------------------------------------------------===//

// The element values are ew's (ElementwiseMath.h, shared with the GPU);
// the CPU adds the run-time errors.
using SquareOp = ew::Square;
struct DivOp {
  template <typename T> T operator()(T a, T b) const {
    if (ew::divisionFails(b))
      throw KernelError("div: integer division by zero (a divisor element is 0)");
    return ew::Div{}(a, b);
  }
};
template <bool Fmod> struct ModOp {
  template <typename T> T operator()(T a, T b) const {
    if (ew::divisionFails(b))
      throw KernelError("mod: integer modulo by zero (a divisor element is 0)");
    return ew::Mod<Fmod>{}(a, b);
  }
};
struct PowOp {
  template <typename T, typename E> T operator()(T a, E b) const {
    if (ew::powFails(a, b))
      throw KernelError("pow: integer 0 raised to a negative power");
    return ew::Pow{}(a, b);
  }
};
using EqualBoolOp = ew::EqualBool;

template <typename TA, typename TB, typename TO, typename Op>
inline void binaryRun(const TA *a, int64_t sa, const TB *b, int64_t sb, TO *o,
                      int64_t n, const Op &op) {
  if (sa && sb) {
    for (int64_t i = 0; i < n; ++i)
      o[i] = op(a[i], b[i]);
  } else if (sa) {
    const TB bv = *b;
    for (int64_t i = 0; i < n; ++i)
      o[i] = op(a[i], bv);
  } else if (sb) {
    const TA av = *a;
    for (int64_t i = 0; i < n; ++i)
      o[i] = op(av, b[i]);
  } else {
    const TO v = op(*a, *b);
    for (int64_t i = 0; i < n; ++i)
      o[i] = v;
  }
}

/// A binary kernel over storage types TA, TB -> TO.
template <typename TA, typename TB, typename TO, typename Op>
KernelFn makeBinary(const Geometry &g, const TensorView &a, const TensorView &b,
                    const TensorView &o, int threads, int64_t grain, Op op) {
  struct State {
    Geometry g;
    const TA *a;
    const TB *b;
    TO *o;
    int threads;
    int64_t grain;
    Op op;
  };
  auto st = std::make_shared<State>(
      State{g, a.as<const TA>(), b.as<const TB>(), o.as<TO>(), threads, grain, op});
  return [st] {
    const State &s = *st;
    if (s.g.numel == 0)
      return;
    parallelFor(s.threads, s.g.numel, s.grain, [&s](int64_t begin, int64_t end) {
      forSegments(s.g, begin, end,
                  [&s](int64_t oo, const int64_t *off, int64_t n, const int64_t *inc) {
                    binaryRun(s.a + off[0], inc[0], s.b + off[1], inc[1], s.o + oo,
                              n, s.op);
                  });
    });
  };
}

KernelFactory arithFactory(std::string name, Bin kind) {
  return [name, kind](KernelArgs &args) -> KernelFn {
    const TensorView &a = args.in(0), &b = args.in(1), &o = args.out(0);
    Geometry g = ew::binaryGeometry(args, name, a.dtype);
    int threads = args.env.threads;
    return dispatchNumeric(args, a.dtype, name, [&](auto tag) -> KernelFn {
      using T = decltype(tag);
      int64_t grain = std::is_integral_v<T> && kind == Bin::Div ? kCostlyGrain
                                                                 : kCheapGrain;
      return ew::withArithOp(args, name, kind, DivOp{}, [&](auto op) -> KernelFn {
        return makeBinary<T, T, T>(g, a, b, o, threads, grain, op);
      });
    });
  };
}

KernelFn powFactory(KernelArgs &args) {
  const TensorView &a = args.in(0), &b = args.in(1), &o = args.out(0);
  Geometry g = ew::binaryGeometry(args, "pow", a.dtype, /*sameTypes=*/false);
  int threads = args.env.threads;
  const bool scalarExponent = b.numElements() == 1;
  const DType edt = b.dtype;
  const void *bdata = b.data;
  return dispatchNumeric(args, a.dtype, "pow base", [&](auto base) -> KernelFn {
    using T = decltype(base);
    return dispatchNumeric(args, edt, "pow exponent", [&](auto exp) -> KernelFn {
      using E = decltype(exp);
      KernelFn general = makeBinary<T, E, T>(g, a, b, o, threads, kCostlyGrain, PowOp{});
      if (!scalarExponent)
        return general;
      // x^2 (LayerNorm variances, squared errors) as one multiplication.
      KernelFn square = makeBinary<T, E, T>(g, a, b, o, threads, kCheapGrain, SquareOp{});
      const E *e = static_cast<const E *>(bdata);
      return [general, square, e] {
        if (*e == E(2))
          square();
        else
          general();
      };
    });
  });
}

KernelFn modFactory(KernelArgs &args) {
  const TensorView &a = args.in(0), &b = args.in(1), &o = args.out(0);
  Geometry g = ew::binaryGeometry(args, "mod", a.dtype);
  const bool fmod = args.flag("fmod");
  int threads = args.env.threads;
  return dispatchNumeric(args, a.dtype, "mod", [&](auto tag) -> KernelFn {
    using T = decltype(tag);
    if (fmod)
      return makeBinary<T, T, T>(g, a, b, o, threads, kCostlyGrain, ModOp<true>{});
    return makeBinary<T, T, T>(g, a, b, o, threads, kCostlyGrain, ModOp<false>{});
  });
}

KernelFactory compareFactory(std::string name, Cmp kind) {
  return [name, kind](KernelArgs &args) -> KernelFn {
    const TensorView &a = args.in(0), &b = args.in(1), &o = args.out(0);
    Geometry g = ew::binaryGeometry(args, name, DType::Bool);
    int threads = args.env.threads;
    if (a.dtype == DType::Bool) {
      ew::checkBoolCompare(args, name, kind);
      return makeBinary<uint8_t, uint8_t, uint8_t>(g, a, b, o, threads, kCheapGrain,
                                                   EqualBoolOp{});
    }
    return dispatchNumeric(args, a.dtype, name, [&](auto tag) -> KernelFn {
      using T = decltype(tag);
      return ew::withCompareOp(args, name, kind, [&](auto op) -> KernelFn {
        return makeBinary<T, T, uint8_t>(g, a, b, o, threads, kCheapGrain, op);
      });
    });
  };
}

//===----------------------------------------------------------------------===//
// where(condition, x, y).
//===----------------------------------------------------------------------===//

/// o[i] = c[i * SC] ? x[i * SX] : y[i * SY] with compile-time strides 0 or 1.
/// The select is written on the bits (a mask from the condition byte), so the
/// loop vectorizes for every element size.
template <typename T, int SC, int SX, int SY>
inline void whereLoop(const uint8_t *c, const T *x, const T *y, T *o, int64_t n) {
  if constexpr (SC == 0) {
    const T *src = c[0] ? x : y;
    const int64_t step = c[0] ? SX : SY;
    if (step == 1)
      std::memcpy(o, src, n * sizeof(T));
    else
      std::fill(o, o + n, src[0]);
    return;
  } else {
    for (int64_t i = 0; i < n; ++i) {
      T m = (T)0 - (T)(c[i] != 0); // all ones when the condition holds
      o[i] = (x[i * SX] & m) | (y[i * SY] & (T)~m);
    }
  }
}

template <typename T>
KernelFn makeWhere(const Geometry &g, const TensorView &c, const TensorView &x,
                   const TensorView &y, const TensorView &o, int threads) {
  struct State {
    Geometry g;
    const uint8_t *c;
    const T *x, *y;
    T *o;
    int threads;
  };
  auto st = std::make_shared<State>(State{g, c.as<const uint8_t>(), x.as<const T>(),
                                          y.as<const T>(), o.as<T>(), threads});
  return [st] {
    const State &s = *st;
    if (s.g.numel == 0)
      return;
    parallelFor(s.threads, s.g.numel, kCheapGrain, [&s](int64_t begin, int64_t end) {
      forSegments(s.g, begin, end,
                  [&s](int64_t oo, const int64_t *off, int64_t n, const int64_t *inc) {
                    const uint8_t *c = s.c + off[0];
                    const T *x = s.x + off[1], *y = s.y + off[2];
                    T *o = s.o + oo;
                    // Inner strides are 0 or 1 (see Geometry): one plain
                    // loop per pattern, so that each vectorizes (a scalar
                    // x or y, as in relu's gradient where(x > 0, dy, 0),
                    // is a broadcast register).
                    switch ((inc[0] ? 4 : 0) | (inc[1] ? 2 : 0) | (inc[2] ? 1 : 0)) {
                    case 7: whereLoop<T, 1, 1, 1>(c, x, y, o, n); break;
                    case 6: whereLoop<T, 1, 1, 0>(c, x, y, o, n); break;
                    case 5: whereLoop<T, 1, 0, 1>(c, x, y, o, n); break;
                    case 4: whereLoop<T, 1, 0, 0>(c, x, y, o, n); break;
                    case 3: whereLoop<T, 0, 1, 1>(c, x, y, o, n); break;
                    case 2: whereLoop<T, 0, 1, 0>(c, x, y, o, n); break;
                    case 1: whereLoop<T, 0, 0, 1>(c, x, y, o, n); break;
                    default: whereLoop<T, 0, 0, 0>(c, x, y, o, n); break;
                    }
                  });
    });
  };
}

KernelFn whereFactory(KernelArgs &args) {
  const TensorView &c = args.in(0), &x = args.in(1), &y = args.in(2), &o = args.out(0);
  Geometry g = ew::whereGeometry(args);
  int threads = args.env.threads;
  return ew::withWhereUnit(args, [&](auto unit) -> KernelFn {
    return makeWhere<decltype(unit)>(g, c, x, y, o, threads);
  });
}

//===----------------------------------------------------------------------===//
// Unary operations (same shape and type in and out).
//===----------------------------------------------------------------------===//

template <typename TI, typename TO, typename Op>
KernelFn makeUnary(const TensorView &in, const TensorView &out, int threads,
                   int64_t grain, Op op) {
  struct State {
    const TI *x;
    TO *y;
    int64_t n;
    int threads;
    int64_t grain;
    Op op;
  };
  auto st = std::make_shared<State>(
      State{in.as<const TI>(), out.as<TO>(), in.numElements(), threads, grain, op});
  return [st] {
    const State &s = *st;
    parallelFor(s.threads, s.n, s.grain, [&s](int64_t begin, int64_t end) {
      const TI *x = s.x;
      TO *y = s.y;
      for (int64_t i = begin; i < end; ++i)
        y[i] = s.op(x[i]);
    });
  };
}

//===----------------------------------------------------------------------===//
// f32 transcendental functions without libm calls, so that the loops over
// them vectorize (glibc's expf/tanhf/erff are scalar calls, 5-30 ns each).
// Accuracy: a few ulp for exp, tanh and sigmoid; erf is within 2e-7
// absolute (1e-6 relative over its whole range). f64 uses <cmath>.
//===----------------------------------------------------------------------===//

inline float bitsToFloat(int32_t i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}

/// e^x: x = n ln2 + r with |r| <= ln2 / 2 (Cody-Waite), e^r by Cephes'
/// expf polynomial, 2^n applied as two factors so that results near
/// overflow and subnormal results are right.
inline float fastExp(float x) {
  const float in = x;
  x = x > -104.0f ? x : -104.0f; // also maps NaN to a number (no UB below)
  x = x < 89.0f ? x : 89.0f;
  // Round to nearest with the 1.5 * 2^23 trick (no libm call).
  const float fn = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - fn * 0.693359375f;
  r = r - fn * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const int32_t n = (int32_t)fn, n1 = n >> 1, n2 = n - n1;
  const float result = y * bitsToFloat((n1 + 127) << 23) * bitsToFloat((n2 + 127) << 23);
  return in != in ? in : result;
}

inline float fastTanh(float x) {
  const float ax = std::fabs(x);
  // |x| < 0.625: Cephes' tanhf polynomial (relative accuracy near 0).
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  // Otherwise 1 - 2 / (e^2|x| + 1), with the sign of x (e = inf gives 1).
  const float large = std::copysign(1.0f - 2.0f / (fastExp(2.0f * ax) + 1.0f), x);
  return ax < 0.625f ? small : large; // NaN: large is NaN
}

inline float fastSigmoid(float x) {
  // Only e^-|x| is computed: it cannot overflow.
  const float e = fastExp(-std::fabs(x));
  const float s = 1.0f / (1.0f + e);
  return x >= 0.0f ? s : e * s; // NaN: e * s is NaN
}

/// Taylor coefficients of erf: 2/sqrt(pi) (-1)^k / (k! (2k + 1)).
struct ErfTaylor {
  float c[12];
  constexpr ErfTaylor() : c() {
    double fact = 1.0;
    for (int k = 0; k < 12; ++k) {
      if (k)
        fact *= k;
      c[k] = (float)((k % 2 ? -1.0 : 1.0) * 1.1283791670955126 / (fact * (2 * k + 1)));
    }
  }
};
constexpr ErfTaylor kErfTaylor;

inline float fastErf(float x) {
  const float ax = std::fabs(x);
  // |x| < 1: the Taylor series in x^2 (12 terms: truncation < 1e-10).
  const float z = x * x;
  float p = kErfTaylor.c[11];
  for (int k = 10; k >= 0; --k)
    p = p * z + kErfTaylor.c[k];
  const float small = p * x;
  // |x| >= 1: Abramowitz & Stegun 7.1.26 (absolute error <= 1.5e-7, so
  // relative <= 2e-7 since erf(1) = 0.84).
  const float t = 1.0f / (1.0f + 0.3275911f * ax);
  float q = 1.061405429f;
  q = q * t - 1.453152027f;
  q = q * t + 1.421413741f;
  q = q * t - 0.284496736f;
  q = q * t + 0.254829592f;
  const float large = std::copysign(1.0f - q * t * fastExp(-z), x);
  return ax < 1.0f ? small : large;
}

// The f32 loops exist twice: for the baseline ISA and for AVX2 + FMA
// (chosen once, at bind time, from the CPU's features). The FMA variant
// rounds polynomial steps once instead of twice; both are within the
// accuracy stated above.
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define PX_HAVE_X86_CLONES 1
#endif

using F32Loop = void (*)(const float *, float *, int64_t);

template <float (*F)(float)>
void f32LoopDefault(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = F(x[i]);
}

#ifdef PX_HAVE_X86_CLONES
template <float (*F)(float)>
__attribute__((target("avx2,fma"))) void f32LoopAvx2(const float *x, float *y,
                                                     int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] = F(x[i]);
}

bool cpuHasAvx2Fma() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
}
#endif

template <float (*F)(float)> F32Loop pickF32Loop() {
#ifdef PX_HAVE_X86_CLONES
  if (cpuHasAvx2Fma())
    return f32LoopAvx2<F>;
#endif
  return f32LoopDefault<F>;
}

/// Unary ops with a fast f32 loop define `f32Loop()`.
struct ExpF {
  static F32Loop f32Loop() { return pickF32Loop<fastExp>(); }
  float operator()(float x) const { return fastExp(x); }
  double operator()(double x) const { return ew::Exp{}(x); }
};
struct TanhF {
  static F32Loop f32Loop() { return pickF32Loop<fastTanh>(); }
  float operator()(float x) const { return fastTanh(x); }
  double operator()(double x) const { return ew::Tanh{}(x); }
};
struct SigmoidF {
  static F32Loop f32Loop() { return pickF32Loop<fastSigmoid>(); }
  float operator()(float x) const { return fastSigmoid(x); }
  double operator()(double x) const { return ew::Sigmoid{}(x); }
};
struct ErfF {
  static F32Loop f32Loop() { return pickF32Loop<fastErf>(); }
  float operator()(float x) const { return fastErf(x); }
  double operator()(double x) const { return ew::Erf{}(x); }
};

/// The CPU's functor for ElementwiseMath.h's `Op`: the ones above where a
/// fast f32 loop exists, else Op itself.
template <typename Op> struct CpuUnary { using type = Op; };
template <> struct CpuUnary<ew::Exp> { using type = ExpF; };
template <> struct CpuUnary<ew::Tanh> { using type = TanhF; };
template <> struct CpuUnary<ew::Sigmoid> { using type = SigmoidF; };
template <> struct CpuUnary<ew::Erf> { using type = ErfF; };

template <typename Op, typename = void> struct HasF32Loop : std::false_type {};
template <typename Op>
struct HasF32Loop<Op, std::void_t<decltype(Op::f32Loop())>> : std::true_type {};

KernelFn makeF32Loop(const TensorView &in, const TensorView &out, int threads,
                     int64_t grain, F32Loop loop) {
  struct State {
    const float *x;
    float *y;
    int64_t n;
    int threads;
    int64_t grain;
    F32Loop loop;
  };
  auto st = std::make_shared<State>(
      State{in.as<const float>(), out.as<float>(), in.numElements(), threads, grain, loop});
  return [st] {
    const State &s = *st;
    parallelFor(s.threads, s.n, s.grain, [&s](int64_t begin, int64_t end) {
      s.loop(s.x + begin, s.y + begin, end - begin);
    });
  };
}

template <typename T> using LeakyReluF = ew::LeakyRelu<T>;
using NotF = ew::Not;

template <typename Op, bool FloatOnly>
KernelFactory unaryFactory(std::string name, int64_t grain) {
  return [name, grain](KernelArgs &args) -> KernelFn {
    const TensorView &x = args.in(0), &y = args.out(0);
    ew::checkUnary(args, name);
    int threads = args.env.threads;
    auto make = [&](auto tag) -> KernelFn {
      using T = decltype(tag);
      // Two tests: clang checks Op::f32Loop() in a branch whose condition
      // also depends on T, and only discards it under a condition that
      // does not.
      if constexpr (std::is_same_v<T, float>) {
        if constexpr (HasF32Loop<Op>::value)
          return makeF32Loop(x, y, threads, grain, Op::f32Loop());
        else
          return makeUnary<T, T>(x, y, threads, grain, Op{});
      } else {
        return makeUnary<T, T>(x, y, threads, grain, Op{});
      }
    };
    if constexpr (FloatOnly)
      return dispatchFloat(args, x.dtype, name, make);
    else
      return dispatchNumeric(args, x.dtype, name, make);
  };
}

KernelFn leakyReluFactory(KernelArgs &args) {
  const TensorView &x = args.in(0), &y = args.out(0);
  const double alpha = ew::leakyReluAlpha(args);
  int threads = args.env.threads;
  return dispatchFloat(args, x.dtype, "leaky_relu", [&](auto tag) -> KernelFn {
    using T = decltype(tag);
    return makeUnary<T, T>(x, y, threads, kCheapGrain, LeakyReluF<T>{(T)alpha});
  });
}

KernelFn clipFactory(KernelArgs &args) {
  const TensorView &x = args.in(0), &y = args.out(0);
  const ew::ClipBounds bounds = ew::clipBounds(args);
  int threads = args.env.threads;
  return dispatchNumeric(args, x.dtype, "clip", [&](auto tag) -> KernelFn {
    using T = decltype(tag);
    return makeUnary<T, T>(x, y, threads, kCheapGrain, bounds.clipOf<T>());
  });
}

//===----------------------------------------------------------------------===//
// cast.
//===----------------------------------------------------------------------===//

template <typename To, typename From> using CastF = ew::Cast<To, From>;

KernelFn castFactory(KernelArgs &args) {
  const TensorView &x = args.in(0), &y = args.out(0);
  int threads = args.env.threads;
  if (ew::castCopies(args)) {
    void *dst = y.data;
    const void *src = x.data;
    int64_t bytes = x.bytes();
    return [dst, src, bytes, threads] {
      parallelFor(threads, bytes, 1 << 18, [=](int64_t b, int64_t e) {
        std::memcpy((char *)dst + b, (const char *)src + b, e - b);
      });
    };
  }
  return dispatchAny(args, x.dtype, "cast input", [&](auto from) -> KernelFn {
    using From = decltype(from);
    return dispatchAny(args, y.dtype, "cast result", [&](auto to) -> KernelFn {
      using To = decltype(to);
      return makeUnary<Storage<From>, Storage<To>>(x, y, threads, kCheapGrain,
                                                   CastF<To, From>{});
    });
  });
}

//===----------------------------------------------------------------------===//
// dropout and dropout_grad.
//===----------------------------------------------------------------------===//

// The dropout mask, bit for bit (a Python reference reproduces it):
//
//   key       = streamKey(env.seed ^ seed_attr, stream_attr, env.step)
//   M         = sample_stride: elements between consecutive samples
//               (px-split-batch sets it; without it, numel / dim0)
//   b, G      = this rank's and the global batch; off = env.sampleOffset
//   e         = (a * b + s) * M + c   (row-major element index in the
//                                     whole tensor: sample s of run a,
//                                     element c of it)
//   g         = (a * G + off + s) * M + c   (the element's index in the
//                                     global batch's tensor)
//   kept[e]   = uniformAt(key, g) >= float(ratio)  (24-bit uniform in [0, 1))
//   output[e] = kept[e] ? x[e] / T(1 - ratio) : 0  (1 - ratio in double)
//
// with streamKey / uniformAt / splitmix64 from Random.h (all arithmetic mod
// 2^64). Because the counter numbers the global batch's elements, a sample
// gets the same mask whichever rank runs it and however the batch is split,
// also where the samples are not the outermost dimension (a [T, B, H]
// tensor is T runs of B samples). sample_stride 0 (a tensor that holds no
// samples) gives g = e on every rank. A block of a model split (split_dim
// over grid_axes) numbers its elements e in the whole tensor
// (ew::dropoutWholeIndex), so that a split draws one rank's masks.
// (dropoutFactory below; the mask loop exists in two bit-identical builds.)

using MaskLoop = void (*)(uint64_t key, uint64_t counter0, float threshold,
                         uint8_t *mask, int64_t n);

void dropoutMaskDefault(uint64_t key, uint64_t counter0, float threshold,
                        uint8_t *mask, int64_t n) {
  for (int64_t e = 0; e < n; ++e)
    mask[e] = ew::dropoutKeep(key, counter0 + (uint64_t)e, threshold);
}

#ifdef PX_HAVE_X86_CLONES
// The same loop with 64-bit vector multiplies (about 5x faster); the mask is
// bit-identical (integer arithmetic and exact conversions only).
__attribute__((target("avx512f,avx512dq,avx512vl,avx512bw"))) void
dropoutMaskAvx512(uint64_t key, uint64_t counter0, float threshold, uint8_t *mask,
                  int64_t n) {
  for (int64_t e = 0; e < n; ++e)
    mask[e] = ew::dropoutKeep(key, counter0 + (uint64_t)e, threshold);
}
#endif

MaskLoop pickMaskLoop() {
#ifdef PX_HAVE_X86_CLONES
  static const bool avx512 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
  }();
  if (avx512)
    return dropoutMaskAvx512;
#endif
  return dropoutMaskDefault;
}

/// y[e] = m[e] ? x[e] / denom : 0. Without a branch: the mask is random,
/// so a branch mispredicts on a tenth of the elements at ratio 0.1, and the
/// compiler vectorizes only straight-line code (the kept value's bits are
/// and-ed with all-ones or zero, which is the select exactly, NaN and
/// infinity included).
template <typename T>
void maskedScale(const T *x, const uint8_t *m, T *y, int64_t n, T denom) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  static_assert(sizeof(Bits) == sizeof(T));
  for (int64_t e = 0; e < n; ++e) {
    T v = x[e] / denom;
    Bits bits;
    std::memcpy(&bits, &v, sizeof bits);
    bits &= Bits(0) - Bits(m[e] != 0);
    std::memcpy(&y[e], &bits, sizeof bits);
  }
}

KernelFn dropoutFactory(KernelArgs &args) {
  const TensorView &x = args.in(0), &y = args.out(0), &m = args.out(1);
  const ew::DropoutLayout l = ew::dropoutLayout(args);
  const double ratio = l.ratio;
  const uint64_t seedAttr = l.seedAttr, stream = l.stream;
  const int64_t n = l.n, perSample = l.perSample, run = l.run;
  const ExecEnv *env = &args.env;
  int threads = args.env.threads;
  MaskLoop maskLoop = pickMaskLoop();
  return dispatchFloat(args, x.dtype, "dropout", [&](auto tag) -> KernelFn {
    using T = decltype(tag);
    struct State {
      const T *x;
      T *y;
      uint8_t *m;
      int64_t n, perSample, run;
      float threshold;
      T denom;
      int64_t blockRun, wholeRun, blockOffset;
      uint64_t seedAttr, stream;
      const ExecEnv *env;
      int threads;
      MaskLoop maskLoop;
      uint64_t key, base; // of the current step
    };
    auto st = std::make_shared<State>(State{x.as<const T>(), y.as<T>(), m.as<uint8_t>(),
                                            n, perSample, run, (float)ratio,
                                            (T)(1.0 - ratio), l.blockRun, l.wholeRun,
                                            l.blockOffset, seedAttr, stream, env,
                                            threads, maskLoop, 0, 0});
    return [st] {
      State &s = *st;
      s.key = streamKey(s.env->seed ^ s.seedAttr, s.stream, (uint64_t)s.env->step);
      s.base = (uint64_t)s.env->sampleOffset * (uint64_t)s.perSample;
      // Run a of this rank's samples starts at global element
      // (a * G + off) * M: a stride of G * M counters per run.
      const uint64_t runStride = (uint64_t)s.env->globalBatch * (uint64_t)s.perSample;
      parallelFor(s.threads, s.n, kCostlyGrain, [&s, runStride](int64_t begin, int64_t end) {
        // In blocks, so that the mask is still in cache for the values, and
        // never across a run of samples or of a model split's block (whose
        // counters jump).
        constexpr int64_t kBlock = 1 << 14;
        for (int64_t b = begin; b < end;) {
          const int64_t w = ew::dropoutWholeIndex(b, s.blockRun, s.wholeRun, s.blockOffset);
          const int64_t a = w / s.run;
          int64_t e1 = std::min({end, b + kBlock, b + (a + 1) * s.run - w});
          if (s.blockRun > 0)
            e1 = std::min(e1, (b / s.blockRun + 1) * s.blockRun);
          const uint64_t counter =
              s.base + (uint64_t)a * runStride + (uint64_t)(w - a * s.run);
          s.maskLoop(s.key, counter, s.threshold, s.m + b, e1 - b);
          maskedScale(s.x + b, s.m + b, s.y + b, e1 - b, s.denom);
          b = e1;
        }
      });
    };
  });
}

KernelFn dropoutGradFactory(KernelArgs &args) {
  const TensorView &dy = args.in(0), &m = args.in(1), &dx = args.out(0);
  const double ratio = ew::dropoutGradRatio(args);
  int threads = args.env.threads;
  return dispatchFloat(args, dy.dtype, "dropout_grad", [&](auto tag) -> KernelFn {
    using T = decltype(tag);
    struct State {
      const T *dy;
      const uint8_t *m;
      T *dx;
      int64_t n;
      T denom;
      int threads;
    };
    auto st = std::make_shared<State>(State{dy.as<const T>(), m.as<const uint8_t>(),
                                            dx.as<T>(), dy.numElements(),
                                            (T)(1.0 - ratio), threads});
    return [st] {
      const State &s = *st;
      parallelFor(s.threads, s.n, kCheapGrain, [&s](int64_t begin, int64_t end) {
        maskedScale(s.dy + begin, s.m + begin, s.dx + begin, end - begin, s.denom);
      });
    };
  });
}

} // namespace

void registerElementwiseKernels(KernelRegistry &r) {
  for (const auto &[name, kind] : ew::kArithOps)
    r.add(name, arithFactory(name, kind));
  r.add("pow", powFactory);
  for (const auto &[name, kind] : ew::kCompareOps)
    r.add(name, compareFactory(name, kind));
  r.add("where", whereFactory);

  ew::forEachUnaryOp([&r](auto op, const char *name, bool costly) {
    using Op = typename CpuUnary<typename decltype(op)::type>::type;
    r.add(name, unaryFactory<Op, decltype(op)::floatOnly>(
                    name, costly ? kCostlyGrain : kCheapGrain));
  });
  r.add("mod", modFactory);
  r.add("leaky_relu", leakyReluFactory);
  r.add("clip", clipFactory);
  r.add("not", [](KernelArgs &args) -> KernelFn {
    const TensorView &x = args.in(0), &y = args.out(0);
    ew::checkNot(args);
    return makeUnary<uint8_t, uint8_t>(x, y, args.env.threads, kCheapGrain, NotF{});
  });
  r.add("cast", castFactory);
  r.add("dropout", dropoutFactory);
  r.add("dropout_grad", dropoutGradFactory);
}

} // namespace parallax::rt
