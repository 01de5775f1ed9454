// Tests of the Loss kernels (softmax_cross_entropy_loss, nll_loss and their
// gradients) against a transcription of the ONNX reference implementations
// (onnx/backend/test/case/node/softmaxcrossentropy.py and
// negativeloglikelihoodloss.py), and the gradients against finite
// differences of the forward kernels.
#include "KernelTestCases.h"

#include <cmath>
#include <optional>

using namespace parallax::rt;
using namespace parallax::rt::test;
using namespace parallax::rt::test::cases;

namespace {

struct RefLoss {
  std::vector<double> loss; ///< per element for none, else one value
  std::vector<double> logProb;
};

/// The ONNX reference, on doubles. `logSoftmax` false: nll_loss.
RefLoss refLoss(const std::vector<int64_t> &shape, const std::vector<double> &x,
                const std::vector<double> &labels,
                const std::vector<double> *weights, const std::string &reduction,
                std::optional<int64_t> ignore, bool logSoftmax) {
  int64_t n = shape[0], c = shape[1], d = numel(shape) / (n * c);
  RefLoss r;
  r.logProb = x;
  if (logSoftmax)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t k = 0; k < d; ++k) {
        double mx = -INFINITY, s = 0;
        for (int64_t j = 0; j < c; ++j)
          mx = std::max(mx, x[(i * c + j) * d + k]);
        for (int64_t j = 0; j < c; ++j)
          s += std::exp(x[(i * c + j) * d + k] - mx);
        for (int64_t j = 0; j < c; ++j)
          r.logProb[(i * c + j) * d + k] = x[(i * c + j) * d + k] - mx - std::log(s);
      }
  std::vector<double> l(n * d), w(n * d);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < d; ++k) {
      int64_t t = (int64_t)labels[i * d + k];
      bool ignored = ignore && t == *ignore;
      w[i * d + k] = ignored ? 0.0 : (weights ? (*weights)[t] : 1.0);
      l[i * d + k] = ignored ? 0.0 : -r.logProb[(i * c + t) * d + k] * w[i * d + k];
    }
  if (reduction == "none") {
    r.loss = l;
  } else {
    double s = 0, sw = 0;
    for (int64_t i = 0; i < n * d; ++i) {
      s += l[i];
      sw += w[i];
    }
    r.loss = {reduction == "sum" ? s : s / sw};
  }
  return r;
}

const std::vector<LossCase> kCases = {
    {{4, 5}, false, std::nullopt},     {{4, 5}, true, std::nullopt},
    {{6, 5}, false, 2},                {{6, 5}, true, -100},
    {{3, 4, 2}, true, 1},              {{3, 4, 2}, false, std::nullopt},
    {{2, 3, 2, 3}, true, std::nullopt}, {{2, 3, 2, 3}, false, -1},
    {{1, 1}, false, std::nullopt},
};

nlohmann::json lossAttrs(const std::string &reduction, bool setReduction,
                         std::optional<int64_t> ignore) {
  nlohmann::json a = nlohmann::json::object();
  if (setReduction)
    a["reduction"] = reduction;
  if (ignore)
    a["ignore_index"] = *ignore;
  return a;
}

void checkForward(bool sce, DType dt, DType lt, const LossCase &c,
                  const std::string &reduction, bool setReduction,
                  int threads = 1) {
  SCOPED_TRACE(::testing::Message()
               << (sce ? "sce " : "nll ") << nameOf(dt) << "/" << nameOf(lt)
               << " " << ::testing::PrintToString(c.shape) << " weights "
               << c.weights << " ignore " << (c.ignore ? *c.ignore : 999)
               << " reduction " << reduction);
  int64_t cls = c.shape[1];
  auto ls = labelShapeOf(c.shape);
  TestTensor x(dt, c.shape, randomValues(numel(c.shape), 101, -3, 3));
  TestTensor labels(lt, ls, makeLabels(numel(ls), cls, 102, c.ignore));
  TestTensor w = c.weights ? TestTensor(dt, {cls}, randomValues(cls, 103, 0.2, 2))
                           : TestTensor::none();
  TestTensor loss(dt, reduction == "none" ? ls : std::vector<int64_t>{});
  TestTensor logProb(dt, c.shape);
  std::vector<TestTensor *> ins{&x, &labels};
  if (c.weights)
    ins.push_back(&w);
  std::vector<TestTensor *> outs{&loss};
  if (sce)
    outs.push_back(&logProb);
  ExecEnv env;
  env.threads = threads;
  runKernel(sce ? "softmax_cross_entropy_loss" : "nll_loss", ins, outs,
            lossAttrs(reduction, setReduction, c.ignore), env);
  std::vector<double> wv = c.weights ? w.values() : std::vector<double>{};
  RefLoss ref = refLoss(c.shape, x.values(), labels.values(),
                        c.weights ? &wv : nullptr, reduction, c.ignore, sce);
  double rt = dt == DType::F32 ? 1e-5 : 1e-12, at = dt == DType::F32 ? 1e-6 : 1e-13;
  expectNear(loss.values(), ref.loss, rt, at, "loss");
  if (sce)
    expectNear(logProb.values(), ref.logProb, rt, at, "log_prob");
}

