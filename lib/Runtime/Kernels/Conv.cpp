//===- Conv.cpp - convolution and pooling kernels (NCHW, N-d) -------------===//
//
// conv, conv_grad_input, conv_grad_filter, max_pool, max_pool_grad,
// avg_pool, avg_pool_grad over x [N, C, spatial...] with any number of
// spatial dimensions (up to kMaxSpatial). Pads are [begin..., end...].
//
// Convolutions are im2col + GEMM per group. A GEMM covers a chunk of whole
// images (small feature maps) or a tile of output rows of one image, so that
// its columns buffer stays about L2-sized; conv_grad_input runs the GEMM
// into columns and scatters them back (col2im). A 1x1, stride-1, unpadded
// convolution multiplies the image directly, and a depthwise convolution
// (one input channel per group) runs direct loops. With several threads and
// at least one image chunk per thread, each thread takes whole chunks with
// its own scratch and single-threaded BLAS; otherwise BLAS and im2col use
// all threads. Scratch is allocated once, in the factory.
//
// Pooling walks each plane tap by tap over precomputed row segments (the
// parts of the output rows a window element hits inside x). It follows ONNX
// and PyTorch: padding never wins a max (ties go to the first maximum in
// row-major window order, NaN propagates), the average's divisor counts the
// window positions inside x, or, with count_include_pad, those inside the
// padded extent [-pad_begin, in + pad_end) (a ceil_mode window's overhang
// past the end padding never counts), as PyTorch's AvgPool and onnxruntime.
// A window entirely in the padding gives the lowest finite value (max, as
// onnxruntime) or 0 (average) and passes no gradient.
//
//===----------------------------------------------------------------------===//

#include "parallax/Runtime/Kernel.h"

#include "Blas.h"
#include "ConvGeometry.h"
#include "KernelUtil.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace parallax::rt {

namespace {

using namespace conv;
using namespace detail;

//===----------------------------------------------------------------------===//
// GEMM
//===----------------------------------------------------------------------===//

/// C[m, n] (ldc) = op(A) op(B) + beta * C on up to `threads` threads, on
/// OpenBLAS: the im2col and shifted-tap shapes below were chosen by
/// measuring it, and with oneDNN instead the tv_resnet18 example's step took
/// 6% longer (every conv kernel slower), the cnn example's 2%.
template <typename T>
void gemmSafe(int threads, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
              const T *a, int64_t lda, const T *b, int64_t ldb, T beta, T *c,
              int64_t ldc) {
  blas::gemm(threads, ta, tb, m, n, k, T(1), a, lda, b, ldb, beta, c, ldc,
             blas::Sgemm::OpenBlas);
}

void checkBlasSize(const KernelArgs &args, std::initializer_list<int64_t> dims) {
  for (int64_t d : dims)
    if (d > INT_MAX)
      args.fail("a GEMM dimension of " + std::to_string(d) +
                " exceeds the BLAS limit of " + std::to_string(INT_MAX));
}

//===----------------------------------------------------------------------===//
// Window taps as row segments
//===----------------------------------------------------------------------===//

/// Valid range [lo, hi) of o in [0, out) with 0 <= o * s + off < in.
inline void validRange(int64_t off, int64_t s, int64_t in, int64_t out,
                       int64_t &lo, int64_t &hi) {
  lo = off >= 0 ? 0 : (-off + s - 1) / s;
  hi = off < in ? (in - off + s - 1) / s : 0;
  hi = std::min(hi, out);
  lo = std::min(lo, hi);
}

/// One tap of the window over one output row (all output dims but the last
/// fixed): outputs yStart + t read x[xStart + t * s_last], t < len, all
/// inside x. Offsets are within one [spatial...] plane.
struct Seg {
  int64_t yStart, xStart, len;
};

/// Every tap's segments, taps in row-major kernel order (so each output sees
/// its window's elements in row-major window order), and the outputs whose
/// window lies entirely in the padding.
struct Taps {
  std::vector<Seg> segs;
  std::vector<int64_t> begin; ///< tap kk: segs[begin[kk], begin[kk + 1])
  std::vector<int64_t> empty;
};

Taps makeTaps(const Geo &g) {
  const int L = g.nd - 1;
  Taps t;
  t.begin.reserve(g.kSize + 1);
  std::vector<char> covered(g.outSize, 0);
  for (int64_t kk = 0; kk < g.kSize; ++kk) {
    t.begin.push_back((int64_t)t.segs.size());
    int64_t off[kMaxSpatial], lo[kMaxSpatial], hi[kMaxSpatial], rem = kk;
    bool any = true;
    for (int i = 0; i < g.nd; ++i) {
      off[i] = (rem / g.kStride[i]) * g.d[i] - g.pb[i];
      rem %= g.kStride[i];
      validRange(off[i], g.s[i], g.in[i], g.out[i], lo[i], hi[i]);
      any = any && lo[i] < hi[i];
    }
    if (!any)
      continue;
    int64_t o[kMaxSpatial];
    for (int i = 0; i < L; ++i)
      o[i] = lo[i];
    while (true) {
      int64_t y = lo[L], x = (lo[L] * g.s[L] + off[L]);
      for (int i = 0; i < L; ++i) {
        y += o[i] * g.outStride[i];
        x += (o[i] * g.s[i] + off[i]) * g.inStride[i];
      }
      t.segs.push_back({y, x, hi[L] - lo[L]});
      std::fill(covered.begin() + y, covered.begin() + y + (hi[L] - lo[L]), 1);
      int i = L - 1;
      for (; i >= 0; --i) {
        if (++o[i] < hi[i])
          break;
        o[i] = lo[i];
      }
      if (i < 0)
        break;
    }
  }
  t.begin.push_back((int64_t)t.segs.size());
  for (int64_t o = 0; o < g.outSize; ++o)
    if (!covered[o])
      t.empty.push_back(o);
  return t;
}

//===----------------------------------------------------------------------===//
// im2col / col2im over output rows [q0, q1) of a run of images
//===----------------------------------------------------------------------===//

/// The 2-D case of im2col below (the common one): per (image, channel,
/// tap) row, per output row, one inline copy of the valid part with zeros
/// either side, instead of the N-d odometer and a memcpy call per row.
template <typename T>
void im2col2d(const Geo &g, const T *x, int64_t xImageStride, int64_t nimg,
              int64_t channels, int64_t q0, int64_t q1, T *cols, int64_t ld,
              int threads) {
  const int64_t KH = g.k[0], KW = g.k[1], OW = g.out[1], IH = g.in[0], IW = g.in[1];
  const int64_t sh = g.s[0], sw = g.s[1], dh = g.d[0], dw = g.d[1];
  const int64_t ph = g.pb[0], pw = g.pb[1];
  const int64_t rows = channels * KH * KW, span = (q1 - q0) * OW;
  int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(span, 1));
  parallelFor(threads, nimg * rows, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t rr = r0; rr < r1; ++rr) {
      const int64_t j = rr / rows, r = rr % rows;
      const int64_t c = r / (KH * KW), kh = (r / KW) % KH, kw = r % KW;
      const T *xc = x + j * xImageStride + c * IH * IW;
      T *dst = cols + r * ld + j * span;
      const int64_t offW = kw * dw - pw;
      int64_t lo, hi;
      validRange(offW, sw, IW, OW, lo, hi);
      const int64_t n = hi - lo;
      for (int64_t oh = q0; oh < q1; ++oh) {
        T *drow = dst + (oh - q0) * OW;
        const int64_t ih = oh * sh - ph + kh * dh;
        if (ih < 0 || ih >= IH || n <= 0) {
          for (int64_t t = 0; t < OW; ++t)
            drow[t] = T(0);
          continue;
        }
        for (int64_t t = 0; t < lo; ++t)
          drow[t] = T(0);
        const T *src = xc + ih * IW + lo * sw + offW;
        T *d = drow + lo;
        if (sw == 1)
          for (int64_t t = 0; t < n; ++t)
            d[t] = src[t];
        else if (sw == 2)
          for (int64_t t = 0; t < n; ++t)
            d[t] = src[2 * t];
        else
          for (int64_t t = 0; t < n; ++t)
            d[t] = src[t * sw];
        for (int64_t t = hi; t < OW; ++t)
          drow[t] = T(0);
      }
    }
  });
}

