//===- RnnTest.cpp - the Rnn CUDA kernels against the CPU's --------------===//
//
// lstm, gru (with and without linear_before_reset) and rnn (tanh, relu) and
// their gradients, in f32 and f64, every direction, with and without initial
// states, over sequence lengths, batch sizes and hidden sizes that are not
// multiples of 32 (some large enough to need several blocks), an empty
// sequence, and the bind errors. The backward kernels get the same saved
// forward results (computed on the CPU) on both devices.
//
// The f32 tolerance is rtol 1e-4: the GPU's expf/tanhf and the CPU's 4-wide
// approximations differ by an ulp or two per step, and the recurrence
// carries that through the sequence (Rnn.cu).
//
//===----------------------------------------------------------------------===//

#include "CudaKernelTestUtil.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace parallax::rt::test {
namespace {

struct Case {
  std::string op = "lstm"; ///< lstm, gru or rnn
  int64_t t = 4, b = 3, i = 5, h = 7;
  std::string direction = "forward";
  bool initial = true; ///< random initial states (else zeros)
  bool lbr = false;    ///< gru: linear_before_reset
  bool relu = false;   ///< rnn: the relu activation
  DType dt = DType::F32;

  int64_t d() const { return direction == "bidirectional" ? 2 : 1; }
  int64_t g() const { return op == "lstm" ? 4 : op == "gru" ? 3 : 1; }
  std::string name() const {
    std::string s = op + " " + direction + " T" + std::to_string(t) + " B" +
                    std::to_string(b) + " I" + std::to_string(i) + " H" +
                    std::to_string(h) + " " + nameOf(dt);
    if (!initial)
      s += " no-initial";
    if (op == "gru")
      s += lbr ? " lbr" : " no-lbr";
    if (op == "rnn")
      s += relu ? " relu" : " tanh";
    return s;
  }
  nlohmann::json attrs() const {
    nlohmann::json a = nlohmann::json::object();
    if (direction != "forward")
      a["direction"] = direction;
    if (op == "gru" && lbr)
      a["linear_before_reset"] = true;
    if (op == "rnn")
      a["activation"] = relu ? "relu" : "tanh";
    return a;
  }
  double rtol() const { return dt == DType::F32 ? 1e-4 : 1e-9; }
  double atol(bool backward) const {
    // Weight gradients sum T * B products: f32 rounding of such sums.
    if (dt == DType::F32)
      return backward ? 5e-5 : 1e-5;
    return 1e-10;
  }
};

/// The forward operands and results of `c` (an absent initial state is
/// zeros, as the importer passes it).
struct Forward {
  TestTensor x, w, r, b, h0, c0, y, yh, yc, gates, cells;
};

Forward makeForward(const Case &c, uint64_t seed) {
  int64_t D = c.d(), G = c.g() * c.h, S = D * c.b * c.h;
  Forward f;
  f.x = TestTensor(c.dt, {c.t, c.b, c.i}, randomValues(c.t * c.b * c.i, seed));
  f.w = TestTensor(c.dt, {D, G, c.i}, randomValues(D * G * c.i, seed + 1, -0.6, 0.6));
  // R within +-1/sqrt(H) (PyTorch's initialisation): a larger R makes the
  // recurrence chaotic, and two correct kernels' rounding then diverges.
  double rMax = 1.0 / std::sqrt((double)std::max<int64_t>(c.h, 1));
  f.r = TestTensor(c.dt, {D, G, c.h}, randomValues(D * G * c.h, seed + 2, -rMax, rMax));
  f.b = TestTensor(c.dt, {D, 2 * G}, randomValues(D * 2 * G, seed + 3, -0.5, 0.5));
  std::vector<double> zeros(S, 0.0);
  f.h0 = TestTensor(c.dt, {D, c.b, c.h},
                    c.initial ? randomValues(S, seed + 4, -0.7, 0.7) : zeros);
  f.c0 = TestTensor(c.dt, {D, c.b, c.h},
                    c.initial ? randomValues(S, seed + 5, -0.7, 0.7) : zeros);
  f.y = TestTensor(c.dt, {c.t, D, c.b, c.h});
  f.yh = TestTensor(c.dt, {D, c.b, c.h});
  f.yc = TestTensor(c.dt, {D, c.b, c.h});
  f.gates = TestTensor(c.dt, {D, c.t, c.b, 4 * c.h});
  f.cells = TestTensor(c.dt, {D, c.t, c.b, c.h});
  return f;
}

void checkForward(const Case &c, uint64_t seed) {
  SCOPED_TRACE(c.name());
  Forward f = makeForward(c, seed);
  double rtol = c.rtol(), atol = c.atol(false);
  if (c.op == "lstm")
    expectCudaMatchesCpu("lstm", {f.x, f.w, f.r, f.b, f.h0, f.c0},
                         {f.y, f.yh, f.yc, f.gates, f.cells}, c.attrs(), rtol, atol);
  else if (c.op == "gru")
    expectCudaMatchesCpu("gru", {f.x, f.w, f.r, f.b, f.h0}, {f.y, f.yh, f.gates},
                         c.attrs(), rtol, atol);
  else
    expectCudaMatchesCpu("rnn", {f.x, f.w, f.r, f.b, f.h0}, {f.y, f.yh}, c.attrs(),
                         rtol, atol);
}

void checkBackward(const Case &c, uint64_t seed) {
  SCOPED_TRACE(c.name() + " grad");
  Forward f = makeForward(c, seed);
  // The saved results, from the CPU's forward kernel.
  if (c.op == "lstm")
    runKernel("lstm", {&f.x, &f.w, &f.r, &f.b, &f.h0, &f.c0},
              {&f.y, &f.yh, &f.yc, &f.gates, &f.cells}, c.attrs());
  else if (c.op == "gru")
    runKernel("gru", {&f.x, &f.w, &f.r, &f.b, &f.h0}, {&f.y, &f.yh, &f.gates},
              c.attrs());
  else
    runKernel("rnn", {&f.x, &f.w, &f.r, &f.b, &f.h0}, {&f.y, &f.yh}, c.attrs());
  int64_t D = c.d(), G = c.g() * c.h, S = D * c.b * c.h;
  TestTensor dy(c.dt, {c.t, D, c.b, c.h}, randomValues(c.t * S, seed + 7));
  TestTensor dyh(c.dt, {D, c.b, c.h}, randomValues(S, seed + 8));
  TestTensor dyc(c.dt, {D, c.b, c.h}, randomValues(S, seed + 9));
  TestTensor dx(c.dt, {c.t, c.b, c.i}), dw(c.dt, {D, G, c.i}), dr(c.dt, {D, G, c.h}),
      db(c.dt, {D, 2 * G}), dh0(c.dt, {D, c.b, c.h}), dc0(c.dt, {D, c.b, c.h});
  double rtol = c.rtol(), atol = c.atol(true);
  if (c.op == "lstm")
    expectCudaMatchesCpu("lstm_grad",
                         {f.x, f.w, f.r, f.h0, f.c0, f.y, f.gates, f.cells, dy, dyh, dyc},
                         {dx, dw, dr, db, dh0, dc0}, c.attrs(), rtol, atol);
  else if (c.op == "gru")
    expectCudaMatchesCpu("gru_grad", {f.x, f.w, f.r, f.h0, f.y, f.gates, dy, dyh},
                         {dx, dw, dr, db, dh0}, c.attrs(), rtol, atol);
  else
    expectCudaMatchesCpu("rnn_grad", {f.x, f.w, f.r, f.h0, f.y, dy, dyh},
                         {dx, dw, dr, db, dh0}, c.attrs(), rtol, atol);
}

/// Every op variant: lstm, gru with and without linear_before_reset, rnn
/// with tanh and relu.
std::vector<Case> variants() {
  std::vector<Case> out;
  Case c;
  c.op = "lstm";
  out.push_back(c);
  c.op = "gru";
  c.lbr = false;
  out.push_back(c);
  c.lbr = true;
  out.push_back(c);
  c.op = "rnn";
  c.lbr = false;
  c.relu = false;
  out.push_back(c);
  c.relu = true;
  out.push_back(c);
  return out;
}

/// Sizes: one step of one sample; a few steps; a batch and hidden size
/// whose steps need several blocks and whose gates span several column
/// chunks of the bias sums.
struct Size {
  int64_t t, b, i, h;
};
const Size kSizes[] = {{1, 1, 3, 5}, {5, 3, 7, 13}, {7, 37, 19, 45}};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const Case &v : variants())
    for (const char *dir : {"forward", "reverse", "bidirectional"})
      for (bool initial : {true, false})
        for (const Size &s : kSizes)
          for (DType dt : {DType::F32, DType::F64}) {
            Case c = v;
            c.direction = dir;
            c.initial = initial;
            c.t = s.t;
            c.b = s.b;
            c.i = s.i;
            c.h = s.h;
            c.dt = dt;
            out.push_back(c);
          }
  return out;
}

