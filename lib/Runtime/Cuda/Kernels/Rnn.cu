//===- Rnn.cu - CUDA kernels of the Rnn family ---------------------------===//
//
// lstm, gru, rnn and their gradients on the GPU, with the CPU kernels'
// layouts and formulas (lib/Runtime/Kernels/Rnn.cpp): y [T, D, B, H], saved
// gates [D, T, B, 4H], cells [D, T, B, H]. Per direction the input
// projections of every step are one cuBLAS GEMM; each step then runs one
// GEMM per direction for the recurrent product and one fused kernel that
// applies the gates of both directions. The backward pass walks the steps in
// reverse the same way and ends with one GEMM each for dW, dR and dx over the
// whole sequence. Everything is enqueued on the device's stream; scratch is
// allocated when the kernel is bound.
//
// The f32 activations are CUDA's expf and tanhf where the CPU uses 4-wide
// polynomial approximations (within a few ulp of libm): one step agrees to
// f32 rounding, but the recurrence carries the differences through the
// sequence, so the tests compare recurrent results with rtol 1e-4.
//
//===----------------------------------------------------------------------===//

#include "CudaKernelUtil.cuh"

#include "../../Kernels/RnnLayer.h"

#include "../../Kernels/KernelUtil.h"

#include <climits>
#include <string>
#include <type_traits>
#include <vector>

namespace parallax::rt {
namespace {

using namespace cuda;
using detail::shapeStr;

using namespace rnn;

/// readLayer, plus the limit of cuBLAS's int sizes.
Layer readCublasLayer(const KernelArgs &args, int64_t gates, const std::string &op) {
  Layer l = readLayer(args, gates, op);
  if (l.rows() > INT_MAX || 4 * l.h > INT_MAX || l.i > INT_MAX)
    args.fail(op + ": seq_length * batch " + std::to_string(l.rows()) +
              ", input_size " + std::to_string(l.i) + " or 4 * hidden_size " +
              std::to_string(4 * l.h) + " exceeds cuBLAS's int sizes");
  return l;
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

__device__ inline float sigmoidOf(float v) { return 1.0f / (1.0f + expf(-v)); }
__device__ inline double sigmoidOf(double v) { return 1.0 / (1.0 + exp(-v)); }
__device__ inline float tanhOf(float v) { return tanhf(v); }
__device__ inline double tanhOf(double v) { return tanh(v); }

cublasOperation_t opOf(bool transpose) {
  return transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
}

/// Row-major C [m, n] = alpha op(A) op(B) + beta C on the device's stream,
/// as blas::gemm on the CPU. cuBLAS is column-major: it computes
/// C^T = op(B)^T op(A)^T over the same memory.
template <typename T>
void gemm(CudaDevice &dev, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
          T alpha, const T *a, int64_t lda, const T *b, int64_t ldb, T beta,
          T *c, int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    // An empty sum (an empty sequence): C = beta C, which cuBLAS may skip.
    forEach(dev.stream(), m * n, [=] __device__(int64_t e) {
      T *p = c + (e / n) * ldc + e % n;
      *p = beta == T(0) ? T(0) : beta * *p;
    });
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    cublasComputeType_t compute =
        dev.tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    PX_CUBLAS_CHECK(cublasGemmEx(dev.cublas(), opOf(tb), opOf(ta), (int)n,
                                 (int)m, (int)k, &alpha, b, CUDA_R_32F,
                                 (int)ldb, a, CUDA_R_32F, (int)lda, &beta, c,
                                 CUDA_R_32F, (int)ldc, compute,
                                 CUBLAS_GEMM_DEFAULT));
  } else {
    PX_CUBLAS_CHECK(cublasDgemm(dev.cublas(), opOf(tb), opOf(ta), (int)n,
                                (int)m, (int)k, &alpha, b, (int)ldb, a,
                                (int)lda, &beta, c, (int)ldc));
  }
}

template <typename T>
void copyAsync(CudaDevice &dev, T *dst, const T *src, int64_t n) {
  if (n > 0)
    PX_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(T),
                                  cudaMemcpyDeviceToDevice, dev.stream()));
}

constexpr int kSumCols = 32, kSumRowGroups = 8;

/// out[dir * outStride + c] (and + cols when `twice`) = the sum over `rows`
/// rows of m[dir] [rows, cols], column c; in double, as the CPU's
/// columnSums. Block: 32 columns x 8 row groups; grid: column chunks x D.
template <typename T>
__global__ void columnSumsKernel(const T *m, int64_t rows, int64_t cols,
                                 T *out, int64_t outStride, bool twice) {
  __shared__ double part[kSumRowGroups][kSumCols + 1];
  int64_t dir = blockIdx.y;
  int64_t c = (int64_t)blockIdx.x * kSumCols + threadIdx.x;
  const T *md = m + dir * rows * cols;
  double acc = 0.0;
  if (c < cols)
    for (int64_t r = threadIdx.y; r < rows; r += kSumRowGroups)
      acc += (double)md[r * cols + c];
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y != 0 || c >= cols)
    return;
  double sum = 0.0;
  for (int g = 0; g < kSumRowGroups; ++g)
    sum += part[g][threadIdx.x];
  out[dir * outStride + c] = (T)sum;
  if (twice)
    out[dir * outStride + cols + c] = (T)sum;
}