TEST(LossKernels, SoftmaxCrossEntropyMatchesOnnxReference) {
  for (DType dt : {DType::F32, DType::F64})
    for (DType lt : {DType::I64, DType::I32})
      for (const LossCase &c : kCases) {
        for (const char *r : {"none", "sum", "mean"})
          checkForward(true, dt, lt, c, r, true);
        checkForward(true, dt, lt, c, "mean", false); // default reduction
      }
  checkForward(true, DType::F32, DType::I64, {{256, 40}, true, 0}, "mean", true, 2);
  checkForward(true, DType::F64, DType::I32, {{8, 30, 40}, false, 3}, "none", true, 2);
}

TEST(LossKernels, NllLossMatchesOnnxReference) {
  for (DType dt : {DType::F32, DType::F64})
    for (DType lt : {DType::I64, DType::I32})
      for (const LossCase &c : kCases) {
        for (const char *r : {"none", "sum", "mean"})
          checkForward(false, dt, lt, c, r, true);
        checkForward(false, dt, lt, c, "mean", false);
      }
  checkForward(false, DType::F32, DType::I64, {{256, 40}, true, 0}, "sum", true, 2);
}

TEST(LossKernels, SoftmaxCrossEntropyIsStableForLargeScores) {
  for (DType dt : {DType::F32, DType::F64})
    for (std::vector<int64_t> shape : std::vector<std::vector<int64_t>>{{5, 37}, {3, 11, 4}}) {
      auto xv = randomValues(numel(shape), 131, -800, 800);
      TestTensor x(dt, shape, xv);
      auto ls = labelShapeOf(shape);
      TestTensor labels(DType::I64, ls, makeLabels(numel(ls), shape[1], 132, std::nullopt));
      TestTensor loss(dt, ls), lp(dt, shape);
      runKernel("softmax_cross_entropy_loss", {&x, &labels}, {&loss, &lp},
                {{"reduction", "none"}});
      RefLoss ref = refLoss(shape, x.values(), labels.values(), nullptr, "none",
                            std::nullopt, true);
      expectNear(loss.values(), ref.loss, 1e-6, 1e-4, "loss");
      expectNear(lp.values(), ref.logProb, 1e-6, 1e-4, "log_prob");
    }
}

TEST(LossKernels, AllIgnoredMeanIsNaNWithZeroGradient) {
  TestTensor x(DType::F32, {3, 4}, randomValues(12, 5)), labels(DType::I64, {3}, {7, 7, 7});
  TestTensor loss(DType::F32, {}), lp(DType::F32, {3, 4});
  nlohmann::json attrs = {{"ignore_index", 7}};
  runKernel("softmax_cross_entropy_loss", {&x, &labels}, {&loss, &lp}, attrs);
  EXPECT_TRUE(std::isnan(loss.get(0)));
  TestTensor dloss(DType::F32, {}, {1.0}), dx(DType::F32, {3, 4});
  for (int i = 0; i < 12; ++i)
    dx.set(i, 42);
  runKernel("softmax_cross_entropy_loss_grad", {&dloss, &lp, &labels}, {&dx}, attrs);
  expectNear(dx.values(), std::vector<double>(12, 0.0), 0, 0);
  runKernel("nll_loss_grad", {&dloss, &labels}, {&dx}, attrs);
  expectNear(dx.values(), std::vector<double>(12, 0.0), 0, 0);
  // Sum of nothing is 0.
  attrs["reduction"] = "sum";
  runKernel("nll_loss", {&x, &labels}, {&loss}, attrs);
  EXPECT_EQ(loss.get(0), 0.0);
}

