// Tests of the Optimizer kernels (sgd, momentum, adam, adagrad, assign):
// several steps against references written from the torch.optim formulas,
// dense and sparse gradients (repeated and -1 indices), weight decay, f32 and
// f64, and 20 f32 steps against values recorded from PyTorch 1.13.
#include "KernelTestUtil.h"

#include "parallax/Runtime/Comm.h"

#include <cmath>
#include <map>

using namespace parallax::rt;
using namespace parallax::rt::test;
using nlohmann::json;

namespace {

struct Opt {
  std::string op;
  double lr = 0.1, wd = 0, mu = 0, b1 = 0, b2 = 0, eps = 0;
  bool nesterov = false;

  int states() const {
    return op == "sgd" ? 0 : op == "adam" ? 2 : 1;
  }
  json attrs() const {
    json a{{"lr", lr}};
    if (wd != 0)
      a["weight_decay"] = wd;
    if (op == "momentum") {
      a["momentum"] = mu;
      if (nesterov)
        a["nesterov"] = true;
    }
    if (op == "adam") {
      a["beta1"] = b1;
      a["beta2"] = b2;
    }
    if (op == "adam" || op == "adagrad")
      a["epsilon"] = eps;
    return a;
  }
  std::string name() const { return attrs().dump(); }
};

/// One step of the torch.optim formulas on doubles. `g` is the coalesced
/// gradient, `touched` the elements it updates (all of them when dense).
void refStep(const Opt &o, std::vector<double> &w, std::vector<double> &s0,
             std::vector<double> &s1, const std::vector<double> &g,
             const std::vector<bool> &touched, bool sparse, int64_t t) {
  double bc1 = 1 - std::pow(o.b1, (double)t), bc2 = 1 - std::pow(o.b2, (double)t);
  for (size_t i = 0; i < w.size(); ++i) {
    if (!touched[i])
      continue;
    double gi = g[i] + o.wd * w[i];
    if (o.op == "sgd") {
      w[i] -= o.lr * gi;
    } else if (o.op == "momentum") {
      s0[i] = o.mu * s0[i] + gi;
      w[i] -= o.lr * (o.nesterov ? gi + o.mu * s0[i] : s0[i]);
    } else if (o.op == "adam") {
      s0[i] = o.b1 * s0[i] + (1 - o.b1) * gi;
      s1[i] = o.b2 * s1[i] + (1 - o.b2) * gi * gi;
      if (!sparse) // torch.optim.Adam
        w[i] -= o.lr / bc1 * s0[i] / (std::sqrt(s1[i]) / std::sqrt(bc2) + o.eps);
      else // torch.optim.SparseAdam
        w[i] -= o.lr * std::sqrt(bc2) / bc1 * s0[i] / (std::sqrt(s1[i]) + o.eps);
    } else if (o.op == "adagrad") {
      s0[i] += gi * gi;
      w[i] -= o.lr * gi / (std::sqrt(s0[i]) + o.eps);
    }
  }
}

std::vector<Opt> optimizers() {
  std::vector<Opt> os;
  for (double wd : {0.0, 0.05}) {
    os.push_back({"sgd", 0.1, wd});
    os.push_back({"momentum", 0.05, wd, 0.9, 0, 0, 0, false});
    os.push_back({"momentum", 0.05, wd, 0.7, 0, 0, 0, true});
    os.push_back({"adam", 0.01, wd, 0, 0.9, 0.999, 1e-8});
    os.push_back({"adam", 0.003, wd, 0, 0.5, 0.9, 1e-3});
    os.push_back({"adagrad", 0.1, wd, 0, 0, 0, 1e-10});
  }
  return os;
}

/// Initial state: velocity / m anywhere, v / sum positive.
std::vector<TestTensor> makeState(const Opt &o, DType dt,
                                  const std::vector<int64_t> &shape,
                                  uint64_t seed) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::vector<TestTensor> st;
  if (o.op == "momentum")
    st.emplace_back(dt, shape, randomValues(n, seed, -0.5, 0.5));
  if (o.op == "adam") {
    st.emplace_back(dt, shape, randomValues(n, seed, -0.1, 0.1));
    st.emplace_back(dt, shape, randomValues(n, seed + 1, 0.0, 0.05));
  }
  if (o.op == "adagrad")
    st.emplace_back(dt, shape, randomValues(n, seed, 0.0, 0.5));
  return st;
}

