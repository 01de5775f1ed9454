// Tests of the Norm kernels (softmax, log_softmax and their gradients,
// layer_norm, batch_norm and their gradients) against naive references and,
// for the gradients, against finite differences of the forward kernels.
#include "KernelTestCases.h"

#include <cmath>
#include <functional>

using namespace parallax::rt;
using namespace parallax::rt::test;
using namespace parallax::rt::test::cases;

namespace {

double tolR(DType dt) { return dt == DType::F32 ? 2e-5 : 1e-11; }
double tolA(DType dt) { return dt == DType::F32 ? 2e-6 : 1e-12; }

/// Mean and biased variance of row `r` of a [rows, len] array, summed in
/// row order.
std::pair<double, double> rowMoments(const std::vector<double> &xv, int64_t r, int64_t len) {
  double mu = 0, var = 0;
  for (int64_t j = 0; j < len; ++j)
    mu += xv[r * len + j] / len;
  for (int64_t j = 0; j < len; ++j)
    var += std::pow(xv[r * len + j] - mu, 2) / len;
  return {mu, var};
}

/// Calls f(base offset, stride, length) for every line along `axis`.
void forLines(const std::vector<int64_t> &shape, int64_t axis,
              const std::function<void(int64_t, int64_t, int64_t)> &f) {
  int64_t outer = numel(shape, 0, axis), len = shape[axis],
          inner = numel(shape, axis + 1);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i)
      f(o * len * inner + i, inner, len);
}

std::vector<double> refSoftmax(const std::vector<int64_t> &shape, int64_t axis,
                               const std::vector<double> &x, bool log) {
  std::vector<double> y(x.size());
  forLines(shape, axis, [&](int64_t b, int64_t s, int64_t n) {
    double mx = -INFINITY;
    for (int64_t j = 0; j < n; ++j)
      mx = std::max(mx, x[b + j * s]);
    double sum = 0;
    for (int64_t j = 0; j < n; ++j)
      sum += std::exp(x[b + j * s] - mx);
    for (int64_t j = 0; j < n; ++j)
      y[b + j * s] = log ? x[b + j * s] - mx - std::log(sum)
                         : std::exp(x[b + j * s] - mx) / sum;
  });
  return y;
}

void checkSoftmax(DType dt, std::vector<int64_t> shape, int64_t axis,
                  bool setAxis = true, double scale = 3.0, int threads = 1) {
  SCOPED_TRACE(::testing::Message() << nameOf(dt) << " "
                                    << ::testing::PrintToString(shape)
                                    << " axis " << axis);
  int64_t a = axis < 0 ? axis + (int64_t)shape.size() : axis;
  TestTensor x(dt, shape, randomValues(numel(shape), 21, -scale, scale));
  nlohmann::json attrs = nlohmann::json::object();
  if (setAxis)
    attrs["axis"] = axis;
  ExecEnv env;
  env.threads = threads;
  for (bool log : {false, true}) {
    TestTensor y(dt, shape);
    runKernel(log ? "log_softmax" : "softmax", {&x}, {&y}, attrs, env);
    expectNear(y.values(), refSoftmax(shape, a, x.values(), log), tolR(dt),
               tolA(dt), log ? "log_softmax" : "softmax");
  }
  // Gradients: against the formula on doubles.
  auto yv = refSoftmax(shape, a, x.values(), false);
  auto lv = refSoftmax(shape, a, x.values(), true);
  TestTensor dy(dt, shape, randomValues(numel(shape), 22));
  for (bool log : {false, true}) {
    TestTensor y(dt, shape, log ? lv : yv), dx(dt, shape);
    runKernel(log ? "log_softmax_grad" : "softmax_grad", {&y, &dy}, {&dx}, attrs,
              env);
    std::vector<double> ref(yv.size()), yy = y.values(), d = dy.values();
    forLines(shape, a, [&](int64_t b, int64_t s, int64_t n) {
      double sum = 0;
      for (int64_t j = 0; j < n; ++j)
        sum += log ? d[b + j * s] : d[b + j * s] * yy[b + j * s];
      for (int64_t j = 0; j < n; ++j)
        ref[b + j * s] = log ? d[b + j * s] - std::exp(yy[b + j * s]) * sum
                             : yy[b + j * s] * (d[b + j * s] - sum);
    });
    expectNear(dx.values(), ref, tolR(dt), tolA(dt),
               log ? "log_softmax_grad" : "softmax_grad");
  }
}

