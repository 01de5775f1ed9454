//===- ElementwiseMath.h - element values shared by the CPU and GPU -*- C++ -*-===//
//
// The value of one element of every element-wise op (Elementwise.cpp's
// kernels and lib/Runtime/Cuda/Kernels/Elementwise.cu), written once as
// PX_HD functors so that both backends compute the same values: integer
// arithmetic wraps, integer division truncates toward zero, ONNX Mod and Pow
// semantics, NaN-propagating max/min, saturating float -> integer casts.
//
// Errors are the caller's: the functors assume that an integer divisor is
// not 0 and that integer 0 is not raised to a negative power (the CPU
// throws, the GPU reports a fault; see the *Fails helpers).
//
// The math functions are called through float and double overloads of the
// C library's names (expf, exp), which are what <cmath>'s std:: overloads
// call on the host and what CUDA provides on the device.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_KERNELS_ELEMENTWISEMATH_H
#define PARALLAX_RUNTIME_KERNELS_ELEMENTWISEMATH_H

#include "HostDevice.h"

#include "parallax/Runtime/Random.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace parallax::rt::ew {

//===----------------------------------------------------------------------===//
// Storage types.
//===----------------------------------------------------------------------===//

/// Tag for i1 tensors (one byte holding 0 or 1).
struct BoolT {};
template <typename T> struct StorageOf { using type = T; };
template <> struct StorageOf<BoolT> { using type = uint8_t; };
template <typename T> using Storage = typename StorageOf<T>::type;

//===----------------------------------------------------------------------===//
// Math functions for float and double.
//===----------------------------------------------------------------------===//

namespace m {
#define PX_EW_MATH1(NAME)                                                      \
  PX_HD inline float NAME(float x) { return ::NAME##f(x); }                    \
  PX_HD inline double NAME(double x) { return ::NAME(x); }
PX_EW_MATH1(sqrt)
PX_EW_MATH1(exp)
PX_EW_MATH1(log)
PX_EW_MATH1(tanh)
PX_EW_MATH1(erf)
PX_EW_MATH1(sin)
PX_EW_MATH1(cos)
PX_EW_MATH1(tan)
PX_EW_MATH1(asin)
PX_EW_MATH1(acos)
PX_EW_MATH1(atan)
PX_EW_MATH1(sinh)
PX_EW_MATH1(cosh)
PX_EW_MATH1(asinh)
PX_EW_MATH1(acosh)
PX_EW_MATH1(atanh)
PX_EW_MATH1(floor)
PX_EW_MATH1(ceil)
PX_EW_MATH1(nearbyint)
PX_EW_MATH1(fabs)
#undef PX_EW_MATH1
PX_HD inline float pow(float x, float y) { return ::powf(x, y); }
PX_HD inline double pow(double x, double y) { return ::pow(x, y); }
PX_HD inline float fmod(float x, float y) { return ::fmodf(x, y); }
PX_HD inline double fmod(double x, double y) { return ::fmod(x, y); }
} // namespace m

//===----------------------------------------------------------------------===//
// Wrapping integer arithmetic.
//===----------------------------------------------------------------------===//

// Integer arithmetic wraps (two's complement) instead of overflowing, which
// would be undefined behaviour on signed types.
template <typename T> PX_HD inline T wrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return (T)((std::make_unsigned_t<T>)a + (std::make_unsigned_t<T>)b);
  else
    return a + b;
}
template <typename T> PX_HD inline T wrapSub(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return (T)((std::make_unsigned_t<T>)a - (std::make_unsigned_t<T>)b);
  else
    return a - b;
}
template <typename T> PX_HD inline T wrapMul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    // Promote to at least unsigned int so that uint16 * uint16 cannot
    // overflow a signed int.
    using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned,
                                 std::make_unsigned_t<T>>;
    return (T)((U)(std::make_unsigned_t<T>)a * (U)(std::make_unsigned_t<T>)b);
  } else {
    return a * b;
  }
}
template <typename T> PX_HD inline T wrapNeg(T a) {
  if constexpr (std::is_integral_v<T>)
    return (T)(std::make_unsigned_t<T>(0) - (std::make_unsigned_t<T>)a);
  else
    return -a;
}

/// x < 0, without a comparison of an unsigned value with 0 (a warning).
template <typename T> PX_HD inline bool isNegative(T x) {
  if constexpr (std::is_unsigned_v<T>)
    return false;
  else
    return x < T(0);
}

/// Saturating float -> integer conversion: truncation toward zero, NaN -> 0,
/// out-of-range values clamp to the target's range. Never undefined.
template <typename To, typename From> PX_HD inline To saturatingCast(From v) {
  static_assert(std::is_integral_v<To> && std::is_floating_point_v<From>);
  double d = (double)v;
  if (!(d == d))
    return 0;
  constexpr double lo = (double)std::numeric_limits<To>::min();
  // 2^digits is one past the maximum and exactly representable.
  constexpr double hiExcl =
      2.0 * (double)(uint64_t(1) << (std::numeric_limits<To>::digits - 1));
  if (d <= lo)
    return std::numeric_limits<To>::min();
  if (d >= hiExcl)
    return std::numeric_limits<To>::max();
  return (To)d;
}

