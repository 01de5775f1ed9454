//===- Rnn.cpp - LSTM, GRU and RNN layers and their backward passes -------===//
//
// px.lstm / px.gru (ONNX LSTM and GRU with the default activations),
// px.rnn (ONNX RNN, tanh or relu) and their gradients px.lstm_grad /
// px.gru_grad / px.rnn_grad (backpropagation through time). Per direction,
// the input projection of every step is one GEMM (x [T*B, I] times W^T)
// written straight into the saved gates [D, T, B, 4H]; each step then adds
// its recurrent product (one [B, H] x [H, G*H] GEMM) and applies the
// activations. The backward pass walks the steps in reverse, keeping each
// step's pre-activation gradients, and ends with one GEMM each for dW, dR
// and dx over the whole sequence. The two directions of a bidirectional
// layer are independent and run side by side when there are threads for it;
// their contributions to dx are added afterwards, in direction order, not
// in the order the directions finish.
//
//===----------------------------------------------------------------------===//

#include "parallax/Runtime/Kernel.h"
#include "parallax/Runtime/KernelMemory.h"

#include "Blas.h"
#include "KernelUtil.h"
#include "RnnLayer.h"
#include "Vec4.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

namespace parallax::rt {
namespace {

using namespace detail;

using namespace rnn;

// The activations over a row: 4-wide for f32 (libm's scalar expf and
// tanhf would be the bulk of a step's elementwise work), plain loops for
// f64.
template <typename T> void sigmoidRow(T *v, int64_t n) {
  for (int64_t j = 0; j < n; ++j)
    v[j] = T(1) / (T(1) + std::exp(-v[j]));
}
inline void sigmoidRow(float *v, int64_t n) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    store4(v + j, vsigmoid4(load4(v + j)));
  for (; j < n; ++j)
    v[j] = 1.0f / (1.0f + std::exp(-v[j]));
}
template <typename T> void tanhRow(const T *in, T *out, int64_t n) {
  for (int64_t j = 0; j < n; ++j)
    out[j] = std::tanh(in[j]);
}
inline void tanhRow(const float *in, float *out, int64_t n) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    store4(out + j, vtanh4(load4(in + j)));
  for (; j < n; ++j)
    out[j] = std::tanh(in[j]);
}

/// Rows [begin, end) of an elementwise step, threaded over the batch.
template <typename F>
void overBatch(int threads, const Layer &l, F &&body) {
  int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(l.h, 1));
  parallelFor(threads, l.b, grain, body);
}

/// Runs body(dir, threads) for every direction: side by side when the layer
/// is bidirectional and there are threads for both.
template <typename F> void forDirections(int threads, const Layer &l, F &&body) {
  if (l.d == 2 && threads >= 2) {
    int inner = threads / 2;
    parallelFor(2, 2, 1, [&](int64_t d0, int64_t d1) {
      for (int64_t dir = d0; dir < d1; ++dir)
        body(dir, inner);
    });
    return;
  }
  for (int64_t dir = 0; dir < l.d; ++dir)
    body(dir, threads);
}

/// out[c] = sum over `rows` rows of m[row * ld + c], c < cols (in double,
/// threaded over columns: each sum keeps its order).
template <typename T>
void columnSums(int threads, const T *m, int64_t rows, int64_t cols,
                int64_t ld, T *out) {
  int64_t grain = std::max<int64_t>(16, 65536 / std::max<int64_t>(rows, 1));
  parallelFor(threads, cols, grain, [&](int64_t c0, int64_t c1) {
    std::vector<double> acc(c1 - c0, 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = c0; c < c1; ++c)
        acc[c - c0] += (double)m[r * ld + c];
    for (int64_t c = c0; c < c1; ++c)
      out[c] = (T)acc[c - c0];
  });
}