/// The 2-D case of col2im below.
template <typename T>
void col2im2d(const Geo &g, const T *cols, int64_t ld, int64_t nimg,
              int64_t channels, int64_t q0, int64_t q1, T *dx,
              int64_t dxImageStride, int threads) {
  const int64_t KH = g.k[0], KW = g.k[1], OW = g.out[1], IH = g.in[0], IW = g.in[1];
  const int64_t sh = g.s[0], sw = g.s[1], dh = g.d[0], dw = g.d[1];
  const int64_t ph = g.pb[0], pw = g.pb[1];
  const int64_t span = (q1 - q0) * OW;
  int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(span * KH * KW, 1));
  parallelFor(threads, nimg * channels, grain, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t j = p / channels, c = p % channels;
      T *xc = dx + j * dxImageStride + c * IH * IW;
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw) {
          const T *src = cols + ((c * KH + kh) * KW + kw) * ld + j * span;
          const int64_t offW = kw * dw - pw;
          int64_t lo, hi;
          validRange(offW, sw, IW, OW, lo, hi);
          const int64_t n = hi - lo;
          if (n <= 0)
            continue;
          for (int64_t oh = q0; oh < q1; ++oh) {
            const int64_t ih = oh * sh - ph + kh * dh;
            if (ih < 0 || ih >= IH)
              continue;
            const T *srow = src + (oh - q0) * OW + lo;
            T *drow = xc + ih * IW + lo * sw + offW;
            if (sw == 1)
              for (int64_t t = 0; t < n; ++t)
                drow[t] += srow[t];
            else
              for (int64_t t = 0; t < n; ++t)
                drow[t * sw] += srow[t];
          }
        }
    }
  });
}

/// cols[c * kSize + kk, (j * (q1 - q0) + q - q0) * outL + o] =
/// x_j[c, window element kk of output (q, o)] (0 in the padding), for the
/// images j < nimg at x + j * xImageStride and the output rows q in
/// [q0, q1) (a row fixes all output dims but the last, of size outL). Rows
/// of cols have stride `ld`.
template <typename T>
void im2col(const Geo &g, const T *x, int64_t xImageStride, int64_t nimg,
            int64_t channels, int64_t q0, int64_t q1, T *cols, int64_t ld,
            int threads) {
  if (g.nd == 2)
    return im2col2d(g, x, xImageStride, nimg, channels, q0, q1, cols, ld, threads);
  const int L = g.nd - 1;
  const int64_t rows = channels * g.kSize, outL = g.out[L];
  const int64_t span = (q1 - q0) * outL;
  int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(span, 1));
  parallelFor(threads, nimg * rows, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t rr = r0; rr < r1; ++rr) {
      int64_t j = rr / rows, r = rr % rows;
      int64_t c = r / g.kSize, kr = r % g.kSize;
      int64_t kpos[kMaxSpatial], o[kMaxSpatial], rem = q0;
      for (int i = 0; i < g.nd; ++i) {
        kpos[i] = kr / g.kStride[i];
        kr %= g.kStride[i];
      }
      for (int i = L - 1; i >= 0; --i) {
        o[i] = rem % g.out[i];
        rem /= g.out[i];
      }
      const T *xc = x + j * xImageStride + c * g.inSize;
      T *dst = cols + r * ld + j * span;
      int64_t offL = kpos[L] * g.d[L] - g.pb[L], sL = g.s[L];
      int64_t lo, hi;
      validRange(offL, sL, g.in[L], outL, lo, hi);
      for (int64_t q = q0; q < q1; ++q) {
        T *drow = dst + (q - q0) * outL;
        bool ok = lo < hi;
        int64_t base = 0;
        for (int i = 0; i < L && ok; ++i) {
          int64_t pos = o[i] * g.s[i] - g.pb[i] + kpos[i] * g.d[i];
          ok = pos >= 0 && pos < g.in[i];
          base += pos * g.inStride[i];
        }
        if (!ok) {
          std::fill(drow, drow + outL, T(0));
        } else {
          std::fill(drow, drow + lo, T(0));
          const T *src = xc + base + (lo * sL + offL);
          if (sL == 1) {
            std::memcpy(drow + lo, src, (hi - lo) * sizeof(T));
          } else {
            for (int64_t t = 0; t < hi - lo; ++t)
              drow[lo + t] = src[t * sL];
          }
          std::fill(drow + hi, drow + outL, T(0));
        }
        for (int i = L - 1; i >= 0; --i) {
          if (++o[i] < g.out[i])
            break;
          o[i] = 0;
        }
      }
    }
  });
}

/// The adjoint of im2col: dx_j[c, ...] += cols[...] for the same columns
/// (parallel over (image, channel), so no two threads write one element).
template <typename T>
void col2im(const Geo &g, const T *cols, int64_t ld, int64_t nimg,
            int64_t channels, int64_t q0, int64_t q1, T *dx,
            int64_t dxImageStride, int threads) {
  if (g.nd == 2)
    return col2im2d(g, cols, ld, nimg, channels, q0, q1, dx, dxImageStride, threads);
  const int L = g.nd - 1;
  const int64_t outL = g.out[L], span = (q1 - q0) * outL;
  int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(span * g.kSize, 1));
  parallelFor(threads, nimg * channels, grain, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      int64_t j = p / channels, c = p % channels;
      T *xc = dx + j * dxImageStride + c * g.inSize;
      for (int64_t kr0 = 0; kr0 < g.kSize; ++kr0) {
        int64_t r = c * g.kSize + kr0, kr = kr0;
        int64_t kpos[kMaxSpatial], o[kMaxSpatial], rem = q0;
        for (int i = 0; i < g.nd; ++i) {
          kpos[i] = kr / g.kStride[i];
          kr %= g.kStride[i];
        }
        for (int i = L - 1; i >= 0; --i) {
          o[i] = rem % g.out[i];
          rem /= g.out[i];
        }
        const T *src = cols + r * ld + j * span;
        int64_t offL = kpos[L] * g.d[L] - g.pb[L], sL = g.s[L];
        int64_t lo, hi;
        validRange(offL, sL, g.in[L], outL, lo, hi);
        for (int64_t q = q0; q < q1; ++q) {
          const T *srow = src + (q - q0) * outL + lo;
          bool ok = lo < hi;
          int64_t base = 0;
          for (int i = 0; i < L && ok; ++i) {
            int64_t pos = o[i] * g.s[i] - g.pb[i] + kpos[i] * g.d[i];
            ok = pos >= 0 && pos < g.in[i];
            base += pos * g.inStride[i];
          }
          if (ok) {
            T *drow = xc + base + (lo * sL + offL);
            int64_t n = hi - lo;
            if (sL == 1) {
              for (int64_t t = 0; t < n; ++t)
                drow[t] += srow[t];
            } else {
              for (int64_t t = 0; t < n; ++t)
                drow[t * sL] += srow[t];
            }
          }
          for (int i = L - 1; i >= 0; --i) {
            if (++o[i] < g.out[i])
              break;
            o[i] = 0;
          }
        }
      }
    }
  });
}

