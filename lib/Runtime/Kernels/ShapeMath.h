//===- ShapeMath.h - shape checks and index maps of Shape/Indexing -*- C++ -*-===//
//
// What the CPU and CUDA kernels of the Shape and Indexing families compute
// alike: the strided-copy geometry every Shape kernel reduces to, the
// bind-time reading of each Shape kernel (transpose, expand and slice as
// copies, concat's rows, pad's source maps and element types, with the same
// checks and messages on both backends), and the index wrapping of gather
// and scatter (PX_HD: the GPU runs it per element).
// Internal to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_LIB_RUNTIME_KERNELS_SHAPEMATH_H
#define PARALLAX_LIB_RUNTIME_KERNELS_SHAPEMATH_H

#include "HostDevice.h"
#include "KernelUtil.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace parallax::rt::detail {

/// Dimensions of a strided copy after merging (transpose, slice, concat,
/// expand, pad).
constexpr int kMaxCopyDims = 16;

/// f16/bf16 elements are refused (the CPU runtime has no kernels for them).
inline void checkElementType(const KernelArgs &args, const std::string &what, DType t) {
  if (t == DType::F16 || t == DType::BF16)
    args.fail(what + ": " + nameOf(t) + " is not supported by the CPU runtime");
}

/// A copy dst[dstBase + sum i_d * dst_d] = src[srcBase + sum i_d * src_d]
/// over the index space `dims` (strides in elements, possibly 0 or negative).
struct CopyGeometry {
  int nd = 1;
  int64_t numel = 0;
  int64_t dims[kMaxCopyDims] = {1};
  int64_t src[kMaxCopyDims] = {}, dst[kMaxCopyDims] = {};
  int64_t srcBase = 0, dstBase = 0;
  /// Tiled transpose: the dimension whose source stride is 1 while the
  /// innermost (destination-contiguous) dimension has a source stride > 1.
  int tileDim = -1;
};

inline CopyGeometry makeCopyGeometry(const KernelArgs &args, const std::string &what,
                              const std::vector<int64_t> &dims,
                              const std::vector<int64_t> &src,
                              const std::vector<int64_t> &dst, int64_t srcBase,
                              int64_t dstBase) {
  CopyGeometry g;
  g.srcBase = srcBase;
  g.dstBase = dstBase;
  g.numel = 1;
  for (int64_t d : dims)
    g.numel *= d;
  std::vector<int64_t> d, s, t;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1)
      continue;
    if (!d.empty() && s.back() == src[i] * dims[i] && t.back() == dst[i] * dims[i]) {
      d.back() *= dims[i];
      s.back() = src[i];
      t.back() = dst[i];
    } else {
      d.push_back(dims[i]);
      s.push_back(src[i]);
      t.push_back(dst[i]);
    }
  }
  if (d.size() > (size_t)kMaxCopyDims)
    args.fail(what + ": too many dimensions after merging (" +
              std::to_string(d.size()) + ", at most " + std::to_string(kMaxCopyDims) +
              ")");
  if (d.empty()) {
    d = {1};
    s = {0};
    t = {0};
  }
  g.nd = (int)d.size();
  for (int i = 0; i < g.nd; ++i) {
    g.dims[i] = d[i];
    g.src[i] = s[i];
    g.dst[i] = t[i];
  }
  const int l = g.nd - 1;
  if (g.dst[l] == 1 && g.src[l] != 1 && g.src[l] != 0 && g.dims[l] >= 8)
    for (int i = 0; i < l; ++i)
      if (g.src[i] == 1 && g.dims[i] >= 8)
        g.tileDim = i;
  return g;
}


/// Index `v` of an axis of `size` counted from the end when negative (ONNX
/// Gather), or -1 when it is outside [-size, size).
PX_HD inline int64_t wrappedIndex(int64_t v, int64_t size) {
  int64_t w = v < 0 ? v + size : v;
  return w < 0 || w >= size ? -1 : w;
}

