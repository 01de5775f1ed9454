//===- Conv.cpp - convolution and pooling kernels (NCHW, N-d) -------------===//
//
// conv, conv_grad_input, conv_grad_filter, max_pool, max_pool_grad,
// avg_pool, avg_pool_grad over x [N, C, spatial...] with any number of
// spatial dimensions (up to kMaxSpatial). Pads are [begin..., end...].
//
// Convolutions are im2col + GEMM per group, over a chunk of images at a time
// so that small feature maps still give BLAS a wide matrix; a 1x1, stride-1,
// unpadded convolution skips im2col and multiplies the image directly.
// Scratch (columns, gathered dy, GEMM result) is sized once in the factory.
//
// Pooling follows ONNX / PyTorch: padding never wins a max (ties go to the
// first maximum in row-major window order), the average's divisor counts the
// window positions inside x, or, with count_include_pad, those inside the
// padded extent [-pad_begin, in + pad_end) (a ceil_mode window's overhang
// past the end padding never counts), as PyTorch's AvgPool and onnxruntime.
//
//===----------------------------------------------------------------------===//

#include "parallax/Runtime/Kernel.h"

#include <cblas.h>

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

constexpr int kMaxSpatial = 8;

std::string shapeStr(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void checkFloat(const KernelArgs &args, const TensorView &t, const char *what) {
  if (t.dtype == DType::F16 || t.dtype == DType::BF16)
    args.fail(std::string(what) + ": " + nameOf(t.dtype) +
              " is not supported by the CPU runtime");
  if (t.dtype != DType::F32 && t.dtype != DType::F64)
    args.fail(std::string(what) + " must be f32 or f64, got " +
              nameOf(t.dtype));
}

void checkSameDType(const KernelArgs &args, const TensorView &a,
                    const TensorView &b, const char *what) {
  if (a.dtype != b.dtype)
    args.fail(std::string(what) + " must be " + nameOf(a.dtype) + ", got " +
              nameOf(b.dtype));
}

/// ONNX / PyTorch output size of one spatial dimension (as the px shape
/// rule): a ceil_mode window that would start in the end padding is dropped.
int64_t windowOut(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe,
                  int64_t d, bool ceilMode) {
  int64_t eff = d * (k - 1) + 1;
  int64_t span = in + pb + pe - eff;
  if (span < 0)
    return 0;
  int64_t out = (ceilMode ? (span + s - 1) / s : span / s) + 1;
  if (ceilMode && (out - 1) * s >= in + pb)
    --out;
  return out;
}

/// The window geometry of one kernel, in elements.
struct Geo {
  int nd = 0;
  int64_t in[kMaxSpatial], out[kMaxSpatial], k[kMaxSpatial], s[kMaxSpatial],
      d[kMaxSpatial], pb[kMaxSpatial], pe[kMaxSpatial];
  int64_t inStride[kMaxSpatial], kStride[kMaxSpatial];
  int64_t inSize = 1, outSize = 1, kSize = 1;
  /// Product of all output dims but the last (output "rows").
  int64_t outOuter = 1;
  /// 1x1 kernel, stride 1, no padding: im2col is the identity.
  bool pointwise = false;
};

/// Reads and checks strides/pads/dilations (dilations all 1 when
/// `hasDilations` is false) for a window of `kernel` over the spatial dims of
/// `xShape`, and checks that `yShape` is [N, channels, out...].
Geo makeGeo(const KernelArgs &args, const std::vector<int64_t> &xShape,
            const std::vector<int64_t> &kernel, bool hasDilations,
            bool ceilMode, const std::vector<int64_t> &yShape,
            int64_t channels, const char *yWhat) {
  Geo g;
  int64_t nd = (int64_t)xShape.size() - 2;
  if (nd < 1)
    args.fail("expected a tensor [N, C, spatial...], got " + shapeStr(xShape));
  if (nd > kMaxSpatial)
    args.fail("at most " + std::to_string(kMaxSpatial) +
              " spatial dimensions are supported, got " + std::to_string(nd));
  g.nd = (int)nd;
  std::vector<int64_t> strides = args.i64s("strides");
  std::vector<int64_t> pads = args.i64s("pads");
  std::vector<int64_t> dil = hasDilations ? args.i64s("dilations")
                                          : std::vector<int64_t>(nd, 1);
  if ((int64_t)kernel.size() != nd)
    args.fail("expected " + std::to_string(nd) + " kernel dimensions, got " +
              std::to_string(kernel.size()));
  if ((int64_t)strides.size() != nd)
    args.fail("expected " + std::to_string(nd) + " strides, got " +
              std::to_string(strides.size()));
  if ((int64_t)dil.size() != nd)
    args.fail("expected " + std::to_string(nd) + " dilations, got " +
              std::to_string(dil.size()));
  if ((int64_t)pads.size() != 2 * nd)
    args.fail("expected " + std::to_string(2 * nd) +
              " pads (begins then ends), got " + std::to_string(pads.size()));
  for (int64_t i = 0; i < nd; ++i) {
    if (kernel[i] < 1 || strides[i] < 1 || dil[i] < 1)
      args.fail("kernel sizes, strides and dilations must be >= 1, got "
                "kernel " + shapeStr(kernel) + ", strides " +
                shapeStr(strides) + ", dilations " + shapeStr(dil));
    if (pads[i] < 0 || pads[nd + i] < 0)
      args.fail("pads must be >= 0, got " + shapeStr(pads));
  }
  for (int64_t d : xShape)
    if (d < 0)
      args.fail("negative dimension in " + shapeStr(xShape));
  std::vector<int64_t> expected{xShape[0], channels};
  for (int64_t i = 0; i < nd; ++i) {
    g.in[i] = xShape[2 + i];
    g.k[i] = kernel[i];
    g.s[i] = strides[i];
    g.d[i] = dil[i];
    g.pb[i] = pads[i];
    g.pe[i] = pads[nd + i];
    g.out[i] = windowOut(g.in[i], g.k[i], g.s[i], g.pb[i], g.pe[i], g.d[i],
                         ceilMode);
    if (g.out[i] < 1)
      args.fail("window of size " + std::to_string(kernel[i]) +
                " (dilation " + std::to_string(dil[i]) +
                ") does not fit spatial dimension " + std::to_string(i) +
                " of size " + std::to_string(g.in[i]) + " with pads " +
                shapeStr(pads));
    expected.push_back(g.out[i]);
  }
  if (yShape != expected)
    args.fail(std::string(yWhat) + " must have shape " + shapeStr(expected) +
              ", got " + shapeStr(yShape));
  for (int i = nd - 1; i >= 0; --i) {
    g.inStride[i] = g.inSize;
    g.kStride[i] = g.kSize;
    g.inSize *= g.in[i];
    g.kSize *= g.k[i];
    g.outSize *= g.out[i];
    if (i < nd - 1)
      g.outOuter *= g.out[i];
  }
  g.pointwise = true;
  for (int i = 0; i < nd; ++i)
    if (g.k[i] != 1 || g.s[i] != 1 || g.pb[i] != 0 || g.pe[i] != 0)
      g.pointwise = false;
  return g;
}

//===----------------------------------------------------------------------===//
// GEMM
//===----------------------------------------------------------------------===//

inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                 const float *a, int64_t lda, const float *b, int64_t ldb,
                 float beta, float *c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, alpha, a,
              (int)lda, b, (int)ldb, beta, c, (int)ldc);
}
inline void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                 double alpha, const double *a, int64_t lda, const double *b,
                 int64_t ldb, double beta, double *c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, alpha, a,
              (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

/// C[m, n] (ldc) = alpha * op(A) op(B) + beta * C; handles k == 0 (BLAS
/// implementations differ on it).
template <typename T>
void gemmSafe(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T *a,
              int64_t lda, const T *b, int64_t ldb, T beta, T *c, int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  gemm(ta, tb, m, n, k, T(1), a, std::max<int64_t>(lda, 1), b,
       std::max<int64_t>(ldb, 1), beta, c, std::max<int64_t>(ldc, 1));
}

void checkBlasSize(const KernelArgs &args, std::initializer_list<int64_t> dims) {
  for (int64_t d : dims)
    if (d > INT_MAX)
      args.fail("a GEMM dimension of " + std::to_string(d) +
                " exceeds the BLAS limit of " + std::to_string(INT_MAX));
}

//===----------------------------------------------------------------------===//
// im2col / col2im
//===----------------------------------------------------------------------===//

/// Valid range [lo, hi) of o in [0, out) with 0 <= o * s + off < in.
inline void validRange(int64_t off, int64_t s, int64_t in, int64_t out,
                       int64_t &lo, int64_t &hi) {
  lo = off >= 0 ? 0 : (-off + s - 1) / s;
  hi = off < in ? (in - off + s - 1) / s : 0;
  hi = std::min(hi, out);
  lo = std::min(lo, hi);
}

/// cols[c * kSize + kk, j * outSize + o] = x_j[c, o * s - pb + kk * d]
/// (0 outside x) for the images j < nimg at x + j * xImageStride; rows of
/// cols have stride `ld`.
template <typename T>
void im2col(const Geo &g, const T *x, int64_t xImageStride, int64_t nimg,
            int64_t channels, T *cols, int64_t ld, int threads) {
  const int L = g.nd - 1;
  int64_t rows = channels * g.kSize;
  int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(g.outSize, 1));
  parallelFor(threads, nimg * rows, grain, [&](int64_t r0, int64_t r1) {
    for (int64_t rr = r0; rr < r1; ++rr) {
      int64_t j = rr / rows, r = rr % rows;
      int64_t c = r / g.kSize, kr = r % g.kSize;
      int64_t kpos[kMaxSpatial], o[kMaxSpatial];
      for (int i = 0; i < g.nd; ++i) {
        kpos[i] = kr / g.kStride[i];
        kr %= g.kStride[i];
        o[i] = 0;
      }
      const T *xc = x + j * xImageStride + c * g.inSize;
      T *dst = cols + r * ld + j * g.outSize;
      int64_t offL = kpos[L] * g.d[L] - g.pb[L], sL = g.s[L], outL = g.out[L];
      int64_t lo, hi;
      validRange(offL, sL, g.in[L], outL, lo, hi);
      for (int64_t q = 0; q < g.outOuter; ++q) {
        T *drow = dst + q * outL;
        bool ok = true;
        int64_t base = 0;
        for (int i = 0; i < L; ++i) {
          int64_t pos = o[i] * g.s[i] - g.pb[i] + kpos[i] * g.d[i];
          if (pos < 0 || pos >= g.in[i]) {
            ok = false;
            break;
          }
          base += pos * g.inStride[i];
        }
        if (!ok || lo >= hi) {
          std::fill(drow, drow + outL, T(0));
        } else {
          std::fill(drow, drow + lo, T(0));
          const T *src = xc + base + offL;
          if (sL == 1) {
            std::memcpy(drow + lo, src + lo, (hi - lo) * sizeof(T));
          } else {
            for (int64_t ow = lo; ow < hi; ++ow)
              drow[ow] = src[ow * sL];
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

/// The adjoint of im2col: dx_j[c, ...] += cols[...] (dx must be zeroed first).
template <typename T>
void col2im(const Geo &g, const T *cols, int64_t ld, int64_t nimg,
            int64_t channels, T *dx, int64_t dxImageStride, int threads) {
  const int L = g.nd - 1;
  int64_t grain = std::max<int64_t>(
      1, 32768 / std::max<int64_t>(g.outSize * g.kSize, 1));
  parallelFor(threads, nimg * channels, grain, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      int64_t j = p / channels, c = p % channels;
      T *xc = dx + j * dxImageStride + c * g.inSize;
      for (int64_t kr0 = 0; kr0 < g.kSize; ++kr0) {
        int64_t r = c * g.kSize + kr0, kr = kr0;
        int64_t kpos[kMaxSpatial], o[kMaxSpatial];
        for (int i = 0; i < g.nd; ++i) {
          kpos[i] = kr / g.kStride[i];
          kr %= g.kStride[i];
          o[i] = 0;
        }
        const T *src = cols + r * ld + j * g.outSize;
        int64_t offL = kpos[L] * g.d[L] - g.pb[L], sL = g.s[L], outL = g.out[L];
        int64_t lo, hi;
        validRange(offL, sL, g.in[L], outL, lo, hi);
        for (int64_t q = 0; q < g.outOuter; ++q) {
          const T *srow = src + q * outL;
          bool ok = lo < hi;
          int64_t base = 0;
          for (int i = 0; i < L && ok; ++i) {
            int64_t pos = o[i] * g.s[i] - g.pb[i] + kpos[i] * g.d[i];
            if (pos < 0 || pos >= g.in[i])
              ok = false;
            base += pos * g.inStride[i];
          }
          if (ok) {
            T *drow = xc + base + offL;
            if (sL == 1) {
              for (int64_t ow = lo; ow < hi; ++ow)
                drow[ow] += srow[ow];
            } else {
              for (int64_t ow = lo; ow < hi; ++ow)
                drow[ow * sL] += srow[ow];
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

/// Shapes shared by conv and its gradients.
struct ConvDims {
  Geo g;
  int64_t n = 0, c = 0, m = 0, group = 1, cg = 0, mg = 0, kc = 0;
  /// Images per GEMM (1: GEMM straight into / out of the tensors).
  int64_t chunk = 1;
};

/// x [N, C, in...], w [M, C/group, k...], y [N, M, out...].
ConvDims makeConvDims(const KernelArgs &args, const std::vector<int64_t> &x,
                      const std::vector<int64_t> &w,
                      const std::vector<int64_t> &y, const char *yWhat) {
  ConvDims cd;
  if (x.size() < 3 || w.size() != x.size() || y.size() != x.size())
    args.fail("conv needs x [N, C, spatial...], w and y of the same rank, "
              "got x " + shapeStr(x) + ", w " + shapeStr(w) + ", y " +
              shapeStr(y));
  cd.group = args.i64Or("group", 1);
  cd.n = x[0];
  cd.c = x[1];
  cd.m = w[0];
  if (cd.group < 1 || cd.c % cd.group != 0 || cd.m % cd.group != 0 ||
      w[1] * cd.group != cd.c)
    args.fail("channels do not match: x has " + std::to_string(cd.c) +
              ", w is " + shapeStr(w) + ", group " + std::to_string(cd.group));
  cd.cg = cd.c / cd.group;
  cd.mg = cd.m / cd.group;
  std::vector<int64_t> kernel(w.begin() + 2, w.end());
  cd.g = makeGeo(args, x, kernel, /*hasDilations=*/true, /*ceil=*/false, y,
                 cd.m, yWhat);
  cd.kc = cd.cg * cd.g.kSize;
  // Batch small feature maps so that a GEMM has ~2048 columns, but keep the
  // columns buffer within 4M elements (or one image's, if that is larger).
  const Geo &g = cd.g;
  int64_t chunk = std::max<int64_t>(1, 2048 / std::max<int64_t>(g.outSize, 1));
  int64_t budget = std::max<int64_t>(1, (int64_t(1) << 22) /
                                            std::max<int64_t>(cd.kc * g.outSize, 1));
  cd.chunk = std::max<int64_t>(1, std::min({chunk, budget, std::max<int64_t>(cd.n, 1)}));
  checkBlasSize(args, {cd.kc, cd.mg, cd.chunk * g.outSize, g.inSize});
  return cd;
}

template <typename T>
KernelFn convKernel(KernelArgs &args, const ConvDims &cd) {
  const T *x = args.in(0).as<T>(), *w = args.in(1).as<T>();
  const T *b = args.hasIn(2) ? args.in(2).as<T>() : nullptr;
  T *y = args.out(0).as<T>();
  int threads = args.env.threads;
  const Geo &g = cd.g;
  bool direct = g.pointwise;
  auto cols = std::make_shared<std::vector<T>>(
      direct ? 0 : cd.kc * cd.chunk * g.outSize);
  auto ybuf = std::make_shared<std::vector<T>>(
      !direct && cd.chunk > 1 ? cd.mg * cd.chunk * g.outSize : 0);
  return [=]() {
    const int64_t outSize = g.outSize, inSize = g.inSize;
    auto fillBias = [&](T *yrow, int64_t mIndex) {
      std::fill(yrow, yrow + outSize, b ? b[mIndex] : T(0));
    };
    if (direct) {
      for (int64_t n = 0; n < cd.n; ++n)
        for (int64_t gi = 0; gi < cd.group; ++gi) {
          T *yg = y + (n * cd.m + gi * cd.mg) * outSize;
          if (b)
            for (int64_t mm = 0; mm < cd.mg; ++mm)
              fillBias(yg + mm * outSize, gi * cd.mg + mm);
          gemmSafe<T>(false, false, cd.mg, outSize, cd.cg,
                      w + gi * cd.mg * cd.kc, cd.kc,
                      x + (n * cd.c + gi * cd.cg) * inSize, inSize,
                      b ? T(1) : T(0), yg, outSize);
        }
      return;
    }
    T *cb = cols->data();
    for (int64_t n0 = 0; n0 < cd.n; n0 += cd.chunk) {
      int64_t nb = std::min(cd.chunk, cd.n - n0), ld = nb * outSize;
      for (int64_t gi = 0; gi < cd.group; ++gi) {
        im2col(g, x + (n0 * cd.c + gi * cd.cg) * inSize, cd.c * inSize, nb,
               cd.cg, cb, ld, threads);
        const T *wg = w + gi * cd.mg * cd.kc;
        if (nb == 1) {
          T *yg = y + (n0 * cd.m + gi * cd.mg) * outSize;
          if (b)
            for (int64_t mm = 0; mm < cd.mg; ++mm)
              fillBias(yg + mm * outSize, gi * cd.mg + mm);
          gemmSafe<T>(false, false, cd.mg, outSize, cd.kc, wg, cd.kc, cb, ld,
                      b ? T(1) : T(0), yg, outSize);
        } else {
          T *yb = ybuf->data();
          gemmSafe<T>(false, false, cd.mg, ld, cd.kc, wg, cd.kc, cb, ld, T(0),
                      yb, ld);
          parallelFor(threads, nb * cd.mg, std::max<int64_t>(1, 16384 / outSize),
                      [&](int64_t p0, int64_t p1) {
                        for (int64_t p = p0; p < p1; ++p) {
                          int64_t j = p / cd.mg, mm = p % cd.mg;
                          T *dst = y + ((n0 + j) * cd.m + gi * cd.mg + mm) * outSize;
                          const T *src = yb + mm * ld + j * outSize;
                          T bias = b ? b[gi * cd.mg + mm] : T(0);
                          for (int64_t o = 0; o < outSize; ++o)
                            dst[o] = src[o] + bias;
                        }
                      });
        }
      }
    }
  };
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

template <typename T>
KernelFn convGradInputKernel(KernelArgs &args, const ConvDims &cd) {
  const T *dy = args.in(0).as<T>(), *w = args.in(1).as<T>();
  T *dx = args.out(0).as<T>();
  int threads = args.env.threads;
  const Geo &g = cd.g;
  bool direct = g.pointwise;
  auto cols = std::make_shared<std::vector<T>>(
      direct ? 0 : cd.kc * cd.chunk * g.outSize);
  auto dybuf = std::make_shared<std::vector<T>>(
      !direct && cd.chunk > 1 ? cd.mg * cd.chunk * g.outSize : 0);
  return [=]() {
    const int64_t outSize = g.outSize, inSize = g.inSize;
    if (direct) {
      for (int64_t n = 0; n < cd.n; ++n)
        for (int64_t gi = 0; gi < cd.group; ++gi)
          gemmSafe<T>(true, false, cd.cg, inSize, cd.mg, w + gi * cd.mg * cd.kc,
                      cd.kc, dy + (n * cd.m + gi * cd.mg) * outSize, outSize,
                      T(0), dx + (n * cd.c + gi * cd.cg) * inSize, inSize);
      return;
    }
    std::fill(dx, dx + cd.n * cd.c * inSize, T(0));
    T *cb = cols->data();
    for (int64_t n0 = 0; n0 < cd.n; n0 += cd.chunk) {
      int64_t nb = std::min(cd.chunk, cd.n - n0), ld = nb * outSize;
      for (int64_t gi = 0; gi < cd.group; ++gi) {
        const T *dyg = dy + (n0 * cd.m + gi * cd.mg) * outSize;
        if (nb > 1) {
          gatherDy(cd, dy, n0, nb, gi, dybuf->data(), threads);
          dyg = dybuf->data();
        }
        gemmSafe<T>(true, false, cd.kc, ld, cd.mg, w + gi * cd.mg * cd.kc,
                    cd.kc, dyg, ld, T(0), cb, ld);
        col2im(g, cb, ld, nb, cd.cg, dx + (n0 * cd.c + gi * cd.cg) * inSize,
               cd.c * inSize, threads);
      }
    }
  };
}

template <typename T>
KernelFn convGradFilterKernel(KernelArgs &args, const ConvDims &cd) {
  const T *x = args.in(0).as<T>(), *dy = args.in(1).as<T>();
  T *dw = args.out(0).as<T>();
  int threads = args.env.threads;
  const Geo &g = cd.g;
  bool direct = g.pointwise;
  auto cols = std::make_shared<std::vector<T>>(
      direct ? 0 : cd.kc * cd.chunk * g.outSize);
  auto dybuf = std::make_shared<std::vector<T>>(
      !direct && cd.chunk > 1 ? cd.mg * cd.chunk * g.outSize : 0);
  return [=]() {
    const int64_t outSize = g.outSize, inSize = g.inSize;
    if (cd.n == 0) {
      std::fill(dw, dw + cd.m * cd.kc, T(0));
      return;
    }
    if (direct) {
      for (int64_t n = 0; n < cd.n; ++n)
        for (int64_t gi = 0; gi < cd.group; ++gi)
          gemmSafe<T>(false, true, cd.mg, cd.cg, outSize,
                      dy + (n * cd.m + gi * cd.mg) * outSize, outSize,
                      x + (n * cd.c + gi * cd.cg) * inSize, inSize,
                      n == 0 ? T(0) : T(1), dw + gi * cd.mg * cd.kc, cd.kc);
      return;
    }
    T *cb = cols->data();
    for (int64_t n0 = 0; n0 < cd.n; n0 += cd.chunk) {
      int64_t nb = std::min(cd.chunk, cd.n - n0), ld = nb * outSize;
      for (int64_t gi = 0; gi < cd.group; ++gi) {
        im2col(g, x + (n0 * cd.c + gi * cd.cg) * inSize, cd.c * inSize, nb,
               cd.cg, cb, ld, threads);
        const T *dyg = dy + (n0 * cd.m + gi * cd.mg) * outSize;
        if (nb > 1) {
          gatherDy(cd, dy, n0, nb, gi, dybuf->data(), threads);
          dyg = dybuf->data();
        }
        gemmSafe<T>(false, true, cd.mg, cd.kc, ld, dyg, ld, cb, ld,
                    n0 == 0 ? T(0) : T(1), dw + gi * cd.mg * cd.kc, cd.kc);
      }
    }
  };
}

KernelFn convFactory(KernelArgs &args) {
  const TensorView &x = args.in(0), &w = args.in(1), &y = args.out(0);
  checkFloat(args, x, "x");
  checkSameDType(args, x, w, "w");
  checkSameDType(args, x, y, "y");
  if (args.hasIn(2)) {
    const TensorView &b = args.in(2);
    checkSameDType(args, x, b, "b");
    if (b.shape != std::vector<int64_t>{w.rank() > 0 ? w.dim(0) : 0})
      args.fail("bias must have shape [" +
                std::to_string(w.rank() > 0 ? w.dim(0) : 0) + "], got " +
                shapeStr(b.shape));
  }
  ConvDims cd = makeConvDims(args, x.shape, w.shape, y.shape, "y");
  return x.dtype == DType::F32 ? convKernel<float>(args, cd)
                               : convKernel<double>(args, cd);
}

KernelFn convGradInputFactory(KernelArgs &args) {
  const TensorView &dy = args.in(0), &w = args.in(1), &dx = args.out(0);
  checkFloat(args, dy, "dy");
  checkSameDType(args, dy, w, "w");
  checkSameDType(args, dy, dx, "dx");
  ConvDims cd = makeConvDims(args, dx.shape, w.shape, dy.shape, "dy");
  return dy.dtype == DType::F32 ? convGradInputKernel<float>(args, cd)
                                : convGradInputKernel<double>(args, cd);
}

KernelFn convGradFilterFactory(KernelArgs &args) {
  const TensorView &x = args.in(0), &dy = args.in(1), &dw = args.out(0);
  checkFloat(args, x, "x");
  checkSameDType(args, x, dy, "dy");
  checkSameDType(args, x, dw, "dw");
  ConvDims cd = makeConvDims(args, x.shape, dw.shape, dy.shape, "dy");
  return x.dtype == DType::F32 ? convGradFilterKernel<float>(args, cd)
                               : convGradFilterKernel<double>(args, cd);
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

/// One output position's window: per dim the first input coordinate and the
/// valid kernel-index range [lo, hi) (inside x).
struct Window {
  int64_t start[kMaxSpatial], lo[kMaxSpatial], hi[kMaxSpatial];
};

inline void windowDim(const Geo &g, int i, int64_t o, Window &win) {
  int64_t start = o * g.s[i] - g.pb[i], d = g.d[i];
  win.start[i] = start;
  int64_t lo = start >= 0 ? 0 : (-start + d - 1) / d;
  int64_t hi = start < g.in[i] ? (g.in[i] - start + d - 1) / d : 0;
  hi = std::min(hi, g.k[i]);
  win.lo[i] = std::min(lo, hi);
  win.hi[i] = hi;
}

/// Calls f(offset) for every window element inside x, in row-major window
/// order (offset within the plane).
template <typename F>
inline void forWindow(const Geo &g, const Window &win, F &&f) {
  const int L = g.nd - 1;
  for (int i = 0; i < g.nd; ++i)
    if (win.lo[i] >= win.hi[i])
      return;
  int64_t kk[kMaxSpatial];
  for (int i = 0; i < L; ++i)
    kk[i] = win.lo[i];
  const int64_t dL = g.d[L], loL = win.lo[L], hiL = win.hi[L];
  while (true) {
    int64_t base = win.start[L];
    for (int i = 0; i < L; ++i)
      base += (win.start[i] + kk[i] * g.d[i]) * g.inStride[i];
    for (int64_t k = loL; k < hiL; ++k)
      f(base + k * dL);
    int i = L - 1;
    for (; i >= 0; --i) {
      if (++kk[i] < win.hi[i])
        break;
      kk[i] = win.lo[i];
    }
    if (i < 0)
      return;
  }
}

/// Runs body(plane, outIndex, window) for every output of planes
/// [p0, p1) in row-major order.
template <typename F>
inline void forOutputs(const Geo &g, int64_t p0, int64_t p1, F &&body) {
  const int L = g.nd - 1;
  for (int64_t p = p0; p < p1; ++p) {
    int64_t o[kMaxSpatial] = {0};
    Window win;
    for (int i = 0; i < L; ++i)
      windowDim(g, i, 0, win);
    int64_t idx = 0;
    for (int64_t q = 0; q < g.outOuter; ++q) {
      for (int64_t ol = 0; ol < g.out[L]; ++ol, ++idx) {
        windowDim(g, L, ol, win);
        body(p, idx, win);
      }
      for (int i = L - 1; i >= 0; --i) {
        if (++o[i] < g.out[i]) {
          windowDim(g, i, o[i], win);
          break;
        }
        o[i] = 0;
        windowDim(g, i, 0, win);
      }
    }
  }
}

/// Index (within the plane) of the window's first maximum, or -1 when the
/// window lies entirely in the padding. NaN wins, as in PyTorch.
template <typename T>
inline int64_t argmaxWindow(const Geo &g, const T *plane, const Window &win) {
  int64_t best = -1;
  T bestVal = T(0);
  forWindow(g, win, [&](int64_t off) {
    T v = plane[off];
    if (best < 0 || v > bestVal || std::isnan(v)) {
      best = off;
      bestVal = v;
    }
  });
  return best;
}

struct PoolDims {
  Geo g;
  int64_t planes = 0;
  bool countIncludePad = false;
};

PoolDims makePoolDims(const KernelArgs &args, const std::vector<int64_t> &x,
                      const std::vector<int64_t> &y, bool isMax,
                      const char *yWhat) {
  PoolDims pd;
  if (x.size() < 3)
    args.fail("pooling needs x [N, C, spatial...], got " + shapeStr(x));
  std::vector<int64_t> kernel = args.i64s("kernel_shape");
  pd.g = makeGeo(args, x, kernel, /*hasDilations=*/isMax, args.flag("ceil_mode"),
                 y, x[1], yWhat);
  pd.planes = x[0] * x[1];
  pd.countIncludePad = !isMax && args.flag("count_include_pad");
  return pd;
}

/// The average's divisor of a window (see the file comment); 0 when empty.
inline int64_t avgDivisor(const Geo &g, const Window &win, bool includePad) {
  int64_t n = 1;
  for (int i = 0; i < g.nd; ++i) {
    if (includePad) {
      // Positions start + k (k < kernel) inside [-pb, in + pe); start >= -pb.
      int64_t end = std::min(win.start[i] + g.k[i], g.in[i] + g.pe[i]);
      n *= std::max<int64_t>(end - win.start[i], 0);
    } else {
      n *= win.hi[i] - win.lo[i];
    }
  }
  return n;
}

template <typename T>
KernelFn maxPoolKernel(KernelArgs &args, const PoolDims &pd) {
  const T *x = args.in(0).as<T>();
  T *y = args.out(0).as<T>();
  int threads = args.env.threads;
  Geo g = pd.g;
  int64_t planes = pd.planes;
  return [=]() {
    int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(g.outSize * g.kSize, 1));
    parallelFor(threads, planes, grain, [&](int64_t p0, int64_t p1) {
      forOutputs(g, p0, p1, [&](int64_t p, int64_t idx, const Window &win) {
        const T *plane = x + p * g.inSize;
        int64_t a = argmaxWindow(g, plane, win);
        y[p * g.outSize + idx] = a < 0 ? std::numeric_limits<T>::lowest() : plane[a];
      });
    });
  };
}

template <typename T>
KernelFn maxPoolGradKernel(KernelArgs &args, const PoolDims &pd) {
  const T *x = args.in(0).as<T>(), *dy = args.in(1).as<T>();
  T *dx = args.out(0).as<T>();
  int threads = args.env.threads;
  Geo g = pd.g;
  int64_t planes = pd.planes;
  return [=]() {
    int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(g.outSize * g.kSize, 1));
    parallelFor(threads, planes, grain, [&](int64_t p0, int64_t p1) {
      std::fill(dx + p0 * g.inSize, dx + p1 * g.inSize, T(0));
      forOutputs(g, p0, p1, [&](int64_t p, int64_t idx, const Window &win) {
        const T *plane = x + p * g.inSize;
        int64_t a = argmaxWindow(g, plane, win);
        if (a >= 0)
          dx[p * g.inSize + a] += dy[p * g.outSize + idx];
      });
    });
  };
}

template <typename T>
KernelFn avgPoolKernel(KernelArgs &args, const PoolDims &pd) {
  const T *x = args.in(0).as<T>();
  T *y = args.out(0).as<T>();
  int threads = args.env.threads;
  Geo g = pd.g;
  int64_t planes = pd.planes;
  bool includePad = pd.countIncludePad;
  return [=]() {
    int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(g.outSize * g.kSize, 1));
    parallelFor(threads, planes, grain, [&](int64_t p0, int64_t p1) {
      forOutputs(g, p0, p1, [&](int64_t p, int64_t idx, const Window &win) {
        const T *plane = x + p * g.inSize;
        double sum = 0;
        forWindow(g, win, [&](int64_t off) { sum += plane[off]; });
        int64_t div = avgDivisor(g, win, includePad);
        y[p * g.outSize + idx] = div > 0 ? T(sum / (double)div) : T(0);
      });
    });
  };
}

template <typename T>
KernelFn avgPoolGradKernel(KernelArgs &args, const PoolDims &pd) {
  const T *dy = args.in(0).as<T>();
  T *dx = args.out(0).as<T>();
  int threads = args.env.threads;
  Geo g = pd.g;
  int64_t planes = pd.planes;
  bool includePad = pd.countIncludePad;
  return [=]() {
    int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(g.outSize * g.kSize, 1));
    parallelFor(threads, planes, grain, [&](int64_t p0, int64_t p1) {
      std::fill(dx + p0 * g.inSize, dx + p1 * g.inSize, T(0));
      forOutputs(g, p0, p1, [&](int64_t p, int64_t idx, const Window &win) {
        int64_t div = avgDivisor(g, win, includePad);
        if (div <= 0)
          return;
        T v = T((double)dy[p * g.outSize + idx] / (double)div);
        T *plane = dx + p * g.inSize;
        forWindow(g, win, [&](int64_t off) { plane[off] += v; });
      });
    });
  };
}

KernelFn maxPoolFactory(KernelArgs &args) {
  const TensorView &x = args.in(0), &y = args.out(0);
  checkFloat(args, x, "x");
  checkSameDType(args, x, y, "y");
  PoolDims pd = makePoolDims(args, x.shape, y.shape, true, "y");
  return x.dtype == DType::F32 ? maxPoolKernel<float>(args, pd)
                               : maxPoolKernel<double>(args, pd);
}

KernelFn maxPoolGradFactory(KernelArgs &args) {
  const TensorView &x = args.in(0), &dy = args.in(1), &dx = args.out(0);
  checkFloat(args, x, "x");
  checkSameDType(args, x, dy, "dy");
  checkSameDType(args, x, dx, "dx");
  if (dx.shape != x.shape)
    args.fail("dx must have x's shape " + shapeStr(x.shape) + ", got " +
              shapeStr(dx.shape));
  PoolDims pd = makePoolDims(args, x.shape, dy.shape, true, "dy");
  return x.dtype == DType::F32 ? maxPoolGradKernel<float>(args, pd)
                               : maxPoolGradKernel<double>(args, pd);
}

KernelFn avgPoolFactory(KernelArgs &args) {
  const TensorView &x = args.in(0), &y = args.out(0);
  checkFloat(args, x, "x");
  checkSameDType(args, x, y, "y");
  PoolDims pd = makePoolDims(args, x.shape, y.shape, false, "y");
  return x.dtype == DType::F32 ? avgPoolKernel<float>(args, pd)
                               : avgPoolKernel<double>(args, pd);
}

KernelFn avgPoolGradFactory(KernelArgs &args) {
  const TensorView &dy = args.in(0), &dx = args.out(0);
  checkFloat(args, dy, "dy");
  checkSameDType(args, dy, dx, "dx");
  PoolDims pd = makePoolDims(args, dx.shape, dy.shape, false, "dy");
  return dy.dtype == DType::F32 ? avgPoolGradKernel<float>(args, pd)
                                : avgPoolGradKernel<double>(args, pd);
}

} // namespace

void registerConvKernels(KernelRegistry &r) {
  r.add("conv", convFactory);
  r.add("conv_grad_input", convGradInputFactory);
  r.add("conv_grad_filter", convGradFilterFactory);
  r.add("max_pool", maxPoolFactory);
  r.add("max_pool_grad", maxPoolGradFactory);
  r.add("avg_pool", avgPoolFactory);
  r.add("avg_pool_grad", avgPoolGradFactory);
}

} // namespace parallax::rt
