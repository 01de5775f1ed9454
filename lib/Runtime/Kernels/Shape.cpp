//===- Shape.cpp - transpose, concat, expand, slice, pad and gradients ----===//
//
// Data movement for any element type: elements are copied as unsigned
// integers of their size, so bits (NaN payloads, i1 bytes) move unchanged.
//
// transpose, expand, slice and slice_grad are all one strided copy: the
// destination's index space (merged where both sides are contiguous across
// dimensions) with a source and a destination stride per dimension. The
// innermost run is a memcpy when both strides are 1, a fill when the source
// stride is 0, and an element loop otherwise. When the destination's
// innermost dimension reads the source with a large stride (a transpose that
// moves the last dimension) the copy goes through square tiles so that both
// sides stay in cache.
//
//===----------------------------------------------------------------------===//

#include "parallax/Runtime/Kernel.h"

#include "KernelUtil.h"
#include "ShapeMath.h"

#include <algorithm>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <memory>
#include <string>
#include <vector>

namespace parallax::rt {
namespace {

using namespace detail;

/// Bytes per thread below which a copy stays serial.
constexpr int64_t kCopyGrainBytes = 1 << 17;

template <typename T>
inline void copyRun(const T *s, int64_t ss, T *d, int64_t ds, int64_t n) {
  if (ss == 1 && ds == 1) {
    std::memcpy(d, s, n * sizeof(T));
  } else if (ss == 0 && ds == 1) {
    const T v = *s;
    std::fill(d, d + n, v);
  } else {
    for (int64_t i = 0; i < n; ++i)
      d[i * ds] = s[i * ss];
  }
}

/// Copies destination-index-space elements [begin, end).
template <typename T>
void copyRange(const CopyGeometry &g, const T *src, T *dst, int64_t begin,
               int64_t end) {
  const int nd = g.nd;
  const int64_t inner = g.dims[nd - 1];
  int64_t idx[kMaxCopyDims] = {};
  int64_t rs = g.srcBase, rd = g.dstBase;
  int64_t r = begin / inner, j = begin % inner;
  for (int d = nd - 2; d >= 0; --d) {
    idx[d] = r % g.dims[d];
    r /= g.dims[d];
    rs += idx[d] * g.src[d];
    rd += idx[d] * g.dst[d];
  }
  const int64_t is = g.src[nd - 1], id = g.dst[nd - 1];
  int64_t pos = begin;
  while (pos < end) {
    int64_t len = std::min(inner - j, end - pos);
    copyRun(src + rs + j * is, is, dst + rd + j * id, id, len);
    pos += len;
    j = 0;
    if (pos >= end)
      break;
    for (int d = nd - 2; d >= 0; --d) {
      rs += g.src[d];
      rd += g.dst[d];
      if (++idx[d] < g.dims[d])
        break;
      rs -= g.src[d] * g.dims[d];
      rd -= g.dst[d] * g.dims[d];
      idx[d] = 0;
    }
  }
}

#if defined(__SSE2__)
/// One tile of 4-byte elements, in 4x4 blocks transposed in SSE registers:
/// dst[i * dq + j] = src[j * sl + i] for i < qn, j < ln.
inline void transposeTile4(const uint32_t *src, int64_t sl, uint32_t *dst, int64_t dq,
                           int64_t qn, int64_t ln) {
  const int64_t q4 = qn & ~int64_t(3), l4 = ln & ~int64_t(3);
  for (int64_t i = 0; i < q4; i += 4) {
    for (int64_t j = 0; j < l4; j += 4) {
      const uint32_t *s0 = src + j * sl + i;
      __m128 r0 = _mm_castsi128_ps(_mm_loadu_si128((const __m128i *)s0));
      __m128 r1 = _mm_castsi128_ps(_mm_loadu_si128((const __m128i *)(s0 + sl)));
      __m128 r2 = _mm_castsi128_ps(_mm_loadu_si128((const __m128i *)(s0 + 2 * sl)));
      __m128 r3 = _mm_castsi128_ps(_mm_loadu_si128((const __m128i *)(s0 + 3 * sl)));
      _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
      uint32_t *d0 = dst + i * dq + j;
      _mm_storeu_si128((__m128i *)d0, _mm_castps_si128(r0));
      _mm_storeu_si128((__m128i *)(d0 + dq), _mm_castps_si128(r1));
      _mm_storeu_si128((__m128i *)(d0 + 2 * dq), _mm_castps_si128(r2));
      _mm_storeu_si128((__m128i *)(d0 + 3 * dq), _mm_castps_si128(r3));
    }
    for (int64_t m = i; m < i + 4; ++m)
      for (int64_t j = l4; j < ln; ++j)
        dst[m * dq + j] = src[j * sl + m];
  }
  for (int64_t m = q4; m < qn; ++m)
    for (int64_t j = 0; j < ln; ++j)
      dst[m * dq + j] = src[j * sl + m];
}
#endif

/// The tiled path: dimensions q = tileDim (source stride 1) and l = the
/// innermost (destination stride 1) are walked in B x B tiles; the other
/// dimensions and the tile rows along q are the parallel work units.
template <typename T>
void copyTiled(const CopyGeometry &g, const T *src, T *dst, int threads) {
  struct Tiles {
    const CopyGeometry &g;
    const T *src;
    T *dst;
    int64_t B, Q, L, dq, sl, qBlocks;
    int od[kMaxCopyDims];
    int no;
  };
  Tiles t{g, src, dst, sizeof(T) <= 4 ? 64 : 32, 0, 0, 0, 0, 0, {}, 0};
  const int q = g.tileDim, l = g.nd - 1;
  t.Q = g.dims[q];
  t.L = g.dims[l];
  t.dq = g.dst[q];
  t.sl = g.src[l];
  int64_t outer = 1;
  for (int d = 0; d < l; ++d)
    if (d != q) {
      t.od[t.no++] = d;
      outer *= g.dims[d];
    }
  t.qBlocks = (t.Q + t.B - 1) / t.B;
  const int64_t units = outer * t.qBlocks;
  const int64_t grain =
      std::max<int64_t>(1, kCopyGrainBytes / (t.B * t.L * (int64_t)sizeof(T)));
  parallelFor(threads, units, grain, [&t](int64_t begin, int64_t end) {
    const CopyGeometry &g = t.g;
    const int64_t B = t.B, Q = t.Q, L = t.L, dq = t.dq, sl = t.sl;
    for (int64_t u = begin; u < end; ++u) {
      int64_t o = u / t.qBlocks, q0 = (u % t.qBlocks) * B;
      int64_t so = g.srcBase, doff = g.dstBase;
      for (int k = t.no - 1; k >= 0; --k) {
        int d = t.od[k];
        int64_t i = o % g.dims[d];
        o /= g.dims[d];
        so += i * g.src[d];
        doff += i * g.dst[d];
      }
      const int64_t q1 = std::min(Q, q0 + B), qn = q1 - q0;
      // Through a contiguous buffer: the source rows of a tile (and the
      // destination rows) are often a multiple of 4 KiB apart and would
      // evict each other from the cache if the tile were copied directly.
      T buf[64 * 64];
      for (int64_t l0 = 0; l0 < L; l0 += B) {
        const int64_t ln = std::min(L, l0 + B) - l0;
        for (int64_t j = 0; j < ln; ++j)
          std::memcpy(buf + j * B, t.src + so + (l0 + j) * sl + q0, qn * sizeof(T));
#if defined(__SSE2__)
        if constexpr (sizeof(T) == 4) {
          transposeTile4(reinterpret_cast<const uint32_t *>(buf), B,
                         reinterpret_cast<uint32_t *>(t.dst + doff + q0 * dq + l0), dq, qn, ln);
          continue;
        }
#endif
        for (int64_t i = 0; i < qn; ++i) {
          T *d = t.dst + doff + (q0 + i) * dq + l0;
          const T *b = buf + i;
          for (int64_t j = 0; j < ln; ++j)
            d[j] = b[j * B];
        }
      }
    }
  });
}

template <typename T>
KernelFn makeCopy(const CopyGeometry &g, const void *src, void *dst, int threads) {
  struct State {
    CopyGeometry g;
    const T *src;
    T *dst;
    int threads;
  };
  auto st = std::make_shared<State>(
      State{g, static_cast<const T *>(src), static_cast<T *>(dst), threads});
  return [st] {
    const State &s = *st;
    if (s.g.numel == 0)
      return;
    if (s.g.tileDim >= 0) {
      copyTiled(s.g, s.src, s.dst, s.threads);
      return;
    }
    const int64_t grain =
        std::max<int64_t>(1, kCopyGrainBytes / (int64_t)sizeof(T));
    parallelFor(s.threads, s.g.numel, grain, [&s](int64_t begin, int64_t end) {
      copyRange(s.g, s.src, s.dst, begin, end);
    });
  };
}

KernelFn makeCopyBySize(const KernelArgs &args, const std::string &what,
                        size_t elementSize, const CopyGeometry &g,
                        const void *src, void *dst) {
  int threads = args.env.threads;
  switch (elementSize) {
  case 1: return makeCopy<uint8_t>(g, src, dst, threads);
  case 2: return makeCopy<uint16_t>(g, src, dst, threads);
  case 4: return makeCopy<uint32_t>(g, src, dst, threads);
  case 8: return makeCopy<uint64_t>(g, src, dst, threads);
  default: args.fail(what + ": unsupported element size");
  }
}

//===----------------------------------------------------------------------===//
// transpose.
//===----------------------------------------------------------------------===//

KernelFn transposeFactory(KernelArgs &args) {
  const TensorView &x = args.in(0), &y = args.out(0);
  checkElementType(args, "transpose", x.dtype);
  args.expectDType(y, x.dtype, "transpose result");
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
  CopyGeometry g =
      makeCopyGeometry(args, "transpose", y.shape, src, stridesOf(y.shape), 0, 0);
  return makeCopyBySize(args, "transpose", sizeOf(x.dtype), g, x.data, y.data);
}

//===----------------------------------------------------------------------===//
// concat.
//===----------------------------------------------------------------------===//

KernelFn concatFactory(KernelArgs &args) {
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
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d)
    outer *= y.shape[d];
  for (int64_t d = axis + 1; d < rank; ++d)
    inner *= y.shape[d];
  struct Part {
    const char *src;
    int64_t bytes;  // per outer index
    int64_t offset; // in the output row, bytes
  };
  std::vector<Part> parts;
  int64_t total = 0;
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
    parts.push_back({static_cast<const char *>(x.data), bytes, total});
    total += bytes;
  }
  if (total != y.shape[axis] * inner * es)
    args.fail("concat: the inputs' sizes along axis " + std::to_string(axis) +
              " do not add up to the result's " + std::to_string(y.shape[axis]));
  struct State {
    std::vector<Part> parts;
    char *dst;
    int64_t outer, rowBytes;
    int threads;
  };
  auto st = std::make_shared<State>(
      State{std::move(parts), static_cast<char *>(y.data), outer, total, args.env.threads});
  return [st] {
    const State &s = *st;
    if (s.rowBytes == 0)
      return;
    const int64_t grain = std::max<int64_t>(1, kCopyGrainBytes / s.rowBytes);
    parallelFor(s.threads, s.outer, grain, [&s](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        char *row = s.dst + o * s.rowBytes;
        for (const Part &p : s.parts)
          if (p.bytes)
            std::memcpy(row + p.offset, p.src + o * p.bytes, p.bytes);
      }
    });
  };
}