/// Checks that the slice of `full` with the "starts"/"steps" attributes and
/// result shape `part` stays inside `full`; returns the offset of the first
/// element and the strides (in `full`) of each result dimension (all 0 for
/// an empty slice).
inline std::pair<int64_t, std::vector<int64_t>>
sliceLayout(const KernelArgs &args, const std::string &what,
            const std::vector<int64_t> &full, const std::vector<int64_t> &part) {
  std::vector<int64_t> starts = args.i64s("starts"), steps = args.i64s("steps");
  const size_t rank = full.size();
  if (part.size() != rank)
    args.fail(what + ": the sliced shape " + shapeStr(part) +
              " and the full shape " + shapeStr(full) + " differ in rank");
  if (starts.size() != rank || steps.size() != rank)
    args.fail(what + ": starts and steps need one entry per dimension (" +
              std::to_string(rank) + "), got " + std::to_string(starts.size()) +
              " and " + std::to_string(steps.size()));
  std::vector<int64_t> fullStrides = stridesOf(full), strides(rank);
  int64_t base = 0;
  bool empty = false;
  for (size_t d = 0; d < rank; ++d) {
    if (steps[d] == 0)
      args.fail(what + ": step of dimension " + std::to_string(d) + " is 0");
    if (part[d] < 0)
      args.fail(what + ": negative dimension in " + shapeStr(part));
    if (part[d] == 0) {
      empty = true;
      continue;
    }
    int64_t span, last;
    bool overflow = __builtin_mul_overflow(part[d] - 1, steps[d], &span) ||
                    __builtin_add_overflow(starts[d], span, &last);
    if (starts[d] < 0 || starts[d] >= full[d] || overflow || last < 0 ||
        last >= full[d])
      args.fail(what + ": dimension " + std::to_string(d) + " takes " +
                std::to_string(part[d]) + " elements from " +
                std::to_string(starts[d]) + " in steps of " +
                std::to_string(steps[d]) + ", outside [0, " +
                std::to_string(full[d]) + ")");
    base += starts[d] * fullStrides[d];
    strides[d] = steps[d] * fullStrides[d];
  }
  if (empty) {
    base = 0;
    std::fill(strides.begin(), strides.end(), 0);
  }
  return {base, strides};
}

/// Per dimension, the source index of each output position (-1: the
/// constant fill), for px.pad's "pads" and "mode" attributes.
inline std::vector<std::vector<int64_t>>
padSources(const KernelArgs &args, const std::string &what,
           const std::vector<int64_t> &in, const std::vector<int64_t> &out) {
  std::vector<int64_t> pads = args.i64s("pads");
  std::string mode = args.strOr("mode", "constant");
  const size_t rank = in.size();
  if (out.size() != rank || pads.size() != 2 * rank)
    args.fail(what + ": needs " + std::to_string(2 * rank) + " pads and a result of rank " +
              std::to_string(rank) + ", got " + std::to_string(pads.size()) + " and " +
              shapeStr(out));
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    args.fail(what + ": mode must be constant, reflect or edge, got '" + mode + "'");
  std::vector<std::vector<int64_t>> src(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t n = in[d], begin = pads[d];
    // 32-bit pads, as the px verifier requires: the sum cannot overflow.
    if (begin < INT32_MIN || begin > INT32_MAX || pads[rank + d] < INT32_MIN ||
        pads[rank + d] > INT32_MAX)
      args.fail(what + ": pads must fit in 32 bits, got " + std::to_string(begin) +
                " and " + std::to_string(pads[rank + d]) + " for dimension " +
                std::to_string(d));
    if (out[d] != n + begin + pads[rank + d])
      args.fail(what + ": dimension " + std::to_string(d) + " of " + shapeStr(out) +
                " should be " + std::to_string(n + begin + pads[rank + d]));
    src[d].resize(out[d]);
    for (int64_t o = 0; o < out[d]; ++o) {
      int64_t i = o - begin;
      if (i < 0 || i >= n) {
        if (mode == "constant") {
          i = -1;
        } else if (mode == "edge") {
          i = i < 0 ? 0 : n - 1;
        } else {
          if (n < 2 || i <= -n || i >= 2 * n - 1)
            args.fail(what + ": reflect pads of dimension " + std::to_string(d) +
                      " must be smaller than its size " + std::to_string(n));
          i = i < 0 ? -i : 2 * (n - 1) - i;
        }
      }
      src[d][o] = i;
    }
  }
  return src;
}

/// x (in 0) and the result (out 0) of a one-input Shape kernel: x's element
/// type supported and the result's the same.
inline void checkCopyTypes(const KernelArgs &args, const std::string &op) {
  checkElementType(args, op, args.in(0).dtype);
  args.expectDType(args.out(0), args.in(0).dtype, (op + " result").c_str());
}