template <typename T>
void columnSums(CudaDevice &dev, const T *m, int64_t dirs, int64_t rows,
                int64_t cols, T *out, int64_t outStride, bool twice) {
  if (dirs == 0 || cols == 0)
    return;
  dim3 grid((unsigned)((cols + kSumCols - 1) / kSumCols), (unsigned)dirs);
  columnSumsKernel<T><<<grid, dim3(kSumCols, kSumRowGroups), 0, dev.stream()>>>(
      m, rows, cols, out, outStride, twice);
  PX_CUDA_LAUNCHED();
}

/// hp [D, T*B, H]: row block `time` of direction dir holds the state that
/// the step at that time read, so that dR is one GEMM over the sequence.
template <typename T>
void gatherStates(CudaDevice &dev, Layer l, const T *y, const T *h0, T *hp) {
  int64_t S = l.stateSize(), perDir = l.t * S;
  forEach(dev.stream(), l.d * perDir, [=] __device__(int64_t k) {
    int64_t dir = k / perDir, rem = k % perDir, time = rem / S, e = rem % S;
    int64_t s = l.reversed(dir) ? l.t - 1 - time : time;
    hp[k] = l.stateBefore(dir, s, y, h0)[e];
  });
}

/// y_h (and y_c) of every direction: the state the last step wrote.
template <typename T>
void copyFinalStates(CudaDevice &dev, const Layer &l, const T *y, const T *h0,
                     T *yh) {
  for (int64_t dir = 0; dir < l.d; ++dir)
    copyAsync(dev, yh + dir * l.stateSize(), l.stateBefore(dir, l.t, y, h0),
              l.stateSize());
}

/// dx = sum over directions of dpre_d [T*B, G*H] times W_d [G*H, I], added
/// in direction order as on the CPU.
template <typename T>
void inputGradient(CudaDevice &dev, const Layer &l, const T *dpre, const T *w,
                   T *dx) {
  int64_t rows = l.rows(), gh = l.gates * l.h;
  for (int64_t dir = 0; dir < l.d; ++dir)
    gemm(dev, false, false, rows, l.i, gh, T(1), dpre + dir * rows * gh, gh,
         w + dir * gh * l.i, l.i, dir == 0 ? T(0) : T(1), dx, l.i);
}

//===----------------------------------------------------------------------===//
// LSTM
//===----------------------------------------------------------------------===//

/// One step of both directions: activates the gates (which hold x W^T +
/// h R^T), writes the cell and the output. Gate order i, o, f, c.
template <typename T>
void lstmStep(CudaDevice &dev, Layer l, int64_t s, const T *bs, const T *c0,
              T *y, T *gates, T *cells) {
  int64_t H = l.h, G = 4 * H, S = l.stateSize();
  forEach(dev.stream(), l.d * S, [=] __device__(int64_t k) {
    int64_t dir = k / S, e = k % S, n = e / H, j = e % H;
    int64_t time = l.timeAt(dir, s);
    T *g = gates + l.gatesAt(dir, time) + n * G;
    const T *bd = bs + dir * G;
    const T *cPrev =
        s > 0 ? cells + l.cellsAt(dir, l.timeAt(dir, s - 1)) : c0 + dir * S;
    T in = sigmoidOf(g[j] + bd[j]);
    T out = sigmoidOf(g[H + j] + bd[H + j]);
    T forget = sigmoidOf(g[2 * H + j] + bd[2 * H + j]);
    T cand = tanhOf(g[3 * H + j] + bd[3 * H + j]);
    g[j] = in;
    g[H + j] = out;
    g[2 * H + j] = forget;
    g[3 * H + j] = cand;
    T c = forget * cPrev[e] + in * cand;
    cells[l.cellsAt(dir, time) + e] = c;
    y[l.yAt(time, dir) + e] = tanhOf(c) * out;
  });
}