/// Gradients: d(sum(dloss * loss))/d(scores) by central differences of the
/// forward kernel in f64, and the f32 kernel against the f64 result.
void checkGrad(bool sce, const LossCase &c, const std::string &reduction,
               DType lt) {
  SCOPED_TRACE(::testing::Message()
               << (sce ? "sce " : "nll ") << nameOf(lt) << " "
               << ::testing::PrintToString(c.shape) << " weights " << c.weights
               << " ignore " << (c.ignore ? *c.ignore : 999) << " reduction "
               << reduction);
  const char *fwd = sce ? "softmax_cross_entropy_loss" : "nll_loss";
  const char *bwd = sce ? "softmax_cross_entropy_loss_grad" : "nll_loss_grad";
  int64_t cls = c.shape[1];
  auto ls = labelShapeOf(c.shape);
  auto lossShape = reduction == "none" ? ls : std::vector<int64_t>{};
  auto attrs = lossAttrs(reduction, true, c.ignore);
  auto xv = randomValues(numel(c.shape), 111, -2, 2);
  auto wv = randomValues(cls, 112, 0.2, 2);
  auto dv = randomValues(numel(lossShape), 113, -2, 2);
  TestTensor labels(lt, ls, makeLabels(numel(ls), cls, 114, c.ignore));
  std::vector<double> results[2];
  int k = 0;
  for (DType dt : {DType::F64, DType::F32}) {
    TestTensor x(dt, c.shape, xv), dloss(dt, lossShape, dv);
    TestTensor w = c.weights ? TestTensor(dt, {cls}, wv) : TestTensor::none();
    auto run = [&](TestTensor &xx, TestTensor *lpOut) {
      TestTensor loss(dt, lossShape), lp(dt, c.shape);
      std::vector<TestTensor *> ins{&xx, &labels};
      if (c.weights)
        ins.push_back(&w);
      std::vector<TestTensor *> outs{&loss};
      if (sce)
        outs.push_back(lpOut ? lpOut : &lp);
      runKernel(fwd, ins, outs, attrs);
      double l = 0;
      for (int64_t i = 0; i < loss.numElements(); ++i)
        l += dloss.get(i) * loss.get(i);
      return l;
    };
    TestTensor lp(dt, c.shape), dx(dt, c.shape);
    for (int64_t i = 0; i < dx.numElements(); ++i)
      dx.set(i, 1e9); // garbage
    run(x, &lp);
    std::vector<TestTensor *> ins{&dloss};
    if (sce)
      ins.push_back(&lp);
    ins.push_back(&labels);
    if (c.weights)
      ins.push_back(&w);
    runKernel(bwd, ins, {&dx}, attrs);
    results[k++] = dx.values();
    if (dt == DType::F64) {
      std::vector<double> fd(x.numElements());
      for (int64_t i = 0; i < x.numElements(); ++i) {
        double v = x.get(i);
        x.set(i, v + 1e-6);
        double lp1 = run(x, nullptr);
        x.set(i, v - 1e-6);
        double lm = run(x, nullptr);
        x.set(i, v);
        fd[i] = (lp1 - lm) / 2e-6;
      }
      expectNear(dx.values(), fd, 1e-6, 1e-8, "f64 vs finite differences");
    }
  }
  expectNear(results[1], results[0], 1e-5, 1e-6, "f32 vs f64");
}

TEST(LossKernels, GradientsMatchFiniteDifferences) {
  for (bool sce : {true, false})
    for (const LossCase &c : kCases)
      for (const char *r : {"none", "sum", "mean"})
        checkGrad(sce, c, r, c.shape.size() > 2 ? DType::I32 : DType::I64);
}