TEST(NormKernels, SoftmaxAndLogSoftmaxAlongOneAxis) {
  for (DType dt : {DType::F32, DType::F64}) {
    checkSoftmax(dt, {4, 7}, -1);
    checkSoftmax(dt, {4, 7}, 1);
    checkSoftmax(dt, {4, 7}, 0);
    checkSoftmax(dt, {2, 3, 4}, 1);
    checkSoftmax(dt, {2, 3, 4}, -3);
    checkSoftmax(dt, {2, 3, 4}, 2);
    checkSoftmax(dt, {5}, 0);
    checkSoftmax(dt, {3, 1}, 1);
    checkSoftmax(dt, {2, 3, 4}, -1, /*setAxis=*/false); // default -1
  }
  // Large logits must not overflow: the max is subtracted.
  checkSoftmax(DType::F32, {3, 9}, -1, true, 500.0);
  checkSoftmax(DType::F64, {3, 9, 2}, 1, true, 2000.0);
  checkSoftmax(DType::F32, {64, 100}, -1, true, 3.0, /*threads=*/2);
  checkSoftmax(DType::F64, {8, 100, 16}, 1, true, 3.0, /*threads=*/2);
}

TEST(NormKernels, SoftmaxMaskedAndNaNRows) {
  // -inf (a masked position) gives exactly 0; a NaN poisons its row only.
  for (DType dt : {DType::F32, DType::F64}) {
    std::vector<double> v = {-INFINITY, 0.5, 1.5, -INFINITY, 2, 0, -3, 1, 0.25,
                             NAN,       1,   2,   3,         4, 5, 6, 7, 8};
    TestTensor x(dt, {2, 9}, v), y(dt, {2, 9}), l(dt, {2, 9});
    runKernel("softmax", {&x}, {&y});
    runKernel("log_softmax", {&x}, {&l});
    std::vector<double> row(v.begin(), v.begin() + 9);
    auto ref = refSoftmax({1, 9}, 1, row, false);
    auto lref = refSoftmax({1, 9}, 1, row, true);
    for (int j = 0; j < 9; ++j) {
      EXPECT_NEAR(y.get(j), ref[j], 1e-6) << j;
      if (std::isinf(v[j])) {
        EXPECT_EQ(y.get(j), 0.0);
        EXPECT_TRUE(std::isinf(l.get(j)) && l.get(j) < 0);
      } else {
        EXPECT_NEAR(l.get(j), lref[j], 1e-5) << j;
      }
      EXPECT_TRUE(std::isnan(y.get(9 + j))) << j;
      EXPECT_TRUE(std::isnan(l.get(9 + j))) << j;
    }
  }
}

TEST(NormKernels, SoftmaxGradMatchesFiniteDifferences) {
  // d/dx sum(w * softmax(x)) by central differences, in f64.
  std::vector<int64_t> shape{3, 4, 2};
  for (int64_t axis : {1, -1, 0})
    for (bool log : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "axis " << axis << " log " << log);
      const char *fwd = log ? "log_softmax" : "softmax";
      TestTensor x(DType::F64, shape, randomValues(24, 31));
      TestTensor w(DType::F64, shape, randomValues(24, 32));
      TestTensor y(DType::F64, shape), dx(DType::F64, shape);
      runKernel(fwd, {&x}, {&y}, {{"axis", axis}});
      runKernel(log ? "log_softmax_grad" : "softmax_grad", {&y, &w}, {&dx},
                {{"axis", axis}});
      std::vector<double> fd(24);
      for (int i = 0; i < 24; ++i) {
        double l[2];
        for (int sgn = 0; sgn < 2; ++sgn) {
          TestTensor xp = x, yp(DType::F64, shape);
          xp.set(i, x.get(i) + (sgn ? -1e-6 : 1e-6));
          runKernel(fwd, {&xp}, {&yp}, {{"axis", axis}});
          l[sgn] = 0;
          for (int j = 0; j < 24; ++j)
            l[sgn] += w.get(j) * yp.get(j);
        }
        fd[i] = (l[0] - l[1]) / 2e-6;
      }
      expectNear(dx.values(), fd, 1e-6, 1e-8);
    }
}