//===----------------------------------------------------------------------===//
// Convolutions
//===----------------------------------------------------------------------===//

/// x [N, C, in...], w [M, C/group, k...], y [N, M, out...], read and
/// checked for the convolution kernel `kind`, and cut into GEMMs.
ConvDims makeConvDims(const KernelArgs &args, ConvKind kind, int threads) {
  ConvDims cd = tileConv(readConvShapes(args, kind), kind,
                         (int64_t)sizeOf(args.in(0).dtype), threads);
  const Geo &g = cd.g;
  checkBlasSize(args, {cd.kc, cd.mg, cd.cg, g.outSize, g.inSize,
                       cd.maxCols, cd.m * g.outSize});
  return cd;
}

/// The kernel's pieces of the session's workspace (convScratch's sizes).
template <typename T> struct ConvScratch {
  ScratchSpan<T> cols, buf, third;
  int64_t colsSize = 0, bufSize = 0;
};
template <typename T>
ConvScratch<T> takeConvScratch(KernelArgs &args, const ConvDims &cd, ConvKind kind) {
  std::vector<int64_t> sizes = convScratch(cd, kind);
  ConvScratch<T> s;
  int64_t workers = cd.workers();
  s.colsSize = sizes[0] / workers;
  s.bufSize = sizes[1] / workers;
  s.cols = args.scratch<T>(sizes[0]);
  s.buf = args.scratch<T>(sizes[1]);
  if (sizes.size() > 2)
    s.third = args.scratch<T>(sizes[2]);
  return s;
}

/// Calls f(n0, nb, q0, q1) for the GEMM units of image chunks [c0, c1):
/// images [n0, n0 + nb) and output rows [q0, q1).
template <typename F>
void forUnits(const ConvDims &cd, int64_t c0, int64_t c1, F &&f) {
  for (int64_t ci = c0; ci < c1; ++ci) {
    int64_t n0 = ci * cd.chunk, nb = std::min(cd.chunk, cd.n - n0);
    for (int64_t q0 = 0; q0 < cd.g.outOuter; q0 += cd.rowsPerTile)
      f(n0, nb, q0, std::min(q0 + cd.rowsPerTile, cd.g.outOuter));
  }
}

/// Runs body(worker, c0, c1) over the image chunks. With several threads and
/// at least one chunk per thread, each thread takes whole chunks with its
/// own scratch and single-threaded BLAS; otherwise one worker runs them all,
/// with BLAS products and im2col split over the threads. body gets the
/// thread count for its own loops.
template <typename F>
void forWorkers(const ConvDims &cd, F &&body) {
  if (!cd.perThread()) {
    body(0, int64_t(0), cd.imageChunks, cd.threads);
    return;
  }
  int64_t workers = cd.threads;
  parallelFor(cd.threads, workers, 1, [&](int64_t w0, int64_t w1) {
    for (int64_t w = w0; w < w1; ++w)
      body(w, cd.imageChunks * w / workers, cd.imageChunks * (w + 1) / workers, 1);
  });
}

/// Copies dy[n0 + j, gi*mg + mm, :] into buf[mm, j * outSize + :].
template <typename T>
void gatherDy(const ConvDims &cd, const T *dy, int64_t n0, int64_t nb,
              int64_t gi, T *buf, int threads) {
  int64_t outSize = cd.g.outSize, ld = nb * outSize;
  parallelFor(threads, nb * cd.mg, std::max<int64_t>(1, 16384 / outSize),
              [&](int64_t p0, int64_t p1) {
                for (int64_t p = p0; p < p1; ++p) {
                  int64_t j = p / cd.mg, mm = p % cd.mg;
                  std::memcpy(buf + mm * ld + j * outSize,
                              dy + ((n0 + j) * cd.m + gi * cd.mg + mm) * outSize,
                              outSize * sizeof(T));
                }
              });
}

//===----------------------------------------------------------------------===//
// The row-shift lowering
//
// For a 2-D convolution (one group, KH > 1), write the row offset of tap
// row kh as kh * dh = a * sh + p (p < sh), and take, for a unit of nb
// images and R output rows from q0, one plane per phase p:
//
//   Z[p][c][kw][j][r][ow] = x_j[c, (q0 + r) * sh + p - ph, ow * sw - pw + kw * dw]
//
// (0 outside x) for r < RZ = R + A, A the largest a. Row (c, kh, kw) of the
// im2col matrix is then Z[p][c][kw] shifted by a rows, so the matrix of the
// taps kh, B_kh [C * KW, N], is Z[p] + a * OW with the leading dimension
// ZP = nb * RZ * OW, N = ZP - A * OW; conv is the sum over kh of W_kh
// [M, C * KW] times B_kh: KH GEMMs and no im2col, Z being about KH / P
// times smaller than the columns (3 for a 3x3 stride-1 convolution, 1.5 at
// stride 2). The filter gradient of tap row kh is B_kh times dy^T, and the
// input gradient the adjoint: GEMMs accumulating W_kh^T dy into dZ shifted
// the same way, then dZ added back into dx. GEMM column n is output (j, r,
// ow) = (n / (RZ * OW), n / OW % RZ, n % OW); columns with r >= R lie
// between two images: junk in y, and dy there is taken as 0.
//===----------------------------------------------------------------------===//

struct ShiftUnit {
  int64_t nb, q0, R, RZ, ZP, N, P;
};

inline ShiftUnit shiftUnit(const Geo &g, int64_t nb, int64_t q0, int64_t q1) {
  ShiftUnit u;
  u.nb = nb;
  u.q0 = q0;
  u.R = q1 - q0;
  u.RZ = u.R + shiftRowHalo(g);
  u.ZP = nb * u.RZ * g.out[1];
  u.N = u.ZP - shiftRowHalo(g) * g.out[1];
  u.P = shiftParities(g);
  return u;
}

/// B_kh: where the tap rows kh start in Z (planes of kk rows of ZP).
inline int64_t shiftTapOffset(const Geo &g, const ShiftUnit &u, int64_t kk, int64_t kh) {
  int64_t o = kh * g.d[0];
  return (o % g.s[0]) * kk * u.ZP + (o / g.s[0]) * g.out[1];
}

