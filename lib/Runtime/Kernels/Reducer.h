//===- Reducer.h - how a reduce_* kernel accumulates ------------*- C++ -*-===//
//
// The accumulation rules of reduce_{sum,mean,max,min,prod}, shared by the
// CPU kernels (Reduction.cpp) and the CUDA ones (Cuda/Kernels/Reduction.cu)
// so that both compute the same values: floats accumulate in double and
// round once; integers in uint64 (sums and products wrap, two's complement)
// or int64 (max, min).
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_KERNELS_REDUCER_H
#define PARALLAX_RUNTIME_KERNELS_REDUCER_H

#include "HostDevice.h"

#include "parallax/Runtime/Kernel.h"

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

namespace parallax::rt::detail {

enum class ReduceKind { Sum, Mean, Max, Min, Prod };

/// Accumulation for element type T: double for floats; for integers uint64
/// (sums and products wrap, two's complement) or int64 (max, min).
///
/// Note: GCC 12 at -O3 miscompiles the vectorized form of an int64
/// accumulator updated as (int64)((uint64)acc + (uint64)x) with x loaded
/// from int16 (lanes are dropped); accumulating in uint64 directly does not
/// have the problem.
template <typename T, ReduceKind K> struct Reducer {
  static constexpr bool kFloat = std::is_floating_point_v<T>;
  using A = std::conditional_t<
      kFloat, double,
      std::conditional_t<K == ReduceKind::Max || K == ReduceKind::Min, int64_t,
                         uint64_t>>;
  PX_HD static A load(T x) {
    if constexpr (kFloat)
      return (A)x;
    else
      return (A)(int64_t)x; // sign-extends, then (for sums) wraps mod 2^64
  }
  PX_HD static A init() {
    if constexpr (K == ReduceKind::Max) {
      if constexpr (kFloat)
        return -std::numeric_limits<double>::infinity();
      else
        return (A)std::numeric_limits<T>::lowest();
    } else if constexpr (K == ReduceKind::Min) {
      if constexpr (kFloat)
        return std::numeric_limits<double>::infinity();
      else
        return (A)std::numeric_limits<T>::max();
    } else if constexpr (K == ReduceKind::Prod) {
      return A(1);
    } else {
      return A(0);
    }
  }
  PX_HD static A combine(A acc, A x) {
    if constexpr (K == ReduceKind::Max)
      return (x > acc || x != x) ? x : acc; // NaN propagates
    else if constexpr (K == ReduceKind::Min)
      return (x < acc || x != x) ? x : acc;
    else if constexpr (K == ReduceKind::Prod)
      return acc * x; // uint64 for integers: wraps
    else
      return acc + x;
  }
  PX_HD static T finish(A acc, int64_t count) {
    if constexpr (kFloat) {
      if constexpr (K == ReduceKind::Mean)
        return (T)(acc / (double)count); // 0 / 0 = NaN for an empty mean
      else
        return (T)acc;
    } else if constexpr (K == ReduceKind::Mean) {
      return count ? (T)((int64_t)acc / count) : T(0);
    } else {
      return (T)(std::make_unsigned_t<T>)acc; // wraps into narrower types
    }
  }
};

/// The reduce_* ops (both backends register these).
inline constexpr std::pair<const char *, ReduceKind> kReduceOps[] = {
    {"reduce_sum", ReduceKind::Sum},
    {"reduce_mean", ReduceKind::Mean},
    {"reduce_max", ReduceKind::Max},
    {"reduce_min", ReduceKind::Min},
    {"reduce_prod", ReduceKind::Prod}};

/// f(std::integral_constant<ReduceKind, K>{}) for K = `kind`; `name` names
/// the op in the message for an unknown kind.
template <typename F>
KernelFn dispatchReduceKind(const KernelArgs &args, ReduceKind kind,
                            const std::string &name, F &&f) {
  switch (kind) {
  case ReduceKind::Sum: return f(std::integral_constant<ReduceKind, ReduceKind::Sum>{});
  case ReduceKind::Mean: return f(std::integral_constant<ReduceKind, ReduceKind::Mean>{});
  case ReduceKind::Max: return f(std::integral_constant<ReduceKind, ReduceKind::Max>{});
  case ReduceKind::Min: return f(std::integral_constant<ReduceKind, ReduceKind::Min>{});
  case ReduceKind::Prod: return f(std::integral_constant<ReduceKind, ReduceKind::Prod>{});
  }
  args.fail(name + ": unknown reduction");
}

} // namespace parallax::rt::detail

#endif // PARALLAX_RUNTIME_KERNELS_REDUCER_H