TEST(NormKernels, SoftmaxErrors) {
  TestTensor x(DType::F32, {2, 3}), y(DType::F32, {2, 3});
  EXPECT_NE(kernelError("softmax", {&x}, {&y}, {{"axis", 2}}).find("axis 2"),
            std::string::npos);
  EXPECT_NE(kernelError("log_softmax", {&x}, {&y}, {{"axis", -3}}).find("axis -3"),
            std::string::npos);
  TestTensor h(DType::F16, {2, 3}), hy(DType::F16, {2, 3});
  EXPECT_NE(kernelError("softmax", {&h}, {&hy}).find("not supported"),
            std::string::npos);
  TestTensor dy(DType::F32, {3, 2});
  EXPECT_NE(kernelError("softmax_grad", {&x, &dy}, {&y}).find("dy"),
            std::string::npos);
  TestTensor yd(DType::F64, {2, 3});
  EXPECT_NE(kernelError("softmax", {&x}, {&yd}).find("result"), std::string::npos);
  EXPECT_EQ(kernelError("log_softmax_grad", {&x, &x}, {&y}), "");
}

//===----------------------------------------------------------------------===//
// layer_norm
//===----------------------------------------------------------------------===//

/// Index of a normalised flat position j in a parameter of shape `ps`
/// broadcast (numpy) to `ns`.
int64_t paramIndex(const std::vector<int64_t> &ps, const std::vector<int64_t> &ns,
                   int64_t j) {
  int64_t nr = (int64_t)ns.size(), pr = (int64_t)ps.size();
  std::vector<int64_t> c(nr);
  for (int64_t d = nr - 1; d >= 0; --d) {
    c[d] = j % ns[d];
    j /= ns[d];
  }
  int64_t off = 0;
  for (int64_t d = 0; d < pr; ++d)
    off = off * ps[d] + (ps[d] == 1 ? 0 : c[nr - pr + d]);
  return off;
}

void checkLayerNorm(DType dt, const LnCase &c, double eps, bool setEps,
                    int threads = 1) {
  SCOPED_TRACE(::testing::Message()
               << nameOf(dt) << " x " << ::testing::PrintToString(c.x) << " axis "
               << c.axis << " scale " << ::testing::PrintToString(c.scale)
               << " bias " << c.bias);
  int64_t rank = (int64_t)c.x.size(), a = c.axis < 0 ? c.axis + rank : c.axis;
  std::vector<int64_t> ns(c.x.begin() + a, c.x.end()), stats = c.x;
  for (int64_t d = a; d < rank; ++d)
    stats[d] = 1;
  int64_t rows = numel(c.x, 0, a), len = numel(ns);
  TestTensor x(dt, c.x, randomValues(numel(c.x), 41, -2, 3));
  TestTensor scale(dt, c.scale, randomValues(numel(c.scale), 42));
  TestTensor bias = c.bias ? TestTensor(dt, c.biasShape,
                                        randomValues(numel(c.biasShape), 43))
                           : TestTensor::none();
  TestTensor y(dt, c.x), mean(dt, stats), inv(dt, stats);
  nlohmann::json attrs = {{"axis", c.axis}};
  if (setEps)
    attrs["epsilon"] = eps;
  std::vector<TestTensor *> ins{&x, &scale};
  if (c.bias)
    ins.push_back(&bias);
  ExecEnv env;
  env.threads = threads;
  runKernel("layer_norm", ins, {&y, &mean, &inv}, attrs, env);
  auto xv = x.values(), sv = scale.values();
  std::vector<double> bv = c.bias ? bias.values() : std::vector<double>{};
  std::vector<double> ry(xv.size()), rm(rows), ri(rows);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0, q = 0;
    for (int64_t j = 0; j < len; ++j)
      s += xv[r * len + j];
    double mu = s / len;
    for (int64_t j = 0; j < len; ++j)
      q += (xv[r * len + j] - mu) * (xv[r * len + j] - mu);
    double is = 1 / std::sqrt(q / len + eps);
    rm[r] = mu;
    ri[r] = is;
    for (int64_t j = 0; j < len; ++j)
      ry[r * len + j] = (xv[r * len + j] - mu) * is * sv[paramIndex(c.scale, ns, j)] +
                        (c.bias ? bv[paramIndex(c.biasShape, ns, j)] : 0.0);
  }
  expectNear(y.values(), ry, tolR(dt), 1e-5 * (dt == DType::F32) + tolA(dt), "y");
  expectNear(mean.values(), rm, tolR(dt), tolA(dt), "mean");
  expectNear(inv.values(), ri, tolR(dt), tolA(dt), "inv_std_dev");
}