/// Builds Z (above) of images x + j * xImageStride, j < nb.
template <typename T>
void buildShiftZ(const Geo &g, const ShiftUnit &u, const T *x, int64_t xImageStride,
                 int64_t channels, T *z, int threads) {
  const int64_t KW = g.k[1], OW = g.out[1], IH = g.in[0], IW = g.in[1];
  const int64_t sh = g.s[0], sw = g.s[1], dw = g.d[1], ph = g.pb[0], pw = g.pb[1];
  int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(u.ZP, 1));
  parallelFor(threads, u.P * channels * KW, grain, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t phase = p / (channels * KW), c = p / KW % channels, kw = p % KW;
      const int64_t offW = kw * dw - pw;
      int64_t lo, hi;
      validRange(offW, sw, IW, OW, lo, hi);
      const int64_t n = hi - lo;
      T *zp = z + p * u.ZP;
      for (int64_t j = 0; j < u.nb; ++j) {
        const T *xc = x + j * xImageStride + c * IH * IW;
        for (int64_t r = 0; r < u.RZ; ++r) {
          T *drow = zp + (j * u.RZ + r) * OW;
          const int64_t ih = (u.q0 + r) * sh + phase - ph;
          if (ih < 0 || ih >= IH || n <= 0) {
            for (int64_t t = 0; t < OW; ++t)
              drow[t] = T(0);
            continue;
          }
          for (int64_t t = 0; t < lo; ++t)
            drow[t] = T(0);
          const T *src = xc + ih * IW + lo * sw + offW;
          T *d = drow + lo;
          if (sw == 1)
            for (int64_t t = 0; t < n; ++t)
              d[t] = src[t];
          else
            for (int64_t t = 0; t < n; ++t)
              d[t] = src[t * sw];
          for (int64_t t = hi; t < OW; ++t)
            drow[t] = T(0);
        }
      }
    }
  });
}

/// The adjoint of buildShiftZ: dx_j[c, ...] += dz (parallel over channels,
/// so no two threads write one element).
template <typename T>
void scatterShiftZ(const Geo &g, const ShiftUnit &u, const T *dz, int64_t channels,
                   T *dx, int64_t dxImageStride, int threads) {
  const int64_t KW = g.k[1], OW = g.out[1], IH = g.in[0], IW = g.in[1];
  const int64_t sh = g.s[0], sw = g.s[1], dw = g.d[1], ph = g.pb[0], pw = g.pb[1];
  int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(u.P * u.ZP * KW, 1));
  parallelFor(threads, channels, grain, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c)
      for (int64_t pk = 0; pk < u.P * KW; ++pk) {
        const int64_t phase = pk / KW, kw = pk % KW;
        const int64_t offW = kw * dw - pw;
        int64_t lo, hi;
        validRange(offW, sw, IW, OW, lo, hi);
        const int64_t n = hi - lo;
        if (n <= 0)
          continue;
        const T *zp = dz + ((phase * channels + c) * KW + kw) * u.ZP;
        for (int64_t j = 0; j < u.nb; ++j) {
          T *xc = dx + j * dxImageStride + c * IH * IW;
          for (int64_t r = 0; r < u.RZ; ++r) {
            const int64_t ih = (u.q0 + r) * sh + phase - ph;
            if (ih < 0 || ih >= IH)
              continue;
            const T *srow = zp + (j * u.RZ + r) * OW + lo;
            T *drow = xc + ih * IW + lo * sw + offW;
            if (sw == 1)
              for (int64_t t = 0; t < n; ++t)
                drow[t] += srow[t];
            else
              for (int64_t t = 0; t < n; ++t)
                drow[t * sw] += srow[t];
          }
        }
      }
  });
}

/// wp[kh][m][c * KW + kw] = w[m][c][kh][kw]: the GEMM operand of each tap row.
template <typename T>
void permuteShiftWeights(const ConvDims &cd, const T *w, T *wp) {
  const int64_t KH = cd.g.k[0], KW = cd.g.k[1], kk = cd.c * KW;
  for (int64_t m = 0; m < cd.m; ++m)
    for (int64_t c = 0; c < cd.c; ++c)
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw)
          wp[(kh * cd.m + m) * kk + c * KW + kw] = w[((m * cd.c + c) * KH + kh) * KW + kw];
}

/// dy of the unit's images laid out as the GEMM columns: buf[m][n], 0 in
/// the columns between images.
template <typename T>
void gatherShiftDy(const ConvDims &cd, const ShiftUnit &u, const T *dy, int64_t n0,
                   T *buf, int threads) {
  const int64_t OW = cd.g.out[1], outSize = cd.g.outSize;
  parallelFor(threads, cd.m, std::max<int64_t>(1, 16384 / std::max<int64_t>(u.N, 1)),
              [&](int64_t m0, int64_t m1) {
                for (int64_t m = m0; m < m1; ++m)
                  for (int64_t j = 0; j < u.nb; ++j) {
                    T *dst = buf + m * u.N + j * u.RZ * OW;
                    const T *src = dy + ((n0 + j) * cd.m + m) * outSize + u.q0 * OW;
                    std::memcpy(dst, src, u.R * OW * sizeof(T));
                    int64_t junk = std::min((u.RZ - u.R) * OW, u.N - (j * u.RZ + u.R) * OW);
                    if (junk > 0)
                      std::fill(dst + u.R * OW, dst + u.R * OW + junk, T(0));
                  }
              });
}