class CudaRnn : public CudaKernelTest {};

TEST_F(CudaRnn, ForwardMatchesCpu) {
  uint64_t seed = 1000;
  for (const Case &c : cases())
    checkForward(c, seed += 10);
}

TEST_F(CudaRnn, BackwardMatchesCpu) {
  uint64_t seed = 2000;
  for (const Case &c : cases())
    checkBackward(c, seed += 10);
}

TEST_F(CudaRnn, LargerLayers) {
  // A wide layer over a longer sequence: many blocks per step, a long sum
  // for the weight and bias gradients.
  uint64_t seed = 3000;
  for (Case c : variants()) {
    c.direction = "bidirectional";
    c.t = 12;
    c.b = 64;
    c.i = 33;
    c.h = 100;
    checkForward(c, seed += 10);
    checkBackward(c, seed += 10);
  }
}

TEST_F(CudaRnn, EmptySequence) {
  // No steps: y_h (y_c) are the initial states, the weight gradients zero
  // and the initial states' gradients dy_h (dy_c).
  uint64_t seed = 4000;
  for (Case c : variants())
    for (DType dt : {DType::F32, DType::F64}) {
      c.direction = "bidirectional";
      c.t = 0;
      c.dt = dt;
      checkForward(c, seed += 10);
      checkBackward(c, seed += 10);
    }
}