TEST(NormKernels, LayerNormMatchesReference) {
  for (DType dt : {DType::F32, DType::F64})
    for (const LnCase &c : kLnCases) {
      checkLayerNorm(dt, c, 1e-5, false); // default epsilon
      checkLayerNorm(dt, c, 0.25, true);
    }
  checkLayerNorm(DType::F32, {{64, 256}, -1, {256}, true, {256}}, 1e-5, true, 2);
}

/// d/d(input i) of sum(w * y) for layer_norm, by central differences (f64).
TEST(NormKernels, LayerNormGradMatchesFiniteDifferences) {
  for (const LnCase &c : kLnCases) {
    SCOPED_TRACE(::testing::Message()
                 << "x " << ::testing::PrintToString(c.x) << " axis " << c.axis
                 << " scale " << ::testing::PrintToString(c.scale));
    int64_t rank = (int64_t)c.x.size(), a = c.axis < 0 ? c.axis + rank : c.axis;
    std::vector<int64_t> stats = c.x;
    for (int64_t d = a; d < rank; ++d)
      stats[d] = 1;
    DType dt = DType::F64;
    TestTensor x(dt, c.x, randomValues(numel(c.x), 51, -2, 2));
    TestTensor scale(dt, c.scale, randomValues(numel(c.scale), 52));
    TestTensor bias(dt, c.scale, randomValues(numel(c.scale), 53));
    TestTensor w(dt, c.x, randomValues(numel(c.x), 54));
    nlohmann::json attrs = {{"axis", c.axis}, {"epsilon", 0.01}};
    auto loss = [&](TestTensor &xx, TestTensor &ss, TestTensor &bb) {
      TestTensor y(dt, c.x), m(dt, stats), iv(dt, stats);
      runKernel("layer_norm", {&xx, &ss, &bb}, {&y, &m, &iv}, attrs);
      double l = 0;
      for (int64_t i = 0; i < y.numElements(); ++i)
        l += w.get(i) * y.get(i);
      return l;
    };
    auto fdOf = [&](TestTensor &t) {
      return centralDifferences(t, [&] { return loss(x, scale, bias); });
    };
    TestTensor y(dt, c.x), mean(dt, stats), inv(dt, stats);
    runKernel("layer_norm", {&x, &scale, &bias}, {&y, &mean, &inv}, attrs);
    for (int threads : {1, 2}) {
      TestTensor dx(dt, c.x), ds(dt, c.scale), db(dt, c.scale);
      ExecEnv env;
      env.threads = threads;
      runKernel("layer_norm_grad", {&w, &x, &scale, &mean, &inv}, {&dx, &ds, &db},
                {{"axis", c.axis}}, env);
      expectNear(dx.values(), fdOf(x), 1e-6, 1e-7, "dx");
      expectNear(ds.values(), fdOf(scale), 1e-6, 1e-7, "dscale");
      expectNear(db.values(), fdOf(bias), 1e-6, 1e-7, "dbias");
    }
  }
}