/// dx = sum over directions of dgates_d [T*B, G*H] times W_d [G*H, I], added
/// in direction order.
template <typename T>
void inputGradient(int threads, const Layer &l, const T *dgates, int64_t ldg,
                   const T *w, T *dx) {
  int64_t rows = l.t * l.b, gh = l.gates * l.h;
  for (int64_t dir = 0; dir < l.d; ++dir)
    blas::gemm(threads, false, false, rows, l.i, gh, T(1),
               dgates + dir * rows * ldg, ldg, w + dir * gh * l.i, l.i,
               dir == 0 ? T(0) : T(1), dx, l.i);
}

/// The gradients of Wb and Rb [2, G] from the pre-activation gradients
/// [rows, G]: both biases enter every gate the same way.
template <typename T>
void sharedBiasGradient(int threads, const T *dpre, int64_t rows, int64_t g, T *db) {
  columnSums(threads, dpre, rows, g, g, db);
  std::memcpy(db + g, db, g * sizeof(T));
}

//===----------------------------------------------------------------------===//
// LSTM
//===----------------------------------------------------------------------===//

// Operands of px.lstm: x, w, r, b, initial_h, initial_c; results y, y_h,
// y_c, gates, cells. Gate order i, o, f, c (ONNX).
template <typename T> KernelFn lstmTyped(KernelArgs &args) {
  const std::string op = "lstm";
  Layer l = readLayer(args, 4, op);
  const int64_t H = l.h, G = 4 * H;
  expectOperands(args, l, op);
  const T *x = args.in(0).as<T>(), *w = args.in(1).as<T>(),
          *r = args.in(2).as<T>(), *bias = args.in(3).as<T>(),
          *h0 = args.in(4).as<T>(), *c0 = args.in(5).as<T>();
  T *y = args.out(0).as<T>(), *yh = args.out(1).as<T>(),
    *yc = args.out(2).as<T>(), *gates = args.out(3).as<T>(),
    *cells = args.out(4).as<T>();
  // Per direction: Wb + Rb [G], summed every call (the bias may change).
  auto biasSum = args.scratch<T>(recurrentScratch(op, l.d, l.t, l.b, H)[0]);
  int threads = args.env.threads;
  return [=] {
    T *bs = biasSum.get();
    for (int64_t dir = 0; dir < l.d; ++dir)
      for (int64_t j = 0; j < G; ++j)
        bs[dir * G + j] = bias[dir * 2 * G + j] + bias[dir * 2 * G + G + j];
    forDirections(threads, l, [&](int64_t dir, int nt) {
      const T *wd = w + dir * G * l.i, *rd = r + dir * G * H, *bd = bs + dir * G;
      T *gd = gates + l.gatesAt(dir, 0);
      // Input projections of every step.
      blas::gemm(nt, false, true, l.t * l.b, G, l.i, T(1), x, l.i, wd, l.i,
                 T(0), gd, G);
      const T *hPrev = h0 + dir * l.stateSize();
      const T *cPrev = c0 + dir * l.stateSize();
      for (int64_t s = 0; s < l.t; ++s) {
        int64_t time = l.timeAt(dir, s);
        T *g = gates + l.gatesAt(dir, time);
        T *c = cells + l.cellsAt(dir, time);
        T *hOut = y + l.yAt(time, dir);
        blas::gemm(nt, false, true, l.b, G, H, T(1), hPrev, H, rd, H, T(1), g, G);
        overBatch(nt, l, [&](int64_t b0, int64_t b1) {
          for (int64_t n = b0; n < b1; ++n) {
            // i, o, f (sigmoid) then c' (tanh), in place.
            T *gr = g + n * G, *cr = c + n * H, *hr = hOut + n * H;
            const T *cp = cPrev + n * H;
            for (int64_t j = 0; j < G; ++j)
              gr[j] += bd[j];
            sigmoidRow(gr, 3 * H);
            tanhRow(gr + 3 * H, gr + 3 * H, H);
            for (int64_t j = 0; j < H; ++j)
              cr[j] = gr[2 * H + j] * cp[j] + gr[j] * gr[3 * H + j];
            tanhRow(cr, hr, H);
            for (int64_t j = 0; j < H; ++j)
              hr[j] *= gr[H + j];
          }
        });
        hPrev = hOut;
        cPrev = c;
      }
      std::memcpy(yh + dir * l.stateSize(), hPrev, l.stateSize() * sizeof(T));
      std::memcpy(yc + dir * l.stateSize(), cPrev, l.stateSize() * sizeof(T));
    });
  };
}