//===----------------------------------------------------------------------===//
// expand.
//===----------------------------------------------------------------------===//

KernelFn expandFactory(KernelArgs &args) {
  const TensorView &x = args.in(0), &y = args.out(0);
  checkElementType(args, "expand", x.dtype);
  args.expectDType(y, x.dtype, "expand result");
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
  CopyGeometry g = makeCopyGeometry(args, "expand", y.shape, src, stridesOf(y.shape), 0, 0);
  return makeCopyBySize(args, "expand", sizeOf(x.dtype), g, x.data, y.data);
}

//===----------------------------------------------------------------------===//
// slice and slice_grad.
//===----------------------------------------------------------------------===//

KernelFn sliceFactory(KernelArgs &args) {
  const TensorView &x = args.in(0), &y = args.out(0);
  checkElementType(args, "slice", x.dtype);
  args.expectDType(y, x.dtype, "slice result");
  auto [base, strides] = sliceLayout(args, "slice", x.shape, y.shape);
  CopyGeometry g =
      makeCopyGeometry(args, "slice", y.shape, strides, stridesOf(y.shape), base, 0);
  return makeCopyBySize(args, "slice", sizeOf(x.dtype), g, x.data, y.data);
}

KernelFn sliceGradFactory(KernelArgs &args) {
  const TensorView &dy = args.in(0), &dx = args.out(0);
  checkElementType(args, "slice_grad", dy.dtype);
  args.expectDType(dx, dy.dtype, "slice_grad result");
  auto [base, strides] = sliceLayout(args, "slice_grad", dx.shape, dy.shape);
  CopyGeometry g =
      makeCopyGeometry(args, "slice_grad", dy.shape, stridesOf(dy.shape), strides, 0, base);
  KernelFn scatter = makeCopyBySize(args, "slice_grad", sizeOf(dy.dtype), g, dy.data, dx.data);
  // Slice positions are distinct, so a dy as large as dx covers all of it.
  const bool covers = dy.numElements() == dx.numElements();
  char *dst = static_cast<char *>(dx.data);
  const int64_t bytes = dx.bytes();
  const int threads = args.env.threads;
  return [scatter, covers, dst, bytes, threads] {
    if (!covers)
      parallelFor(threads, bytes, 1 << 20, [dst](int64_t b, int64_t e) {
        std::memset(dst + b, 0, e - b);
      });
    scatter();
  };
}