// Operands of px.lstm: x, w, r, b, initial_h, initial_c; results y, y_h,
// y_c, gates, cells.
template <typename T> KernelFn lstmTyped(KernelArgs &args) {
  const std::string op = "lstm";
  CudaDevice &dev = cudaDeviceOf(args);
  Layer l = readCublasLayer(args, 4, op);
  const int64_t H = l.h, G = 4 * H;
  expectOperands(args, l, op);
  const T *x = args.in(0).as<T>(), *w = args.in(1).as<T>(),
          *r = args.in(2).as<T>(), *bias = args.in(3).as<T>(),
          *h0 = args.in(4).as<T>(), *c0 = args.in(5).as<T>();
  T *y = args.out(0).as<T>(), *yh = args.out(1).as<T>(),
    *yc = args.out(2).as<T>(), *gates = args.out(3).as<T>(),
    *cells = args.out(4).as<T>();
  Scratch biasSum = scratch(dev, l.d * G * (int64_t)sizeof(T));
  return [=, &dev] {
    T *bs = static_cast<T *>(biasSum->data());
    // Wb + Rb, summed in T as on the CPU.
    forEach(dev.stream(), l.d * G, [=] __device__(int64_t k) {
      int64_t dir = k / G, j = k % G;
      bs[k] = bias[dir * 2 * G + j] + bias[dir * 2 * G + G + j];
    });
    for (int64_t dir = 0; dir < l.d; ++dir)
      gemm(dev, false, true, l.rows(), G, l.i, T(1), x, l.i, w + dir * G * l.i,
           l.i, T(0), gates + l.gatesAt(dir, 0), G);
    for (int64_t s = 0; s < l.t; ++s) {
      for (int64_t dir = 0; dir < l.d; ++dir)
        gemm(dev, false, true, l.b, G, H, T(1), l.stateBefore(dir, s, y, h0), H,
             r + dir * G * H, H, T(1), gates + l.gatesAt(dir, l.timeAt(dir, s)),
             G);
      lstmStep(dev, l, s, (const T *)bs, c0, y, gates, cells);
    }
    copyFinalStates(dev, l, (const T *)y, h0, yh);
    for (int64_t dir = 0; dir < l.d; ++dir)
      copyAsync(dev, yc + dir * l.stateSize(),
                l.t > 0 ? cells + l.cellsAt(dir, l.timeAt(dir, l.t - 1))
                        : c0 + dir * l.stateSize(),
                l.stateSize());
  };
}

/// One backward step of both directions: the pre-activation gradients of
/// the step's gates into dg, dc carried to the previous step; dh is then
/// replaced by dg R (a GEMM after this).
template <typename T>
void lstmGradStep(CudaDevice &dev, Layer l, int64_t s, const T *c0,
                  const T *gates, const T *cells, const T *dy, T *dg, T *dh0,
                  T *dc0) {
  int64_t H = l.h, G = 4 * H, S = l.stateSize(), rows = l.rows();
  forEach(dev.stream(), l.d * S, [=] __device__(int64_t k) {
    int64_t dir = k / S, e = k % S, n = e / H, j = e % H;
    int64_t time = l.timeAt(dir, s);
    const T *g = gates + l.gatesAt(dir, time) + n * G;
    T *dgr = dg + dir * rows * G + time * l.b * G + n * G;
    T *dh = dh0 + dir * S, *dc = dc0 + dir * S;
    const T *cPrev =
        s > 0 ? cells + l.cellsAt(dir, l.timeAt(dir, s - 1)) : c0 + dir * S;
    T dhj = dh[e] + dy[l.yAt(time, dir) + e];
    T in = g[j], out = g[H + j], forget = g[2 * H + j], cand = g[3 * H + j];
    T tc = tanhOf(cells[l.cellsAt(dir, time) + e]);
    T dcj = dc[e] + dhj * out * (T(1) - tc * tc);
    dgr[j] = dcj * cand * in * (T(1) - in);
    dgr[H + j] = dhj * tc * out * (T(1) - out);
    dgr[2 * H + j] = dcj * cPrev[e] * forget * (T(1) - forget);
    dgr[3 * H + j] = dcj * in * (T(1) - cand * cand);
    dc[e] = dcj * forget;
  });
}