TEST_F(CudaRnn, NoInputFeatures) {
  // input_size 0: the input projections are empty sums.
  uint64_t seed = 5000;
  for (Case c : variants()) {
    c.direction = "reverse";
    c.i = 0;
    checkForward(c, seed += 10);
    checkBackward(c, seed += 10);
  }
}

TEST_F(CudaRnn, BindErrors) {
  // Both devices refuse these (expectCudaMatchesCpu checks that both fail).
  TestTensor x(DType::F32, {5, 2, 3}), w(DType::F32, {1, 16, 3}),
      r(DType::F32, {1, 16, 4}), badW(DType::F32, {1, 16, 2}),
      b(DType::F32, {1, 32}), badB(DType::F32, {1, 16});
  TestTensor y(DType::F32, {5, 1, 2, 4}), s(DType::F32, {1, 2, 4}),
      g(DType::F32, {1, 5, 2, 16}), c(DType::F32, {1, 5, 2, 4});
  expectCudaMatchesCpu("lstm", {x, badW, r, b, s, s}, {y, s, s, g, c});
  expectCudaMatchesCpu("lstm", {x, w, r, badB, s, s}, {y, s, s, g, c});
  expectCudaMatchesCpu("lstm", {x, w, r, b, s, s}, {y, s, s, g, c},
                       {{"direction", "sideways"}});
  expectCudaMatchesCpu("gru", {x, w, r, b, s}, {y, s, g});
  TestTensor xi(DType::I32, {5, 2, 3});
  expectCudaMatchesCpu("lstm", {xi, w, r, b, s, s}, {y, s, s, g, c});
  TestTensor badGates(DType::F32, {1, 5, 2, 12});
  expectCudaMatchesCpu("lstm_grad", {x, w, r, s, s, y, badGates, c, y, s, s},
                       {x, w, r, b, s, s});
  TestTensor rr(DType::F32, {1, 4, 4}), wr(DType::F32, {1, 4, 3}), br(DType::F32, {1, 8});
  expectCudaMatchesCpu("rnn", {x, wr, rr, br, s}, {y, s}, {{"activation", "gelu"}});
  expectCudaMatchesCpu("rnn_grad", {x, wr, rr, s, y, y, s}, {x, wr, rr, br, s},
                       {{"activation", "sigmoid"}});
}

} // namespace
} // namespace parallax::rt::test
