// Tests of the Conv kernels (conv, conv_grad_input, conv_grad_filter,
// max_pool, max_pool_grad, avg_pool, avg_pool_grad) against naive direct
// loops over doubles, the adjoint identities and finite differences.
#include "KernelTestCases.h"

#include "parallax/Runtime/KernelMemory.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <functional>
#include <limits>

using namespace parallax::rt;
using namespace parallax::rt::test;
using namespace parallax::rt::test::cases;
using nlohmann::json;

namespace {

int64_t prod(const std::vector<int64_t> &s, size_t from = 0) {
  int64_t n = 1;
  for (size_t i = from; i < s.size(); ++i)
    n *= s[i];
  return n;
}

/// Row-major multi-index of `flat` in `shape`.
std::vector<int64_t> unravel(int64_t flat, const std::vector<int64_t> &shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    idx[i] = flat % shape[i];
    flat /= shape[i];
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t> &idx, const std::vector<int64_t> &shape) {
  int64_t f = 0;
  for (size_t i = 0; i < shape.size(); ++i)
    f = f * shape[i] + idx[i];
  return f;
}

ExecEnv withThreads(int threads) {
  ExecEnv env;
  env.threads = threads;
  return env;
}

double dot(const std::vector<double> &a, const std::vector<double> &b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

/// Visits every (x index, w index, y index) triple that the convolution
/// multiplies: y[n, m, o] += x[n, c, o*s - pb + k*d] * w[m, c', k].
void forEachTap(const ConvCase &c,
                const std::function<void(int64_t, int64_t, int64_t)> &f) {
  std::vector<int64_t> ys = c.y();
  size_t nd = c.nd();
  int64_t cg = c.w[1], mg = c.w[0] / c.group;
  std::vector<int64_t> kshape(c.w.begin() + 2, c.w.end());
  int64_t ksize = prod(kshape);
  std::vector<int64_t> yidx(ys.size()), k(nd), pos(nd);
  for (int64_t yi = 0; yi < prod(ys); ++yi) {
    int64_t rem = yi;
    for (size_t i = ys.size(); i-- > 0;) {
      yidx[i] = rem % ys[i];
      rem /= ys[i];
    }
    int64_t n = yidx[0], m = yidx[1], g = m / mg;
    for (int64_t kf = 0; kf < ksize; ++kf) {
      int64_t kr = kf;
      for (size_t i = nd; i-- > 0;) {
        k[i] = kr % kshape[i];
        kr /= kshape[i];
      }
      bool inside = true;
      int64_t xoff = 0;
      for (size_t i = 0; i < nd; ++i) {
        pos[i] = yidx[2 + i] * c.strides[i] - c.pads[i] + k[i] * c.dilations[i];
        inside = inside && pos[i] >= 0 && pos[i] < c.x[2 + i];
        xoff = xoff * c.x[2 + i] + pos[i];
      }
      if (!inside)
        continue;
      int64_t xplane = prod(c.x, 2);
      for (int64_t cl = 0; cl < cg; ++cl)
        f((n * c.x[1] + g * cg + cl) * xplane + xoff, (m * cg + cl) * ksize + kf, yi);
    }
  }
}

std::vector<double> refConv(const ConvCase &c, const std::vector<double> &x,
                            const std::vector<double> &w,
                            const std::vector<double> &b) {
  std::vector<int64_t> ys = c.y();
  std::vector<double> y(prod(ys), 0.0);
  if (c.bias)
    for (int64_t i = 0; i < prod(ys); ++i)
      y[i] = b[unravel(i, ys)[1]];
  forEachTap(c, [&](int64_t xi, int64_t wi, int64_t yi) { y[yi] += x[xi] * w[wi]; });
  return y;
}

std::vector<double> refConvGradInput(const ConvCase &c, const std::vector<double> &dy,
                                     const std::vector<double> &w) {
  std::vector<double> dx(prod(c.x), 0.0);
  forEachTap(c, [&](int64_t xi, int64_t wi, int64_t yi) { dx[xi] += w[wi] * dy[yi]; });
  return dx;
}

std::vector<double> refConvGradFilter(const ConvCase &c, const std::vector<double> &x,
                                      const std::vector<double> &dy) {
  std::vector<double> dw(prod(c.w), 0.0);
  forEachTap(c, [&](int64_t xi, int64_t wi, int64_t yi) { dw[wi] += x[xi] * dy[yi]; });
  return dw;
}

struct ConvRun {
  TestTensor x, w, b, dy;
};

ConvRun makeInputs(const ConvCase &c, DType dt, uint64_t seed) {
  ConvRun r;
  r.x = TestTensor(dt, c.x, randomValues(prod(c.x), seed));
  r.w = TestTensor(dt, c.w, randomValues(prod(c.w), seed + 1));
  r.b = TestTensor(dt, {c.w[0]}, randomValues(c.w[0], seed + 2));
  r.dy = TestTensor(dt, c.y(), randomValues(prod(c.y()), seed + 3));
  return r;
}

std::vector<double> runConv(const ConvCase &c, ConvRun &r, DType dt,
                            int threads = 1) {
  TestTensor y(dt, c.y());
  std::vector<TestTensor *> ins{&r.x, &r.w};
  if (c.bias)
    ins.push_back(&r.b);
  runKernel("conv", ins, {&y}, c.attrs(), withThreads(threads));
  return y.values();
}
std::vector<double> runGradInput(const ConvCase &c, ConvRun &r, DType dt) {
  TestTensor dx(dt, c.x);
  runKernel("conv_grad_input", {&r.dy, &r.w}, {&dx}, c.attrs());
  return dx.values();
}
std::vector<double> runGradFilter(const ConvCase &c, ConvRun &r, DType dt) {
  TestTensor dw(dt, c.w);
  runKernel("conv_grad_filter", {&r.x, &r.dy}, {&dw}, c.attrs());
  return dw.values();
}

std::vector<ConvCase> convCases() {
  std::vector<ConvCase> cs;
  // 2-D, 3x3, pad 1, bias.
  cs.push_back({{2, 3, 6, 5}, {4, 3, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true});
  // Strides, asymmetric pads, no bias.
  cs.push_back({{2, 2, 7, 8}, {3, 2, 3, 2}, {2, 3}, {0, 2, 1, 0}, {1, 1}, 1, false});
  // Dilations with padding.
  cs.push_back({{1, 2, 9, 9}, {2, 2, 3, 3}, {1, 2}, {2, 1, 2, 3}, {2, 3}, 1, true});
  // Groups.
  cs.push_back({{2, 4, 5, 6}, {6, 2, 2, 3}, {1, 1}, {1, 0, 0, 1}, {1, 1}, 2, true});
  // Depthwise (group == channels) with a channel multiplier of 2.
  cs.push_back({{3, 3, 6, 6}, {6, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 3, true});
  // 1x1, stride 1, unpadded: the direct GEMM path (with groups).
  cs.push_back({{2, 4, 3, 5}, {6, 2, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2, true});
  // 1x1 but strided / padded: im2col path.
  cs.push_back({{2, 3, 5, 5}, {2, 3, 1, 1}, {2, 1}, {1, 0, 0, 1}, {1, 1}, 1, false});
  // 1-D with stride, dilation and asymmetric pads.
  cs.push_back({{3, 2, 11}, {4, 2, 3}, {2}, {2, 1}, {2}, 1, true});
  // 1-D pointwise.
  cs.push_back({{2, 3, 7}, {5, 3, 1}, {1}, {0, 0}, {1}, 1, true});
  // 3-D with groups, strides, dilations and asymmetric pads.
  cs.push_back({{2, 4, 5, 4, 6}, {4, 2, 2, 3, 2}, {1, 2, 2}, {1, 0, 1, 0, 1, 1},
                {2, 1, 1}, 2, true});
  // A large feature map (one image per GEMM) ...
  cs.push_back({{2, 2, 48, 48}, {3, 2, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true});
  // ... and a stride that drops trailing input elements.
  cs.push_back({{2, 2, 8, 9}, {2, 2, 2, 2}, {3, 3}, {0, 0, 0, 0}, {1, 1}, 1, false});
  // Many small images: several chunks of images per GEMM, the last partial.
  cs.push_back({{23, 1, 11, 11}, {2, 1, 2, 2}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1, true});
  // Large outputs with many input channels: a GEMM covers a tile of output
  // rows (the last tile partial), also with strides, dilations and
  // asymmetric pads.
  cs.push_back({{2, 64, 20, 20}, {2, 64, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, true});
  cs.push_back({{1, 64, 40, 17}, {2, 64, 3, 3}, {1, 1}, {2, 0, 1, 1}, {2, 1}, 1, false});
  cs.push_back({{1, 48, 41, 36}, {2, 48, 2, 3}, {2, 2}, {0, 1, 1, 0}, {1, 2}, 1, true});
  // Depthwise with dilations and asymmetric pads, 1-D and 3-D.
  cs.push_back({{2, 4, 9, 8}, {4, 1, 3, 2}, {1, 2}, {2, 0, 1, 1}, {2, 3}, 4, true});
  cs.push_back({{2, 3, 13}, {6, 1, 4}, {3}, {2, 1}, {1}, 3, false});
  cs.push_back({{1, 2, 5, 6, 4}, {2, 1, 2, 3, 2}, {2, 1, 1}, {1, 1, 0, 0, 1, 1}, {1, 2, 1}, 2, true});
  // Kernel bigger than the input, covered by padding.
  cs.push_back({{1, 1, 2, 2}, {1, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, false});
  return cs;
}

// Each case runs on one thread and on two: with two, a batch of two or more
// images is split between threads (single-threaded BLAS per thread), a
// single image uses multithreaded BLAS and im2col.
TEST(ConvKernels, ForwardMatchesDirectLoops) {
  uint64_t seed = 10;
  for (const ConvCase &c : convCases())
    for (DType dt : {DType::F32, DType::F64}) {
      ConvRun r = makeInputs(c, dt, seed += 7);
      std::vector<double> ref = refConv(c, r.x.values(), r.w.values(), r.b.values());
      double tol = dt == DType::F32 ? 1e-5 : 1e-12;
      for (int threads : {1, 2})
        expectNear(runConv(c, r, dt, threads), ref, tol, tol,
                   describe(c, dt) + " threads " + std::to_string(threads));
    }
}

TEST(ConvKernels, GradInputMatchesDirectLoops) {
  uint64_t seed = 20;
  for (const ConvCase &c : convCases())
    for (DType dt : {DType::F32, DType::F64}) {
      ConvRun r = makeInputs(c, dt, seed += 7);
      std::vector<double> ref = refConvGradInput(c, r.dy.values(), r.w.values());
      double tol = dt == DType::F32 ? 1e-5 : 1e-12;
      for (int threads : {1, 2}) {
        // Garbage in the output buffer must not leak into dx.
        TestTensor dx(dt, c.x, std::vector<double>(prod(c.x), 123.0));
        runKernel("conv_grad_input", {&r.dy, &r.w}, {&dx}, c.attrs(), withThreads(threads));
        expectNear(dx.values(), ref, tol, tol,
                   describe(c, dt) + " threads " + std::to_string(threads));
      }
    }
}

TEST(ConvKernels, GradFilterMatchesDirectLoops) {
  uint64_t seed = 30;
  for (const ConvCase &c : convCases())
    for (DType dt : {DType::F32, DType::F64}) {
      ConvRun r = makeInputs(c, dt, seed += 7);
      std::vector<double> ref = refConvGradFilter(c, r.x.values(), r.dy.values());
      double tol = dt == DType::F32 ? 1e-5 : 1e-12;
      for (int threads : {1, 2}) {
        TestTensor dw(dt, c.w, std::vector<double>(prod(c.w), -77.0));
        runKernel("conv_grad_filter", {&r.x, &r.dy}, {&dw}, c.attrs(), withThreads(threads));
        expectNear(dw.values(), ref, tol, tol,
                   describe(c, dt) + " threads " + std::to_string(threads));
      }
    }
}

TEST(ConvKernels, AdjointIdentities) {
  // <conv(x, w), dy> = <x, conv_grad_input(dy, w)> = <w, conv_grad_filter(x, dy)>
  uint64_t seed = 40;
  for (ConvCase c : convCases()) {
    c.bias = false;
    ConvRun r = makeInputs(c, DType::F64, seed += 3);
    double lhs = dot(runConv(c, r, DType::F64), r.dy.values());
    double viaX = dot(r.x.values(), runGradInput(c, r, DType::F64));
    double viaW = dot(r.w.values(), runGradFilter(c, r, DType::F64));
    double scale = 1e-12 * (1.0 + std::abs(lhs));
    EXPECT_NEAR(viaX, lhs, scale) << describe(c, DType::F64);
    EXPECT_NEAR(viaW, lhs, scale) << describe(c, DType::F64);
  }
}

TEST(ConvKernels, FiniteDifferences) {
  // L(x, w, b) = <conv(x, w, b), dy>: dL/dx = conv_grad_input(dy, w) and
  // dL/dw = conv_grad_filter(x, dy), checked by central differences.
  std::vector<ConvCase> cases{
      {{1, 2, 4, 5}, {2, 1, 3, 2}, {2, 1}, {1, 0, 1, 1}, {1, 2}, 2, true},
      {{2, 2, 5}, {3, 2, 2}, {1}, {1, 2}, {2}, 1, true},
      {{1, 2, 3, 3, 3}, {2, 2, 2, 1, 2}, {1, 1, 2}, {0, 1, 1, 1, 0, 0}, {1, 1, 1}, 1, false}};
  const double h = 1e-5;
  uint64_t seed = 50;
  for (const ConvCase &c : cases) {
    ConvRun r = makeInputs(c, DType::F64, seed += 5);
    auto loss = [&]() { return dot(runConv(c, r, DType::F64), r.dy.values()); };
    std::vector<double> dx = runGradInput(c, r, DType::F64);
    std::vector<double> dw = runGradFilter(c, r, DType::F64);
    for (auto [t, grad] : {std::pair{&r.x, &dx}, std::pair{&r.w, &dw}}) {
      std::vector<double> fd = centralDifferences(*t, loss, h);
      for (int64_t i = 0; i < t->numElements(); ++i)
        EXPECT_NEAR(fd[i], (*grad)[i], 1e-7) << describe(c, DType::F64) << " element " << i;
    }
  }
}

TEST(ConvKernels, BiasAbsentAsNoneOperand) {
  ConvCase c{{1, 2, 4, 4}, {3, 2, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, false};
  ConvRun r = makeInputs(c, DType::F64, 5);
  TestTensor none = TestTensor::none();
  TestTensor y(DType::F64, c.y());
  runKernel("conv", {&r.x, &r.w, &none}, {&y}, c.attrs());
  expectNear(y.values(), refConv(c, r.x.values(), r.w.values(), {}), 1e-12, 1e-12);
}

TEST(ConvKernels, RepeatedRunsGiveSameResult) {
  // Scratch is reused across steps; a second run must not see the first's.
  ConvCase c{{3, 2, 5, 5}, {4, 2, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, false};
  ConvRun r = makeInputs(c, DType::F32, 6);
  const KernelFactory *f = KernelRegistry::global().find("conv_grad_input");
  ASSERT_NE(f, nullptr);
  TestTensor dx(DType::F32, c.x);
  PlanKernel k;
  k.op = "conv_grad_input";
  k.attrs = c.attrs();
  ExecEnv env;
  env.step = 1;
  KernelArgs args(k, {r.dy.view(), r.w.view()}, {dx.view()}, env);
  KernelFn fn = (*f)(args);
  fn();
  std::vector<double> first = dx.values();
  fn();
  EXPECT_EQ(dx.values(), first);
  expectNear(first, refConvGradInput(c, r.dy.values(), r.w.values()), 1e-5, 1e-5);
}

TEST(ConvKernels, ShareAWorkspaceOfThePredictedSize) {
  // Every convolution kernel of convCases (and a max-pool gradient), bound
  // on one environment, takes its scratch from one workspace: the size the
  // plan's memory estimate predicts for the same kernels (workspaceBytes),
  // whose contents are garbage (NaN bytes) whenever a kernel starts.
  for (int threads : {1, 3}) {
    ExecEnv env = withThreads(threads);
    env.step = 1;
    Plan plan;
    struct Bound {
      std::function<void()> fn;
      TestTensor *out;
      std::vector<double> ref;
      std::string what;
    };
    std::vector<ConvCase> cases = convCases();
    std::vector<ConvRun> runs;
    std::vector<std::unique_ptr<TestTensor>> outs;
    std::vector<PlanKernel> kernels;
    std::vector<Bound> bound;
    runs.reserve(cases.size());
    kernels.reserve(4 * cases.size() + 1);
    auto addTensor = [&](const TestTensor &t) {
      PlanTensor pt;
      pt.dtype = t.dtype;
      pt.shape = t.shape;
      plan.tensors.push_back(pt);
      return (int32_t)plan.tensors.size() - 1;
    };
    auto bind = [&](const std::string &op, nlohmann::json attrs,
                    std::vector<TestTensor *> ins, TestTensor *out,
                    std::vector<double> ref, std::string what) {
      PlanKernel k;
      k.op = op;
      k.attrs = std::move(attrs);
      std::vector<TensorView> views;
      for (TestTensor *t : ins) {
        views.push_back(t->view());
        k.inputs.push_back(addTensor(*t));
      }
      k.outputs.push_back(addTensor(*out));
      plan.kernels.push_back(k);
      kernels.push_back(k);
      KernelArgs args(kernels.back(), views, {out->view()}, env);
      bound.push_back({(*KernelRegistry::global().find(op))(args), out, std::move(ref),
                       std::move(what)});
    };
    for (size_t i = 0; i < cases.size(); ++i) {
      ConvCase c = cases[i];
      c.bias = false;
      runs.push_back(makeInputs(c, DType::F32, 40 + i));
      ConvRun &r = runs.back();
      outs.push_back(std::make_unique<TestTensor>(DType::F32, c.y()));
      bind("conv", c.attrs(), {&r.x, &r.w}, outs.back().get(),
           refConv(c, r.x.values(), r.w.values(), {}), "conv " + describe(c, DType::F32));
      outs.push_back(std::make_unique<TestTensor>(DType::F32, c.x));
      bind("conv_grad_input", c.attrs(), {&r.dy, &r.w}, outs.back().get(),
           refConvGradInput(c, r.dy.values(), r.w.values()),
           "conv_grad_input " + describe(c, DType::F32));
      outs.push_back(std::make_unique<TestTensor>(DType::F32, c.w));
      bind("conv_grad_filter", c.attrs(), {&r.x, &r.dy}, outs.back().get(),
           refConvGradFilter(c, r.x.values(), r.dy.values()),
           "conv_grad_filter " + describe(c, DType::F32));
    }
    PoolCase pc{{2, 3, 9, 8}, {3, 2}, {2, 2}, {1, 0, 1, 1}, {}, false, false};
    TestTensor px(DType::F32, pc.x, randomValues(prod(pc.x), 7));
    TestTensor py(DType::F32, pc.y());
    runKernel("max_pool", {&px}, {&py}, pc.attrs(true));
    TestTensor pdy(DType::F32, pc.y(), randomValues(prod(pc.y()), 8));
    TestTensor pdx(DType::F32, pc.x);
    runKernel("max_pool_grad", {&px, &pdy}, {&pdx}, pc.attrs(true));
    std::vector<double> poolRef = pdx.values();
    TestTensor pdx2(DType::F32, pc.x);
    bind("max_pool_grad", pc.attrs(true), {&px, &pdy}, &pdx2, poolRef, "max_pool_grad");

    ASSERT_TRUE(env.workspace);
    EXPECT_EQ(env.workspace->bytes(), workspaceBytes(plan, threads)) << threads << " threads";
    EXPECT_GT(env.workspace->bytes(), 0);
    for (Bound &b : bound) {
      std::memset(env.workspace->base(), 0xff, env.workspace->bytes());
      b.fn();
      expectNear(b.out->values(), b.ref, 1e-4, 1e-4, b.what + " on " +
                 std::to_string(threads) + " threads");
    }
  }
}

TEST(ConvKernels, Errors) {
  ConvCase c{{1, 4, 5, 5}, {2, 2, 3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 2, false};
  auto err = [&](ConvCase cc, json attrs, std::vector<int64_t> yShape,
                 DType dt = DType::F32, std::vector<int64_t> wShape = {}) {
    TestTensor x(dt, cc.x), w(dt, wShape.empty() ? cc.w : wShape), y(dt, yShape);
    return kernelError("conv", {&x, &w}, {&y}, attrs);
  };
  EXPECT_EQ(err(c, c.attrs(), c.y()), "");
  EXPECT_NE(err(c, c.attrs(), {1, 2, 4, 4}).find("y must have shape [1, 2, 3, 3]"),
            std::string::npos);
  json noGroup = c.attrs();
  noGroup.erase("group");
  EXPECT_NE(err(c, noGroup, c.y()).find("channels do not match"), std::string::npos);
  json badStrides = c.attrs();
  badStrides["strides"] = {1};
  EXPECT_NE(err(c, badStrides, c.y()).find("expected 2 strides"), std::string::npos);
  json zeroStride = c.attrs();
  zeroStride["strides"] = {0, 1};
  EXPECT_NE(err(c, zeroStride, c.y()).find(">= 1"), std::string::npos);
  json negPad = c.attrs();
  negPad["pads"] = {0, -1, 0, 0};
  EXPECT_NE(err(c, negPad, c.y()).find("pads must be >= 0"), std::string::npos);
  json noDil = c.attrs();
  noDil.erase("dilations");
  EXPECT_NE(err(c, noDil, c.y()).find("dilations"), std::string::npos);
  EXPECT_NE(err(c, c.attrs(), c.y(), DType::F16).find("f16 is not supported"),
            std::string::npos);
  EXPECT_NE(err(c, c.attrs(), c.y(), DType::I32).find("f32 or f64"), std::string::npos);
  // Kernel larger than the padded input.
  EXPECT_NE(err(c, c.attrs(), c.y(), DType::F32, {2, 2, 6, 3}).find("does not fit"),
            std::string::npos);
  // Mixed dtypes and a bad bias.
  TestTensor x(DType::F32, c.x), w64(DType::F64, c.w), y(DType::F32, c.y()),
      w(DType::F32, c.w), b(DType::F32, {3});
  EXPECT_NE(kernelError("conv", {&x, &w64}, {&y}, c.attrs()).find("w must be f32"),
            std::string::npos);
  EXPECT_NE(kernelError("conv", {&x, &w, &b}, {&y}, c.attrs()).find("bias must have shape [2]"),
            std::string::npos);
  // The gradients check dy against the window.
  TestTensor dyBad(DType::F32, {1, 2, 2, 3}), dx(DType::F32, c.x), dw(DType::F32, c.w);
  EXPECT_NE(kernelError("conv_grad_input", {&dyBad, &w}, {&dx}, c.attrs()).find("dy must have shape"),
            std::string::npos);
  EXPECT_NE(kernelError("conv_grad_filter", {&x, &dyBad}, {&dw}, c.attrs()).find("dy must have shape"),
            std::string::npos);
  TestTensor x1(DType::F32, {1, 4});
  EXPECT_NE(kernelError("conv", {&x1, &w}, {&y}, c.attrs()).find("same rank"), std::string::npos);
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

/// Visits the window of output `yi`: f(x index or -1 for a position in the
/// padded extent [-pb, in + pe) outside x, in row-major window order).
/// Positions past the end padding (a ceil_mode overhang) are not visited.
void forEachWindow(const PoolCase &c, int64_t yi,
                   const std::function<void(int64_t)> &f) {
  std::vector<int64_t> ys = c.y(), yidx = unravel(yi, ys);
  size_t nd = c.nd();
  std::vector<int64_t> dil = c.dil();
  for (int64_t kf = 0; kf < prod(c.kernel); ++kf) {
    std::vector<int64_t> k = unravel(kf, c.kernel);
    std::vector<int64_t> xidx{yidx[0], yidx[1]};
    bool inside = true, inPadded = true;
    for (size_t i = 0; i < nd; ++i) {
      int64_t p = yidx[2 + i] * c.strides[i] - c.pads[i] + k[i] * dil[i];
      inside = inside && p >= 0 && p < c.x[2 + i];
      inPadded = inPadded && p >= -c.pads[i] && p < c.x[2 + i] + c.pads[nd + i];
      xidx.push_back(p);
    }
    if (inside)
      f(ravel(xidx, c.x));
    else if (inPadded)
      f(-1);
  }
}

/// Max and first argmax (x index, -1 if the window is all padding).
std::vector<std::pair<double, int64_t>> refMaxPool(const PoolCase &c,
                                                   const std::vector<double> &x) {
  std::vector<std::pair<double, int64_t>> y(prod(c.y()));
  for (int64_t yi = 0; yi < (int64_t)y.size(); ++yi) {
    double best = -std::numeric_limits<double>::infinity();
    int64_t arg = -1;
    forEachWindow(c, yi, [&](int64_t xi) {
      if (xi >= 0 && (arg < 0 || x[xi] > best)) {
        best = x[xi];
        arg = xi;
      }
    });
    y[yi] = {best, arg};
  }
  return y;
}

/// Average and divisor.
std::vector<std::pair<double, double>> refAvgPool(const PoolCase &c,
                                                  const std::vector<double> &x) {
  std::vector<std::pair<double, double>> y(prod(c.y()));
  for (int64_t yi = 0; yi < (int64_t)y.size(); ++yi) {
    double sum = 0, count = 0;
    forEachWindow(c, yi, [&](int64_t xi) {
      if (xi >= 0) {
        sum += x[xi];
        count += 1;
      } else if (c.includePad) {
        count += 1;
      }
    });
    y[yi] = {count > 0 ? sum / count : 0.0, count};
  }
  return y;
}

TEST(ConvKernels, MaxPoolMatchesDirectLoops) {
  uint64_t seed = 60;
  std::vector<PoolCase> cases = poolCases();
  for (const PoolCase &c : dilatedPoolCases())
    cases.push_back(c);
  for (const PoolCase &c : cases)
    for (DType dt : {DType::F32, DType::F64})
      for (int threads : {1, 2}) {
      // All-negative inputs: a padding zero must never win.
      TestTensor x(dt, c.x, randomValues(prod(c.x), seed += 3, -2.0, -0.5));
      TestTensor y(dt, c.y());
      runKernel("max_pool", {&x}, {&y}, c.attrs(true), withThreads(threads));
      auto ref = refMaxPool(c, x.values());
      std::vector<double> expected;
      for (auto &[v, a] : ref)
        expected.push_back(v);
      expectNear(y.values(), expected, 0, 0, describe(c, dt, true));

      // Gradient: each dy goes to its window's argmax.
      TestTensor dy(dt, c.y(), randomValues(prod(c.y()), seed + 1));
      TestTensor dx(dt, c.x, std::vector<double>(prod(c.x), 9.0));
      runKernel("max_pool_grad", {&x, &dy}, {&dx}, c.attrs(true), withThreads(threads));
      std::vector<double> refDx(prod(c.x), 0.0);
      for (int64_t i = 0; i < (int64_t)ref.size(); ++i)
        if (ref[i].second >= 0)
          refDx[ref[i].second] += dy.get(i);
      expectNear(dx.values(), refDx, 1e-6, 1e-6, describe(c, dt, true));
    }
}

TEST(ConvKernels, MaxPoolTiesGoToFirstMaximum) {
  // Constant input: every window's first element (row-major) gets dy.
  PoolCase c{{1, 1, 4, 4}, {2, 3}, {1, 1}, {0, 1, 0, 1}, {}, false, false};
  TestTensor x(DType::F32, c.x, std::vector<double>(16, 1.5));
  TestTensor y(DType::F32, c.y());
  runKernel("max_pool", {&x}, {&y}, c.attrs(true));
  for (double v : y.values())
    EXPECT_EQ(v, 1.5);
  TestTensor dy(DType::F32, c.y(), std::vector<double>(prod(c.y()), 1.0));
  TestTensor dx(DType::F32, c.x);
  runKernel("max_pool_grad", {&x, &dy}, {&dx}, c.attrs(true));
  // y is 3x4; window (oh, ow) starts at row oh, column max(ow - 1, 0).
  std::vector<double> expected(16, 0.0);
  for (int64_t oh = 0; oh < 3; ++oh)
    for (int64_t ow = 0; ow < 4; ++ow)
      expected[oh * 4 + std::max<int64_t>(ow - 1, 0)] += 1.0;
  EXPECT_EQ(dx.values(), expected);

  // A tie inside one window between its second and fourth elements.
  PoolCase c2{{1, 1, 2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {}, false, false};
  TestTensor x2(DType::F64, c2.x, {0.5, 3.0, 1.0, 3.0});
  TestTensor dy2(DType::F64, {1, 1, 1, 1}, {2.0});
  TestTensor dx2(DType::F64, c2.x);
  runKernel("max_pool_grad", {&x2, &dy2}, {&dx2}, c2.attrs(true));
  EXPECT_EQ(dx2.values(), (std::vector<double>{0, 2.0, 0, 0}));
}

TEST(ConvKernels, MaxPoolNanAndInfinity) {
  // As PyTorch: NaN wins the max and its gradient goes to the last NaN; an
  // all -inf window gives -inf and its gradient goes to the first element.
  PoolCase c{{1, 1, 2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {}, false, false};
  double nan = std::numeric_limits<double>::quiet_NaN(),
         inf = std::numeric_limits<double>::infinity();
  for (DType dt : {DType::F32, DType::F64}) {
    TestTensor x(dt, c.x, {1, nan, 3, nan}), y(dt, c.y()), dy(dt, c.y(), {2.0}),
        dx(dt, c.x);
    runKernel("max_pool", {&x}, {&y}, c.attrs(true));
    EXPECT_TRUE(std::isnan(y.get(0)));
    runKernel("max_pool_grad", {&x, &dy}, {&dx}, c.attrs(true));
    EXPECT_EQ(dx.values(), (std::vector<double>{0, 0, 0, 2}));
    TestTensor xi(dt, c.x, {-inf, -inf, -inf, -inf});
    runKernel("max_pool", {&xi}, {&y}, c.attrs(true));
    EXPECT_EQ(y.get(0), -inf);
    runKernel("max_pool_grad", {&xi, &dy}, {&dx}, c.attrs(true));
    EXPECT_EQ(dx.values(), (std::vector<double>{2, 0, 0, 0}));
  }
}

TEST(ConvKernels, AvgPoolMatchesDirectLoops) {
  uint64_t seed = 70;
  for (const PoolCase &c : poolCases())
    for (DType dt : {DType::F32, DType::F64})
      for (int threads : {1, 2}) {
      TestTensor x(dt, c.x, randomValues(prod(c.x), seed += 3));
      TestTensor y(dt, c.y());
      runKernel("avg_pool", {&x}, {&y}, c.attrs(false), withThreads(threads));
      auto ref = refAvgPool(c, x.values());
      std::vector<double> expected;
      for (auto &[v, n] : ref)
        expected.push_back(v);
      double tol = dt == DType::F32 ? 1e-6 : 1e-14;
      expectNear(y.values(), expected, tol, tol, describe(c, dt, false));

      TestTensor dy(dt, c.y(), randomValues(prod(c.y()), seed + 1));
      TestTensor dx(dt, c.x, std::vector<double>(prod(c.x), 5.0));
      runKernel("avg_pool_grad", {&dy}, {&dx}, c.attrs(false), withThreads(threads));
      std::vector<double> refDx(prod(c.x), 0.0);
      for (int64_t yi = 0; yi < (int64_t)ref.size(); ++yi)
        forEachWindow(c, yi, [&](int64_t xi) {
          if (xi >= 0)
            refDx[xi] += dy.get(yi) / ref[yi].second;
        });
      expectNear(dx.values(), refDx, tol, tol, describe(c, dt, false));
    }
}

TEST(ConvKernels, AvgPoolMatchesOnnxAndTorchValues) {
  // onnx backend test averagepool_2d_ceil.
  TestTensor x(DType::F32, {1, 1, 4, 4});
  for (int i = 0; i < 16; ++i)
    x.set(i, i + 1);
  TestTensor y(DType::F32, {1, 1, 2, 2});
  runKernel("avg_pool", {&x}, {&y},
            {{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {0, 0, 0, 0}},
             {"ceil_mode", true}});
  EXPECT_EQ(y.values(), (std::vector<double>{6, 7.5, 12, 13.5}));

  // onnx backend test averagepool_2d_precomputed_pads_count_include_pad.
  TestTensor x5(DType::F32, {1, 1, 5, 5});
  for (int i = 0; i < 25; ++i)
    x5.set(i, i + 1);
  TestTensor y5(DType::F32, {1, 1, 5, 5});
  runKernel("avg_pool", {&x5}, {&y5},
            {{"kernel_shape", {5, 5}}, {"strides", {1, 1}}, {"pads", {2, 2, 2, 2}},
             {"count_include_pad", true}});
  expectNear(y5.values(),
             {2.52, 3.6, 4.8, 4.08, 3.24, 4.56, 6.4, 8.4, 7.04, 5.52, 7.2, 10, 13,
              10.8, 8.4, 6.96, 9.6, 12.4, 10.24, 7.92, 6.12, 8.4, 10.8, 8.88, 6.84},
             1e-6, 1e-6);

  // torch.nn.functional.avg_pool2d(x, 3, 2, 1, ceil_mode=True,
  // count_include_pad=True / False) on x = arange(36).reshape(6, 6) / 2 - 3:
  // the ceil_mode overhang past the end padding is never counted.
  TestTensor x6(DType::F64, {1, 1, 6, 6});
  for (int i = 0; i < 36; ++i)
    x6.set(i, i * 0.5 - 3.0);
  json attrs{{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}},
             {"ceil_mode", true}, {"count_include_pad", true}};
  TestTensor y6(DType::F64, {1, 1, 4, 4});
  runKernel("avg_pool", {&x6}, {&y6}, attrs);
  expectNear(y6.values(),
             {-0.5555555555555556, -0.3333333333333333, 0.3333333333333333,
              0.3333333333333333, 2.1666666666666665, 4.0, 5.0, 2.75,
              6.166666666666667, 10.0, 11.0, 5.75, 4.083333333333333, 6.5, 7.0,
              3.625},
             1e-14, 1e-14);
  attrs.erase("count_include_pad");
  runKernel("avg_pool", {&x6}, {&y6}, attrs);
  expectNear(y6.values(),
             {-1.25, -0.5, 0.5, 1.0, 3.25, 4.0, 5.0, 5.5, 9.25, 10.0, 11.0, 11.5,
              12.25, 13.0, 14.0, 14.5},
             1e-14, 1e-14);
  // torch avg_pool1d([1..7], 2, 3, 1, ceil_mode=True): the fourth window
  // would start in the end padding and is dropped.
  TestTensor x7(DType::F64, {1, 1, 7}, {1, 2, 3, 4, 5, 6, 7});
  TestTensor y7(DType::F64, {1, 1, 3});
  json a1{{"kernel_shape", {2}}, {"strides", {3}}, {"pads", {1, 1}}, {"ceil_mode", true}};
  runKernel("avg_pool", {&x7}, {&y7}, a1);
  expectNear(y7.values(), {1.0, 3.5, 6.5}, 1e-15, 1e-15);
  a1["count_include_pad"] = true;
  runKernel("avg_pool", {&x7}, {&y7}, a1);
  expectNear(y7.values(), {0.5, 3.5, 6.5}, 1e-15, 1e-15);
}

TEST(ConvKernels, PoolGradAdjointAndFiniteDifferences) {
  uint64_t seed = 80;
  std::vector<PoolCase> cases = poolCases();
  for (const PoolCase &c : cases) {
    // avg_pool is linear: <avg_pool(x), dy> = <x, avg_pool_grad(dy)>.
    TestTensor x(DType::F64, c.x, randomValues(prod(c.x), seed += 3));
    TestTensor dy(DType::F64, c.y(), randomValues(prod(c.y()), seed + 1));
    TestTensor y(DType::F64, c.y()), dx(DType::F64, c.x);
    runKernel("avg_pool", {&x}, {&y}, c.attrs(false));
    runKernel("avg_pool_grad", {&dy}, {&dx}, c.attrs(false));
    EXPECT_NEAR(dot(y.values(), dy.values()), dot(x.values(), dx.values()), 1e-12)
        << describe(c, DType::F64, false);
  }
  // Central differences of L = <pool(x), dy> for both pools (random x has no
  // ties, so the max is differentiable at x).
  const double h = 1e-6;
  for (const PoolCase &c : {cases[3], cases[4], cases[9], cases[11]})
    for (bool isMax : {true, false}) {
      const char *op = isMax ? "max_pool" : "avg_pool";
      TestTensor x(DType::F64, c.x, randomValues(prod(c.x), seed += 3));
      TestTensor dy(DType::F64, c.y(), randomValues(prod(c.y()), seed + 1));
      TestTensor dx(DType::F64, c.x);
      if (isMax)
        runKernel("max_pool_grad", {&x, &dy}, {&dx}, c.attrs(true));
      else
        runKernel("avg_pool_grad", {&dy}, {&dx}, c.attrs(false));
      auto loss = [&]() {
        TestTensor y(DType::F64, c.y());
        runKernel(op, {&x}, {&y}, c.attrs(isMax));
        return dot(y.values(), dy.values());
      };
      std::vector<double> fd = centralDifferences(x, loss, h);
      for (int64_t i = 0; i < x.numElements(); ++i)
        ASSERT_NEAR(fd[i], dx.get(i), 1e-7)
            << op << " " << describe(c, DType::F64, isMax) << " element " << i;
    }
}

TEST(ConvKernels, WindowsEntirelyInPadding) {
  // pads >= the window: the first two rows of windows see only padding. A
  // max over no element is the lowest finite value (as onnxruntime) and
  // passes no gradient; an average over no element is 0.
  PoolCase c{{1, 1, 3, 2}, {1, 2}, {1, 1}, {2, 0, 0, 0}, {}, false, false};
  ASSERT_EQ(c.y(), (std::vector<int64_t>{1, 1, 5, 1}));
  for (DType dt : {DType::F32, DType::F64}) {
    double lowest = dt == DType::F32 ? (double)std::numeric_limits<float>::lowest()
                                     : std::numeric_limits<double>::lowest();
    TestTensor x(dt, c.x, {1, 2, 3, 4, 5, 6}), y(dt, c.y());
    runKernel("max_pool", {&x}, {&y}, c.attrs(true));
    EXPECT_EQ(y.values(), (std::vector<double>{lowest, lowest, 2, 4, 6}));
    TestTensor dy(dt, c.y(), {1, 1, 1, 1, 1}), dx(dt, c.x);
    runKernel("max_pool_grad", {&x, &dy}, {&dx}, c.attrs(true));
    EXPECT_EQ(dx.values(), (std::vector<double>{0, 1, 0, 1, 0, 1}));
    runKernel("avg_pool", {&x}, {&y}, c.attrs(false));
    EXPECT_EQ(y.values(), (std::vector<double>{0, 0, 1.5, 3.5, 5.5}));
    runKernel("avg_pool_grad", {&dy}, {&dx}, c.attrs(false));
    EXPECT_EQ(dx.values(), (std::vector<double>{0.5, 0.5, 0.5, 0.5, 0.5, 0.5}));
  }
}

TEST(ConvKernels, PoolErrors) {
  PoolCase c{{1, 2, 6, 6}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, true, false};
  TestTensor x(DType::F32, c.x), y(DType::F32, c.y());
  EXPECT_EQ(kernelError("max_pool", {&x}, {&y}, c.attrs(true)), "");
  EXPECT_EQ(kernelError("avg_pool", {&x}, {&y}, c.attrs(false)), "");
  // Without ceil_mode the output is 3x3, not 4x4.
  json floorAttrs = c.attrs(true);
  floorAttrs.erase("ceil_mode");
  EXPECT_NE(kernelError("max_pool", {&x}, {&y}, floorAttrs).find("y must have shape [1, 2, 3, 3]"),
            std::string::npos);
  json noKernel = c.attrs(false);
  noKernel.erase("kernel_shape");
  EXPECT_NE(kernelError("avg_pool", {&x}, {&y}, noKernel).find("kernel_shape"),
            std::string::npos);
  json noDil = c.attrs(true);
  noDil.erase("dilations");
  EXPECT_NE(kernelError("max_pool", {&x}, {&y}, noDil).find("dilations"), std::string::npos);
  json badPads = c.attrs(false);
  badPads["pads"] = {1, 1};
  EXPECT_NE(kernelError("avg_pool", {&x}, {&y}, badPads).find("expected 4 pads"),
            std::string::npos);
  TestTensor xh(DType::BF16, c.x), yh(DType::BF16, c.y());
  EXPECT_NE(kernelError("max_pool", {&xh}, {&yh}, c.attrs(true)).find("bf16 is not supported"),
            std::string::npos);
  TestTensor x2(DType::F32, {6, 6});
  EXPECT_NE(kernelError("max_pool", {&x2}, {&y}, c.attrs(true)).find("[N, C, spatial...]"),
            std::string::npos);
  TestTensor dyBad(DType::F32, {1, 2, 3, 3}), dx(DType::F32, c.x), dxBad(DType::F32, {1, 2, 6, 5});
  EXPECT_NE(kernelError("max_pool_grad", {&x, &dyBad}, {&dx}, c.attrs(true)).find("dy must have shape"),
            std::string::npos);
  EXPECT_NE(kernelError("max_pool_grad", {&x, &y}, {&dxBad}, c.attrs(true)).find("dx must have x's shape"),
            std::string::npos);
  EXPECT_NE(kernelError("avg_pool_grad", {&dyBad}, {&dx}, c.attrs(false)).find("dy must have shape"),
            std::string::npos);
  TestTensor y64(DType::F64, c.y());
  EXPECT_NE(kernelError("avg_pool", {&x}, {&y64}, c.attrs(false)).find("y must be f32"),
            std::string::npos);
}

} // namespace