// Operands of px.lstm_grad: x, w, r, initial_h, initial_c, y, gates, cells,
// dy, dy_h, dy_c; results dx, dw, dr, db, dinitial_h, dinitial_c.
template <typename T> KernelFn lstmGradTyped(KernelArgs &args) {
  const std::string op = "lstm_grad";
  CudaDevice &dev = cudaDeviceOf(args);
  Layer l = readCublasLayer(args, 4, op);
  const int64_t H = l.h, G = 4 * H, S = l.stateSize();
  expectOperands(args, l, op);
  const T *x = args.in(0).as<T>(), *w = args.in(1).as<T>(),
          *r = args.in(2).as<T>(), *h0 = args.in(3).as<T>(),
          *c0 = args.in(4).as<T>(), *y = args.in(5).as<T>(),
          *gates = args.in(6).as<T>(), *cells = args.in(7).as<T>(),
          *dy = args.in(8).as<T>(), *dyh = args.in(9).as<T>(),
          *dyc = args.in(10).as<T>();
  T *dx = args.out(0).as<T>(), *dw = args.out(1).as<T>(),
    *dr = args.out(2).as<T>(), *db = args.out(3).as<T>(),
    *dh0 = args.out(4).as<T>(), *dc0 = args.out(5).as<T>();
  int64_t rows = l.rows();
  // Per direction: pre-activation gradients [T*B, 4H] and the state each
  // step read [T*B, H].
  Scratch dgates = scratch(dev, l.d * rows * G * (int64_t)sizeof(T));
  Scratch hPrevs = scratch(dev, l.d * rows * H * (int64_t)sizeof(T));
  return [=, &dev] {
    T *dg = static_cast<T *>(dgates->data()), *hp = static_cast<T *>(hPrevs->data());
    gatherStates(dev, l, y, h0, hp);
    // dh and dc: the gradients flowing into the state the current step
    // wrote, kept in the outputs for the initial states.
    copyAsync(dev, dh0, dyh, l.d * S);
    copyAsync(dev, dc0, dyc, l.d * S);
    for (int64_t s = l.t - 1; s >= 0; --s) {
      lstmGradStep(dev, l, s, c0, gates, cells, dy, dg, dh0, dc0);
      for (int64_t dir = 0; dir < l.d; ++dir)
        gemm(dev, false, false, l.b, H, G, T(1),
             dg + dir * rows * G + l.timeAt(dir, s) * l.b * G, G,
             r + dir * G * H, H, T(0), dh0 + dir * S, H);
    }
    for (int64_t dir = 0; dir < l.d; ++dir) {
      gemm(dev, true, false, G, l.i, rows, T(1), dg + dir * rows * G, G, x, l.i,
           T(0), dw + dir * G * l.i, l.i);
      gemm(dev, true, false, G, H, rows, T(1), dg + dir * rows * G, G,
           hp + dir * rows * H, H, T(0), dr + dir * G * H, H);
    }
    columnSums(dev, (const T *)dg, l.d, rows, G, db, 2 * G, true);
    inputGradient(dev, l, (const T *)dg, w, dx);
  };
}

//===----------------------------------------------------------------------===//
// GRU
//===----------------------------------------------------------------------===//

// The saved gates hold z, r, the candidate n and q per step: h Rh^T + Rbh
// with linear_before_reset, else r * h. `products` [D, B, 3H] holds the
// step's recurrent products.

/// A linear_before_reset step of both directions (products: h R^T).
template <typename T>
void gruLbrStep(CudaDevice &dev, Layer l, int64_t s, const T *bias,
                const T *h0, const T *products, T *y, T *gates) {
  int64_t H = l.h, G3 = 3 * H, G4 = 4 * H, S = l.stateSize();
  forEach(dev.stream(), l.d * S, [=] __device__(int64_t k) {
    int64_t dir = k / S, e = k % S, n = e / H, j = e % H;
    int64_t time = l.timeAt(dir, s);
    T *g = gates + l.gatesAt(dir, time) + n * G4;
    const T *pr = products + dir * S * 3 + n * G3;
    const T *wb = bias + dir * 2 * G3, *rb = wb + G3;
    const T *hp = l.stateBefore(dir, s, (const T *)y, h0);
    T z = sigmoidOf(g[j] + wb[j] + pr[j] + rb[j]);
    T rs = sigmoidOf(g[H + j] + wb[H + j] + pr[H + j] + rb[H + j]);
    T q = pr[2 * H + j] + rb[2 * H + j];
    T cand = tanhOf(g[2 * H + j] + wb[2 * H + j] + rs * q);
    g[j] = z;
    g[H + j] = rs;
    g[2 * H + j] = cand;
    g[3 * H + j] = q;
    y[l.yAt(time, dir) + e] = (T(1) - z) * cand + z * hp[e];
  });
}

/// Without linear_before_reset, first half of a step: z, r and q = r * h
/// (products holds h R^T for z and r).
template <typename T>
void gruResetStep(CudaDevice &dev, Layer l, int64_t s, const T *bias,
                  const T *h0, const T *products, const T *y, T *gates) {
  int64_t H = l.h, G3 = 3 * H, G4 = 4 * H, S = l.stateSize();
  forEach(dev.stream(), l.d * S, [=] __device__(int64_t k) {
    int64_t dir = k / S, e = k % S, n = e / H, j = e % H;
    T *g = gates + l.gatesAt(dir, l.timeAt(dir, s)) + n * G4;
    const T *pr = products + dir * S * 3 + n * G3;
    const T *wb = bias + dir * 2 * G3, *rb = wb + G3;
    const T *hp = l.stateBefore(dir, s, y, h0);
    T z = sigmoidOf(g[j] + wb[j] + pr[j] + rb[j]);
    T rs = sigmoidOf(g[H + j] + wb[H + j] + pr[H + j] + rb[H + j]);
    g[j] = z;
    g[H + j] = rs;
    g[3 * H + j] = rs * hp[e];
  });
}