TEST(LossKernels, GradDefaultReductionAndThreads) {
  // reduction absent = mean; threaded lines.
  int64_t n = 300, c = 20;
  TestTensor lp(DType::F64, {n, c}), labels(DType::I64, {n}, makeLabels(n, c, 121, -1));
  auto x = randomValues(n * c, 122);
  for (int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (int64_t j = 0; j < c; ++j)
      s += std::exp(x[i * c + j]);
    for (int64_t j = 0; j < c; ++j)
      lp.set(i * c + j, x[i * c + j] - std::log(s));
  }
  TestTensor dloss(DType::F64, {}, {0.5}), dx(DType::F64, {n, c});
  ExecEnv env;
  env.threads = 2;
  runKernel("softmax_cross_entropy_loss_grad", {&dloss, &lp, &labels}, {&dx},
            {{"ignore_index", -1}}, env);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i)
    kept += labels.get(i) != -1;
  std::vector<double> ref(n * c);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j)
      ref[i * c + j] = labels.get(i) == -1
                           ? 0.0
                           : (std::exp(lp.get(i * c + j)) - (labels.get(i) == j)) *
                                 0.5 / (double)kept;
  expectNear(dx.values(), ref, 1e-12, 1e-14);
}

// A vocabulary-parallel loss (px-shard-model): on a 2 x 2 grid whose axis 1
// splits the classes, nll_loss on each rank's block of the log-probabilities
// gives partial losses that sum to the whole tensor's, and the softmax cross
// entropy's gradient on a block is that block of the whole gradient. Labels
// fall in both blocks, with ignored lines (which count in no block) and a
// trailing dimension (classes D apart).
TEST(LossKernels, ClassBlocksSumToTheWholeLoss) {
  for (const char *reduction : {"mean", "sum", "none"})
    for (const Shape &whole : {Shape{6, 8}, Shape{4, 6, 3}}) {
      SCOPED_TRACE(::testing::Message() << reduction << " " << ::testing::PrintToString(whole));
      const int64_t n = whole[0], c = whole[1], d = numel(whole) / (n * c);
      Shape ls = labelShapeOf(whole);
      TestTensor x(DType::F64, whole, randomValues(numel(whole), 131, -3, 3));
      TestTensor labels(DType::I64, ls, makeLabels(numel(ls), c, 132, -100));
      Shape lossShape = std::string(reduction) == "none" ? ls : Shape{};
      TestTensor loss(DType::F64, lossShape), lp(DType::F64, whole);
      nlohmann::json attrs = {{"reduction", reduction}, {"ignore_index", -100}};
      runKernel("softmax_cross_entropy_loss", {&x, &labels}, {&loss, &lp}, attrs);
      TestTensor dloss(DType::F64, lossShape,
                       randomValues(numel(lossShape), 133, 0.5, 1.5)),
          dx(DType::F64, whole);
      runKernel("softmax_cross_entropy_loss_grad", {&dloss, &lp, &labels}, {&dx}, attrs);
      Shape bs = whole;
      bs[1] = c / 2;
      std::vector<double> sum(numel(lossShape), 0.0);
      nlohmann::json block = attrs;
      block["grid_shape"] = {2, 2};
      block["grid_axes"] = {1};
      for (int rank : {2, 3}) { // the second row of the grid: blocks 0 and 1
        const int64_t first = (rank % 2) * (c / 2);
        auto at = [&](int64_t i, int64_t k, int64_t j) { return (i * c + first + k) * d + j; };
        TestTensor lpBlock(DType::F64, bs), part(DType::F64, lossShape), dxBlock(DType::F64, bs);
        std::vector<double> wholeDx(numel(bs));
        for (int64_t i = 0; i < n; ++i)
          for (int64_t k = 0; k < c / 2; ++k)
            for (int64_t j = 0; j < d; ++j) {
              lpBlock.set((i * (c / 2) + k) * d + j, lp.get(at(i, k, j)));
              wholeDx[(i * (c / 2) + k) * d + j] = dx.get(at(i, k, j));
            }
        ExecEnv env;
        env.rank = rank;
        env.worldSize = 4;
        runKernel("nll_loss", {&lpBlock, &labels}, {&part}, block, env);
        for (int64_t e = 0; e < numel(lossShape); ++e)
          sum[e] += part.get(e);
        runKernel("softmax_cross_entropy_loss_grad", {&dloss, &lpBlock, &labels}, {&dxBlock},
                  block, env);
        expectNear(dxBlock.values(), wholeDx, 1e-12, 1e-14, "gradient block");
      }
      expectNear(sum, loss.values(), 1e-12, 1e-14, "summed loss");
    }
}