/// An optimizer's variable and state as the kernel updates them, and the
/// reference's copies.
struct OptRun {
  TestTensor w;
  std::vector<TestTensor> st;
  std::vector<double> rw, r0, r1;
};

/// A random variable of `shape` (from `seed`) and state (from seed + 1).
OptRun startRun(const Opt &o, DType dt, const std::vector<int64_t> &shape, uint64_t seed) {
  OptRun r;
  r.w = TestTensor(dt, shape, randomValues(numel(shape), seed));
  r.st = makeState(o, dt, shape, seed + 1);
  r.rw = r.w.values();
  if (o.states() > 0)
    r.r0 = r.st[0].values();
  if (o.states() > 1)
    r.r1 = r.st[1].values();
  return r;
}

ExecEnv stepEnv(int64_t step, int threads = 1) {
  ExecEnv env;
  env.step = step;
  env.threads = threads;
  return env;
}

void runOpt(const Opt &o, TestTensor &w, std::vector<TestTensor> &st,
            std::vector<TestTensor *> grad, int64_t step, int threads = 1) {
  std::vector<TestTensor *> ins{&w};
  for (TestTensor &s : st)
    ins.push_back(&s);
  for (TestTensor *g : grad)
    ins.push_back(g);
  runKernel(o.op, ins, {}, o.attrs(), stepEnv(step, threads));
}

/// expectNear without one gtest assertion per element (large tensors).
void expectClose(const std::vector<double> &actual,
                 const std::vector<double> &expected, double tol,
                 const std::string &what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i)
    if (!(std::abs(actual[i] - expected[i]) <= tol + tol * std::abs(expected[i]))) {
      ADD_FAILURE() << what << " element " << i << ": " << actual[i] << " vs "
                    << expected[i];
      return;
    }
}

void expectState(const Opt &o, DType dt, const TestTensor &w,
                 const std::vector<TestTensor> &st, const std::vector<double> &rw,
                 const std::vector<double> &r0, const std::vector<double> &r1,
                 const std::string &what) {
  double tol = dt == DType::F32 ? 2e-5 : 1e-12;
  expectClose(w.values(), rw, tol, what + " variable");
  if (o.states() > 0)
    expectClose(st[0].values(), r0, tol, what + " state 0");
  if (o.states() > 1)
    expectClose(st[1].values(), r1, tol, what + " state 1");
}

TEST(OptimizerKernels, DenseMatchesTorchFormulas) {
  uint64_t seed = 100;
  const std::vector<int64_t> shape{3, 5, 7};
  const int64_t n = 105;
  for (const Opt &o : optimizers())
    for (DType dt : {DType::F32, DType::F64}) {
      OptRun run = startRun(o, dt, shape, seed += 5);
      auto &[w, st, rw, r0, r1] = run;
      for (int64_t t = 1; t <= 3; ++t) {
        TestTensor g(dt, shape, randomValues(n, seed + 10 * t));
        runOpt(o, w, st, {&g}, t);
        refStep(o, rw, r0, r1, g.values(), std::vector<bool>(n, true), false, t);
        expectState(o, dt, w, st, rw, r0, r1,
                    o.name() + " " + nameOf(dt) + " step " + std::to_string(t));
      }
    }
}

TEST(OptimizerKernels, SubnormalStateIsFlushedToZero) {
  // Adam's second moment of a gradient of 1e-20 is 1e-43 in f32, a
  // subnormal: flushed to 0 (and the update, 1e-15 on a variable of 0.5,
  // is below the variable's precision either way). The caller's thread
  // keeps its own floating-point mode.
  const std::vector<int64_t> shape{64};
  Opt adam{"adam", 0.001, 0, 0, 0.9, 0.999, 1e-8};
  TestTensor w(DType::F32, shape, std::vector<double>(64, 0.5));
  std::vector<TestTensor> st{TestTensor(DType::F32, shape, std::vector<double>(64, 0.0)),
                             TestTensor(DType::F32, shape, std::vector<double>(64, 0.0))};
  TestTensor g(DType::F32, shape, std::vector<double>(64, 1e-20));
  runOpt(adam, w, st, {&g}, 1);
  for (double v : st[1].values())
    EXPECT_EQ(v, 0.0);
  for (double m : st[0].values())
    EXPECT_FLOAT_EQ((float)m, 1e-21f);
  for (double x : w.values())
    EXPECT_EQ((float)x, 0.5f);
  volatile float tiny = 1e-38f;
  EXPECT_GT(tiny / 100.0f, 0.0f);
}