// Operands of px.lstm_grad: x, w, r, initial_h, initial_c, y, gates, cells,
// dy, dy_h, dy_c; results dx, dw, dr, db, dinitial_h, dinitial_c.
template <typename T> KernelFn lstmGradTyped(KernelArgs &args) {
  const std::string op = "lstm_grad";
  Layer l = readLayer(args, 4, op);
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
  int64_t rows = l.t * l.b;
  // Per direction: pre-activation gradients [T*B, 4H] and the state each
  // step read [T*B, H].
  std::vector<int64_t> pieces = recurrentScratch(op, l.d, l.t, l.b, H);
  auto dgates = args.scratch<T>(pieces[0]);
  auto hPrevs = args.scratch<T>(pieces[1]);
  auto tanhCells = args.scratch<T>(pieces[2]);
  int threads = args.env.threads;
  return [=] {
    forDirections(threads, l, [&](int64_t dir, int nt) {
      const T *rd = r + dir * G * H;
      T *dg = dgates.get() + dir * rows * G, *hp = hPrevs.get() + dir * rows * H;
      T *tcs = tanhCells.get() + dir * S; // tanh of the step's cells
      // dh and dc: the gradients flowing into the state the current step
      // wrote, kept in the outputs for the initial states.
      T *dh = dh0 + dir * S, *dc = dc0 + dir * S;
      std::memcpy(dh, dyh + dir * S, S * sizeof(T));
      std::memcpy(dc, dyc + dir * S, S * sizeof(T));
      for (int64_t s = l.t - 1; s >= 0; --s) {
        int64_t time = l.timeAt(dir, s);
        const T *hPrev = l.stateBefore(dir, s, y, h0);
        const T *cPrev =
            s > 0 ? cells + l.cellsAt(dir, l.timeAt(dir, s - 1)) : c0 + dir * S;
        std::memcpy(hp + time * S, hPrev, S * sizeof(T));
        const T *g = gates + l.gatesAt(dir, time), *c = cells + l.cellsAt(dir, time);
        const T *dyt = dy + l.yAt(time, dir);
        T *dgt = dg + time * l.b * G;
        overBatch(nt, l, [&](int64_t b0, int64_t b1) {
          for (int64_t n = b0; n < b1; ++n) {
            const T *gr = g + n * G;
            T *dgr = dgt + n * G;
            tanhRow(c + n * H, tcs + n * H, H);
            for (int64_t j = 0; j < H; ++j) {
              int64_t e = n * H + j;
              T dhj = dh[e] + dyt[e];
              T in = gr[j], out = gr[H + j], forget = gr[2 * H + j],
                cand = gr[3 * H + j];
              T tc = tcs[e];
              T dcj = dc[e] + dhj * out * (T(1) - tc * tc);
              dgr[j] = dcj * cand * in * (T(1) - in);
              dgr[H + j] = dhj * tc * out * (T(1) - out);
              dgr[2 * H + j] = dcj * cPrev[e] * forget * (T(1) - forget);
              dgr[3 * H + j] = dcj * in * (T(1) - cand * cand);
              dc[e] = dcj * forget;
            }
          }
        });
        // The gradient of the state this step read: dgates_t R.
        blas::gemm(nt, false, false, l.b, H, G, T(1), dgt, G, rd, H, T(0), dh, H);
      }
      blas::gemm(nt, true, false, G, l.i, rows, T(1), dg, G, x, l.i, T(0),
                 dw + dir * G * l.i, l.i);
      blas::gemm(nt, true, false, G, H, rows, T(1), dg, G, hp, H, T(0),
                 dr + dir * G * H, H);
      sharedBiasGradient(nt, dg, rows, G, db + dir * 2 * G);
    });
    inputGradient(threads, l, dgates.get(), G, w, dx);
  };
}

//===----------------------------------------------------------------------===//
// GRU
//===----------------------------------------------------------------------===//