TEST(LossKernels, Errors) {
  TestTensor x(DType::F32, {3, 5}), labels(DType::I64, {3}, {0, 5, 1}),
      loss(DType::F32, {}), lp(DType::F32, {3, 5});
  std::string e = kernelError("softmax_cross_entropy_loss", {&x, &labels}, {&loss, &lp});
  EXPECT_NE(e.find("label 5"), std::string::npos) << e;
  EXPECT_NE(e.find("[0, 5)"), std::string::npos) << e;
  e = kernelError("nll_loss", {&x, &labels}, {&loss}, {{"ignore_index", -100}});
  EXPECT_NE(e.find("label 5"), std::string::npos) << e;
  EXPECT_NE(e.find("ignore_index -100"), std::string::npos) << e;
  EXPECT_EQ(kernelError("nll_loss", {&x, &labels}, {&loss}, {{"ignore_index", 5}}), "");
  TestTensor neg(DType::I32, {3}, {0, -1, 1});
  e = kernelError("nll_loss", {&x, &neg}, {&loss});
  EXPECT_NE(e.find("label -1"), std::string::npos) << e;
  TestTensor dloss(DType::F32, {}), dx(DType::F32, {3, 5});
  e = kernelError("softmax_cross_entropy_loss_grad", {&dloss, &lp, &neg}, {&dx},
                  {{"reduction", "sum"}});
  EXPECT_NE(e.find("label -1"), std::string::npos) << e;
  e = kernelError("nll_loss_grad", {&dloss, &labels}, {&dx});
  EXPECT_NE(e.find("label 5"), std::string::npos) << e;

  TestTensor good(DType::I64, {3}, {0, 4, 1});
  EXPECT_EQ(kernelError("softmax_cross_entropy_loss", {&x, &good}, {&loss, &lp}), "");
  // Scores padded to 5 classes of which 4 are real (a padded vocabulary,
  // the plan's "classes"): class 4 is no label.
  e = kernelError("softmax_cross_entropy_loss", {&x, &good}, {&loss, &lp}, {{"classes", 4}});
  EXPECT_NE(e.find("label 4 (at position 1 of the labels) is out of range [0, 4)"),
            std::string::npos)
      << e;
  e = kernelError("nll_loss", {&x, &good}, {&loss}, {{"classes", 4}});
  EXPECT_NE(e.find("out of range [0, 4)"), std::string::npos) << e;
  EXPECT_NE(kernelError("nll_loss", {&x, &good}, {&loss}, {{"classes", 6}})
                .find("classes 6 of scores of 5"),
            std::string::npos);
  EXPECT_NE(kernelError("nll_loss", {&x, &good}, {&loss}, {{"reduction", "avg"}})
                .find("reduction"),
            std::string::npos);
  TestTensor w4(DType::F32, {4});
  EXPECT_NE(kernelError("nll_loss", {&x, &good, &w4}, {&loss}).find("weights"),
            std::string::npos);
  TestTensor badLabels(DType::I64, {3, 1});
  EXPECT_NE(kernelError("nll_loss", {&x, &badLabels}, {&loss}).find("labels must have shape"),
            std::string::npos);
  TestTensor fl(DType::F32, {3});
  EXPECT_NE(kernelError("nll_loss", {&x, &fl}, {&loss}).find("i32 or i64"),
            std::string::npos);
  EXPECT_NE(kernelError("nll_loss", {&x, &good}, {&loss}, {{"reduction", "none"}})
                .find("loss must be"),
            std::string::npos);
  TestTensor lpBad(DType::F32, {3, 4});
  EXPECT_NE(kernelError("softmax_cross_entropy_loss", {&x, &good}, {&loss, &lpBad})
                .find("log_prob"),
            std::string::npos);
  TestTensor v(DType::F32, {5}), vl(DType::I64, {});
  EXPECT_NE(kernelError("nll_loss", {&v, &vl}, {&loss}).find("rank >= 2"),
            std::string::npos);
  TestTensor dl3(DType::F32, {3});
  EXPECT_NE(kernelError("nll_loss_grad", {&dl3, &good}, {&dx}).find("dloss"),
            std::string::npos);
  EXPECT_EQ(kernelError("nll_loss_grad", {&dl3, &good}, {&dx}, {{"reduction", "none"}}), "");
  TestTensor h(DType::F16, {3, 5}), hl(DType::F16, {});
  EXPECT_NE(kernelError("nll_loss", {&h, &good}, {&hl}).find("not supported"),
            std::string::npos);
}

} // namespace