/// transpose: "perm" checked against x and y; the copy of x into y.
inline CopyGeometry transposeGeometry(const KernelArgs &args) {
  const TensorView &x = args.in(0), &y = args.out(0);
  checkCopyTypes(args, "transpose");
  std::vector<int64_t> perm = args.i64s("perm");
  const int64_t rank = x.rank();
  if ((int64_t)perm.size() != rank)
    args.fail("transpose: perm has " + std::to_string(perm.size()) +
              " entries for an input of rank " + std::to_string(rank));
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[p])
      args.fail("transpose: perm " + shapeStr(perm) +
                " is not a permutation of the input's " + std::to_string(rank) +
                " dimensions");
    seen[p] = true;
  }
  std::vector<int64_t> expected(rank);
  for (int64_t i = 0; i < rank; ++i)
    expected[i] = x.shape[perm[i]];
  if (y.shape != expected)
    args.fail("transpose: the result shape " + shapeStr(y.shape) + " should be " +
              shapeStr(expected) + " (input " + shapeStr(x.shape) + ", perm " +
              shapeStr(perm) + ")");
  std::vector<int64_t> inStrides = stridesOf(x.shape), src(rank);
  for (int64_t i = 0; i < rank; ++i)
    src[i] = inStrides[perm[i]];
  return makeCopyGeometry(args, "transpose", y.shape, src, stridesOf(y.shape), 0, 0);
}

/// expand: x broadcast to y's shape checked; the copy of x into y.
inline CopyGeometry expandGeometry(const KernelArgs &args) {
  const TensorView &x = args.in(0), &y = args.out(0);
  checkCopyTypes(args, "expand");
  const size_t rank = y.shape.size();
  if (x.shape.size() > rank)
    args.fail("expand: the input " + shapeStr(x.shape) +
              " has a higher rank than the result " + shapeStr(y.shape));
  std::vector<int64_t> inStrides = stridesOf(x.shape), src(rank, 0);
  const size_t off = rank - x.shape.size();
  for (size_t i = 0; i < x.shape.size(); ++i) {
    if (x.shape[i] == y.shape[off + i])
      src[off + i] = inStrides[i];
    else if (x.shape[i] != 1)
      args.fail("expand: the input " + shapeStr(x.shape) +
                " does not broadcast to the result shape " + shapeStr(y.shape));
  }
  return makeCopyGeometry(args, "expand", y.shape, src, stridesOf(y.shape), 0, 0);
}

/// slice: the copy of x's slice into y.
inline CopyGeometry sliceGeometry(const KernelArgs &args) {
  const TensorView &x = args.in(0), &y = args.out(0);
  checkCopyTypes(args, "slice");
  auto [base, strides] = sliceLayout(args, "slice", x.shape, y.shape);
  return makeCopyGeometry(args, "slice", y.shape, strides, stridesOf(y.shape), base, 0);
}

/// slice_grad: the copy of dy into dx's slice (the rest of dx is zeroed).
inline CopyGeometry sliceGradGeometry(const KernelArgs &args) {
  const TensorView &dy = args.in(0), &dx = args.out(0);
  checkCopyTypes(args, "slice_grad");
  auto [base, strides] = sliceLayout(args, "slice_grad", dx.shape, dy.shape);
  return makeCopyGeometry(args, "slice_grad", dy.shape, stridesOf(dy.shape), strides,
                          0, base);
}

/// One input of a concat: its bytes of each output row.
struct ConcatPiece {
  const char *src;
  int64_t bytes;  // per outer index
  int64_t offset; // in the output row, bytes
};

/// A concat along one axis as rows: `outer` rows of `rowBytes` each, every
/// input a piece of each row (empty inputs included).
struct ConcatLayout {
  int64_t outer = 1, rowBytes = 0;
  std::vector<ConcatPiece> pieces;
};