// Operands of px.gru: x, w, r, b, initial_h; results y, y_h, gates.
// Gate order z, r, h (ONNX). Per step the saved gates hold z, r, the
// candidate n, and q: h Rh^T + Rbh with linear_before_reset, else r * h.
template <typename T> KernelFn gruTyped(KernelArgs &args) {
  const std::string op = "gru";
  Layer l = readLayer(args, 3, op);
  const int64_t H = l.h, G3 = 3 * H, G4 = 4 * H;
  bool lbr = args.flag("linear_before_reset");
  expectOperands(args, l, op);
  const T *x = args.in(0).as<T>(), *w = args.in(1).as<T>(),
          *r = args.in(2).as<T>(), *bias = args.in(3).as<T>(),
          *h0 = args.in(4).as<T>();
  T *y = args.out(0).as<T>(), *yh = args.out(1).as<T>(),
    *gates = args.out(2).as<T>();
  // Per direction: the step's recurrent products [B, 3H].
  auto products = args.scratch<T>(recurrentScratch(op, l.d, l.t, l.b, H)[0]);
  int threads = args.env.threads;
  return [=] {
    forDirections(threads, l, [&](int64_t dir, int nt) {
      const T *wd = w + dir * G3 * l.i, *rd = r + dir * G3 * H;
      const T *wb = bias + dir * 2 * G3, *rb = wb + G3;
      T *gd = gates + l.gatesAt(dir, 0);
      T *hr = products.get() + dir * l.b * G3;
      blas::gemm(nt, false, true, l.t * l.b, G3, l.i, T(1), x, l.i, wd, l.i,
                 T(0), gd, G4);
      const T *hPrev = h0 + dir * l.stateSize();
      for (int64_t s = 0; s < l.t; ++s) {
        int64_t time = l.timeAt(dir, s);
        T *g = gates + l.gatesAt(dir, time);
        T *hOut = y + l.yAt(time, dir);
        if (lbr) {
          blas::gemm(nt, false, true, l.b, G3, H, T(1), hPrev, H, rd, H, T(0),
                     hr, G3);
          overBatch(nt, l, [&](int64_t b0, int64_t b1) {
            for (int64_t n = b0; n < b1; ++n) {
              T *gr = g + n * G4, *ho = hOut + n * H;
              const T *pr = hr + n * G3, *hp = hPrev + n * H;
              for (int64_t j = 0; j < 2 * H; ++j)
                gr[j] = gr[j] + wb[j] + pr[j] + rb[j];
              sigmoidRow(gr, 2 * H); // z, r
              for (int64_t j = 0; j < H; ++j) {
                T q = pr[2 * H + j] + rb[2 * H + j];
                gr[3 * H + j] = q;
                gr[2 * H + j] = gr[2 * H + j] + wb[2 * H + j] + gr[H + j] * q;
              }
              tanhRow(gr + 2 * H, gr + 2 * H, H); // the candidate
              for (int64_t j = 0; j < H; ++j)
                ho[j] = (T(1) - gr[j]) * gr[2 * H + j] + gr[j] * hp[j];
            }
          });
        } else {
          // z and r first: the candidate's recurrent product reads r * h.
          blas::gemm(nt, false, true, l.b, 2 * H, H, T(1), hPrev, H, rd, H,
                     T(0), hr, G3);
          overBatch(nt, l, [&](int64_t b0, int64_t b1) {
            for (int64_t n = b0; n < b1; ++n) {
              T *gr = g + n * G4;
              const T *pr = hr + n * G3, *hp = hPrev + n * H;
              for (int64_t j = 0; j < 2 * H; ++j)
                gr[j] = gr[j] + wb[j] + pr[j] + rb[j];
              sigmoidRow(gr, 2 * H); // z, r
              for (int64_t j = 0; j < H; ++j)
                gr[3 * H + j] = gr[H + j] * hp[j];
            }
          });
          blas::gemm(nt, false, true, l.b, H, H, T(1), g + 3 * H, G4,
                     rd + 2 * H * H, H, T(0), hr + 2 * H, G3);
          overBatch(nt, l, [&](int64_t b0, int64_t b1) {
            for (int64_t n = b0; n < b1; ++n) {
              T *gr = g + n * G4, *ho = hOut + n * H;
              const T *pr = hr + n * G3, *hp = hPrev + n * H;
              for (int64_t j = 0; j < H; ++j)
                gr[2 * H + j] = gr[2 * H + j] + wb[2 * H + j] + pr[2 * H + j] +
                                rb[2 * H + j];
              tanhRow(gr + 2 * H, gr + 2 * H, H); // the candidate
              for (int64_t j = 0; j < H; ++j)
                ho[j] = (T(1) - gr[j]) * gr[2 * H + j] + gr[j] * hp[j];
            }
          });
        }
        hPrev = hOut;
      }
      std::memcpy(yh + dir * l.stateSize(), hPrev, l.stateSize() * sizeof(T));
    });
  };
}