template <typename T>
KernelFn convKernel(KernelArgs &args, const ConvDims &cd) {
  const T *x = args.in(0).as<T>(), *w = args.in(1).as<T>();
  const T *b = args.hasIn(2) ? args.in(2).as<T>() : nullptr;
  T *y = args.out(0).as<T>();
  int threads = args.env.threads;
  const Geo &g = cd.g;
  const int64_t outSize = g.outSize, inSize = g.inSize;
  if (cd.pointwise)
    return [=]() {
      for (int64_t n = 0; n < cd.n; ++n)
        for (int64_t gi = 0; gi < cd.group; ++gi) {
          T *yg = y + (n * cd.m + gi * cd.mg) * outSize;
          if (b)
            for (int64_t mm = 0; mm < cd.mg; ++mm)
              std::fill(yg + mm * outSize, yg + (mm + 1) * outSize, b[gi * cd.mg + mm]);
          gemmSafe<T>(threads, false, false, cd.mg, outSize, cd.cg,
                      w + gi * cd.mg * cd.kc, cd.kc,
                      x + (n * cd.c + gi * cd.cg) * inSize, inSize,
                      b ? T(1) : T(0), yg, outSize);
        }
    };
  if (cd.depthwise) {
    auto taps = std::make_shared<Taps>(makeTaps(g));
    int64_t sL = g.s[g.nd - 1];
    return [=]() {
      const Taps &tp = *taps;
      int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(outSize * g.kSize, 1));
      parallelFor(threads, cd.n * cd.m, grain, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          int64_t n = p / cd.m, m = p % cd.m, c = m / cd.mg;
          T *yp = y + p * outSize;
          const T *xp = x + (n * cd.c + c) * inSize, *wm = w + m * g.kSize;
          std::fill(yp, yp + outSize, b ? b[m] : T(0));
          for (int64_t kk = 0; kk < g.kSize; ++kk) {
            T wk = wm[kk];
            for (int64_t si = tp.begin[kk]; si < tp.begin[kk + 1]; ++si) {
              const Seg &sg = tp.segs[si];
              T *yr = yp + sg.yStart;
              const T *xr = xp + sg.xStart;
              if (sL == 1)
                for (int64_t t = 0; t < sg.len; ++t)
                  yr[t] += wk * xr[t];
              else
                for (int64_t t = 0; t < sg.len; ++t)
                  yr[t] += wk * xr[t * sL];
            }
          }
        }
      });
    };
  }
  if (cd.shift) {
    const int64_t KH = g.k[0], KW = g.k[1], kk = cd.c * KW, OW = g.out[1];
    ConvScratch<T> sc = takeConvScratch<T>(args, cd, ConvKind::Forward);
    const int64_t zSize = sc.colsSize, ybufSize = sc.bufSize;
    return [=]() {
      T *z = sc.cols.get(), *ybuf = sc.buf.get(), *wp = sc.third.get();
      permuteShiftWeights(cd, w, wp);
      forWorkers(cd, [&](int64_t wk, int64_t c0, int64_t c1, int threads) {
        T *zb = z + wk * zSize;
        forUnits(cd, c0, c1, [&](int64_t n0, int64_t nb, int64_t q0, int64_t q1) {
          ShiftUnit u = shiftUnit(g, nb, q0, q1);
          buildShiftZ(g, u, x + n0 * cd.c * inSize, cd.c * inSize, cd.c, zb, threads);
          T *c = nb == 1 ? y + n0 * cd.m * outSize + q0 * OW : ybuf + wk * ybufSize;
          int64_t ldc = nb == 1 ? outSize : u.N;
          if (nb == 1 && b)
            for (int64_t m = 0; m < cd.m; ++m)
              std::fill(c + m * ldc, c + m * ldc + u.N, b[m]);
          for (int64_t kh = 0; kh < KH; ++kh)
            gemmSafe<T>(threads, false, false, cd.m, u.N, kk, wp + kh * cd.m * kk, kk,
                        zb + shiftTapOffset(g, u, kk, kh), u.ZP,
                        (kh > 0 || (nb == 1 && b)) ? T(1) : T(0), c,
                        ldc);
          if (nb > 1)
            parallelFor(threads, nb * cd.m, std::max<int64_t>(1, 16384 / outSize),
                        [&](int64_t p0, int64_t p1) {
                          for (int64_t p = p0; p < p1; ++p) {
                            int64_t j = p / cd.m, m = p % cd.m;
                            T *dst = y + ((n0 + j) * cd.m + m) * outSize;
                            const T *src = c + m * u.N + j * u.RZ * OW;
                            T bias = b ? b[m] : T(0);
                            for (int64_t o = 0; o < outSize; ++o)
                              dst[o] = src[o] + bias;
                          }
                        });
        });
      });
    };
  }
  ConvScratch<T> sc = takeConvScratch<T>(args, cd, ConvKind::Forward);
  const int64_t colsSize = sc.colsSize, ybufSize = sc.bufSize;
  return [=]() {
    const int64_t outL = g.out[g.nd - 1];
    T *cols = sc.cols.get(), *ybuf = sc.buf.get();
    forWorkers(cd, [&](int64_t wk, int64_t c0, int64_t c1, int threads) {
    T *cb = cols + wk * colsSize;
    forUnits(cd, c0, c1, [&](int64_t n0, int64_t nb, int64_t q0, int64_t q1) {
      int64_t ncols = nb * (q1 - q0) * outL;
      for (int64_t gi = 0; gi < cd.group; ++gi) {
        im2col(g, x + (n0 * cd.c + gi * cd.cg) * inSize, cd.c * inSize, nb,
               cd.cg, q0, q1, cb, ncols, threads);
        const T *wg = w + gi * cd.mg * cd.kc;
        if (nb == 1) {
          T *yg = y + (n0 * cd.m + gi * cd.mg) * outSize + q0 * outL;
          if (b)
            for (int64_t mm = 0; mm < cd.mg; ++mm)
              std::fill(yg + mm * outSize, yg + mm * outSize + ncols, b[gi * cd.mg + mm]);
          gemmSafe<T>(threads, false, false, cd.mg, ncols, cd.kc, wg, cd.kc, cb, ncols,
                      b ? T(1) : T(0), yg, outSize);
        } else {
          T *yb = ybuf + wk * ybufSize;
          gemmSafe<T>(threads, false, false, cd.mg, ncols, cd.kc, wg, cd.kc, cb, ncols,
                      T(0), yb, ncols);
          parallelFor(threads, nb * cd.mg, std::max<int64_t>(1, 16384 / outSize),
                      [&](int64_t p0, int64_t p1) {
                        for (int64_t p = p0; p < p1; ++p) {
                          int64_t j = p / cd.mg, mm = p % cd.mg;
                          T *dst = y + ((n0 + j) * cd.m + gi * cd.mg + mm) * outSize;
                          const T *src = yb + mm * ncols + j * outSize;
                          T bias = b ? b[gi * cd.mg + mm] : T(0);
                          for (int64_t o = 0; o < outSize; ++o)
                            dst[o] = src[o] + bias;
                        }
                      });
        }
      }
    });
    });
  };
}

template <typename T>
KernelFn convGradInputKernel(KernelArgs &args, const ConvDims &cd) {
  const T *dy = args.in(0).as<T>(), *w = args.in(1).as<T>();
  T *dx = args.out(0).as<T>();
  int threads = args.env.threads;
  const Geo &g = cd.g;
  const int64_t outSize = g.outSize, inSize = g.inSize;
  if (cd.pointwise)
    return [=]() {
      for (int64_t n = 0; n < cd.n; ++n)
        for (int64_t gi = 0; gi < cd.group; ++gi)
          gemmSafe<T>(threads, true, false, cd.cg, inSize, cd.mg, w + gi * cd.mg * cd.kc,
                      cd.kc, dy + (n * cd.m + gi * cd.mg) * outSize, outSize,
                      T(0), dx + (n * cd.c + gi * cd.cg) * inSize, inSize);
    };
  if (cd.depthwise) {
    auto taps = std::make_shared<Taps>(makeTaps(g));
    int64_t sL = g.s[g.nd - 1];
    return [=]() {
      const Taps &tp = *taps;
      int64_t grain = std::max<int64_t>(
          1, 32768 / std::max<int64_t>(cd.mg * outSize * g.kSize, 1));
      parallelFor(threads, cd.n * cd.c, grain, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          int64_t n = p / cd.c, c = p % cd.c;
          T *xp = dx + p * inSize;
          std::fill(xp, xp + inSize, T(0));
          for (int64_t mm = 0; mm < cd.mg; ++mm) {
            int64_t m = c * cd.mg + mm;
            const T *yp = dy + (n * cd.m + m) * outSize, *wm = w + m * g.kSize;
            for (int64_t kk = 0; kk < g.kSize; ++kk) {
              T wk = wm[kk];
              for (int64_t si = tp.begin[kk]; si < tp.begin[kk + 1]; ++si) {
                const Seg &sg = tp.segs[si];
                const T *yr = yp + sg.yStart;
                T *xr = xp + sg.xStart;
                if (sL == 1)
                  for (int64_t t = 0; t < sg.len; ++t)
                    xr[t] += wk * yr[t];
                else
                  for (int64_t t = 0; t < sg.len; ++t)
                    xr[t * sL] += wk * yr[t];
              }
            }
          }
        }
      });
    };
  }
  if (cd.shift) {
    const int64_t KH = g.k[0], KW = g.k[1], kk = cd.c * KW, OW = g.out[1];
    ConvScratch<T> sc = takeConvScratch<T>(args, cd, ConvKind::GradInput);
    const int64_t zSize = sc.colsSize, dybufSize = sc.bufSize;
    return [=]() {
      T *z = sc.cols.get(), *dybuf = sc.buf.get(), *wp = sc.third.get();
      permuteShiftWeights(cd, w, wp);
      // A worker owns whole images, so its scatter never meets another's.
      forWorkers(cd, [&](int64_t wk, int64_t c0, int64_t c1, int threads) {
        T *zb = z + wk * zSize, *db = dybuf + wk * dybufSize;
        int64_t i0 = c0 * cd.chunk, i1 = std::min(cd.n, c1 * cd.chunk);
        std::fill(dx + i0 * cd.c * inSize, dx + i1 * cd.c * inSize, T(0));
        forUnits(cd, c0, c1, [&](int64_t n0, int64_t nb, int64_t q0, int64_t q1) {
          ShiftUnit u = shiftUnit(g, nb, q0, q1);
          const T *dyu = dy + n0 * cd.m * outSize + q0 * OW;
          int64_t ldd = outSize;
          if (nb > 1) {
            gatherShiftDy(cd, u, dy, n0, db, threads);
            dyu = db;
            ldd = u.N;
          }
          std::fill(zb, zb + u.P * kk * u.ZP, T(0));
          for (int64_t kh = 0; kh < KH; ++kh)
            gemmSafe<T>(threads, true, false, kk, u.N, cd.m, wp + kh * cd.m * kk, kk, dyu,
                        ldd, T(1), zb + shiftTapOffset(g, u, kk, kh), u.ZP);
          scatterShiftZ(g, u, zb, cd.c, dx + n0 * cd.c * inSize, cd.c * inSize, threads);
        });
      });
    };
  }
  ConvScratch<T> sc = takeConvScratch<T>(args, cd, ConvKind::GradInput);
  const int64_t colsSize = sc.colsSize, dybufSize = sc.bufSize;
  return [=]() {
    const int64_t outL = g.out[g.nd - 1];
    T *cols = sc.cols.get(), *dybuf = sc.buf.get();
    // A worker owns whole images, so its col2im never meets another's.
    forWorkers(cd, [&](int64_t wk, int64_t c0, int64_t c1, int threads) {
      T *cb = cols + wk * colsSize, *db = dybuf + wk * dybufSize;
      int64_t i0 = c0 * cd.chunk, i1 = std::min(cd.n, c1 * cd.chunk);
      std::fill(dx + i0 * cd.c * inSize, dx + i1 * cd.c * inSize, T(0));
      forUnits(cd, c0, c1, [&](int64_t n0, int64_t nb, int64_t q0, int64_t q1) {
        int64_t ncols = nb * (q1 - q0) * outL;
        for (int64_t gi = 0; gi < cd.group; ++gi) {
          const T *dyg = dy + (n0 * cd.m + gi * cd.mg) * outSize + q0 * outL;
          int64_t ldd = outSize;
          if (nb > 1) {
            gatherDy(cd, dy, n0, nb, gi, db, threads);
            dyg = db;
            ldd = ncols;
          }
          gemmSafe<T>(threads, true, false, cd.kc, ncols, cd.mg, w + gi * cd.mg * cd.kc,
                      cd.kc, dyg, ldd, T(0), cb, ncols);
          col2im(g, cb, ncols, nb, cd.cg, q0, q1,
                 dx + (n0 * cd.c + gi * cd.cg) * inSize, cd.c * inSize, threads);
        }
      });
    });
  };
}