/// concat's axis and inputs checked against the result.
inline ConcatLayout concatLayout(const KernelArgs &args) {
  const TensorView &y = args.out(0);
  checkElementType(args, "concat", y.dtype);
  if (args.ins.empty())
    args.fail("concat: no inputs");
  const int64_t rank = y.rank();
  if (rank == 0)
    args.fail("concat: rank-0 tensors cannot be concatenated");
  int64_t axis = args.i64("axis");
  if (axis < -rank || axis >= rank)
    args.fail("concat: axis " + std::to_string(axis) + " is out of range for rank " +
              std::to_string(rank));
  if (axis < 0)
    axis += rank;
  const int64_t es = (int64_t)sizeOf(y.dtype);
  ConcatLayout c;
  int64_t inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    c.outer *= y.shape[d];
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= y.shape[d];
  for (size_t k = 0; k < args.ins.size(); ++k) {
    const TensorView &x = args.in(k);
    std::string what = "concat input " + std::to_string(k);
    args.expectDType(x, y.dtype, what.c_str());
    bool ok = x.rank() == rank;
    for (int64_t d = 0; ok && d < rank; ++d)
      ok = d == axis || x.shape[d] == y.shape[d];
    if (!ok)
      args.fail(what + " of shape " + shapeStr(x.shape) +
                " does not match the result shape " + shapeStr(y.shape) +
                " outside axis " + std::to_string(axis));
    int64_t bytes = x.shape[axis] * inner * es;
    c.pieces.push_back({static_cast<const char *>(x.data), bytes, c.rowBytes});
    c.rowBytes += bytes;
  }
  if (c.rowBytes != y.shape[axis] * inner * es)
    args.fail("concat: the inputs' sizes along axis " + std::to_string(axis) +
              " do not add up to the result's " + std::to_string(y.shape[axis]));
  return c;
}

/// pad: the source maps of x into y.
inline std::vector<std::vector<int64_t>> padMaps(const KernelArgs &args) {
  checkCopyTypes(args, "pad");
  return padSources(args, "pad", args.in(0).shape, args.out(0).shape);
}

/// pad_grad: the source maps of dx into dy.
inline std::vector<std::vector<int64_t>> padGradMaps(const KernelArgs &args) {
  const TensorView &dy = args.in(0), &dx = args.out(0);
  args.expectDType(dx, dy.dtype, "pad_grad result");
  auto src = padSources(args, "pad_grad", dx.shape, dy.shape);
  if (dy.rank() == 0)
    args.fail("pad_grad: needs a tensor of rank >= 1");
  return src;
}

/// make(fill) with pad's "value" as x's element type (bool and u8: value
/// != 0), else KernelError.
template <typename F> KernelFn withPadFill(const KernelArgs &args, F &&make) {
  const DType t = args.in(0).dtype;
  const double value = args.f64Or("value", 0.0);
  switch (t) {
  case DType::F32: return make((float)value);
  case DType::F64: return make(value);
  case DType::I64: return make((int64_t)value);
  case DType::I32: return make((int32_t)value);
  case DType::I16: return make((int16_t)value);
  case DType::I8: return make((int8_t)value);
  case DType::U8:
  case DType::Bool: return make((uint8_t)(value != 0));
  default: args.fail(std::string("pad: element type ") + nameOf(t) + " is not supported");
  }
}

/// make(T()) for pad_grad's element type T (f32 or f64), else KernelError.
template <typename F> KernelFn withPadGradType(const KernelArgs &args, F &&make) {
  const DType t = args.in(0).dtype;
  switch (t) {
  case DType::F32: return make(float());
  case DType::F64: return make(double());
  default: args.fail(std::string("pad_grad: element type ") + nameOf(t) + " is not supported");
  }
}

} // namespace parallax::rt::detail

/// Registers a backend's Shape kernels into REGISTRY from the factories
/// transposeFactory, concatFactory, expandFactory, sliceFactory,
/// sliceGradFactory, padFactory and padGradFactory of the file that expands
/// it.
#define PX_ADD_SHAPE_KERNELS(REGISTRY)                                         \
  do {                                                                         \
    (REGISTRY).add("transpose", transposeFactory);                             \
    (REGISTRY).add("concat", concatFactory);                                   \
    (REGISTRY).add("expand", expandFactory);                                   \
    (REGISTRY).add("slice", sliceFactory);                                     \
    (REGISTRY).add("slice_grad", sliceGradFactory);                            \
    (REGISTRY).add("pad", padFactory);                                         \
    (REGISTRY).add("pad_grad", padGradFactory);                                \
  } while (false)

#endif // PARALLAX_LIB_RUNTIME_KERNELS_SHAPEMATH_H
