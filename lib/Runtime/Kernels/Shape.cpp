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
  CopyGeometry g = transposeGeometry(args);
  return makeCopyBySize(args, "transpose", sizeOf(x.dtype), g, x.data, y.data);
}

//===----------------------------------------------------------------------===//
// concat.
//===----------------------------------------------------------------------===//

KernelFn concatFactory(KernelArgs &args) {
  const TensorView &y = args.out(0);
  ConcatLayout layout = concatLayout(args);
  struct State {
    std::vector<ConcatPiece> parts;
    char *dst;
    int64_t outer, rowBytes;
    int threads;
  };
  auto st = std::make_shared<State>(State{std::move(layout.pieces),
                                          static_cast<char *>(y.data), layout.outer,
                                          layout.rowBytes, args.env.threads});
  return [st] {
    const State &s = *st;
    if (s.rowBytes == 0)
      return;
    const int64_t grain = std::max<int64_t>(1, kCopyGrainBytes / s.rowBytes);
    parallelFor(s.threads, s.outer, grain, [&s](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        char *row = s.dst + o * s.rowBytes;
        for (const ConcatPiece &p : s.parts)
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
  CopyGeometry g = expandGeometry(args);
  return makeCopyBySize(args, "expand", sizeOf(x.dtype), g, x.data, y.data);
}

//===----------------------------------------------------------------------===//
// slice and slice_grad.
//===----------------------------------------------------------------------===//

KernelFn sliceFactory(KernelArgs &args) {
  const TensorView &x = args.in(0), &y = args.out(0);
  CopyGeometry g = sliceGeometry(args);
  return makeCopyBySize(args, "slice", sizeOf(x.dtype), g, x.data, y.data);
}

KernelFn sliceGradFactory(KernelArgs &args) {
  const TensorView &dy = args.in(0), &dx = args.out(0);
  CopyGeometry g = sliceGradGeometry(args);
  KernelFn scatter =
      makeCopyBySize(args, "slice_grad", sizeOf(dy.dtype), g, dy.data, dx.data);
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
  auto src = padMaps(args);
  const int threads = args.env.threads;
  return withPadFill(args, [&](auto fill) {
    return makePad<decltype(fill)>(x, y, std::move(src), fill, threads);
  });
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
  auto src = padGradMaps(args);
  const int threads = args.env.threads;
  return withPadGradType(args, [&](auto zero) {
    return makePadGrad<decltype(zero)>(dy, dx, std::move(src), threads);
  });
}

} // namespace

void registerShapeKernels(KernelRegistry &r) {
  PX_ADD_SHAPE_KERNELS(r);
}

} // namespace parallax::rt