TEST(OptimizerKernels, SparseMatchesTorchFormulas) {
  // Variable [6, 2, 2]: rows of 4 elements; repeated rows sum, -1 is skipped,
  // rows that no index names keep their values and state.
  const std::vector<int64_t> shape{6, 2, 2};
  const int64_t rows = 6, rowSize = 4, n = 24;
  const std::vector<std::vector<int64_t>> indices{
      {3, -1, 0, 3, 5, -1, 0}, {1, 1, -1, 4, 2, 2, 2}, {-1, -1, 5, 0, 3, 3, 1}};
  uint64_t seed = 200;
  for (const Opt &o : optimizers())
    for (DType dt : {DType::F32, DType::F64}) {
      OptRun run = startRun(o, dt, shape, seed += 5);
      auto &[w, st, rw, r0, r1] = run;
      for (int64_t t = 1; t <= 3; ++t) {
        const std::vector<int64_t> &idx = indices[t - 1];
        int64_t k = idx.size();
        TestTensor ti(DType::I64, {k}, std::vector<double>(idx.begin(), idx.end()));
        TestTensor tv(dt, {k, 2, 2}, randomValues(k * rowSize, seed + 10 * t));
        runOpt(o, w, st, {&ti, &tv}, t);
        std::vector<double> g(n, 0.0);
        std::vector<bool> touched(n, false);
        for (int64_t p = 0; p < k; ++p) {
          if (idx[p] < 0)
            continue;
          for (int64_t j = 0; j < rowSize; ++j) {
            g[idx[p] * rowSize + j] += tv.get(p * rowSize + j);
            touched[idx[p] * rowSize + j] = true;
          }
        }
        refStep(o, rw, r0, r1, g, touched, true, t);
        expectState(o, dt, w, st, rw, r0, r1,
                    o.name() + " sparse " + nameOf(dt) + " step " + std::to_string(t));
      }
      (void)rows;
    }
}

TEST(OptimizerKernels, SparseWeightDecayAppliesOncePerRow) {
  // Row 2 appears three times: wd * w is added to the summed gradient once.
  Opt o{"sgd", 0.5, 0.2};
  TestTensor w(DType::F64, {3, 1}, {1.0, 2.0, 3.0});
  std::vector<TestTensor> st;
  TestTensor idx(DType::I64, {3}, {2, 2, 2});
  TestTensor vals(DType::F64, {3, 1}, {1.0, 1.0, 1.0});
  runOpt(o, w, st, {&idx, &vals}, 1);
  EXPECT_EQ(w.values(), (std::vector<double>{1.0, 2.0, 3.0 - 0.5 * (3.0 + 0.2 * 3.0)}));
}

TEST(OptimizerKernels, AllSlotsUnused) {
  for (const Opt &o : optimizers()) {
    TestTensor w(DType::F32, {4, 3}, randomValues(12, 7));
    std::vector<TestTensor> st = makeState(o, DType::F32, {4, 3}, 8);
    std::vector<double> before = w.values();
    TestTensor idx(DType::I64, {2}, {-1, -1});
    TestTensor vals(DType::F32, {2, 3}, randomValues(6, 9));
    runOpt(o, w, st, {&idx, &vals}, 1);
    EXPECT_EQ(w.values(), before) << o.name();
  }
}