//===----------------------------------------------------------------------===//
// pad and pad_grad.
//===----------------------------------------------------------------------===//

/// Walks the output of a pad: body(outRow, srcRow or -1) per innermost row,
/// rows in [begin, end) of the outer index space; the maps give the source
/// index per dimension.
template <typename Body>
void forPadRows(const std::vector<std::vector<int64_t>> &src,
                const std::vector<int64_t> &inStrides, int64_t begin, int64_t end,
                Body &&body) {
  const size_t rank = src.size();
  for (int64_t row = begin; row < end; ++row) {
    int64_t rem = row, base = 0;
    bool filled = false;
    for (int d = (int)rank - 2; d >= 0; --d) {
      const int64_t n = (int64_t)src[d].size(), o = rem % n;
      rem /= n;
      const int64_t i = src[d][o];
      if (i < 0)
        filled = true;
      else
        base += i * inStrides[d];
    }
    body(row, filled ? -1 : base);
  }
}

template <typename T>
KernelFn makePad(const TensorView &x, const TensorView &y,
                 std::vector<std::vector<int64_t>> src, T fill, int threads) {
  const size_t rank = src.size();
  const std::vector<int64_t> inStrides = stridesOf(x.shape);
  const int64_t width = rank ? y.shape[rank - 1] : 1;
  const int64_t rows = width ? y.numElements() / width : 0;
  const T *in = x.as<const T>();
  T *out = y.as<T>();
  auto last = std::make_shared<std::vector<int64_t>>(rank ? src[rank - 1] : std::vector<int64_t>{0});
  auto maps = std::make_shared<std::vector<std::vector<int64_t>>>(std::move(src));
  return [=] {
    if (rows == 0)
      return;
    const int64_t grain = std::max<int64_t>(1, kCopyGrainBytes / (int64_t)sizeof(T) / std::max<int64_t>(width, 1));
    parallelFor(threads, rows, grain, [&](int64_t b, int64_t e) {
      forPadRows(*maps, inStrides, b, e, [&](int64_t row, int64_t base) {
        T *dst = out + row * width;
        if (base < 0) {
          std::fill(dst, dst + width, fill);
          return;
        }
        const int64_t *map = last->data();
        for (int64_t o = 0; o < width; ++o)
          dst[o] = map[o] < 0 ? fill : in[base + map[o]];
      });
    });
  };
}