//===----------------------------------------------------------------------===//
// Binary operations.
//===----------------------------------------------------------------------===//

struct Add {
  template <typename T> PX_HD T operator()(T a, T b) const { return wrapAdd(a, b); }
};
struct Sub {
  template <typename T> PX_HD T operator()(T a, T b) const { return wrapSub(a, b); }
};
struct Mul {
  template <typename T> PX_HD T operator()(T a, T b) const { return wrapMul(a, b); }
};

/// Whether div or mod of a by b is an error (an integer divisor of 0).
template <typename T> PX_HD inline bool divisionFails(T b) {
  if constexpr (std::is_integral_v<T>)
    return b == 0;
  else
    return false;
}

/// a / b; for integers b != 0 (divisionFails), truncating toward zero as C
/// and ONNX do.
struct Div {
  template <typename T> PX_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if constexpr (std::is_signed_v<T>)
        if (b == T(-1))
          return wrapNeg(a); // INT_MIN / -1 would overflow
      return (T)(a / b);
    } else {
      return a / b;
    }
  }
};

// Max and min propagate NaN (as numpy.maximum / torch.maximum).
struct Max {
  template <typename T> PX_HD T operator()(T a, T b) const {
    return (a > b || a != a) ? a : b;
  }
};
struct Min {
  template <typename T> PX_HD T operator()(T a, T b) const {
    return (a < b || a != a) ? a : b;
  }
};

/// ONNX Mod: the sign of the divisor (Python's %) without fmod, of the
/// dividend (C's fmod) with it. For integers b != 0 (divisionFails).
template <bool Fmod> struct Mod {
  template <typename T> PX_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if constexpr (std::is_signed_v<T>)
        if (b == T(-1))
          return 0; // INT_MIN % -1 would overflow
      T r = (T)(a % b);
      if constexpr (!Fmod)
        if (r != 0 && isNegative(r) != isNegative(b))
          r = wrapAdd(r, b);
      return r;
    } else {
      T r = m::fmod(a, b);
      if constexpr (!Fmod)
        if (r != 0 && ((r < 0) != (b < 0)))
          r += b;
      return r;
    }
  }
};

/// pow with the scalar exponent 2, as one multiplication.
struct Square {
  template <typename T, typename E> PX_HD T operator()(T a, E) const {
    return wrapMul(a, a);
  }
};

/// The exponent of an integer power: a float exponent truncates toward 0.
template <typename E> PX_HD inline int64_t intExponent(E b) {
  if constexpr (std::is_floating_point_v<E>)
    return saturatingCast<int64_t>(b);
  else
    return (int64_t)b;
}

/// Whether pow(a, b) is an error: integer 0 to a negative power.
template <typename T, typename E> PX_HD inline bool powFails(T a, E b) {
  if constexpr (std::is_integral_v<T>)
    return a == 0 && intExponent(b) < 0;
  else
    return false;
}

/// ONNX Pow: the result has the base's type; the exponent is cast to it.
/// Requires !powFails(a, b).
struct Pow {
  template <typename T, typename E> PX_HD T operator()(T a, E b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return m::pow(a, (T)b);
    } else {
      int64_t e = intExponent(b);
      if (e < 0) {
        if (a == 1)
          return 1;
        if constexpr (std::is_signed_v<T>)
          if (a == T(-1))
            return (e & 1) ? T(-1) : T(1);
        return 0; // |a| > 1: 1 / a^|e| truncates to 0
      }
      T result = 1, base = a;
      while (e) {
        if (e & 1)
          result = wrapMul(result, base);
        base = wrapMul(base, base);
        e >>= 1;
      }
      return result;
    }
  }
};

struct Equal {
  template <typename T> PX_HD bool operator()(T a, T b) const { return a == b; }
};
struct EqualBool {
  PX_HD bool operator()(uint8_t a, uint8_t b) const { return (a != 0) == (b != 0); }
};
struct Less {
  template <typename T> PX_HD bool operator()(T a, T b) const { return a < b; }
};
struct Greater {
  template <typename T> PX_HD bool operator()(T a, T b) const { return a > b; }
};

//===----------------------------------------------------------------------===//
// Unary operations.
//===----------------------------------------------------------------------===//

struct Neg {
  template <typename T> PX_HD T operator()(T x) const { return wrapNeg(x); }
};
struct Abs {
  template <typename T> PX_HD T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>)
      return m::fabs(x);
    else if constexpr (std::is_unsigned_v<T>)
      return x;
    else
      return x < 0 ? wrapNeg(x) : x; // abs(INT_MIN) wraps to INT_MIN
  }
};
struct Relu {
  template <typename T> PX_HD T operator()(T x) const { return x > T(0) ? x : T(0); }
};
struct Reciprocal {
  template <typename T> PX_HD T operator()(T x) const { return T(1) / x; }
};
#define PX_EW_UNARY(NAME, FN)                                                  \
  struct NAME {                                                                \
    template <typename T> PX_HD T operator()(T x) const { return m::FN(x); }   \
  };