template <typename T>
KernelFn convGradFilterKernel(KernelArgs &args, const ConvDims &cd) {
  const T *x = args.in(0).as<T>(), *dy = args.in(1).as<T>();
  T *dw = args.out(0).as<T>();
  int threads = args.env.threads;
  const Geo &g = cd.g;
  const int64_t outSize = g.outSize, inSize = g.inSize;
  if (cd.pointwise)
    return [=]() {
      if (cd.n == 0)
        std::fill(dw, dw + cd.m * cd.kc, T(0));
      for (int64_t n = 0; n < cd.n; ++n)
        for (int64_t gi = 0; gi < cd.group; ++gi)
          gemmSafe<T>(threads, false, true, cd.mg, cd.cg, outSize,
                      dy + (n * cd.m + gi * cd.mg) * outSize, outSize,
                      x + (n * cd.c + gi * cd.cg) * inSize, inSize,
                      n == 0 ? T(0) : T(1), dw + gi * cd.mg * cd.kc, cd.kc);
    };
  if (cd.depthwise) {
    auto taps = std::make_shared<Taps>(makeTaps(g));
    int64_t sL = g.s[g.nd - 1];
    return [=]() {
      const Taps &tp = *taps;
      int64_t grain = std::max<int64_t>(
          1, 32768 / std::max<int64_t>(cd.n * outSize * g.kSize, 1));
      parallelFor(threads, cd.m, grain, [&](int64_t m0, int64_t m1) {
        for (int64_t m = m0; m < m1; ++m) {
          int64_t c = m / cd.mg;
          for (int64_t kk = 0; kk < g.kSize; ++kk) {
            double acc = 0;
            for (int64_t n = 0; n < cd.n; ++n) {
              const T *yp = dy + (n * cd.m + m) * outSize;
              const T *xp = x + (n * cd.c + c) * inSize;
              for (int64_t si = tp.begin[kk]; si < tp.begin[kk + 1]; ++si) {
                const Seg &sg = tp.segs[si];
                const T *yr = yp + sg.yStart, *xr = xp + sg.xStart;
                T part = 0;
                if (sL == 1)
                  for (int64_t t = 0; t < sg.len; ++t)
                    part += yr[t] * xr[t];
                else
                  for (int64_t t = 0; t < sg.len; ++t)
                    part += yr[t] * xr[t * sL];
                acc += part;
              }
            }
            dw[m * g.kSize + kk] = T(acc);
          }
        }
      });
    };
  }
  // Each worker accumulates the transposed gradient dw^T [K, M] of each
  // group (cols [K, P] times dy^T [P, M]: with few output channels this
  // GEMM shape is markedly faster in BLAS than dy [M, P] times cols^T) into
  // its own scratch; the end transposes and sums them in worker order.
  // Threads split the images unless their partial sums would take more
  // than 64 MiB (tileConv).
  const int64_t dwSize = cd.m * cd.kc;
  if (cd.shift) {
    const int64_t KH = g.k[0], KW = g.k[1], kk = cd.c * KW, OW = g.out[1];
    ConvScratch<T> sc = takeConvScratch<T>(args, cd, ConvKind::GradFilter);
    const int64_t zSize = sc.colsSize, dybufSize = sc.bufSize;
    int threadsAll = threads;
    return [=]() {
      T *z = sc.cols.get(), *dybuf = sc.buf.get(), *partial = sc.third.get();
      forWorkers(cd, [&](int64_t wk, int64_t c0, int64_t c1, int threads) {
        T *zb = z + wk * zSize, *db = dybuf + wk * dybufSize;
        T *sk = partial + wk * dwSize; // [KH][C * KW][M]
        bool first = true;
        forUnits(cd, c0, c1, [&](int64_t n0, int64_t nb, int64_t q0, int64_t q1) {
          ShiftUnit u = shiftUnit(g, nb, q0, q1);
          buildShiftZ(g, u, x + n0 * cd.c * inSize, cd.c * inSize, cd.c, zb, threads);
          const T *dyu = dy + n0 * cd.m * outSize + q0 * OW;
          int64_t ldd = outSize;
          if (nb > 1) {
            gatherShiftDy(cd, u, dy, n0, db, threads);
            dyu = db;
            ldd = u.N;
          }
          for (int64_t kh = 0; kh < KH; ++kh)
            gemmSafe<T>(threads, false, true, kk, cd.m, u.N, zb + shiftTapOffset(g, u, kk, kh), u.ZP,
                        dyu, ldd,
                        first ? T(0) : T(1), sk + kh * kk * cd.m, cd.m);
          first = false;
        });
        if (first) // no images
          std::fill(sk, sk + dwSize, T(0));
      });
      const int64_t workers = cd.workers();
      const T *pp = partial;
      parallelFor(threadsAll, cd.m, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(cd.kc, 1)),
                  [&](int64_t m0, int64_t m1) {
                    for (int64_t m = m0; m < m1; ++m)
                      for (int64_t c = 0; c < cd.c; ++c)
                        for (int64_t kh = 0; kh < KH; ++kh)
                          for (int64_t kw = 0; kw < KW; ++kw) {
                            const T *src = pp + (kh * kk + c * KW + kw) * cd.m + m;
                            T acc = src[0];
                            for (int64_t w = 1; w < workers; ++w)
                              acc += src[w * dwSize];
                            dw[((m * cd.c + c) * KH + kh) * KW + kw] = acc;
                          }
                  });
    };
  }
  ConvScratch<T> sc = takeConvScratch<T>(args, cd, ConvKind::GradFilter);
  const int64_t colsSize = sc.colsSize, dybufSize = sc.bufSize;
  int threadsAll = threads;
  return [=]() {
    const int64_t outL = g.out[g.nd - 1];
    T *cols = sc.cols.get(), *dybuf = sc.buf.get(), *partial = sc.third.get();
    forWorkers(cd, [&](int64_t wk, int64_t c0, int64_t c1, int threads) {
      T *cb = cols + wk * colsSize, *db = dybuf + wk * dybufSize;
      T *dwk = partial + wk * dwSize; // [group][K][M/group]
      bool first = true;
      forUnits(cd, c0, c1, [&](int64_t n0, int64_t nb, int64_t q0, int64_t q1) {
        int64_t ncols = nb * (q1 - q0) * outL;
        for (int64_t gi = 0; gi < cd.group; ++gi) {
          im2col(g, x + (n0 * cd.c + gi * cd.cg) * inSize, cd.c * inSize, nb,
                 cd.cg, q0, q1, cb, ncols, threads);
          const T *dyg = dy + (n0 * cd.m + gi * cd.mg) * outSize + q0 * outL;
          int64_t ldd = outSize;
          if (nb > 1) {
            gatherDy(cd, dy, n0, nb, gi, db, threads);
            dyg = db;
            ldd = ncols;
          }
          gemmSafe<T>(threads, false, true, cd.kc, cd.mg, ncols, cb, ncols, dyg, ldd,
                      first ? T(0) : T(1), dwk + gi * cd.kc * cd.mg, cd.mg);
        }
        first = false;
      });
      if (first) // no images
        std::fill(dwk, dwk + dwSize, T(0));
    });
    const int64_t workers = cd.workers(), kc = cd.kc, mg = cd.mg;
    const T *pp = partial;
    parallelFor(threadsAll, cd.m, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(kc, 1)),
                [&](int64_t m0, int64_t m1) {
                  for (int64_t m = m0; m < m1; ++m) {
                    const int64_t gi = m / mg, mm = m % mg;
                    T *row = dw + m * kc;
                    const T *src = pp + gi * kc * mg + mm;
                    for (int64_t k = 0; k < kc; ++k)
                      row[k] = src[k * mg];
                    for (int64_t w = 1; w < workers; ++w)
                      for (int64_t k = 0; k < kc; ++k)
                        row[k] += src[w * dwSize + k * mg];
                  }
                });
  };
}