// Operands of px.gru_grad: x, w, r, initial_h, y, gates, dy, dy_h; results
// dx, dw, dr, db, dinitial_h.
template <typename T> KernelFn gruGradTyped(KernelArgs &args) {
  const std::string op = "gru_grad";
  Layer l = readLayer(args, 3, op);
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
  int64_t rows = l.t * l.b;
  // Per direction: gradients of the input projections' pre-activations
  // [T*B, 3H] and of the recurrent products [T*B, 3H] (they differ in the
  // candidate's part), the states each step read, and a [B, H] temporary.
  std::vector<int64_t> pieces = recurrentScratch(op, l.d, l.t, l.b, H);
  auto dInput = args.scratch<T>(pieces[0]);
  auto dRecur = args.scratch<T>(pieces[1]);
  auto hPrevs = args.scratch<T>(pieces[2]);
  auto temp = args.scratch<T>(pieces[3]);
  int threads = args.env.threads;
  return [=] {
    forDirections(threads, l, [&](int64_t dir, int nt) {
      const T *rd = r + dir * G3 * H;
      T *dgx = dInput.get() + dir * rows * G3,
        *dgh = dRecur.get() + dir * rows * G3,
        *hp = hPrevs.get() + dir * rows * H, *tmp = temp.get() + dir * S;
      T *dh = dh0 + dir * S; // the gradient of the state the step wrote
      std::memcpy(dh, dyh + dir * S, S * sizeof(T));
      for (int64_t s = l.t - 1; s >= 0; --s) {
        int64_t time = l.timeAt(dir, s);
        const T *hPrev = l.stateBefore(dir, s, y, h0);
        std::memcpy(hp + time * S, hPrev, S * sizeof(T));
        const T *g = gates + l.gatesAt(dir, time);
        const T *dyt = dy + l.yAt(time, dir);
        T *dgxt = dgx + time * l.b * G3, *dght = dgh + time * l.b * G3;
        if (lbr) {
          overBatch(nt, l, [&](int64_t b0, int64_t b1) {
            for (int64_t n = b0; n < b1; ++n) {
              const T *gr = g + n * G4;
              T *dx3 = dgxt + n * G3, *dh3 = dght + n * G3;
              for (int64_t j = 0; j < H; ++j) {
                int64_t e = n * H + j;
                T dhj = dh[e] + dyt[e];
                T z = gr[j], rs = gr[H + j], cand = gr[2 * H + j], q = gr[3 * H + j];
                T dn = dhj * (T(1) - z) * (T(1) - cand * cand);
                T dz = dhj * (hPrev[e] - cand) * z * (T(1) - z);
                T dr = dn * q * rs * (T(1) - rs);
                dx3[j] = dh3[j] = dz;
                dx3[H + j] = dh3[H + j] = dr;
                dx3[2 * H + j] = dn;
                dh3[2 * H + j] = dn * rs;
                dh[e] = dhj * z;
              }
            }
          });
          blas::gemm(nt, false, false, l.b, H, G3, T(1), dght, G3, rd, H, T(1),
                     dh, H);
        } else {
          overBatch(nt, l, [&](int64_t b0, int64_t b1) {
            for (int64_t n = b0; n < b1; ++n) {
              const T *gr = g + n * G4;
              T *dx3 = dgxt + n * G3, *dh3 = dght + n * G3;
              for (int64_t j = 0; j < H; ++j) {
                int64_t e = n * H + j;
                T dhj = dh[e] + dyt[e];
                T z = gr[j], cand = gr[2 * H + j];
                T dn = dhj * (T(1) - z) * (T(1) - cand * cand);
                dx3[j] = dh3[j] = dhj * (hPrev[e] - cand) * z * (T(1) - z);
                dx3[2 * H + j] = dh3[2 * H + j] = dn;
                dh[e] = dhj * z;
              }
            }
          });
          // The gradient of r * h: the candidate's gradient times Rh.
          blas::gemm(nt, false, false, l.b, H, H, T(1), dght + 2 * H, G3,
                     rd + 2 * H * H, H, T(0), tmp, H);
          overBatch(nt, l, [&](int64_t b0, int64_t b1) {
            for (int64_t n = b0; n < b1; ++n) {
              const T *gr = g + n * G4;
              T *dx3 = dgxt + n * G3, *dh3 = dght + n * G3;
              for (int64_t j = 0; j < H; ++j) {
                int64_t e = n * H + j;
                T rs = gr[H + j];
                dx3[H + j] = dh3[H + j] = tmp[e] * hPrev[e] * rs * (T(1) - rs);
                dh[e] += tmp[e] * rs;
              }
            }
          });
          blas::gemm(nt, false, false, l.b, H, 2 * H, T(1), dght, G3, rd, H,
                     T(1), dh, H);
        }
      }
      blas::gemm(nt, true, false, G3, l.i, rows, T(1), dgx, G3, x, l.i, T(0),
                 dw + dir * G3 * l.i, l.i);
      T *drd = dr + dir * G3 * H;
      if (lbr) {
        blas::gemm(nt, true, false, G3, H, rows, T(1), dgh, G3, hp, H, T(0),
                   drd, H);
      } else {
        // z and r multiply h; the candidate's rows multiply r * h (saved).
        blas::gemm(nt, true, false, 2 * H, H, rows, T(1), dgh, G3, hp, H, T(0),
                   drd, H);
        blas::gemm(nt, true, false, H, H, rows, T(1), dgh + 2 * H, G3,
                   gates + l.gatesAt(dir, 0) + 3 * H, G4, T(0), drd + 2 * H * H,
                   H);
      }
      T *dbd = db + dir * 2 * G3;
      columnSums(nt, dgx, rows, G3, G3, dbd);
      columnSums(nt, dgh, rows, G3, G3, dbd + G3);
    });
    inputGradient(threads, l, dInput.get(), G3, w, dx);
  };
}