/// Second half: the candidate (products' third block holds (r * h) Rh^T)
/// and the output.
template <typename T>
void gruCandidateStep(CudaDevice &dev, Layer l, int64_t s, const T *bias,
                      const T *h0, const T *products, T *y, T *gates) {
  int64_t H = l.h, G3 = 3 * H, G4 = 4 * H, S = l.stateSize();
  forEach(dev.stream(), l.d * S, [=] __device__(int64_t k) {
    int64_t dir = k / S, e = k % S, n = e / H, j = e % H;
    int64_t time = l.timeAt(dir, s);
    T *g = gates + l.gatesAt(dir, time) + n * G4;
    const T *pr = products + dir * S * 3 + n * G3;
    const T *wb = bias + dir * 2 * G3, *rb = wb + G3;
    const T *hp = l.stateBefore(dir, s, (const T *)y, h0);
    T cand = tanhOf(g[2 * H + j] + wb[2 * H + j] + pr[2 * H + j] + rb[2 * H + j]);
    g[2 * H + j] = cand;
    T z = g[j];
    y[l.yAt(time, dir) + e] = (T(1) - z) * cand + z * hp[e];
  });
}

// Operands of px.gru: x, w, r, b, initial_h; results y, y_h, gates. Gate
// order z, r, h (ONNX).
template <typename T> KernelFn gruTyped(KernelArgs &args) {
  const std::string op = "gru";
  CudaDevice &dev = cudaDeviceOf(args);
  Layer l = readCublasLayer(args, 3, op);
  const int64_t H = l.h, G3 = 3 * H, G4 = 4 * H;
  bool lbr = args.flag("linear_before_reset");
  expectOperands(args, l, op);
  const T *x = args.in(0).as<T>(), *w = args.in(1).as<T>(),
          *r = args.in(2).as<T>(), *bias = args.in(3).as<T>(),
          *h0 = args.in(4).as<T>();
  T *y = args.out(0).as<T>(), *yh = args.out(1).as<T>(),
    *gates = args.out(2).as<T>();
  Scratch products = scratch(dev, l.d * l.b * G3 * (int64_t)sizeof(T));
  return [=, &dev] {
    T *hr = static_cast<T *>(products->data());
    for (int64_t dir = 0; dir < l.d; ++dir)
      gemm(dev, false, true, l.rows(), G3, l.i, T(1), x, l.i,
           w + dir * G3 * l.i, l.i, T(0), gates + l.gatesAt(dir, 0), G4);
    for (int64_t s = 0; s < l.t; ++s) {
      if (lbr) {
        for (int64_t dir = 0; dir < l.d; ++dir)
          gemm(dev, false, true, l.b, G3, H, T(1),
               l.stateBefore(dir, s, (const T *)y, h0), H, r + dir * G3 * H, H,
               T(0), hr + dir * l.b * G3, G3);
        gruLbrStep(dev, l, s, bias, h0, (const T *)hr, y, gates);
        continue;
      }
      // z and r first: the candidate's recurrent product reads r * h.
      for (int64_t dir = 0; dir < l.d; ++dir)
        gemm(dev, false, true, l.b, 2 * H, H, T(1),
             l.stateBefore(dir, s, (const T *)y, h0), H, r + dir * G3 * H, H,
             T(0), hr + dir * l.b * G3, G3);
      gruResetStep(dev, l, s, bias, h0, (const T *)hr, (const T *)y, gates);
      for (int64_t dir = 0; dir < l.d; ++dir)
        gemm(dev, false, true, l.b, H, H, T(1),
             (const T *)gates + l.gatesAt(dir, l.timeAt(dir, s)) + 3 * H, G4,
             r + dir * G3 * H + 2 * H * H, H, T(0), hr + dir * l.b * G3 + 2 * H,
             G3);
      gruCandidateStep(dev, l, s, bias, h0, (const T *)hr, y, gates);
    }
    copyFinalStates(dev, l, (const T *)y, h0, yh);
  };
}

/// Pointers of a GRU backward step: per direction the gradients of the
/// input projections' pre-activations dgx [T*B, 3H] and of the recurrent
/// products dgh [T*B, 3H] (they differ in the candidate's part).
template <typename T> struct GruGrad {
  const T *h0, *y, *gates, *dy;
  T *dgx, *dgh, *dh0, *tmp;
};