TEST(OptimizerKernels, ManyThreads) {
  // Large enough for parallelFor to split, dense and sparse.
  uint64_t seed = 300;
  for (const Opt &o : optimizers()) {
    if (o.wd == 0 && o.op != "sgd")
      continue; // keep it fast: sgd without weight decay has its own path
    const int64_t rows = 3000, cols = 16, n = rows * cols;
    OptRun run = startRun(o, DType::F32, {rows, cols}, seed += 3);
    auto &[w, st, rw, r0, r1] = run;
    TestTensor g(DType::F32, {rows, cols}, randomValues(n, seed + 2));
    runOpt(o, w, st, {&g}, 1, /*threads=*/2);
    refStep(o, rw, r0, r1, g.values(), std::vector<bool>(n, true), false, 1);
    expectState(o, DType::F32, w, st, rw, r0, r1, o.name() + " dense");

    // Sparse: every row twice, in a shuffled order.
    int64_t k = 2 * rows;
    std::vector<double> idx(k);
    for (int64_t p = 0; p < k; ++p)
      idx[p] = (double)((p * 7919) % rows);
    TestTensor ti(DType::I64, {k}, idx);
    TestTensor tv(DType::F32, {k, cols}, randomValues(k * cols, seed + 4));
    runOpt(o, w, st, {&ti, &tv}, 2, /*threads=*/2);
    std::vector<double> gs(n, 0.0);
    std::vector<bool> touched(n, false);
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < cols; ++j) {
        gs[(int64_t)idx[p] * cols + j] += tv.get(p * cols + j);
        touched[(int64_t)idx[p] * cols + j] = true;
      }
    refStep(o, rw, r0, r1, gs, touched, true, 2);
    expectState(o, DType::F32, w, st, rw, r0, r1, o.name() + " sparse");
  }
}

//===----------------------------------------------------------------------===//
// 20 f32 steps against PyTorch 1.13 (torch.optim, single-tensor path).
//
// w0[i] = 0.5 cos(0.3 i + 0.1) for a [5, 3] variable, g_t[i] =
// sin(0.37 t + 0.91 i); sparse gradients have indices [t % 5, -1, 2t % 5,
// t % 5] with rows g_t[0..12) (the -1 row dropped before torch sees it).
//===----------------------------------------------------------------------===//

const std::map<std::string, std::vector<double>> &torchValues() {
  static const std::map<std::string, std::vector<double>> values{
      {"adam", {0.42222586274147034, 0.41203030943870544, 0.376636266708374, 0.32727158069610596, 0.19597183167934418, 0.013217305764555931, -0.18977536261081696, -0.36764416098594666, -0.44583961367607117, -0.47155705094337463, -0.42096924781799316, -0.4238700568675995, -0.40045270323753357, -0.3615829646587372, -0.2717028260231018}},
      {"adam_wd", {0.44168537855148315, 0.42116016149520874, 0.3670794367790222, 0.302476167678833, 0.1752469390630722, 0.009586148895323277, -0.1720515787601471, -0.341941237449646, -0.4301399290561676, -0.4734228253364563, -0.43951401114463806, -0.4380381405353546, -0.39792293310165405, -0.3402521312236786, -0.24729090929031372}},
      {"sparse_adam", {0.49098676443099976, 0.458860844373703, 0.39475005865097046, 0.23961827158927917, 0.10960643738508224, -0.00628642039373517, -0.164544478058815, -0.32005664706230164, -0.4099400043487549, -0.4926965832710266, -0.5124269723892212, -0.46769392490386963, -0.4263378381729126, -0.33751723170280457, -0.20099475979804993}},
      {"nesterov", {-0.3480614721775055, -0.06306812912225723, 0.5832487940788269, 1.0385839939117432, 0.8749800324440002, 0.1262340247631073, -0.7299388647079468, -1.1319502592086792, -0.8592543005943298, -0.19468052685260773, 0.30050086975097656, 0.2244419902563095, -0.35312575101852417, -0.9457412958145142, -1.0296064615249634}},
      {"momentum", {0.36558979749679565, 0.2614438533782959, 0.2699563801288605, 0.3311881422996521, 0.32113659381866455, 0.15437939763069153, -0.1416115015745163, -0.43863898515701294, -0.5978407263755798, -0.5688686370849609, -0.42229509353637695, -0.2907903492450714, -0.26489681005477905, -0.3240714371204376, -0.3561766743659973}},
      {"sgd", {0.3636641800403595, 0.2786957621574402, 0.26304638385772705, 0.28053268790245056, 0.24826209247112274, 0.1068657711148262, -0.1261080950498581, -0.3615608215332031, -0.49955567717552185, -0.49919798970222473, -0.40435850620269775, -0.30588796734809875, -0.2698633372783661, -0.28743547201156616, -0.2849413752555847}},
      {"adagrad", {0.18938851356506348, 0.26089754700660706, 0.3207772374153137, 0.45260024070739746, 0.37275028228759766, 0.11996456980705261, -0.24384355545043945, -0.5844072699546814, -0.5847442150115967, -0.5043269991874695, -0.12925423681735992, -0.24983574450016022, -0.29972195625305176, -0.43747907876968384, -0.4785269796848297}},
      {"sparse_adagrad", {0.4390144348144531, 0.3671361207962036, 0.4712810516357422, 0.17842978239059448, 0.0188340675085783, 0.014651055447757244, -0.13253173232078552, -0.4626639783382416, -0.4306357204914093, -0.5679044723510742, -0.6646620035171509, -0.4316502511501312, -0.41392821073532104, -0.3909737467765808, -0.2165486365556717}},
      {"sparse_sgd", {0.45227548480033875, 0.4351853132247925, 0.39653679728507996, 0.24140235781669617, 0.07252928614616394, -0.06099814176559448, -0.17466583847999573, -0.3274383246898651, -0.4282884895801544, -0.5187062621116638, -0.550061821937561, -0.49778541922569275, -0.44340643286705017, -0.3478551208972931, -0.20686137676239014}},
  };
  return values;
}