//===----------------------------------------------------------------------===//
// RNN
//===----------------------------------------------------------------------===//

// Operands of px.rnn: x, w, r, b, initial_h; results y, y_h.
template <typename T> KernelFn rnnTyped(KernelArgs &args) {
  const std::string op = "rnn";
  Layer l = readLayer(args, 1, op);
  const int64_t H = l.h;
  bool relu = readRelu(args, op);
  expectOperands(args, l, op);
  const T *x = args.in(0).as<T>(), *w = args.in(1).as<T>(),
          *r = args.in(2).as<T>(), *bias = args.in(3).as<T>(),
          *h0 = args.in(4).as<T>();
  T *y = args.out(0).as<T>(), *yh = args.out(1).as<T>();
  // Per direction: the input projections of every step [T*B, H] (y
  // interleaves the directions, so they cannot go there directly).
  auto inputs = args.scratch<T>(recurrentScratch(op, l.d, l.t, l.b, H)[0]);
  int threads = args.env.threads;
  return [=] {
    forDirections(threads, l, [&](int64_t dir, int nt) {
      const T *wd = w + dir * H * l.i, *rd = r + dir * H * H;
      const T *wb = bias + dir * 2 * H, *rb = wb + H;
      T *xin = inputs.get() + dir * l.t * l.b * H;
      blas::gemm(nt, false, true, l.t * l.b, H, l.i, T(1), x, l.i, wd, l.i,
                 T(0), xin, H);
      const T *hPrev = h0 + dir * l.stateSize();
      for (int64_t s = 0; s < l.t; ++s) {
        int64_t time = l.timeAt(dir, s);
        T *hOut = y + l.yAt(time, dir);
        std::memcpy(hOut, xin + time * l.stateSize(), l.stateSize() * sizeof(T));
        blas::gemm(nt, false, true, l.b, H, H, T(1), hPrev, H, rd, H, T(1), hOut, H);
        overBatch(nt, l, [&](int64_t b0, int64_t b1) {
          for (int64_t n = b0; n < b1; ++n) {
            T *hr = hOut + n * H;
            for (int64_t j = 0; j < H; ++j)
              hr[j] += wb[j] + rb[j];
            if (relu)
              for (int64_t j = 0; j < H; ++j)
                hr[j] = hr[j] > T(0) ? hr[j] : T(0);
            else
              tanhRow(hr, hr, H);
          }
        });
        hPrev = hOut;
      }
      std::memcpy(yh + dir * l.stateSize(), hPrev, l.stateSize() * sizeof(T));
    });
  };
}