/// A linear_before_reset backward step of both directions; dh becomes the
/// part of the previous state's gradient that does not go through R.
template <typename T>
void gruLbrGradStep(CudaDevice &dev, Layer l, int64_t s, GruGrad<T> p) {
  int64_t H = l.h, G3 = 3 * H, G4 = 4 * H, S = l.stateSize(), rows = l.rows();
  forEach(dev.stream(), l.d * S, [=] __device__(int64_t k) {
    int64_t dir = k / S, e = k % S, n = e / H, j = e % H;
    int64_t time = l.timeAt(dir, s);
    const T *g = p.gates + l.gatesAt(dir, time) + n * G4;
    int64_t at = dir * rows * G3 + time * l.b * G3 + n * G3;
    T *dx3 = p.dgx + at, *dh3 = p.dgh + at, *dh = p.dh0 + dir * S;
    const T *hp = l.stateBefore(dir, s, p.y, p.h0);
    T dhj = dh[e] + p.dy[l.yAt(time, dir) + e];
    T z = g[j], rs = g[H + j], cand = g[2 * H + j], q = g[3 * H + j];
    T dn = dhj * (T(1) - z) * (T(1) - cand * cand);
    T dz = dhj * (hp[e] - cand) * z * (T(1) - z);
    T dr = dn * q * rs * (T(1) - rs);
    dx3[j] = dh3[j] = dz;
    dx3[H + j] = dh3[H + j] = dr;
    dx3[2 * H + j] = dn;
    dh3[2 * H + j] = dn * rs;
    dh[e] = dhj * z;
  });
}

/// Without linear_before_reset, first part of a backward step: z and the
/// candidate.
template <typename T>
void gruGradStepA(CudaDevice &dev, Layer l, int64_t s, GruGrad<T> p) {
  int64_t H = l.h, G3 = 3 * H, G4 = 4 * H, S = l.stateSize(), rows = l.rows();
  forEach(dev.stream(), l.d * S, [=] __device__(int64_t k) {
    int64_t dir = k / S, e = k % S, n = e / H, j = e % H;
    int64_t time = l.timeAt(dir, s);
    const T *g = p.gates + l.gatesAt(dir, time) + n * G4;
    int64_t at = dir * rows * G3 + time * l.b * G3 + n * G3;
    T *dx3 = p.dgx + at, *dh3 = p.dgh + at, *dh = p.dh0 + dir * S;
    const T *hp = l.stateBefore(dir, s, p.y, p.h0);
    T dhj = dh[e] + p.dy[l.yAt(time, dir) + e];
    T z = g[j], cand = g[2 * H + j];
    T dn = dhj * (T(1) - z) * (T(1) - cand * cand);
    dx3[j] = dh3[j] = dhj * (hp[e] - cand) * z * (T(1) - z);
    dx3[2 * H + j] = dh3[2 * H + j] = dn;
    dh[e] = dhj * z;
  });
}

/// Second part: r, from tmp = the candidate's gradient times Rh (the
/// gradient of r * h).
template <typename T>
void gruGradStepB(CudaDevice &dev, Layer l, int64_t s, GruGrad<T> p) {
  int64_t H = l.h, G3 = 3 * H, G4 = 4 * H, S = l.stateSize(), rows = l.rows();
  forEach(dev.stream(), l.d * S, [=] __device__(int64_t k) {
    int64_t dir = k / S, e = k % S, n = e / H, j = e % H;
    int64_t time = l.timeAt(dir, s);
    const T *g = p.gates + l.gatesAt(dir, time) + n * G4;
    int64_t at = dir * rows * G3 + time * l.b * G3 + n * G3;
    T *dx3 = p.dgx + at, *dh3 = p.dgh + at, *dh = p.dh0 + dir * S;
    const T *hp = l.stateBefore(dir, s, p.y, p.h0);
    T t = p.tmp[dir * S + e], rs = g[H + j];
    dx3[H + j] = dh3[H + j] = t * hp[e] * rs * (T(1) - rs);
    dh[e] += t * rs;
  });
}