std::vector<double> torchRun(const Opt &o, bool sparse) {
  const int64_t R = 5, C = 3, n = R * C;
  std::vector<double> w0(n);
  for (int64_t i = 0; i < n; ++i)
    w0[i] = 0.5 * std::cos(0.3 * i + 0.1);
  TestTensor w(DType::F32, {R, C}, w0);
  std::vector<TestTensor> st;
  for (int s = 0; s < o.states(); ++s)
    st.emplace_back(DType::F32, std::vector<int64_t>{R, C}); // zeros
  auto grad = [](int64_t t, int64_t count) {
    std::vector<double> g(count);
    for (int64_t i = 0; i < count; ++i)
      g[i] = std::sin(0.37 * t + 0.91 * i);
    return g;
  };
  for (int64_t t = 1; t <= 20; ++t) {
    if (!sparse) {
      TestTensor g(DType::F32, {R, C}, grad(t, n));
      runOpt(o, w, st, {&g}, t);
    } else {
      TestTensor idx(DType::I64, {4}, {double(t % 5), -1.0, double(2 * t % 5), double(t % 5)});
      TestTensor vals(DType::F32, {4, C}, grad(t, 4 * C));
      runOpt(o, w, st, {&idx, &vals}, t);
    }
  }
  return w.values();
}

TEST(OptimizerKernels, TwentyStepsMatchPyTorch) {
  struct Case {
    const char *key;
    Opt opt;
    bool sparse;
  };
  std::vector<Case> cases{
      {"adam", {"adam", 0.01, 0, 0, 0.9, 0.999, 1e-8}, false},
      {"adam_wd", {"adam", 0.01, 0.05, 0, 0.8, 0.99, 1e-6}, false},
      {"sparse_adam", {"adam", 0.01, 0, 0, 0.9, 0.999, 1e-8}, true},
      {"nesterov", {"momentum", 0.05, 1e-3, 0.9, 0, 0, 0, true}, false},
      {"momentum", {"momentum", 0.05, 0, 0.5}, false},
      {"sgd", {"sgd", 0.05, 0.1}, false},
      {"adagrad", {"adagrad", 0.1, 0.01, 0, 0, 0, 1e-10}, false},
      {"sparse_adagrad", {"adagrad", 0.1, 0, 0, 0, 0, 1e-10}, true},
      {"sparse_sgd", {"sgd", 0.05}, true},
  };
  for (const Case &c : cases)
    expectNear(torchRun(c.opt, c.sparse), torchValues().at(c.key), 1e-6, 1e-8, c.key);
}