TEST(NormKernels, LayerNormGradLargeMatchesReference) {
  // Large enough for several row chunks with two threads; the reference is
  // the closed form on doubles (validated by finite differences above).
  int64_t rows = 160, len = 256;
  std::vector<int64_t> xs{rows, len}, ss{len};
  for (DType dt : {DType::F32, DType::F64}) {
    SCOPED_TRACE(nameOf(dt));
    TestTensor x(dt, xs, randomValues(rows * len, 61, -2, 2)),
        s(dt, ss, randomValues(len, 62)), dy(dt, xs, randomValues(rows * len, 63));
    TestTensor y(dt, xs), m(dt, {rows, 1}), iv(dt, {rows, 1});
    runKernel("layer_norm", {&x, &s}, {&y, &m, &iv});
    TestTensor dx(dt, xs), ds(dt, ss), db(dt, ss);
    ExecEnv env;
    env.threads = 2;
    runKernel("layer_norm_grad", {&dy, &x, &s, &m, &iv}, {&dx, &ds, &db}, {}, env);
    auto xv = x.values(), sv = s.values(), dv = dy.values();
    std::vector<double> rdx(rows * len), rds(len, 0.0), rdb(len, 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      auto [mu, var] = rowMoments(xv, r, len);
      double is = 1 / std::sqrt(var + 1e-5), mg = 0, mgx = 0;
      for (int64_t j = 0; j < len; ++j) {
        double xh = (xv[r * len + j] - mu) * is, g = dv[r * len + j] * sv[j];
        mg += g / len;
        mgx += g * xh / len;
        rds[j] += dv[r * len + j] * xh;
        rdb[j] += dv[r * len + j];
      }
      for (int64_t j = 0; j < len; ++j) {
        double xh = (xv[r * len + j] - mu) * is;
        rdx[r * len + j] = is * (dv[r * len + j] * sv[j] - mg - xh * mgx);
      }
    }
    double rt = dt == DType::F32 ? 1e-4 : 1e-10, at = dt == DType::F32 ? 1e-4 : 1e-10;
    expectNear(dx.values(), rdx, rt, at, "dx");
    expectNear(ds.values(), rds, rt, at, "dscale");
    expectNear(db.values(), rdb, rt, at, "dbias");
  }
}

TEST(NormKernels, F32StatisticsOfOffsetData) {
  // Data far from zero: means and variances must not lose digits.
  int64_t rows = 6, len = 1000;
  auto v = randomValues(rows * len, 141, 999, 1001);
  TestTensor x(DType::F32, {rows, len}, v), s(DType::F32, {len}, std::vector<double>(len, 1.0));
  TestTensor y(DType::F32, {rows, len}), m(DType::F32, {rows, 1}), iv(DType::F32, {rows, 1});
  runKernel("layer_norm", {&x, &s}, {&y, &m, &iv});
  auto xv = x.values();
  std::vector<double> ry(rows * len), rm(rows), ri(rows);
  for (int64_t r = 0; r < rows; ++r) {
    auto [mu, var] = rowMoments(xv, r, len);
    rm[r] = mu;
    ri[r] = 1 / std::sqrt(var + 1e-5);
    for (int64_t j = 0; j < len; ++j)
      ry[r * len + j] = (xv[r * len + j] - mu) * ri[r];
  }
  expectNear(m.values(), rm, 1e-7, 0, "mean");
  expectNear(iv.values(), ri, 1e-5, 0, "inv_std_dev");
  // x itself is only known to ~6e-5 at 1000: y to about that.
  expectNear(y.values(), ry, 0, 2e-4, "y");
  // batch_norm over the same values as [rows, 1, len]: one channel.
  TestTensor xb(DType::F32, {rows, 1, len}, xv), one(DType::F32, {1}, {1.0}),
      zero(DType::F32, {1}, {0.0}), yb(DType::F32, {rows, 1, len}),
      rmb(DType::F32, {1}), rvb(DType::F32, {1});
  runKernel("batch_norm", {&xb, &one, &zero, &zero, &one}, {&yb, &rmb, &rvb},
            {{"training", true}, {"momentum", 0.0}});
  double mu = 0, var = 0;
  for (double t : xv)
    mu += t / (double)xv.size();
  for (double t : xv)
    var += (t - mu) * (t - mu) / (double)xv.size();
  EXPECT_NEAR(rmb.get(0), mu, 1e-7 * mu);
  EXPECT_NEAR(rvb.get(0), var, 1e-5 * var);
}

