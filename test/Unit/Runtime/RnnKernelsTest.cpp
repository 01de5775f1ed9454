// Tests of the recurrent kernels (lstm, gru, rnn and their gradients): the
// forward kernels against a naive loop over ONNX's equations (in double),
// the backward kernels against central differences of that loop, in f32 and
// f64, every direction, with and without bias and initial states, GRU with
// and without linear_before_reset, on one thread and on several.
#include "KernelTestUtil.h"

#include "../../../lib/Runtime/Kernels/Vec4.h"

#include <cmath>
#include <limits>
#include <functional>
#include <map>

using namespace parallax::rt;
using namespace parallax::rt::test;

namespace {

struct Case {
  bool lstm = true;
  int64_t t = 4, b = 3, i = 2, h = 3;
  std::string direction = "forward";
  bool bias = true, initialH = true, initialC = true, lbr = true;

  /// An LSTM or GRU layer in direction `dir`, the other fields defaulted.
  static Case layer(bool lstm, std::string dir) {
    Case c;
    c.lstm = lstm;
    c.direction = std::move(dir);
    return c;
  }

  int64_t d() const { return direction == "bidirectional" ? 2 : 1; }
  int64_t g() const { return lstm ? 4 : 3; }
  std::string name() const {
    std::string s = std::string(lstm ? "lstm" : "gru") + " " + direction + " T" +
                    std::to_string(t) + " B" + std::to_string(b) + " I" +
                    std::to_string(i) + " H" + std::to_string(h);
    if (!bias)
      s += " no-bias";
    if (!initialH)
      s += " no-h0";
    if (lstm && !initialC)
      s += " no-c0";
    if (!lstm)
      s += lbr ? " lbr" : " no-lbr";
    return s;
  }
};

/// Operand values in double; an absent B or initial state is zeros, as the
/// importer passes it.
struct Values {
  std::vector<double> x, w, r, b, h0, c0;
};

Values caseValues(const Case &c, uint64_t seed) {
  int64_t d = c.d(), gh = c.g() * c.h;
  Values v;
  v.x = test::randomValues(c.t * c.b * c.i, seed, -1, 1);
  v.w = test::randomValues(d * gh * c.i, seed + 1, -0.8, 0.8);
  v.r = test::randomValues(d * gh * c.h, seed + 2, -0.8, 0.8);
  v.b = c.bias ? test::randomValues(d * 2 * gh, seed + 3, -0.5, 0.5)
               : std::vector<double>(d * 2 * gh, 0.0);
  v.h0 = c.initialH ? test::randomValues(d * c.b * c.h, seed + 4, -0.7, 0.7)
                    : std::vector<double>(d * c.b * c.h, 0.0);
  v.c0 = c.lstm && c.initialC ? test::randomValues(d * c.b * c.h, seed + 5, -0.7, 0.7)
                              : std::vector<double>(d * c.b * c.h, 0.0);
  return v;
}

double sig(double v) { return 1.0 / (1.0 + std::exp(-v)); }

struct Outputs {
  std::vector<double> y, yh, yc;
};

/// ONNX LSTM / GRU (default activations), written out step by step.
Outputs reference(const Case &c, const Values &v) {
  int64_t T = c.t, B = c.b, I = c.i, H = c.h, D = c.d(), G = c.g() * H;
  Outputs o;
  o.y.assign(T * D * B * H, 0.0);
  o.yh.assign(D * B * H, 0.0);
  o.yc.assign(D * B * H, 0.0);
  for (int64_t d = 0; d < D; ++d) {
    bool rev = c.direction == "reverse" || d == 1;
    const double *w = v.w.data() + d * G * I, *r = v.r.data() + d * G * H,
                 *wb = v.b.data() + d * 2 * G, *rb = wb + G;
    std::vector<double> h(v.h0.begin() + d * B * H, v.h0.begin() + (d + 1) * B * H);
    std::vector<double> cs(v.c0.begin() + d * B * H, v.c0.begin() + (d + 1) * B * H);
    for (int64_t s = 0; s < T; ++s) {
      int64_t t = rev ? T - 1 - s : s;
      std::vector<double> hn(B * H), cn(B * H);
      for (int64_t n = 0; n < B; ++n) {
        const double *xt = v.x.data() + (t * B + n) * I, *hp = h.data() + n * H;
        auto xw = [&](int64_t row) {
          double a = 0;
          for (int64_t k = 0; k < I; ++k)
            a += xt[k] * w[row * I + k];
          return a;
        };
        auto hr = [&](int64_t row, const double *state) {
          double a = 0;
          for (int64_t k = 0; k < H; ++k)
            a += state[k] * r[row * H + k];
          return a;
        };
        if (c.lstm) {
          for (int64_t j = 0; j < H; ++j) {
            auto pre = [&](int64_t row) { return xw(row) + hr(row, hp) + wb[row] + rb[row]; };
            double in = sig(pre(j)), out = sig(pre(H + j)), f = sig(pre(2 * H + j)),
                   g = std::tanh(pre(3 * H + j));
            double cell = f * cs[n * H + j] + in * g;
            cn[n * H + j] = cell;
            hn[n * H + j] = out * std::tanh(cell);
          }
        } else {
          std::vector<double> z(H), rs(H), rh(H);
          for (int64_t j = 0; j < H; ++j) {
            z[j] = sig(xw(j) + hr(j, hp) + wb[j] + rb[j]);
            rs[j] = sig(xw(H + j) + hr(H + j, hp) + wb[H + j] + rb[H + j]);
            rh[j] = rs[j] * hp[j];
          }
          for (int64_t j = 0; j < H; ++j) {
            int64_t row = 2 * H + j;
            double cand = c.lbr ? std::tanh(xw(row) + wb[row] + rs[j] * (hr(row, hp) + rb[row]))
                                : std::tanh(xw(row) + wb[row] + hr(row, rh.data()) + rb[row]);
            hn[n * H + j] = (1 - z[j]) * cand + z[j] * hp[j];
          }
        }
      }
      h = hn;
      if (c.lstm)
        cs = cn;
      for (int64_t e = 0; e < B * H; ++e)
        o.y[(t * D + d) * B * H + e] = h[e];
    }
    for (int64_t e = 0; e < B * H; ++e) {
      o.yh[d * B * H + e] = h[e];
      o.yc[d * B * H + e] = cs[e];
    }
  }
  return o;
}

nlohmann::json attrsOf(const Case &c) {
  nlohmann::json a = nlohmann::json::object();
  if (c.direction != "forward")
    a["direction"] = c.direction;
  if (!c.lstm && c.lbr)
    a["linear_before_reset"] = true;
  return a;
}

/// The forward kernel's tensors for `c`.
struct Forward {
  TestTensor x, w, r, b, h0, c0, y, yh, yc, gates, cells;
};

Forward runForward(const Case &c, const Values &v, DType dt, int threads) {
  int64_t D = c.d(), G = c.g() * c.h;
  Forward f;
  f.x = TestTensor(dt, {c.t, c.b, c.i}, v.x);
  f.w = TestTensor(dt, {D, G, c.i}, v.w);
  f.r = TestTensor(dt, {D, G, c.h}, v.r);
  f.b = TestTensor(dt, {D, 2 * G}, v.b);
  f.h0 = TestTensor(dt, {D, c.b, c.h}, v.h0);
  f.c0 = TestTensor(dt, {D, c.b, c.h}, v.c0);
  f.y = TestTensor(dt, {c.t, D, c.b, c.h});
  f.yh = TestTensor(dt, {D, c.b, c.h});
  f.yc = TestTensor(dt, {D, c.b, c.h});
  f.gates = TestTensor(dt, {D, c.t, c.b, 4 * c.h});
  f.cells = TestTensor(dt, {D, c.t, c.b, c.h});
  ExecEnv env;
  env.threads = threads;
  if (c.lstm)
    runKernel("lstm", {&f.x, &f.w, &f.r, &f.b, &f.h0, &f.c0},
              {&f.y, &f.yh, &f.yc, &f.gates, &f.cells}, attrsOf(c), env);
  else
    runKernel("gru", {&f.x, &f.w, &f.r, &f.b, &f.h0}, {&f.y, &f.yh, &f.gates},
              attrsOf(c), env);
  return f;
}

/// The gradients lstm_grad (gru_grad: no dc0) writes.
struct Grads {
  TestTensor dx, dw, dr, db, dh0, dc0;
};

/// Runs the layer's gradient kernel after `f` with the output gradients
/// dy, dyh and dyc (LSTM only).
Grads runBackward(const Case &c, Forward &f, DType dt, TestTensor &dy, TestTensor &dyh,
                  TestTensor &dyc, int threads) {
  int64_t D = c.d(), G = c.g() * c.h;
  Grads g{TestTensor(dt, {c.t, c.b, c.i}), TestTensor(dt, {D, G, c.i}),
          TestTensor(dt, {D, G, c.h}),     TestTensor(dt, {D, 2 * G}),
          TestTensor(dt, {D, c.b, c.h}),   TestTensor(dt, {D, c.b, c.h})};
  ExecEnv env;
  env.threads = threads;
  if (c.lstm)
    runKernel("lstm_grad",
              {&f.x, &f.w, &f.r, &f.h0, &f.c0, &f.y, &f.gates, &f.cells, &dy, &dyh, &dyc},
              {&g.dx, &g.dw, &g.dr, &g.db, &g.dh0, &g.dc0}, attrsOf(c), env);
  else
    runKernel("gru_grad", {&f.x, &f.w, &f.r, &f.h0, &f.y, &f.gates, &dy, &dyh},
              {&g.dx, &g.dw, &g.dr, &g.db, &g.dh0}, attrsOf(c), env);
  return g;
}

double tolR(DType dt) { return dt == DType::F32 ? 2e-5 : 1e-12; }
double tolA(DType dt) { return dt == DType::F32 ? 2e-6 : 1e-13; }

void checkForward(const Case &c, DType dt, int threads, uint64_t seed) {
  SCOPED_TRACE(c.name() + " " + nameOf(dt) + " threads " + std::to_string(threads));
  Values v = caseValues(c, seed);
  Forward f = runForward(c, v, dt, threads);
  Outputs want = reference(c, v);
  expectNear(f.y.values(), want.y, tolR(dt), tolA(dt), "y");
  expectNear(f.yh.values(), want.yh, tolR(dt), tolA(dt), "y_h");
  if (c.lstm)
    expectNear(f.yc.values(), want.yc, tolR(dt), tolA(dt), "y_c");
}

/// The backward kernel against central differences of the reference, for
/// L = sum(y * Ry) + sum(y_h * Rh) + sum(y_c * Rc), each term present when
/// the case passes that gradient (zeros otherwise, as px-autodiff passes
/// them for a result nothing reads).
void checkBackward(const Case &c, DType dt, int threads, uint64_t seed,
                   bool withDy = true, bool withDyH = true, bool withDyC = true) {
  SCOPED_TRACE(c.name() + " " + nameOf(dt) + " threads " + std::to_string(threads) +
               (withDy ? " dy" : "") + (withDyH ? " dy_h" : "") +
               (c.lstm && withDyC ? " dy_c" : ""));
  Values v = caseValues(c, seed);
  int64_t D = c.d();
  std::vector<double> ry = test::randomValues(c.t * D * c.b * c.h, seed + 7),
                      rh = test::randomValues(D * c.b * c.h, seed + 8),
                      rc = test::randomValues(D * c.b * c.h, seed + 9);
  bool useC = c.lstm && withDyC;
  auto loss = [&](const Values &vals) {
    Outputs o = reference(c, vals);
    double sum = 0;
    for (size_t k = 0; withDy && k < o.y.size(); ++k)
      sum += o.y[k] * ry[k];
    for (size_t k = 0; withDyH && k < o.yh.size(); ++k)
      sum += o.yh[k] * rh[k];
    for (size_t k = 0; useC && k < o.yc.size(); ++k)
      sum += o.yc[k] * rc[k];
    return sum;
  };

  Forward f = runForward(c, v, dt, threads);
  TestTensor dy(dt, {c.t, D, c.b, c.h}, withDy ? ry : std::vector<double>{});
  TestTensor dyh(dt, {D, c.b, c.h}, withDyH ? rh : std::vector<double>{});
  TestTensor dyc(dt, {D, c.b, c.h}, useC ? rc : std::vector<double>{});
  Grads g = runBackward(c, f, dt, dy, dyh, dyc, threads);
  TestTensor &dx = g.dx, &dw = g.dw, &dr = g.dr, &db = g.db, &dh0 = g.dh0, &dc0 = g.dc0;

  // f32 kernels are checked against double differences with a looser bound.
  double rtol = dt == DType::F32 ? 2e-3 : 1e-6, atol = dt == DType::F32 ? 2e-4 : 1e-8;
  auto numeric = [&](std::vector<double> Values::*member) {
    Values p = v;
    std::vector<double> &x = p.*member;
    std::vector<double> g(x.size());
    const double step = 1e-6;
    for (size_t k = 0; k < x.size(); ++k) {
      double keep = x[k];
      x[k] = keep + step;
      double up = loss(p);
      x[k] = keep - step;
      double down = loss(p);
      x[k] = keep;
      g[k] = (up - down) / (2 * step);
    }
    return g;
  };
  expectNear(dx.values(), numeric(&Values::x), rtol, atol, "dx");
  expectNear(dw.values(), numeric(&Values::w), rtol, atol, "dw");
  expectNear(dr.values(), numeric(&Values::r), rtol, atol, "dr");
  expectNear(db.values(), numeric(&Values::b), rtol, atol, "db");
  expectNear(dh0.values(), numeric(&Values::h0), rtol, atol, "dinitial_h");
  if (c.lstm)
    expectNear(dc0.values(), numeric(&Values::c0), rtol, atol, "dinitial_c");
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (bool lstm : {true, false})
    for (const char *dir : {"forward", "reverse", "bidirectional"})
      for (int variant = 0; variant < (lstm ? 2 : 4); ++variant) {
        Case c = Case::layer(lstm, dir);
        // Variants: all operands; no bias and no initial states (GRU also
        // both without linear_before_reset).
        bool full = variant % 2 == 0;
        c.bias = c.initialH = c.initialC = full;
        c.lbr = variant < 2;
        if (!full)
          c.initialC = false;
        out.push_back(c);
      }
  return out;
}

TEST(RnnKernels, ForwardMatchesReference) {
  uint64_t seed = 100;
  for (const Case &c : cases())
    for (DType dt : {DType::F32, DType::F64})
      checkForward(c, dt, 1, seed++);
}

TEST(RnnKernels, ForwardThreadedMatchesReference) {
  // Large enough that the batch loops and GEMMs split over threads.
  uint64_t seed = 200;
  for (bool lstm : {true, false})
    for (const char *dir : {"forward", "bidirectional"}) {
      Case c = Case::layer(lstm, dir);
      c.t = 6;
      c.b = 33;
      c.i = 40;
      c.h = 70;
      checkForward(c, DType::F32, 4, seed++);
    }
}

TEST(RnnKernels, BackwardMatchesFiniteDifferences) {
  uint64_t seed = 300;
  for (const Case &c : cases())
    checkBackward(c, DType::F64, 1, seed++);
}

TEST(RnnKernels, BackwardF32AndThreads) {
  uint64_t seed = 400;
  for (bool lstm : {true, false})
    for (const char *dir : {"reverse", "bidirectional"}) {
      Case c = Case::layer(lstm, dir);
      checkBackward(c, DType::F32, 1, seed++);
      checkBackward(c, DType::F64, 3, seed++);
    }
}

TEST(RnnKernels, BackwardThreadedMatchesOneThread) {
  // Large enough that the GEMMs, the batch loops and the bias sums split
  // over threads, and the two directions run side by side.
  uint64_t seed = 450;
  for (bool lstm : {true, false})
    for (bool lbr : {true, false}) {
      if (lstm && !lbr)
        continue;
      Case c;
      c.lstm = lstm;
      c.lbr = lbr;
      c.direction = "bidirectional";
      c.t = 5;
      c.b = 33;
      c.i = 24;
      c.h = 40;
      SCOPED_TRACE(c.name());
      Values v = caseValues(c, seed++);
      int64_t D = c.d();
      std::vector<double> ry = test::randomValues(c.t * D * c.b * c.h, seed++),
                          rh = test::randomValues(D * c.b * c.h, seed++);
      std::map<int, std::vector<std::vector<double>>> results;
      for (int threads : {1, 4}) {
        Forward f = runForward(c, v, DType::F32, threads);
        TestTensor dy(DType::F32, {c.t, D, c.b, c.h}, ry), dyh(DType::F32, {D, c.b, c.h}, rh),
            dyc(DType::F32, {D, c.b, c.h}, rh);
        Grads g = runBackward(c, f, DType::F32, dy, dyh, dyc, threads);
        results[threads] = {f.y.values(), g.dx.values(), g.dw.values(), g.dr.values(),
                            g.db.values(), g.dh0.values(), g.dc0.values()};
      }
      const char *names[] = {"y", "dx", "dw", "dr", "db", "dinitial_h", "dinitial_c"};
      // Threads cut the products into blocks that the BLAS rounds
      // differently (oneDNN or OpenBLAS by block size, and their kernels by
      // CPU), and five steps of the recurrence carry it on: f32 rounding
      // reaches 3e-5 of a bias gradient's value on an AVX2 EPYC. A wrong
      // block or a lost partial sum is off by the values' own size.
      for (size_t k = 0; k < results[1].size(); ++k)
        expectNear(results[4][k], results[1][k], 1e-4, 1e-5, names[k]);
    }
}

TEST(RnnKernels, BackwardWithSomeGradientsAbsent) {
  // Zero dy, dy_h or dy_c (a result nothing reads): only y_h (a
  // classifier), only y (an LM), only y_c.
  uint64_t seed = 500;
  for (bool lstm : {true, false}) {
    Case c = Case::layer(lstm, "bidirectional");
    checkBackward(c, DType::F64, 1, seed++, false, true, false);
    checkBackward(c, DType::F64, 1, seed++, true, false, false);
    if (lstm)
      checkBackward(c, DType::F64, 1, seed++, false, false, true);
  }
}

TEST(RnnKernels, EdgeSizes) {
  // One step, one sample, one hidden unit; an empty sequence gives the
  // initial states and zero weight gradients.
  uint64_t seed = 600;
  for (bool lstm : {true, false}) {
    Case c;
    c.lstm = lstm;
    c.t = 1;
    c.b = 1;
    c.h = 1;
    checkForward(c, DType::F64, 1, seed++);
    checkBackward(c, DType::F64, 1, seed++);
    c.t = 0;
    c.direction = "bidirectional";
    checkForward(c, DType::F64, 1, seed++);
    checkBackward(c, DType::F64, 1, seed++);
  }
}

// The 4-wide activations the f32 kernels use, against libm over [-20, 20]
// (both branches of tanh, the saturated ends) and at the special values.
TEST(RnnKernels, VectorActivationsMatchLibm) {
  using namespace parallax::rt::detail;
  double worstTanh = 0, worstSigmoid = 0;
  for (int k = -200000; k <= 200000; k += 4) {
    v4f x;
    for (int i = 0; i < 4; ++i)
      x[i] = (float)((k + i) * 1e-4);
    v4f t = vtanh4(x), s = vsigmoid4(x);
    for (int i = 0; i < 4; ++i) {
      double xd = x[i], rt = std::tanh(xd), rs = 1.0 / (1.0 + std::exp(-xd));
      worstTanh = std::max(worstTanh, std::abs(t[i] - rt) / std::max(std::abs(rt), 1e-30));
      worstSigmoid = std::max(worstSigmoid, std::abs(s[i] - rs) / rs);
    }
  }
  // A few float ulps (2^-23 = 1.2e-7).
  EXPECT_LT(worstTanh, 4e-7);
  EXPECT_LT(worstSigmoid, 4e-7);
  const float inf = std::numeric_limits<float>::infinity();
  v4f special{inf, -inf, 0.0f, std::numeric_limits<float>::quiet_NaN()};
  v4f t = vtanh4(special), s = vsigmoid4(special);
  EXPECT_EQ(t[0], 1.0f);
  EXPECT_EQ(t[1], -1.0f);
  EXPECT_EQ(t[2], 0.0f);
  EXPECT_TRUE(std::isnan(t[3]));
  EXPECT_EQ(s[0], 1.0f);
  EXPECT_EQ(s[1], 0.0f);
  EXPECT_EQ(s[2], 0.5f);
  EXPECT_TRUE(std::isnan(s[3]));
}

TEST(RnnKernels, BindErrors) {
  TestTensor x(DType::F32, {5, 2, 3}), w(DType::F32, {1, 16, 3}),
      r(DType::F32, {1, 16, 4}), badW(DType::F32, {1, 16, 2}),
      b(DType::F32, {1, 32}), badB(DType::F32, {1, 16});
  TestTensor y(DType::F32, {5, 1, 2, 4}), s(DType::F32, {1, 2, 4}),
      g(DType::F32, {1, 5, 2, 16}), c(DType::F32, {1, 5, 2, 4});
  EXPECT_EQ(kernelError("lstm", {&x, &badW, &r, &b, &s, &s}, {&y, &s, &s, &g, &c}),
            "lstm: w must be f32 [1, 16, 3], got f32 [1, 16, 2]");
  EXPECT_EQ(kernelError("lstm", {&x, &w, &r, &badB, &s, &s}, {&y, &s, &s, &g, &c}),
            "lstm: b must be f32 [1, 32], got f32 [1, 16]");
  EXPECT_EQ(kernelError("lstm", {&x, &w, &r, &b, &s, &s}, {&y, &s, &s, &g, &c},
                        {{"direction", "sideways"}}),
            "lstm: unknown direction 'sideways'");
  EXPECT_EQ(kernelError("gru", {&x, &w, &r, &b, &s}, {&y, &s, &g}),
            "gru: r must be f32 [1, 12, 4], got f32 [1, 16, 4]");
  TestTensor xi(DType::I32, {5, 2, 3});
  EXPECT_EQ(kernelError("lstm", {&xi, &w, &r, &b, &s, &s}, {&y, &s, &s, &g, &c}),
            "lstm: element type i32 is not supported by the CPU runtime");
  TestTensor badGates(DType::F32, {1, 5, 2, 12});
  EXPECT_EQ(kernelError("lstm_grad", {&x, &w, &r, &s, &s, &y, &badGates, &c, &y, &s, &s},
                        {&x, &w, &r, &b, &s, &s}),
            "lstm_grad: gates must be f32 [1, 5, 2, 16], got f32 [1, 5, 2, 12]");
}

//===----------------------------------------------------------------------===//
// rnn (ONNX RNN, tanh or relu)
//===----------------------------------------------------------------------===//

struct SimpleCase {
  int64_t t = 4, b = 3, i = 2, h = 3;
  std::string direction = "forward", activation = "tanh";
  int64_t d() const { return direction == "bidirectional" ? 2 : 1; }
  nlohmann::json attrs() const {
    return {{"direction", direction}, {"activation", activation}};
  }
  std::string name() const {
    return activation + " " + direction + " T" + std::to_string(t) + " B" +
           std::to_string(b) + " I" + std::to_string(i) + " H" + std::to_string(h);
  }
};

/// h_t = f(x_t W^T + h_{t-1} R^T + Wb + Rb), per direction, in double.
std::vector<double> simpleReference(const SimpleCase &c, const std::vector<double> &x,
                                    const std::vector<double> &w,
                                    const std::vector<double> &r,
                                    const std::vector<double> &b,
                                    const std::vector<double> &h0) {
  int64_t D = c.d(), H = c.h;
  std::vector<double> y(c.t * D * c.b * H);
  for (int64_t dir = 0; dir < D; ++dir) {
    bool rev = c.direction == "reverse" || dir == 1;
    std::vector<double> h(h0.begin() + dir * c.b * H, h0.begin() + (dir + 1) * c.b * H);
    for (int64_t s = 0; s < c.t; ++s) {
      int64_t t = rev ? c.t - 1 - s : s;
      std::vector<double> next(c.b * H);
      for (int64_t n = 0; n < c.b; ++n)
        for (int64_t j = 0; j < H; ++j) {
          double a = b[dir * 2 * H + j] + b[dir * 2 * H + H + j];
          for (int64_t k = 0; k < c.i; ++k)
            a += x[(t * c.b + n) * c.i + k] * w[(dir * H + j) * c.i + k];
          for (int64_t k = 0; k < H; ++k)
            a += h[n * H + k] * r[(dir * H + j) * H + k];
          next[n * H + j] = c.activation == "relu" ? std::max(a, 0.0) : std::tanh(a);
          y[((t * D + dir) * c.b + n) * H + j] = next[n * H + j];
        }
      h = next;
    }
  }
  return y;
}

struct SimpleRun {
  TestTensor x, w, r, b, h0, y, yh;
};

SimpleRun runSimple(const SimpleCase &c, DType dt, const std::vector<std::vector<double>> &v,
                    int threads = 1) {
  int64_t D = c.d();
  SimpleRun f;
  f.x = TestTensor(dt, {c.t, c.b, c.i}, v[0]);
  f.w = TestTensor(dt, {D, c.h, c.i}, v[1]);
  f.r = TestTensor(dt, {D, c.h, c.h}, v[2]);
  f.b = TestTensor(dt, {D, 2 * c.h}, v[3]);
  f.h0 = TestTensor(dt, {D, c.b, c.h}, v[4]);
  f.y = TestTensor(dt, {c.t, D, c.b, c.h});
  f.yh = TestTensor(dt, {D, c.b, c.h});
  ExecEnv env;
  env.threads = threads;
  runKernel("rnn", {&f.x, &f.w, &f.r, &f.b, &f.h0}, {&f.y, &f.yh}, c.attrs(), env);
  return f;
}

std::vector<SimpleCase> simpleCases() {
  std::vector<SimpleCase> cs;
  for (std::string act : {"tanh", "relu"})
    for (std::string dir : {"forward", "reverse", "bidirectional"}) {
      SimpleCase c;
      c.activation = act;
      c.direction = dir;
      cs.push_back(c);
    }
  SimpleCase big; // several threads' worth of batch rows
  big.t = 6, big.b = 40, big.i = 7, big.h = 33, big.direction = "bidirectional";
  cs.push_back(big);
  SimpleCase one; // one step, one sample, one unit
  one.t = 1, one.b = 1, one.i = 1, one.h = 1, one.activation = "relu";
  cs.push_back(one);
  return cs;
}

std::vector<std::vector<double>> simpleValues(const SimpleCase &c, uint64_t seed) {
  int64_t D = c.d();
  return {randomValues(c.t * c.b * c.i, seed, -1, 1),
          randomValues(D * c.h * c.i, seed + 1, -0.8, 0.8),
          randomValues(D * c.h * c.h, seed + 2, -0.8, 0.8),
          randomValues(D * 2 * c.h, seed + 3, -0.5, 0.5),
          randomValues(D * c.b * c.h, seed + 4, -0.7, 0.7)};
}

TEST(RnnKernels, SimpleForwardMatchesReference) {
  uint64_t seed = 700;
  for (const SimpleCase &c : simpleCases())
    for (DType dt : {DType::F32, DType::F64})
      for (int threads : {1, 3}) {
        SCOPED_TRACE(c.name() + " " + nameOf(dt) + " threads " + std::to_string(threads));
        auto v = simpleValues(c, seed += 10);
        SimpleRun f = runSimple(c, dt, v, threads);
        std::vector<double> ref = simpleReference(c, f.x.values(), f.w.values(),
                                                  f.r.values(), f.b.values(), f.h0.values());
        expectNear(f.y.values(), ref, tolR(dt) * 10, tolA(dt) * 10, "y");
        // y_h: the last step of each direction.
        std::vector<double> yh;
        for (int64_t dir = 0; dir < c.d(); ++dir) {
          int64_t last = (c.direction == "reverse" || dir == 1) ? 0 : c.t - 1;
          for (int64_t e = 0; e < c.b * c.h; ++e)
            yh.push_back(ref[(last * c.d() + dir) * c.b * c.h + e]);
        }
        expectNear(f.yh.values(), yh, tolR(dt) * 10, tolA(dt) * 10, "y_h");
      }
}

TEST(RnnKernels, SimpleBackwardMatchesFiniteDifferences) {
  uint64_t seed = 800;
  for (SimpleCase c : simpleCases()) {
    if (c.b > 8)
      continue; // the finite differences of the big case take too long
    SCOPED_TRACE(c.name());
    auto v = simpleValues(c, seed += 10);
    int64_t D = c.d();
    std::vector<double> wy = randomValues(c.t * D * c.b * c.h, seed + 7),
                        wyh = randomValues(D * c.b * c.h, seed + 8);
    auto loss = [&](const std::vector<std::vector<double>> &vals) {
      SimpleRun f = runSimple(c, DType::F64, vals);
      double l = 0;
      for (int64_t e = 0; e < f.y.numElements(); ++e)
        l += wy[e] * f.y.get(e);
      for (int64_t e = 0; e < f.yh.numElements(); ++e)
        l += wyh[e] * f.yh.get(e);
      return l;
    };
    SimpleRun f = runSimple(c, DType::F64, v);
    TestTensor dy(DType::F64, {c.t, D, c.b, c.h}, wy), dyh(DType::F64, {D, c.b, c.h}, wyh);
    for (int threads : {1, 2}) {
      TestTensor dx(DType::F64, f.x.shape), dw(DType::F64, f.w.shape),
          dr(DType::F64, f.r.shape), db(DType::F64, f.b.shape), dh0(DType::F64, f.h0.shape);
      ExecEnv env;
      env.threads = threads;
      runKernel("rnn_grad", {&f.x, &f.w, &f.r, &f.h0, &f.y, &dy, &dyh},
                {&dx, &dw, &dr, &db, &dh0}, c.attrs(), env);
      TestTensor *grads[] = {&dx, &dw, &dr, &db, &dh0};
      const char *names[] = {"dx", "dw", "dr", "db", "dinitial_h"};
      for (int k = 0; k < 5; ++k) {
        std::vector<double> fd(v[k].size());
        for (size_t e = 0; e < v[k].size(); ++e) {
          auto plus = v, minus = v;
          plus[k][e] += 1e-6;
          minus[k][e] -= 1e-6;
          fd[e] = (loss(plus) - loss(minus)) / 2e-6;
        }
        expectNear(grads[k]->values(), fd, 1e-6, 1e-7, names[k]);
      }
    }
  }
}

TEST(RnnKernels, SimpleBackwardF32AndThreads) {
  // The big case: f32 and 3 threads against f64 on one thread.
  SimpleCase c = simpleCases()[6];
  auto v = simpleValues(c, 900);
  std::vector<double> wy = randomValues(c.t * c.d() * c.b * c.h, 901),
                      wyh = randomValues(c.d() * c.b * c.h, 902);
  std::vector<std::vector<double>> out[2];
  for (int k = 0; k < 2; ++k) {
    DType dt = k == 0 ? DType::F64 : DType::F32;
    SimpleRun f = runSimple(c, dt, v, k == 0 ? 1 : 3);
    TestTensor dy(dt, {c.t, c.d(), c.b, c.h}, wy), dyh(dt, {c.d(), c.b, c.h}, wyh);
    TestTensor dx(dt, f.x.shape), dw(dt, f.w.shape), dr(dt, f.r.shape), db(dt, f.b.shape),
        dh0(dt, f.h0.shape);
    ExecEnv env;
    env.threads = k == 0 ? 1 : 3;
    runKernel("rnn_grad", {&f.x, &f.w, &f.r, &f.h0, &f.y, &dy, &dyh},
              {&dx, &dw, &dr, &db, &dh0}, c.attrs(), env);
    out[k] = {dx.values(), dw.values(), dr.values(), db.values(), dh0.values()};
  }
  for (int g = 0; g < 5; ++g)
    expectNear(out[1][g], out[0][g], 1e-4, 1e-4, "gradient " + std::to_string(g));
}

TEST(RnnKernels, SimpleBindErrors) {
  TestTensor x(DType::F32, {5, 2, 3}), w(DType::F32, {1, 4, 3}), r(DType::F32, {1, 4, 4}),
      b(DType::F32, {1, 8}), s(DType::F32, {1, 2, 4}), y(DType::F32, {5, 1, 2, 4});
  EXPECT_EQ(kernelError("rnn", {&x, &w, &r, &b, &s}, {&y, &s}), "");
  EXPECT_EQ(kernelError("rnn", {&x, &w, &r, &b, &s}, {&y, &s}, {{"activation", "sigmoid"}}),
            "rnn: unknown activation 'sigmoid'");
  TestTensor badB(DType::F32, {1, 4});
  EXPECT_EQ(kernelError("rnn", {&x, &w, &r, &badB, &s}, {&y, &s}),
            "rnn: b must be f32 [1, 8], got f32 [1, 4]");
  TestTensor r16(DType::F32, {1, 16, 4});
  EXPECT_EQ(kernelError("rnn", {&x, &w, &r16, &b, &s}, {&y, &s}),
            "rnn: r must be f32 [1, 4, 4], got f32 [1, 16, 4]");
  TestTensor badDy(DType::F32, {5, 2, 4});
  EXPECT_EQ(kernelError("rnn_grad", {&x, &w, &r, &s, &y, &badDy, &s}, {&x, &w, &r, &b, &s}),
            "rnn_grad: dy must be f32 [5, 1, 2, 4], got f32 [5, 2, 4]");
}

} // namespace