//===----------------------------------------------------------------------===//
// assign and errors
//===----------------------------------------------------------------------===//

TEST(OptimizerKernels, AssignCopiesEveryType) {
  for (DType dt : {DType::F32, DType::F64, DType::I64, DType::I32, DType::Bool}) {
    std::vector<double> v = dt == DType::Bool ? std::vector<double>{1, 0, 1, 1, 0, 0}
                                              : std::vector<double>{1, -2, 3, 4, 5, -6};
    TestTensor var(dt, {2, 3}, std::vector<double>(6, 0.0)), value(dt, {2, 3}, v);
    runKernel("assign", {&var, &value}, {});
    EXPECT_EQ(var.values(), value.values()) << nameOf(dt);
  }
  TestTensor var(DType::F32, {2, 3}), value(DType::F32, {3, 2}), v64(DType::F64, {2, 3});
  EXPECT_NE(kernelError("assign", {&var, &value}, {}).find("value must have the variable's shape [2, 3]"),
            std::string::npos);
  EXPECT_NE(kernelError("assign", {&var, &v64}, {}).find("value must be f32"), std::string::npos);
}

TEST(OptimizerKernels, Errors) {
  TestTensor w(DType::F32, {4, 2}), g(DType::F32, {4, 2}), m(DType::F32, {4, 2}),
      v(DType::F32, {4, 2});
  json adam{{"lr", 0.1}, {"beta1", 0.9}, {"beta2", 0.999}, {"epsilon", 1e-8}};
  EXPECT_EQ(kernelError("adam", {&w, &m, &v, &g}, {}, adam), "");
  // Sparse indices out of range name the index; -1 is fine, -2 is not.
  TestTensor vals(DType::F32, {3, 2});
  for (double bad : {4.0, -2.0, 100.0}) {
    TestTensor idx(DType::I64, {3}, {0, -1, bad});
    std::string e = kernelError("adam", {&w, &m, &v, &idx, &vals}, {}, adam);
    EXPECT_NE(e.find("index " + std::to_string((int64_t)bad) + " at position 2"),
              std::string::npos) << e;
    EXPECT_NE(e.find("[0, 4)"), std::string::npos) << e;
    EXPECT_NE(kernelError("sgd", {&w, &idx, &vals}, {}, {{"lr", 0.1}}).find("out of range"),
              std::string::npos);
  }
  // Attributes.
  json noLr = adam;
  noLr.erase("lr");
  EXPECT_NE(kernelError("adam", {&w, &m, &v, &g}, {}, noLr).find("'lr'"), std::string::npos);
  json badBeta = adam;
  badBeta["beta2"] = 1.0;
  EXPECT_NE(kernelError("adam", {&w, &m, &v, &g}, {}, badBeta).find("beta2 must be in [0, 1)"),
            std::string::npos);
  json badEps = adam;
  badEps["epsilon"] = 0.0;
  EXPECT_NE(kernelError("adam", {&w, &m, &v, &g}, {}, badEps).find("epsilon must be > 0"),
            std::string::npos);
  EXPECT_NE(kernelError("sgd", {&w, &g}, {}, {{"lr", -1.0}}).find("lr must be >= 0"),
            std::string::npos);
  EXPECT_NE(kernelError("momentum", {&w, &m, &g}, {}, {{"lr", 0.1}}).find("'momentum'"),
            std::string::npos);
  EXPECT_NE(kernelError("adagrad", {&w, &m, &g}, {}, {{"lr", 0.1}}).find("'epsilon'"),
            std::string::npos);
  // Shapes, dtypes and operand counts.
  TestTensor g2(DType::F32, {2, 4}), g64(DType::F64, {4, 2}), m3(DType::F32, {4, 3});
  EXPECT_NE(kernelError("sgd", {&w, &g2}, {}, {{"lr", 0.1}}).find("grad must have the variable's shape"),
            std::string::npos);
  EXPECT_NE(kernelError("sgd", {&w, &g64}, {}, {{"lr", 0.1}}).find("grad must be f32"),
            std::string::npos);
  EXPECT_NE(kernelError("adam", {&w, &m3, &v, &g}, {}, adam).find("m must have the variable's shape"),
            std::string::npos);
  EXPECT_NE(kernelError("adam", {&w, &m, &g}, {}, adam).find("expects 4 inputs"),
            std::string::npos);
  TestTensor idx32(DType::I32, {3}), idx(DType::I64, {3}), valsBad(DType::F32, {3, 3});
  EXPECT_NE(kernelError("sgd", {&w, &idx32, &vals}, {}, {{"lr", 0.1}}).find("indices must be i64"),
            std::string::npos);
  EXPECT_NE(kernelError("sgd", {&w, &idx, &valsBad}, {}, {{"lr", 0.1}}).find("rows must have shape [3, 2]"),
            std::string::npos);
  TestTensor wh(DType::F16, {4, 2}), gh(DType::F16, {4, 2});
  EXPECT_NE(kernelError("sgd", {&wh, &gh}, {}, {{"lr", 0.1}}).find("f16 is not supported"),
            std::string::npos);
  TestTensor wi(DType::I32, {4, 2}), gi(DType::I32, {4, 2});
  EXPECT_NE(kernelError("sgd", {&wi, &gi}, {}, {{"lr", 0.1}}).find("f32 or f64"),
            std::string::npos);
  // Adam needs a step number.
  ExecEnv env;
  env.step = -1;
  try {
    runKernel("adam", {&w, &m, &v, &g}, {}, adam, env);
    ADD_FAILURE() << "adam ran at step -1";
  } catch (const KernelError &e) {
    EXPECT_NE(std::string(e.what()).find("step number must be >= 1"), std::string::npos);
  }
}