// Operands of px.gru_grad: x, w, r, initial_h, y, gates, dy, dy_h; results
// dx, dw, dr, db, dinitial_h.
template <typename T> KernelFn gruGradTyped(KernelArgs &args) {
  const std::string op = "gru_grad";
  CudaDevice &dev = cudaDeviceOf(args);
  Layer l = readCublasLayer(args, 3, op);
  const int64_t H = l.h, G3 = 3 * H, G4 = 4 * H, S = l.stateSize();
  bool lbr = args.flag("linear_before_reset");
  expectOperands(args, l, op);
  const T *x = args.in(0).as<T>(), *w = args.in(1).as<T>(),
          *r = args.in(2).as<T>(), *h0 = args.in(3).as<T>(),
          *y = args.in(4).as<T>(), *gates = args.in(5).as<T>(),
          *dy = args.in(6).as<T>(), *dyh = args.in(7).as<T>();
  T *dx = args.out(0).as<T>(), *dw = args.out(1).as<T>(),
    *dr = args.out(2).as<T>(), *db = args.out(3).as<T>(),
    *dh0 = args.out(4).as<T>();
  int64_t rows = l.rows();
  int64_t bytes = (int64_t)sizeof(T);
  Scratch dInput = scratch(dev, l.d * rows * G3 * bytes);
  Scratch dRecur = scratch(dev, l.d * rows * G3 * bytes);
  Scratch hPrevs = scratch(dev, l.d * rows * H * bytes);
  Scratch temp = scratch(dev, l.d * S * bytes);
  return [=, &dev] {
    GruGrad<T> p{h0, y, gates, dy,
                 static_cast<T *>(dInput->data()), static_cast<T *>(dRecur->data()),
                 dh0, static_cast<T *>(temp->data())};
    T *hp = static_cast<T *>(hPrevs->data());
    gatherStates(dev, l, y, h0, hp);
    copyAsync(dev, dh0, dyh, l.d * S);
    for (int64_t s = l.t - 1; s >= 0; --s) {
      auto dghAt = [&](int64_t dir) {
        return (const T *)p.dgh + dir * rows * G3 + l.timeAt(dir, s) * l.b * G3;
      };
      if (lbr) {
        gruLbrGradStep(dev, l, s, p);
        for (int64_t dir = 0; dir < l.d; ++dir)
          gemm(dev, false, false, l.b, H, G3, T(1), dghAt(dir), G3,
               r + dir * G3 * H, H, T(1), dh0 + dir * S, H);
        continue;
      }
      gruGradStepA(dev, l, s, p);
      // The gradient of r * h: the candidate's gradient times Rh.
      for (int64_t dir = 0; dir < l.d; ++dir)
        gemm(dev, false, false, l.b, H, H, T(1), dghAt(dir) + 2 * H, G3,
             r + dir * G3 * H + 2 * H * H, H, T(0), p.tmp + dir * S, H);
      gruGradStepB(dev, l, s, p);
      for (int64_t dir = 0; dir < l.d; ++dir)
        gemm(dev, false, false, l.b, H, 2 * H, T(1), dghAt(dir), G3,
             r + dir * G3 * H, H, T(1), dh0 + dir * S, H);
    }
    for (int64_t dir = 0; dir < l.d; ++dir) {
      const T *dgx = p.dgx + dir * rows * G3, *dgh = p.dgh + dir * rows * G3;
      const T *hpd = hp + dir * rows * H;
      T *drd = dr + dir * G3 * H;
      gemm(dev, true, false, G3, l.i, rows, T(1), dgx, G3, x, l.i, T(0),
           dw + dir * G3 * l.i, l.i);
      if (lbr) {
        gemm(dev, true, false, G3, H, rows, T(1), dgh, G3, hpd, H, T(0), drd, H);
      } else {
        // z and r multiply h; the candidate's rows multiply r * h (saved).
        gemm(dev, true, false, 2 * H, H, rows, T(1), dgh, G3, hpd, H, T(0), drd,
             H);
        gemm(dev, true, false, H, H, rows, T(1), dgh + 2 * H, G3,
             gates + l.gatesAt(dir, 0) + 3 * H, G4, T(0), drd + 2 * H * H, H);
      }
    }
    columnSums(dev, (const T *)p.dgx, l.d, rows, G3, db, 2 * G3, false);
    columnSums(dev, (const T *)p.dgh, l.d, rows, G3, db + G3, 2 * G3, false);
    inputGradient(dev, l, (const T *)p.dgx, w, dx);
  };
}

//===----------------------------------------------------------------------===//
// RNN
//===----------------------------------------------------------------------===//

/// One step of both directions: y holds h R^T; adds the input projection
/// and the biases and applies the activation.
template <typename T>
void rnnStep(CudaDevice &dev, Layer l, int64_t s, bool relu, const T *bias,
             const T *inputs, T *y) {
  int64_t H = l.h, S = l.stateSize();
  forEach(dev.stream(), l.d * S, [=] __device__(int64_t k) {
    int64_t dir = k / S, e = k % S, j = e % H;
    int64_t time = l.timeAt(dir, s);
    const T *wb = bias + dir * 2 * H, *rb = wb + H;
    T *h = y + l.yAt(time, dir) + e;
    T v = (*h + inputs[dir * l.rows() * H + time * S + e]) + (wb[j] + rb[j]);
    *h = relu ? (v > T(0) ? v : T(0)) : tanhOf(v);
  });
}