TEST(NormKernels, LayerNormErrors) {
  TestTensor x(DType::F32, {2, 3}), s(DType::F32, {3}), y(DType::F32, {2, 3}),
      m(DType::F32, {2, 1}), iv(DType::F32, {2, 1});
  EXPECT_EQ(kernelError("layer_norm", {&x, &s}, {&y, &m, &iv}), "");
  TestTensor bad(DType::F32, {2});
  EXPECT_NE(kernelError("layer_norm", {&x, &bad}, {&y, &m, &iv}).find("does not broadcast"),
            std::string::npos);
  EXPECT_NE(kernelError("layer_norm", {&x, &s, &bad}, {&y, &m, &iv}).find("bias"),
            std::string::npos);
  TestTensor big(DType::F32, {2, 3});
  EXPECT_NE(kernelError("layer_norm", {&x, &big}, {&y, &m, &iv}).find("does not broadcast"),
            std::string::npos);
  EXPECT_NE(kernelError("layer_norm", {&x, &s}, {&y, &m, &iv}, {{"axis", 2}}).find("axis 2"),
            std::string::npos);
  TestTensor m2(DType::F32, {1, 2});
  EXPECT_NE(kernelError("layer_norm", {&x, &s}, {&y, &m2, &iv}).find("mean"),
            std::string::npos);
  TestTensor sd(DType::F64, {3});
  EXPECT_NE(kernelError("layer_norm", {&x, &sd}, {&y, &m, &iv}).find("scale"),
            std::string::npos);
  TestTensor dx(DType::F32, {2, 3}), ds(DType::F32, {3}), db(DType::F32, {3});
  EXPECT_EQ(kernelError("layer_norm_grad", {&y, &x, &s, &m, &iv}, {&dx, &ds, &db}), "");
  EXPECT_NE(kernelError("layer_norm_grad", {&y, &x, &s, &m2, &iv}, {&dx, &ds, &db})
                .find("mean"),
            std::string::npos);
  TestTensor ds2(DType::F32, {1, 3});
  EXPECT_NE(kernelError("layer_norm_grad", {&y, &x, &s, &m, &iv}, {&dx, &ds2, &db})
                .find("dscale"),
            std::string::npos);
  TestTensor h(DType::F16, {2, 3});
  EXPECT_NE(kernelError("layer_norm", {&h, &s}, {&y, &m, &iv}).find("not supported"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// batch_norm
//===----------------------------------------------------------------------===//

void checkBatchNorm(DType dt, std::vector<int64_t> xs, bool training,
                    bool setAttrs, int threads = 1, bool unbiased = false) {
  SCOPED_TRACE(::testing::Message() << nameOf(dt) << " x "
                                    << ::testing::PrintToString(xs)
                                    << " training " << training << " unbiased " << unbiased);
  int64_t n = xs[0], c = xs[1], sp = numel(xs, 2);
  double eps = setAttrs ? 0.1 : 1e-5, mom = setAttrs ? 0.7 : 0.9;
  TestTensor x(dt, xs, randomValues(numel(xs), 71, -1, 3));
  TestTensor s(dt, {c}, randomValues(c, 72)), b(dt, {c}, randomValues(c, 73)),
      im(dt, {c}, randomValues(c, 74)), iv(dt, {c}, randomValues(c, 75, 0.5, 2));
  TestTensor y(dt, xs), rm(dt, {c}), rv(dt, {c});
  nlohmann::json attrs = nlohmann::json::object();
  if (setAttrs) {
    attrs["epsilon"] = eps;
    attrs["momentum"] = mom;
  }
  if (training)
    attrs["training"] = true;
  if (unbiased)
    attrs["unbiased_running_var"] = true;
  ExecEnv env;
  env.threads = threads;
  runKernel("batch_norm", {&x, &s, &b, &im, &iv}, {&y, &rm, &rv}, attrs, env);
  auto xv = x.values();
  std::vector<double> ry(xv.size()), rrm(c), rrv(c);
  for (int64_t ch = 0; ch < c; ++ch) {
    double mu = 0, var = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < sp; ++j)
        mu += xv[(i * c + ch) * sp + j];
    mu /= n * sp;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < sp; ++j)
        var += std::pow(xv[(i * c + ch) * sp + j] - mu, 2);
    var /= n * sp; // biased, as ONNX's reference
    double useMean = training ? mu : im.get(ch), useVar = training ? var : iv.get(ch);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < sp; ++j) {
        int64_t k = (i * c + ch) * sp + j;
        ry[k] = s.get(ch) * (xv[k] - useMean) / std::sqrt(useVar + eps) + b.get(ch);
      }
    rrm[ch] = training ? mom * im.get(ch) + (1 - mom) * mu : im.get(ch);
    // PyTorch's running variance: the unbiased batch variance.
    double runningVar = unbiased ? var * (n * sp) / (n * sp - 1) : var;
    rrv[ch] = training ? mom * iv.get(ch) + (1 - mom) * runningVar : iv.get(ch);
  }
  expectNear(y.values(), ry, tolR(dt), 1e-5 * (dt == DType::F32) + tolA(dt), "y");
  expectNear(rm.values(), rrm, tolR(dt), tolA(dt), "running_mean");
  expectNear(rv.values(), rrv, tolR(dt), tolA(dt), "running_var");
}