KernelFn convFactory(KernelArgs &args) {
  ConvDims cd = makeConvDims(args, ConvKind::Forward, args.env.threads);
  return args.in(0).dtype == DType::F32 ? convKernel<float>(args, cd)
                                        : convKernel<double>(args, cd);
}

KernelFn convGradInputFactory(KernelArgs &args) {
  ConvDims cd = makeConvDims(args, ConvKind::GradInput, args.env.threads);
  return args.in(0).dtype == DType::F32 ? convGradInputKernel<float>(args, cd)
                                        : convGradInputKernel<double>(args, cd);
}

KernelFn convGradFilterFactory(KernelArgs &args) {
  ConvDims cd = makeConvDims(args, ConvKind::GradFilter, args.env.threads);
  return args.in(0).dtype == DType::F32 ? convGradFilterKernel<float>(args, cd)
                                        : convGradFilterKernel<double>(args, cd);
}

//===----------------------------------------------------------------------===//
// Pooling
//
// Each plane is processed tap by tap over the precomputed row segments: the
// inner loops run along contiguous output rows and the plane stays in cache.
//===----------------------------------------------------------------------===//

/// The average's divisor of every output (see the file comment); 0 for a
/// window entirely in the padding without count_include_pad.
std::vector<double> avgDivisors(const Geo &g, bool includePad) {
  // The divisor is a product over dims of per-dim counts.
  std::vector<std::vector<int64_t>> count(g.nd);
  for (int i = 0; i < g.nd; ++i) {
    count[i].resize(g.out[i]);
    for (int64_t o = 0; o < g.out[i]; ++o) {
      int64_t start = o * g.s[i] - g.pb[i];
      int64_t lo = includePad ? start : std::max<int64_t>(start, 0);
      int64_t hi = std::min(start + g.k[i], includePad ? g.in[i] + g.pe[i] : g.in[i]);
      count[i][o] = std::max<int64_t>(hi - lo, 0);
    }
  }
  std::vector<double> div(g.outSize);
  for (int64_t o = 0; o < g.outSize; ++o) {
    int64_t rem = o, n = 1;
    for (int i = g.nd - 1; i >= 0; --i) {
      n *= count[i][rem % g.out[i]];
      rem /= g.out[i];
    }
    div[o] = (double)n;
  }
  return div;
}

inline int64_t poolGrain(const Geo &g) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(g.outSize * g.kSize, 1));
}

/// y[o] = max over o's window of xp, taps in window order (a value replaces
/// the max when greater, or NaN: NaN propagates). Unit: the last spatial
/// stride is 1, so the inner loops are contiguous and vectorize.
template <typename T, bool Unit>
void windowMax(const Taps &tp, const T *xp, T *y, int64_t sL) {
  for (const Seg &sg : tp.segs) {
    T *yr = y + sg.yStart;
    const T *xr = xp + sg.xStart;
    const int64_t len = sg.len;
    for (int64_t t = 0; t < len; ++t) {
      T v = xr[Unit ? t : t * sL], cur = yr[t];
      yr[t] = (v > cur || v != v) ? v : cur;
    }
  }
}

/// best[o], arg[o] = the maximum of o's window of xp and the position in
/// the plane of the element that gives it, in one scan in window order: an
/// element is taken when it is greater, or NaN, or the first of its window.
/// So ties go to the first maximum, an all -inf window picks its first
/// element and a NaN maximum is the last NaN, as PyTorch's scan. best starts
/// at -inf and arg at -1 (no element; an output whose window lies entirely
/// in the padding keeps it). A select without a branch: the outcome is
/// unpredictable.
template <typename T, typename I, bool Unit>
void windowMaxArg(const Taps &tp, const T *xp, T *best, I *arg, int64_t sL) {
  for (const Seg &sg : tp.segs) {
    T *br = best + sg.yStart;
    I *ar = arg + sg.yStart;
    const T *xr = xp + sg.xStart;
    const int64_t len = sg.len;
    const I x0 = (I)sg.xStart, step = (I)(Unit ? 1 : sL);
    for (int64_t t = 0; t < len; ++t) {
      T v = xr[Unit ? t : t * sL], b = br[t];
      I a = ar[t];
      bool take = (v > b) | (v != v) | (a < 0);
      br[t] = take ? v : b;
      ar[t] = take ? (I)(x0 + (I)t * step) : a;
    }
  }
}

