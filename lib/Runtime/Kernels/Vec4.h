//===- Vec4.h - 4-wide float row primitives for the kernels -----*- C++ -*-===//
//
// Contiguous row primitives shared by the normalisation and loss kernels.
// Floats go through 4-wide GCC vectors (the build targets plain SSE2 and
// does not let the compiler reorder float sums); partial sums are flushed to
// double every 32 elements, so long sums stay accurate. Doubles
// (finite-difference tests) use plain loops. Internal to lib/Runtime/Kernels.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_LIB_RUNTIME_KERNELS_VEC4_H
#define PARALLAX_LIB_RUNTIME_KERNELS_VEC4_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace parallax::rt::detail {

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

inline v4f splat(float v) { return v4f{v, v, v, v}; }
inline v4f load4(const float *p) {
  v4f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store4(float *p, v4f v) { std::memcpy(p, &v, sizeof v); }
inline double hsum(v4f v) {
  return ((double)v[0] + (double)v[1]) + ((double)v[2] + (double)v[3]);
}

/// exp of 4 floats (Cephes expf: reduction by ln 2, degree-6 polynomial,
/// exponent by bit assembly): within 1 ulp or so of std::exp below 88.37
/// (+inf above; the kernels only take exp of values <= 0), 0 below -87.34,
/// NaN for NaN.
inline v4f vexp4(v4f x) {
  const v4f lo = splat(-87.33654f), hi = splat(88.37626f);
  v4f xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc;
  // Round x / ln 2 to nearest with the 1.5 * 2^23 trick.
  v4f n = (xc * splat(1.44269504088896341f) + splat(12582912.0f)) -
          splat(12582912.0f);
  v4f r = xc - n * splat(0.693359375f) - n * splat(-2.12194440e-4f);
  v4f p = splat(1.9875691500e-4f);
  p = p * r + splat(1.3981999507e-3f);
  p = p * r + splat(8.3334519073e-3f);
  p = p * r + splat(4.1665795894e-2f);
  p = p * r + splat(1.6666665459e-1f);
  p = p * r + splat(5.0000001201e-1f);
  p = p * r * r + r + splat(1.0f);
  v4i bits = (__builtin_convertvector(n, v4i) + 127) << 23;
  v4f v = p * (v4f)bits;
  v = x > hi ? splat(std::numeric_limits<float>::infinity()) : v;
  return x < lo ? splat(0.0f) : v;
}

/// sigmoid of 4 floats, 1 / (1 + exp(-x)) through vexp4: 0 and 1 at the
/// extremes, NaN for NaN.
inline v4f vsigmoid4(v4f x) {
  return splat(1.0f) / (splat(1.0f) + vexp4(-x));
}

/// tanh of 4 floats (Cephes tanhf: an odd polynomial below |x| = 0.625,
/// 1 - 2 / (exp(2|x|) + 1) with x's sign above): within 2 ulp or so of
/// std::tanh.
inline v4f vtanh4(v4f x) {
  v4f ax = x < splat(0.0f) ? -x : x;
  v4f z = x * x;
  v4f p = splat(-5.70498872745e-3f);
  p = p * z + splat(2.06390887954e-2f);
  p = p * z + splat(-5.37397155531e-2f);
  p = p * z + splat(1.33314422036e-1f);
  p = p * z + splat(-3.33332819422e-1f);
  p = p * z * x + x;
  v4f big = splat(1.0f) - splat(2.0f) / (vexp4(ax + ax) + splat(1.0f));
  big = x < splat(0.0f) ? -big : big;
  return ax < splat(0.625f) ? p : big;
}

/// Maximum of x[0, n); NaN if any element is NaN.
template <typename T> T rowMax(const T *x, int64_t n) {
  T m = -std::numeric_limits<T>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    if (x[j] != x[j])
      return x[j];
    m = x[j] > m ? x[j] : m;
  }
  return m;
}
inline float rowMax(const float *x, int64_t n) {
  v4f m = splat(-std::numeric_limits<float>::infinity());
  v4i nan = v4i{0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    v4f v = load4(x + j);
    m = v > m ? v : m;
    nan |= v != v;
  }
  float r = -std::numeric_limits<float>::infinity();
  bool isNan = false;
  for (int k = 0; k < 4; ++k) {
    r = m[k] > r ? m[k] : r;
    isNan |= nan[k] != 0;
  }
  for (; j < n; ++j) {
    r = x[j] > r ? x[j] : r;
    isNan |= x[j] != x[j];
  }
  return isNan ? std::numeric_limits<float>::quiet_NaN() : r;
}

/// out[j] = exp(x[j] - shift) (out may be null); returns the sum.
template <typename T>
double expShiftSum(const T *x, T shift, T *out, int64_t n) {
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    T e = std::exp(x[j] - shift);
    if (out)
      out[j] = e;
    sum += e;
  }
  return sum;
}
inline double expShiftSum(const float *x, float shift, float *out, int64_t n) {
  double sum = 0;
  int64_t j = 0;
  v4f s = splat(shift);
  while (j + 4 <= n) {
    v4f acc = splat(0.0f);
    int64_t end = std::min<int64_t>(n, j + 32);
    for (; j + 4 <= end; j += 4) {
      v4f e = vexp4(load4(x + j) - s);
      if (out)
        store4(out + j, e);
      acc += e;
    }
    sum += hsum(acc);
  }
  for (; j < n; ++j) {
    float e = std::exp(x[j] - shift);
    if (out)
      out[j] = e;
    sum += e;
  }
  return sum;
}

} // namespace parallax::rt::detail

#endif // PARALLAX_LIB_RUNTIME_KERNELS_VEC4_H
