//===- KernelUtil.h - helpers shared by the CPU kernel files ----*- C++ -*-===//
//
// Shape formatting for error messages, element counts, axis checks and the
// element-type dispatch that every kernel family needs. Internal to
// lib/Runtime/Kernels.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_LIB_RUNTIME_KERNELS_KERNELUTIL_H
#define PARALLAX_LIB_RUNTIME_KERNELS_KERNELUTIL_H

#include "parallax/Runtime/Grid.h"
#include "parallax/Runtime/Kernel.h"

#include <cstdint>
#if defined(__SSE2__)
#include <xmmintrin.h>
#endif
#include <string>
#include <vector>

namespace parallax::rt::detail {

/// Subnormal floats flushed to zero, as results and as operands, on this
/// thread until the scope ends (TensorFlow's ScopedFlushDenormal does the
/// same for its CPU kernels). An optimizer's second moment of a gradient
/// near 1e-20 is subnormal, and x86 cores take a microcode assist for each
/// one: ten times slower updates, on values far below epsilon.
class ScopedFlushDenormals {
public:
#if defined(__SSE2__)
  ScopedFlushDenormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | kFtz | kDaz); }
  ~ScopedFlushDenormals() { _mm_setcsr(saved_); }

private:
  static constexpr unsigned kFtz = 0x8000, kDaz = 0x0040;
  unsigned saved_;
#endif
};

/// Which block of a split tensor this rank holds, and of how many: its
/// place in the group the kernel's grid_shape and `axes` (its grid_axes,
/// or another attribute's: a parameter server's block_axes) name (block 0
/// of 1 without a grid). A grid the world does not fit fails the kernel,
/// naming `op`.
struct BlockPlace {
  int64_t index = 0, count = 1;
};
inline BlockPlace blockPlaceOf(const KernelArgs &args, const char *op,
                               const char *axes = "grid_axes") {
  if (!args.has("grid_shape"))
    return {};
  try {
    nlohmann::json attrs = {{"grid_shape", args.kernel.attrs.at("grid_shape")}};
    if (args.has(axes))
      attrs["grid_axes"] = args.kernel.attrs.at(axes);
    KernelGrid grid = kernelGridOf(attrs, args.env.worldSize);
    GroupPlace place = placeInGroup(args.env.worldSize, args.env.rank, grid.shape, grid.axes);
    return {place.rank, (int64_t)place.members.size()};
  } catch (const CommError &e) {
    args.fail(std::string(op) + ": " + e.what());
  }
}

/// "[2, 3, 4]", for error messages.
inline std::string shapeStr(const std::vector<int64_t> &shape) { return shapeString(shape); }

/// The error for a negative id in an embedding lookup (a kernel with the
/// plan's "nonnegative_ids"): PyTorch's nn.Embedding raises on it where
/// ONNX's Gather counts it from the end, and in data it is a bug.
inline KernelError negativeIdError(const std::string &op, int64_t id,
                                   int64_t position, int64_t rows) {
  return KernelError(op + ": id " + std::to_string(id) + " at position " +
                     std::to_string(position) +
                     " of the ids is negative: PyTorch's nn.Embedding refuses "
                     "it, ONNX's Gather would read row " +
                     std::to_string(id + rows) + " of " + std::to_string(rows) +
                     " (compile with parallax-opt --allow-negative-ids for that)");
}

/// The product of v[begin, end).
inline int64_t product(const std::vector<int64_t> &v, size_t begin,
                       size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i)
    n *= v[i];
  return n;
}

/// `axis` in [-rank, rank) made non-negative; anything else fails the
/// kernel with a message naming `op`.
inline int64_t normalizeAxis(const KernelArgs &args, int64_t axis,
                             int64_t rank, const std::string &op) {
  if (axis < -rank || axis >= rank)
    args.fail(op + ": axis " + std::to_string(axis) +
              " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

/// Fails the kernel: `what` has element type `t`, and expects `expected`.
[[noreturn]] inline void failType(const KernelArgs &args, const std::string &what,
                                  DType t, const char *expected) {
  if (t == DType::F16 || t == DType::BF16)
    args.fail(what + ": " + nameOf(t) + " is not supported by the CPU runtime");
  args.fail(what + ": element type " + nameOf(t) + " is not supported (expects " +
            expected + ")");
}

/// f(T{}) for the C++ type T of float element type `t`.
template <typename F>
KernelFn dispatchFloat(const KernelArgs &args, DType t, const std::string &what,
                       F &&f) {
  switch (t) {
  case DType::F32: return f(float{});
  case DType::F64: return f(double{});
  default: failType(args, what, t, "f32 or f64");
  }
}

/// f(T{}) for the C++ type T of float or integer element type `t`.
template <typename F>
KernelFn dispatchNumeric(const KernelArgs &args, DType t, const std::string &what,
                         F &&f) {
  switch (t) {
  case DType::F32: return f(float{});
  case DType::F64: return f(double{});
  case DType::I64: return f(int64_t{});
  case DType::I32: return f(int32_t{});
  case DType::I16: return f(int16_t{});
  case DType::I8: return f(int8_t{});
  case DType::U8: return f(uint8_t{});
  default: failType(args, what, t, "a float or integer type");
  }
}

} // namespace parallax::rt::detail

#endif // PARALLAX_LIB_RUNTIME_KERNELS_KERNELUTIL_H