template <typename T>
KernelFn maxPoolKernel(KernelArgs &args, const PoolDims &pd) {
  const T *x = args.in(0).as<T>();
  T *y = args.out(0).as<T>();
  int threads = args.env.threads;
  const Geo g = pd.g;
  const int64_t planes = pd.planes, sL = g.s[g.nd - 1];
  auto taps = std::make_shared<Taps>(makeTaps(g));
  return [=]() {
    const Taps &tp = *taps;
    parallelFor(threads, planes, poolGrain(g), [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        const T *xp = x + p * g.inSize;
        T *yp = y + p * g.outSize;
        std::fill(yp, yp + g.outSize, -std::numeric_limits<T>::infinity());
        // In window order a value replaces the max when greater, or NaN
        // (NaN propagates, as in PyTorch).
        if (sL == 1)
          windowMax<T, true>(tp, xp, yp, 1);
        else
          windowMax<T, false>(tp, xp, yp, sL);
        for (int64_t o : tp.empty)
          yp[o] = std::numeric_limits<T>::lowest();
      }
    });
  };
}

template <typename T, typename I>
KernelFn maxPoolGradTyped(KernelArgs &args, const PoolDims &pd) {
  const T *x = args.in(0).as<T>(), *dy = args.in(1).as<T>();
  T *dx = args.out(0).as<T>();
  int threads = std::max(1, args.env.threads);
  const Geo g = pd.g;
  const int64_t planes = pd.planes, sL = g.s[g.nd - 1];
  auto taps = std::make_shared<Taps>(makeTaps(g));
  // Per-chunk scratch: each output's running max and its argmax.
  ScratchSpan<T> best = args.scratch<T>(maxPoolGradScratch(g, threads));
  ScratchSpan<I> arg = args.scratch<I>(maxPoolGradScratch(g, threads));
  return [=]() {
    const Taps &tp = *taps;
    T *bestAll = best.get();
    I *argAll = arg.get();
    int64_t chunks = std::min<int64_t>(
        threads, std::max<int64_t>(1, planes / poolGrain(g)));
    chunks = std::max<int64_t>(1, std::min(chunks, planes));
    parallelFor(threads, chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        T *bv = bestAll + c * g.outSize;
        I *ba = argAll + c * g.outSize;
        for (int64_t p = planes * c / chunks; p < planes * (c + 1) / chunks; ++p) {
          const T *xp = x + p * g.inSize, *dyp = dy + p * g.outSize;
          T *dxp = dx + p * g.inSize;
          std::fill(bv, bv + g.outSize, -std::numeric_limits<T>::infinity());
          std::fill(ba, ba + g.outSize, I(-1));
          if (sL == 1)
            windowMaxArg<T, I, true>(tp, xp, bv, ba, 1);
          else
            windowMaxArg<T, I, false>(tp, xp, bv, ba, sL);
          std::fill(dxp, dxp + g.inSize, T(0));
          for (int64_t o = 0; o < g.outSize; ++o)
            if (ba[o] >= 0)
              dxp[ba[o]] += dyp[o];
        }
      }
    });
  };
}

template <typename T>
KernelFn maxPoolGradKernel(KernelArgs &args, const PoolDims &pd) {
  if (maxPoolGradIndexBytes(pd.g) == 4)
    return maxPoolGradTyped<T, int32_t>(args, pd);
  return maxPoolGradTyped<T, int64_t>(args, pd);
}

template <typename T>
KernelFn avgPoolKernel(KernelArgs &args, const PoolDims &pd) {
  const T *x = args.in(0).as<T>();
  T *y = args.out(0).as<T>();
  int threads = args.env.threads;
  const Geo g = pd.g;
  const int64_t planes = pd.planes, sL = g.s[g.nd - 1];
  auto taps = std::make_shared<Taps>(makeTaps(g));
  auto div = std::make_shared<std::vector<double>>(avgDivisors(g, pd.countIncludePad));
  return [=]() {
    const Taps &tp = *taps;
    const double *dv = div->data();
    parallelFor(threads, planes, poolGrain(g), [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        const T *xp = x + p * g.inSize;
        T *yp = y + p * g.outSize;
        std::fill(yp, yp + g.outSize, T(0));
        for (const Seg &sg : tp.segs) {
          T *yr = yp + sg.yStart;
          const T *xr = xp + sg.xStart;
          if (sL == 1)
            for (int64_t t = 0; t < sg.len; ++t)
              yr[t] += xr[t];
          else
            for (int64_t t = 0; t < sg.len; ++t)
              yr[t] += xr[t * sL];
        }
        for (int64_t o = 0; o < g.outSize; ++o)
          yp[o] = dv[o] > 0 ? T(yp[o] / dv[o]) : T(0);
      }
    });
  };
}

template <typename T>
KernelFn avgPoolGradKernel(KernelArgs &args, const PoolDims &pd) {
  const T *dy = args.in(0).as<T>();
  T *dx = args.out(0).as<T>();
  int threads = args.env.threads;
  const Geo g = pd.g;
  const int64_t planes = pd.planes, sL = g.s[g.nd - 1];
  auto taps = std::make_shared<Taps>(makeTaps(g));
  std::vector<double> d = avgDivisors(g, pd.countIncludePad);
  auto inv = std::make_shared<std::vector<double>>(d.size());
  for (size_t o = 0; o < d.size(); ++o)
    (*inv)[o] = d[o] > 0 ? 1.0 / d[o] : 0.0;
  return [=]() {
    const Taps &tp = *taps;
    const double *iv = inv->data();
    parallelFor(threads, planes, poolGrain(g), [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        const T *dyp = dy + p * g.outSize;
        T *dxp = dx + p * g.inSize;
        std::fill(dxp, dxp + g.inSize, T(0));
        for (const Seg &sg : tp.segs) {
          const T *yr = dyp + sg.yStart;
          const double *ir = iv + sg.yStart;
          T *xr = dxp + sg.xStart;
          for (int64_t t = 0; t < sg.len; ++t)
            xr[t * sL] += T(yr[t] * ir[t]);
        }
      }
    });
  };
}

KernelFn maxPoolFactory(KernelArgs &args) {
  PoolDims pd = readPoolDims(args, PoolKind::Max);
  return args.in(0).dtype == DType::F32 ? maxPoolKernel<float>(args, pd)
                                        : maxPoolKernel<double>(args, pd);
}

KernelFn maxPoolGradFactory(KernelArgs &args) {
  PoolDims pd = readPoolDims(args, PoolKind::MaxGrad);
  return args.in(0).dtype == DType::F32 ? maxPoolGradKernel<float>(args, pd)
                                        : maxPoolGradKernel<double>(args, pd);
}

KernelFn avgPoolFactory(KernelArgs &args) {
  PoolDims pd = readPoolDims(args, PoolKind::Avg);
  return args.in(0).dtype == DType::F32 ? avgPoolKernel<float>(args, pd)
                                        : avgPoolKernel<double>(args, pd);
}

KernelFn avgPoolGradFactory(KernelArgs &args) {
  PoolDims pd = readPoolDims(args, PoolKind::AvgGrad);
  return args.in(0).dtype == DType::F32 ? avgPoolGradKernel<float>(args, pd)
                                        : avgPoolGradKernel<double>(args, pd);
}

} // namespace

void registerConvKernels(KernelRegistry &r) {
  PX_ADD_CONV_KERNELS(r);
}

} // namespace parallax::rt