// Operands of px.rnn: x, w, r, b, initial_h; results y, y_h.
template <typename T> KernelFn rnnTyped(KernelArgs &args) {
  const std::string op = "rnn";
  CudaDevice &dev = cudaDeviceOf(args);
  Layer l = readCublasLayer(args, 1, op);
  const int64_t H = l.h;
  bool relu = readRelu(args, op);
  expectOperands(args, l, op);
  const T *x = args.in(0).as<T>(), *w = args.in(1).as<T>(),
          *r = args.in(2).as<T>(), *bias = args.in(3).as<T>(),
          *h0 = args.in(4).as<T>();
  T *y = args.out(0).as<T>(), *yh = args.out(1).as<T>();
  // Per direction: the input projections of every step [T*B, H] (y
  // interleaves the directions, so they cannot go there directly).
  Scratch inputs = scratch(dev, l.d * l.rows() * H * (int64_t)sizeof(T));
  return [=, &dev] {
    T *xin = static_cast<T *>(inputs->data());
    for (int64_t dir = 0; dir < l.d; ++dir)
      gemm(dev, false, true, l.rows(), H, l.i, T(1), x, l.i, w + dir * H * l.i,
           l.i, T(0), xin + dir * l.rows() * H, H);
    for (int64_t s = 0; s < l.t; ++s) {
      for (int64_t dir = 0; dir < l.d; ++dir)
        gemm(dev, false, true, l.b, H, H, T(1),
             l.stateBefore(dir, s, (const T *)y, h0), H, r + dir * H * H, H,
             T(0), y + l.yAt(l.timeAt(dir, s), dir), H);
      rnnStep(dev, l, s, relu, bias, (const T *)xin, y);
    }
    copyFinalStates(dev, l, (const T *)y, h0, yh);
  };
}

/// One backward step of both directions: the pre-activation gradients,
/// from the activation's output (1 - h^2 for tanh, h > 0 for relu).
template <typename T>
void rnnGradStep(CudaDevice &dev, Layer l, int64_t s, bool relu, const T *y,
                 const T *dy, T *dpre, const T *dh0) {
  int64_t S = l.stateSize();
  forEach(dev.stream(), l.d * S, [=] __device__(int64_t k) {
    int64_t dir = k / S, e = k % S;
    int64_t time = l.timeAt(dir, s);
    T g = dh0[k] + dy[l.yAt(time, dir) + e];
    T h = y[l.yAt(time, dir) + e];
    dpre[dir * l.rows() * l.h + time * S + e] =
        relu ? (h > T(0) ? g : T(0)) : g * (T(1) - h * h);
  });
}

// Operands of px.rnn_grad: x, w, r, initial_h, y, dy, dy_h; results dx, dw,
// dr, db, dinitial_h.
template <typename T> KernelFn rnnGradTyped(KernelArgs &args) {
  const std::string op = "rnn_grad";
  CudaDevice &dev = cudaDeviceOf(args);
  Layer l = readCublasLayer(args, 1, op);
  const int64_t H = l.h, S = l.stateSize();
  bool relu = readRelu(args, op);
  expectOperands(args, l, op);
  const T *x = args.in(0).as<T>(), *w = args.in(1).as<T>(),
          *r = args.in(2).as<T>(), *h0 = args.in(3).as<T>(),
          *y = args.in(4).as<T>(), *dy = args.in(5).as<T>(),
          *dyh = args.in(6).as<T>();
  T *dx = args.out(0).as<T>(), *dw = args.out(1).as<T>(),
    *dr = args.out(2).as<T>(), *db = args.out(3).as<T>(),
    *dh0 = args.out(4).as<T>();
  int64_t rows = l.rows();
  // Per direction: the pre-activation gradients [T*B, H] and the state each
  // step read [T*B, H].
  Scratch dpre = scratch(dev, l.d * rows * H * (int64_t)sizeof(T));
  Scratch hPrevs = scratch(dev, l.d * rows * H * (int64_t)sizeof(T));
  return [=, &dev] {
    T *dg = static_cast<T *>(dpre->data()), *hp = static_cast<T *>(hPrevs->data());
    gatherStates(dev, l, y, h0, hp);
    copyAsync(dev, dh0, dyh, l.d * S); // the gradient of the state the step wrote
    for (int64_t s = l.t - 1; s >= 0; --s) {
      rnnGradStep(dev, l, s, relu, y, dy, dg, (const T *)dh0);
      // The gradient of the state this step read: dpre_t R.
      for (int64_t dir = 0; dir < l.d; ++dir)
        gemm(dev, false, false, l.b, H, H, T(1),
             (const T *)dg + dir * rows * H + l.timeAt(dir, s) * S, H,
             r + dir * H * H, H, T(0), dh0 + dir * S, H);
    }
    for (int64_t dir = 0; dir < l.d; ++dir) {
      gemm(dev, true, false, H, l.i, rows, T(1), (const T *)dg + dir * rows * H,
           H, x, l.i, T(0), dw + dir * H * l.i, l.i);
      gemm(dev, true, false, H, H, rows, T(1), (const T *)dg + dir * rows * H,
           H, (const T *)hp + dir * rows * H, H, T(0), dr + dir * H * H, H);
    }
    columnSums(dev, (const T *)dg, l.d, rows, H, db, 2 * H, true);
    inputGradient(dev, l, (const T *)dg, w, dx);
  };
}

} // namespace

void registerCudaRnnKernels(KernelRegistry &r) {
  PX_ADD_RNN_KERNELS(r);
}

} // namespace parallax::rt