TEST(NormKernels, BatchNormTrainingAndInference) {
  for (DType dt : {DType::F32, DType::F64})
    for (bool training : {true, false})
      for (bool setAttrs : {true, false}) {
        checkBatchNorm(dt, {2, 3, 4, 5}, training, setAttrs);
        checkBatchNorm(dt, {5, 3}, training, setAttrs);
        checkBatchNorm(dt, {2, 4, 3}, training, setAttrs);
        checkBatchNorm(dt, {1, 1, 2, 2, 2}, training, setAttrs);
      }
  checkBatchNorm(DType::F32, {8, 16, 12, 12}, true, true, 2);
  checkBatchNorm(DType::F64, {8, 16, 12, 12}, false, true, 2);
}

TEST(NormKernels, BatchNormUnbiasedRunningVariance) {
  // n / (n - 1) on the running variance only (8/7 for a batch of 8 1x1 maps).
  for (DType dt : {DType::F32, DType::F64}) {
    checkBatchNorm(dt, {8, 3, 1, 1}, true, true, 1, true);
    checkBatchNorm(dt, {2, 3, 4, 5}, true, false, 2, true);
    checkBatchNorm(dt, {2, 3, 4, 5}, false, false, 1, true); // inference: unchanged
  }
  TestTensor x(DType::F32, {1, 3}), c3(DType::F32, {3}), y(DType::F32, {1, 3}),
      rm(DType::F32, {3}), rv(DType::F32, {3});
  EXPECT_NE(kernelError("batch_norm", {&x, &c3, &c3, &c3, &c3}, {&y, &rm, &rv},
                        {{"training", true}, {"unbiased_running_var", true}})
                .find("the unbiased running variance needs more than 1 value per channel"),
            std::string::npos);
}

