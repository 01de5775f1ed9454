//===- LossTest.cpp - the Loss CUDA kernels against the CPU's --------------===//

#include "CudaKernelTestUtil.h"

#include "../Runtime/KernelTestCases.h"

#include <cmath>
#include <optional>

namespace parallax::rt::test {
namespace {

const DType kFloats[] = {DType::F32, DType::F64};

using namespace cases;

nlohmann::json lossAttrs(const std::string &reduction, std::optional<int64_t> ignore) {
  nlohmann::json a = nlohmann::json::object();
  if (!reduction.empty())
    a["reduction"] = reduction;
  if (ignore)
    a["ignore_index"] = *ignore;
  return a;
}

const std::vector<LossCase> kCases = {
    {{5, 7}, false, std::nullopt},
    {{5, 7}, true, 2},
    {{6, 4}, false, -100}, // ignore_index outside [0, C)
    {{4, 3, 6}, true, std::nullopt},
    {{2, 5, 3, 4}, false, 1},
    {{2, 5, 3, 4}, true, -1},
    // Several blocks, long lines (256- and 1024-thread blocks), many lines.
    {{300, 1000}, true, 3},
    {{7, 5003}, false, std::nullopt},
    {{2000, 10}, true, std::nullopt},
    {{4, 10, 32, 33}, true, 0},
};

/// Empty reduction: the attribute left out (mean).
const char *kReductions[] = {"none", "sum", "mean", ""};

/// Calls f(dtype, label type, case, reduction) for every combination, in a
/// trace that names it.
template <typename F> void forEachLossCase(F f) {
  for (DType dt : kFloats)
    for (DType lt : {DType::I64, DType::I32})
      for (const LossCase &c : kCases)
        for (const char *reduction : kReductions) {
          SCOPED_TRACE(::testing::Message()
                       << nameOf(dt) << " labels " << nameOf(lt) << " scores "
                       << ::testing::PrintToString(c.shape) << " weights " << c.weights
                       << " ignore " << (c.ignore ? *c.ignore : 999) << " reduction '"
                       << reduction << "'");
          f(dt, lt, c, std::string(reduction));
        }
}

TEST_F(CudaKernelTest, LossForwardMatchesCpu) {
  forEachLossCase([](DType dt, DType lt, const LossCase &c, const std::string &reduction) {
    std::vector<int64_t> ls = labelShapeOf(c.shape);
    int64_t cls = c.shape[1];
    TestTensor x(dt, c.shape, randomValues(numel(c.shape), 101, -4, 4));
    TestTensor labels(lt, ls, makeLabels(numel(ls), cls, 102, c.ignore));
    std::vector<int64_t> lossShape =
        std::string(reduction) == "none" ? ls : std::vector<int64_t>{};
    nlohmann::json attrs = lossAttrs(reduction, c.ignore);
    std::vector<TestTensor> ins{x, labels};
    if (c.weights)
      ins.push_back(TestTensor(dt, {cls}, randomValues(cls, 103, 0.1, 2)));
    expectCudaMatchesCpu("softmax_cross_entropy_loss", ins,
                         {TestTensor(dt, lossShape), TestTensor(dt, c.shape)}, attrs,
                         1e-5, 1e-5);
    // nll_loss over log-probabilities.
    std::vector<TestTensor> nllIns = ins;
    nllIns[0] = TestTensor(dt, c.shape, randomValues(numel(c.shape), 104, -6, 0));
    expectCudaMatchesCpu("nll_loss", nllIns, {TestTensor(dt, lossShape)}, attrs,
                         1e-5, 1e-5);
  });
}

TEST_F(CudaKernelTest, LossGradientsMatchCpu) {
  forEachLossCase([](DType dt, DType lt, const LossCase &c, const std::string &reduction) {
    std::vector<int64_t> ls = labelShapeOf(c.shape);
    int64_t cls = c.shape[1];
    bool none = std::string(reduction) == "none";
    TestTensor dloss = none ? TestTensor(dt, ls, randomValues(numel(ls), 111))
                            : TestTensor(dt, {}, {0.75});
    TestTensor logProb(dt, c.shape, randomValues(numel(c.shape), 112, -6, 0));
    TestTensor labels(lt, ls, makeLabels(numel(ls), cls, 113, c.ignore));
    nlohmann::json attrs = lossAttrs(reduction, c.ignore);
    std::vector<TestTensor> sce{dloss, logProb, labels}, nll{dloss, labels};
    if (c.weights) {
      TestTensor w(dt, {cls}, randomValues(cls, 114, 0.1, 2));
      sce.push_back(w);
      nll.push_back(w);
    }
    expectCudaMatchesCpu("softmax_cross_entropy_loss_grad", sce,
                         {TestTensor(dt, c.shape)}, attrs, 1e-5, 1e-6);
    expectCudaMatchesCpu("nll_loss_grad", nll, {TestTensor(dt, c.shape)}, attrs,
                         1e-5, 1e-6);
  });
}

TEST_F(CudaKernelTest, LossClassBlocksMatchCpu) {
  // A vocabulary-parallel loss: nll_loss and the softmax cross entropy's
  // gradient on each rank's block of the classes (axis 1 of a 2 x 2 grid),
  // labels in every block and ignored ones, classes contiguous and D apart.
  for (const Shape &block : {Shape{16, 4}, Shape{4, 3, 5}})
    for (const char *reduction : {"mean", "none"})
      for (int r = 0; r < 4; ++r) {
        SCOPED_TRACE(::testing::Message() << ::testing::PrintToString(block) << " "
                                          << reduction << " rank " << r);
        ExecEnv env;
        env.worldSize = 4;
        env.rank = r;
        std::vector<int64_t> ls = labelShapeOf(block);
        bool none = std::string(reduction) == "none";
        std::vector<int64_t> lossShape = none ? ls : std::vector<int64_t>{};
        TestTensor labels(DType::I64, ls, makeLabels(numel(ls), 2 * block[1], 121, -100));
        nlohmann::json attrs = {{"reduction", reduction},
                                {"ignore_index", -100},
                                {"grid_shape", {2, 2}},
                                {"grid_axes", {1}}};
        TestTensor lp(DType::F32, block, randomValues(numel(block), 122, -6, 0));
        expectCudaMatchesCpu("nll_loss", {lp, labels}, {TestTensor(DType::F32, lossShape)},
                             attrs, 1e-5, 1e-5, env);
        TestTensor dloss = none ? TestTensor(DType::F32, ls, randomValues(numel(ls), 123))
                                : TestTensor(DType::F32, {}, {0.75});
        expectCudaMatchesCpu("softmax_cross_entropy_loss_grad", {dloss, lp, labels},
                             {TestTensor(DType::F32, block)}, attrs, 1e-5, 1e-6, env);
      }
}

TEST_F(CudaKernelTest, LossAllIgnored) {
  // The mean of nothing is NaN (checked on its own: the comparison cannot
  // take NaN); its gradient is zero, and the sum is 0.
  TestTensor x(DType::F32, {3, 4}, randomValues(12, 5)), labels(DType::I64, {3}, {7, 7, 7});
  nlohmann::json attrs = {{"ignore_index", 7}};
  TestTensor dloss(DType::F32, {}, {1.0}), lp(DType::F32, {3, 4}, randomValues(12, 6, -3, 0));
  expectCudaMatchesCpu("softmax_cross_entropy_loss_grad", {dloss, lp, labels},
                       {TestTensor(DType::F32, {3, 4})}, attrs);
  expectCudaMatchesCpu("nll_loss_grad", {dloss, labels}, {TestTensor(DType::F32, {3, 4})},
                       attrs);
  attrs["reduction"] = "sum";
  expectCudaMatchesCpu("nll_loss", {x, labels}, {TestTensor(DType::F32, {})}, attrs);
  expectCudaMatchesCpu("softmax_cross_entropy_loss", {x, labels},
                       {TestTensor(DType::F32, {}), TestTensor(DType::F32, {3, 4})}, attrs);

  // The mean over no labels.
  TestTensor loss = runOnCuda("nll_loss", {x, labels}, {TestTensor(DType::F32, {})},
                              {{"ignore_index", 7}})[0];
  EXPECT_TRUE(std::isnan(loss.get(0)));
}

TEST_F(CudaKernelTest, LossLabelOutOfRange) {
  // The CPU throws when it meets the label; the GPU reports a fault that
  // fails the step at synchronize().
  for (DType lt : {DType::I64, DType::I32})
    for (double bad : {5.0, -1.0, 1000.0}) {
      SCOPED_TRACE(::testing::Message() << nameOf(lt) << " label " << bad);
      TestTensor x(DType::F32, {4, 5}, randomValues(20, 7));
      TestTensor labels(lt, {4}, {0, 1, bad, 3});
      TestTensor x3(DType::F32, {2, 5, 3}, randomValues(30, 8));
      TestTensor labels3(lt, {2, 3}, {0, 1, 2, 3, bad, 4});
      for (const char *reduction : {"none", "mean", "sum"}) {
        nlohmann::json attrs = {{"reduction", reduction}, {"ignore_index", -100}};
        bool none = std::string(reduction) == "none";
        TestTensor loss(DType::F32, none ? std::vector<int64_t>{4} : std::vector<int64_t>{});
        TestTensor loss3(DType::F32,
                         none ? std::vector<int64_t>{2, 3} : std::vector<int64_t>{});
        expectCudaMatchesCpu("softmax_cross_entropy_loss", {x, labels},
                             {loss, TestTensor(DType::F32, {4, 5})}, attrs);
        expectCudaMatchesCpu("softmax_cross_entropy_loss", {x3, labels3},
                             {loss3, TestTensor(DType::F32, {2, 5, 3})}, attrs);
        expectCudaMatchesCpu("nll_loss", {x, labels}, {loss}, attrs);
        TestTensor dloss = none ? TestTensor(DType::F32, {4}, {1, 1, 1, 1})
                                : TestTensor(DType::F32, {}, {1.0});
        expectCudaMatchesCpu("softmax_cross_entropy_loss_grad", {dloss, x, labels},
                             {TestTensor(DType::F32, {4, 5})}, attrs);
        expectCudaMatchesCpu("nll_loss_grad", {dloss, labels},
                             {TestTensor(DType::F32, {4, 5})}, attrs);
      }
    }
  // After a fault the device goes on: a good kernel runs clean.
  TestTensor x(DType::F32, {4, 5}, randomValues(20, 7));
  TestTensor labels(DType::I64, {4}, {0, 1, 2, 3});
  expectCudaMatchesCpu("nll_loss", {x, labels}, {TestTensor(DType::F32, {})});
}

TEST_F(CudaKernelTest, LossLabelInThePadding) {
  // Scores padded to 5 classes of which 4 are real (the plan's "classes").
  TestTensor x(DType::F32, {4, 5}, randomValues(20, 7));
  TestTensor labels(DType::I64, {4}, {0, 1, 4, 3});
  nlohmann::json attrs = {{"classes", 4}};
  expectCudaMatchesCpu("softmax_cross_entropy_loss", {x, labels},
                       {TestTensor(DType::F32, {}), TestTensor(DType::F32, {4, 5})}, attrs);
  expectCudaMatchesCpu("nll_loss", {x, labels}, {TestTensor(DType::F32, {})}, attrs);
  std::string message = cudaKernelError("nll_loss", {x, labels}, {TestTensor(DType::F32, {})}, attrs);
  EXPECT_NE(message.find("label 4 is out of range [0, 4)"), std::string::npos) << message;
}

TEST_F(CudaKernelTest, LossBindErrors) {
  TestTensor x(DType::F32, {4, 5}), labels(DType::I64, {4}), loss(DType::F32, {}),
      lp(DType::F32, {4, 5});
  expectCudaMatchesCpu("nll_loss", {x, labels}, {loss}, {{"reduction", "avg"}});
  TestTensor w4(DType::F32, {4});
  expectCudaMatchesCpu("nll_loss", {x, labels, w4}, {loss});
  TestTensor badLabels(DType::I64, {5});
  expectCudaMatchesCpu("nll_loss", {x, badLabels}, {loss});
  TestTensor fl(DType::F32, {4});
  expectCudaMatchesCpu("nll_loss", {x, fl}, {loss});
  expectCudaMatchesCpu("nll_loss", {x, labels}, {loss}, {{"reduction", "none"}});
  TestTensor lpBad(DType::F32, {4, 6});
  expectCudaMatchesCpu("softmax_cross_entropy_loss", {x, labels}, {loss, lpBad});
  TestTensor v(DType::F32, {4}), vl(DType::I64, {4});
  expectCudaMatchesCpu("nll_loss", {v, vl}, {loss});
  TestTensor dl3(DType::F32, {3});
  expectCudaMatchesCpu("nll_loss_grad", {dl3, labels}, {x});
  TestTensor h(DType::I32, {4, 5});
  expectCudaMatchesCpu("nll_loss", {h, labels}, {loss});
}

} // namespace
} // namespace parallax::rt::test