// Operands of px.rnn_grad: x, w, r, initial_h, y, dy, dy_h; results dx, dw,
// dr, db, dinitial_h. The activation's derivative comes from its output:
// 1 - h^2 (tanh), or h > 0 (relu).
template <typename T> KernelFn rnnGradTyped(KernelArgs &args) {
  const std::string op = "rnn_grad";
  Layer l = readLayer(args, 1, op);
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
  int64_t rows = l.t * l.b;
  // Per direction: the pre-activation gradients [T*B, H] and the state each
  // step read [T*B, H].
  std::vector<int64_t> pieces = recurrentScratch(op, l.d, l.t, l.b, H);
  auto dpre = args.scratch<T>(pieces[0]);
  auto hPrevs = args.scratch<T>(pieces[1]);
  int threads = args.env.threads;
  return [=] {
    forDirections(threads, l, [&](int64_t dir, int nt) {
      const T *rd = r + dir * H * H;
      T *dg = dpre.get() + dir * rows * H, *hp = hPrevs.get() + dir * rows * H;
      T *dh = dh0 + dir * S; // the gradient of the state the step wrote
      std::memcpy(dh, dyh + dir * S, S * sizeof(T));
      for (int64_t s = l.t - 1; s >= 0; --s) {
        int64_t time = l.timeAt(dir, s);
        const T *hPrev = l.stateBefore(dir, s, y, h0);
        std::memcpy(hp + time * S, hPrev, S * sizeof(T));
        const T *h = y + l.yAt(time, dir), *dyt = dy + l.yAt(time, dir);
        T *dgt = dg + time * S;
        overBatch(nt, l, [&](int64_t b0, int64_t b1) {
          for (int64_t e = b0 * H; e < b1 * H; ++e) {
            T g = dh[e] + dyt[e];
            dgt[e] = relu ? (h[e] > T(0) ? g : T(0)) : g * (T(1) - h[e] * h[e]);
          }
        });
        // The gradient of the state this step read: dpre_t R.
        blas::gemm(nt, false, false, l.b, H, H, T(1), dgt, H, rd, H, T(0), dh, H);
      }
      blas::gemm(nt, true, false, H, l.i, rows, T(1), dg, H, x, l.i, T(0),
                 dw + dir * H * l.i, l.i);
      blas::gemm(nt, true, false, H, H, rows, T(1), dg, H, hp, H, T(0),
                 dr + dir * H * H, H);
      sharedBiasGradient(nt, dg, rows, H, db + dir * 2 * H);
    });
    inputGradient(threads, l, dpre.get(), H, w, dx);
  };
}

} // namespace

void registerRnnKernels(KernelRegistry &r) {
  PX_ADD_RNN_KERNELS(r);
}

} // namespace parallax::rt