TEST(NormKernels, BatchNormGradMatchesFiniteDifferences) {
  for (std::vector<int64_t> xs :
       std::vector<std::vector<int64_t>>{{2, 3, 2, 2}, {4, 2}, {3, 2, 3}}) {
    SCOPED_TRACE(::testing::PrintToString(xs));
    DType dt = DType::F64;
    int64_t c = xs[1];
    TestTensor x(dt, xs, randomValues(numel(xs), 81, -1, 2));
    TestTensor s(dt, {c}, randomValues(c, 82)), b(dt, {c}, randomValues(c, 83));
    TestTensor im(dt, {c}), iv(dt, {c}, std::vector<double>(c, 1.0));
    TestTensor w(dt, xs, randomValues(numel(xs), 84));
    nlohmann::json attrs = {{"epsilon", 0.01}, {"training", true}};
    auto loss = [&] {
      TestTensor y(dt, xs), rm(dt, {c}), rv(dt, {c});
      runKernel("batch_norm", {&x, &s, &b, &im, &iv}, {&y, &rm, &rv}, attrs);
      double l = 0;
      for (int64_t i = 0; i < y.numElements(); ++i)
        l += w.get(i) * y.get(i);
      return l;
    };
    auto fdOf = [&](TestTensor &t) { return centralDifferences(t, loss); };
    for (int threads : {1, 2}) {
      TestTensor dx(dt, xs), ds(dt, {c}), db(dt, {c});
      ExecEnv env;
      env.threads = threads;
      runKernel("batch_norm_grad", {&w, &x, &s}, {&dx, &ds, &db},
                {{"epsilon", 0.01}}, env);
      expectNear(dx.values(), fdOf(x), 1e-6, 1e-7, "dx");
      expectNear(ds.values(), fdOf(s), 1e-6, 1e-7, "dscale");
      expectNear(db.values(), fdOf(b), 1e-6, 1e-7, "dbias");
    }
  }
  // f32 against f64 on a larger tensor.
  std::vector<int64_t> xs{4, 8, 6, 6};
  auto xv = randomValues(numel(xs), 91, -1, 2), dv = randomValues(numel(xs), 92),
       sv = randomValues(8, 93);
  std::vector<double> out[2][3];
  int k = 0;
  for (DType dt : {DType::F32, DType::F64}) {
    TestTensor x(dt, xs, xv), dy(dt, xs, dv), s(dt, {8}, sv);
    xv = x.values(), dv = dy.values(), sv = s.values();
    TestTensor dx(dt, xs), ds(dt, {8}), db(dt, {8});
    runKernel("batch_norm_grad", {&dy, &x, &s}, {&dx, &ds, &db});
    out[k][0] = dx.values(), out[k][1] = ds.values(), out[k][2] = db.values();
    ++k;
  }
  for (int i = 0; i < 3; ++i)
    expectNear(out[0][i], out[1][i], 1e-4, 1e-4);
}

TEST(NormKernels, BatchNormErrors) {
  TestTensor x(DType::F32, {2, 3, 4}), c3(DType::F32, {3}), y(DType::F32, {2, 3, 4}),
      rm(DType::F32, {3}), rv(DType::F32, {3});
  EXPECT_EQ(kernelError("batch_norm", {&x, &c3, &c3, &c3, &c3}, {&y, &rm, &rv}), "");
  TestTensor c4(DType::F32, {4});
  EXPECT_NE(kernelError("batch_norm", {&x, &c3, &c4, &c3, &c3}, {&y, &rm, &rv}).find("bias"),
            std::string::npos);
  EXPECT_NE(kernelError("batch_norm", {&x, &c3, &c3, &c3, &c3}, {&y, &c4, &rv}).find("running_mean"),
            std::string::npos);
  TestTensor v(DType::F32, {3}), vy(DType::F32, {3});
  EXPECT_NE(kernelError("batch_norm", {&v, &c3, &c3, &c3, &c3}, {&vy, &rm, &rv}).find("[N, C"),
            std::string::npos);
  TestTensor e(DType::F32, {0, 3}), ey(DType::F32, {0, 3});
  EXPECT_NE(kernelError("batch_norm", {&e, &c3, &c3, &c3, &c3}, {&ey, &rm, &rv},
                        {{"training", true}})
                .find("at least one"),
            std::string::npos);
  TestTensor dx(DType::F32, {2, 3, 4}), ds(DType::F32, {3}), db(DType::F32, {3});
  EXPECT_EQ(kernelError("batch_norm_grad", {&y, &x, &c3}, {&dx, &ds, &db}), "");
  EXPECT_NE(kernelError("batch_norm_grad", {&y, &x, &c4}, {&dx, &ds, &db}).find("scale"),
            std::string::npos);
  TestTensor dyBad(DType::F32, {2, 3, 5});
  EXPECT_NE(kernelError("batch_norm_grad", {&dyBad, &x, &c3}, {&dx, &ds, &db}).find("dy"),
            std::string::npos);
  TestTensor i(DType::I32, {2, 3, 4});
  EXPECT_NE(kernelError("batch_norm_grad", {&i, &i, &c3}, {&dx, &ds, &db}).find("not supported"),
            std::string::npos);
}

} // namespace