PX_EW_UNARY(Sqrt, sqrt)
PX_EW_UNARY(Exp, exp)
PX_EW_UNARY(Log, log)
PX_EW_UNARY(Tanh, tanh)
PX_EW_UNARY(Erf, erf)
PX_EW_UNARY(Sin, sin)
PX_EW_UNARY(Cos, cos)
PX_EW_UNARY(Tan, tan)
PX_EW_UNARY(Asin, asin)
PX_EW_UNARY(Acos, acos)
PX_EW_UNARY(Atan, atan)
PX_EW_UNARY(Sinh, sinh)
PX_EW_UNARY(Cosh, cosh)
PX_EW_UNARY(Asinh, asinh)
PX_EW_UNARY(Acosh, acosh)
PX_EW_UNARY(Atanh, atanh)
PX_EW_UNARY(Floor, floor)
PX_EW_UNARY(Ceil, ceil)
// Halves to even, as ONNX Round (and numpy.round): the default rounding mode.
PX_EW_UNARY(Round, nearbyint)
#undef PX_EW_UNARY

/// exp of a non-positive argument only: no overflow for large |x|.
struct Sigmoid {
  template <typename T> PX_HD T operator()(T x) const {
    if (x >= T(0))
      return T(1) / (T(1) + m::exp(-x));
    T e = m::exp(x);
    return e / (T(1) + e);
  }
};
struct Sign {
  template <typename T> PX_HD T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>)
      return x > T(0) ? T(1) : x < T(0) ? T(-1) : x; // 0, -0 and NaN stay
    else
      return (T)((x > T(0)) - isNegative(x));
  }
};
template <typename T> struct LeakyRelu {
  T alpha;
  PX_HD T operator()(T x) const { return x >= T(0) ? x : alpha * x; }
};
/// Clamps to [lo, hi]; NaN stays NaN.
template <typename T> struct Clip {
  T lo, hi;
  PX_HD T operator()(T x) const {
    T y = x < lo ? lo : x;
    return y > hi ? hi : y;
  }
};
struct Not {
  PX_HD uint8_t operator()(uint8_t x) const { return x == 0; }
};

/// One element of From as To: float -> int truncates toward zero (NaN -> 0,
/// out of range clamps); -> bool is value != 0; bool -> number is 0/1;
/// int -> narrower int wraps (two's complement, as numpy's astype).
template <typename To, typename From> struct Cast {
  PX_HD Storage<To> operator()(Storage<From> v) const {
    if constexpr (std::is_same_v<To, BoolT>) {
      return v != 0;
    } else if constexpr (std::is_same_v<From, BoolT>) {
      return (To)(v != 0);
    } else if constexpr (std::is_floating_point_v<To>) {
      return (To)v;
    } else if constexpr (std::is_floating_point_v<From>) {
      return saturatingCast<To>(v);
    } else if constexpr (sizeof(To) > sizeof(From)) {
      return (To)v; // widening: value preserving (U8 is never the target)
    } else {
      return (To)(std::make_unsigned_t<To>)v; // modular
    }
  }
};

//===----------------------------------------------------------------------===//
// Dropout (the formula is documented in Elementwise.cpp).
//===----------------------------------------------------------------------===//

/// Whether the element with global counter `counter` is kept.
PX_HD inline bool dropoutKeep(uint64_t key, uint64_t counter, float threshold) {
  return uniformAt(key, counter) >= threshold;
}

/// The global counter of element e of this rank's tensor: e lies in run
/// a = e / run of this rank's samples, which starts at counter
/// base + a * runStride.
PX_HD inline uint64_t dropoutCounter(int64_t e, int64_t run, uint64_t base,
                                     uint64_t runStride) {
  const int64_t a = run > 0 ? e / run : 0;
  return base + (uint64_t)a * runStride + (uint64_t)(e - a * run);
}

/// The index in the whole tensor of element e of a block split along one
/// dimension: the block is runs of `blockRun` elements (its part of the
/// split dimension and everything after it), each `blockOffset` into a run
/// of `wholeRun` of the whole tensor. blockRun 0: not a block.
PX_HD inline int64_t dropoutWholeIndex(int64_t e, int64_t blockRun, int64_t wholeRun,
                                       int64_t blockOffset) {
  if (blockRun <= 0)
    return e;
  const int64_t r = e / blockRun;
  return r * wholeRun + blockOffset + (e - r * blockRun);
}

/// A kept element scaled by 1 / (1 - ratio); a dropped one is +0.
template <typename T> PX_HD inline T dropoutScale(T x, bool kept, T denom) {
  return kept ? x / denom : T(0);
}

} // namespace parallax::rt::ew

#endif // PARALLAX_RUNTIME_KERNELS_ELEMENTWISEMATH_H