KernelFn padFactory(KernelArgs &args) {
  const TensorView &x = args.in(0), &y = args.out(0);
  checkElementType(args, "pad", x.dtype);
  args.expectDType(y, x.dtype, "pad result");
  auto src = padSources(args, "pad", x.shape, y.shape);
  const double value = args.f64Or("value", 0.0);
  const int threads = args.env.threads;
  switch (x.dtype) {
  case DType::F32: return makePad<float>(x, y, std::move(src), (float)value, threads);
  case DType::F64: return makePad<double>(x, y, std::move(src), value, threads);
  case DType::I64: return makePad<int64_t>(x, y, std::move(src), (int64_t)value, threads);
  case DType::I32: return makePad<int32_t>(x, y, std::move(src), (int32_t)value, threads);
  case DType::I16: return makePad<int16_t>(x, y, std::move(src), (int16_t)value, threads);
  case DType::I8: return makePad<int8_t>(x, y, std::move(src), (int8_t)value, threads);
  case DType::U8:
  case DType::Bool: return makePad<uint8_t>(x, y, std::move(src), (uint8_t)(value != 0), threads);
  default: args.fail(std::string("pad: element type ") + nameOf(x.dtype) + " is not supported");
  }
}

template <typename T>
KernelFn makePadGrad(const TensorView &dy, const TensorView &dx,
                     std::vector<std::vector<int64_t>> src, int threads) {
  const size_t rank = src.size();
  const std::vector<int64_t> inStrides = stridesOf(dx.shape);
  const int64_t width = rank ? dy.shape[rank - 1] : 1;
  const int64_t rows = width ? dy.numElements() / width : 0;
  // Output rows of one dimension-0 index add only into that index's source
  // when dimension 0 maps one to one (no reflect/edge padding there).
  bool injective = rank > 1;
  if (injective) {
    std::vector<bool> seen(dx.shape[0], false);
    for (int64_t i : src[0]) {
      if (i < 0)
        continue;
      injective &= !seen[i];
      seen[i] = true;
    }
  }
  const int64_t perFirst = rank > 1 && dy.shape[0] ? rows / dy.shape[0] : rows;
  const T *g = dy.as<const T>();
  T *out = dx.as<T>();
  const int64_t total = dx.numElements();
  auto maps = std::make_shared<std::vector<std::vector<int64_t>>>(std::move(src));
  return [=] {
    std::fill(out, out + total, T(0));
    if (rows == 0)
      return;
    const std::vector<int64_t> &map = (*maps)[rank - 1];
    auto addRows = [&](int64_t b, int64_t e) {
      forPadRows(*maps, inStrides, b, e, [&](int64_t row, int64_t base) {
        if (base < 0)
          return;
        const T *gr = g + row * width;
        for (int64_t o = 0; o < width; ++o)
          if (map[o] >= 0)
            out[base + map[o]] += gr[o];
      });
    };
    if (!injective) {
      addRows(0, rows);
      return;
    }
    parallelFor(threads, dy.shape[0], 1, [&](int64_t b, int64_t e) {
      addRows(b * perFirst, e * perFirst);
    });
  };
}

KernelFn padGradFactory(KernelArgs &args) {
  const TensorView &dy = args.in(0), &dx = args.out(0);
  args.expectDType(dx, dy.dtype, "pad_grad result");
  auto src = padSources(args, "pad_grad", dx.shape, dy.shape);
  const int threads = args.env.threads;
  if (dy.rank() == 0)
    args.fail("pad_grad: needs a tensor of rank >= 1");
  switch (dy.dtype) {
  case DType::F32: return makePadGrad<float>(dy, dx, std::move(src), threads);
  case DType::F64: return makePadGrad<double>(dy, dx, std::move(src), threads);
  default: args.fail(std::string("pad_grad: element type ") + nameOf(dy.dtype) + " is not supported");
  }
}

} // namespace

void registerShapeKernels(KernelRegistry &r) {
  r.add("transpose", transposeFactory);
  r.add("concat", concatFactory);
  r.add("expand", expandFactory);
  r.add("slice", sliceFactory);
  r.add("slice_grad", sliceGradFactory);
  r.add("pad", padFactory);
  r.add("pad_grad", padGradFactory);
}

} // namespace parallax::rt