// A sharded update (shard_offset, shard_state) in a world of one: rank 0
// owns the whole bucket, so it updates every element, exactly as the plain
// kernel does, and reads and writes the state where the variable lies in the
// bucket's block (here 16 elements in, a block of 32).
TEST(OptimizerKernels, ShardedAdamMatchesPlainAndUsesTheBlocksState) {
  auto comm = makeLocalComm();
  ExecEnv env;
  env.comm = comm.get();
  json attrs{{"lr", 0.01}, {"beta1", 0.9}, {"beta2", 0.999}, {"epsilon", 1e-8}};
  auto w0 = randomValues(8, 1), g0 = randomValues(8, 2);
  TestTensor w(DType::F32, {4, 2}, w0), m(DType::F32, {4, 2}), v(DType::F32, {4, 2}),
      g(DType::F32, {4, 2}, g0);
  runKernel("adam", {&w, &m, &v, &g}, {}, attrs, env);
  TestTensor ws(DType::F32, {4, 2}, w0), ms(DType::F32, {32}), vs(DType::F32, {32}),
      gs(DType::F32, {4, 2}, g0);
  json sharded = attrs;
  sharded["shard_offset"] = 64;
  sharded["shard_bytes"] = 128;
  sharded["shard_state"] = true;
  runKernel("adam", {&ws, &ms, &vs, &gs}, {}, sharded, env);
  for (int64_t i = 0; i < 8; ++i) {
    EXPECT_EQ(ws.get(i), w.get(i)) << i;
    EXPECT_EQ(ms.get(16 + i), m.get(i)) << i;
    EXPECT_EQ(vs.get(16 + i), v.get(i)) << i;
  }
  for (int64_t i : {0, 15, 24, 31})
    EXPECT_EQ(ms.get(i), 0.0) << i;
  // The state must be one block; shard_state needs shard_offset.
  TestTensor m8(DType::F32, {4, 2});
  try {
    runKernel("adam", {&ws, &m8, &vs, &gs}, {}, sharded, env);
    ADD_FAILURE() << "no error";
  } catch (const KernelError &e) {
    EXPECT_NE(std::string(e.what()).find("m must have one block's shape [32], got [4, 2]"),
              std::string::npos)
        << e.what();
  }
  json noOffset = sharded;
  noOffset.erase("shard_offset");
  EXPECT_NE(kernelError("adam", {&ws, &ms, &vs, &gs}, {}, noOffset)
                .find("shard_state needs a dense gradient and shard_offset"),
            std::string::npos);
}

} // namespace
