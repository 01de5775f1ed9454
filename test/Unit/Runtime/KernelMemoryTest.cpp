//===- KernelMemoryTest.cpp - the libraries' memory the plan predicts -----===//
//
// libraryBytes counts oneDNN's 4 MiB exactly when some product of the plan
// runs on it: the split Blas.cpp's gemmImpl makes (kOnednnMinWork per
// piece), and for a recurrent layer its sequence-wide products. The
// figures below are worked out by hand from those rules.
//
//===----------------------------------------------------------------------===//

#include "parallax/Runtime/KernelMemory.h"
#include "parallax/Runtime/Plan.h"

#include <gtest/gtest.h>

using namespace parallax::rt;

namespace {

int32_t addTensor(Plan &plan, std::vector<int64_t> shape) {
  PlanTensor t;
  t.dtype = DType::F32;
  t.shape = std::move(shape);
  plan.tensors.push_back(t);
  return (int32_t)plan.tensors.size() - 1;
}

/// A plan of one kernel `op` on tensors of `ins` and `outs` shapes.
Plan planOf(const std::string &op, std::vector<std::vector<int64_t>> ins,
            std::vector<std::vector<int64_t>> outs, nlohmann::json attrs = {}) {
  Plan plan;
  plan.target = "cpu";
  PlanKernel k;
  k.op = op;
  k.attrs = attrs.is_null() ? nlohmann::json::object() : attrs;
  for (auto &s : ins)
    k.inputs.push_back(addTensor(plan, s));
  for (auto &s : outs)
    k.outputs.push_back(addTensor(plan, s));
  plan.kernels.push_back(k);
  return plan;
}

/// gru_classifier's bidirectional GRU (12 steps, 8 inputs, 32 hidden: W
/// 2x96x8, R 2x96x32) over `batch` sequences, forward or gradient.
Plan gruOf(int64_t batch, bool grad) {
  std::vector<int64_t> x{12, batch, 8}, w{2, 96, 8}, r{2, 96, 32};
  return planOf(grad ? "gru_grad" : "gru", {x, w, r}, {x});
}

// 0 without oneDNN: every product runs on OpenBLAS.
const int64_t kOnednn = onednnBytes();

} // namespace

TEST(KernelMemory, OneDnnHoldsWhatItsInstructionSetTakes) {
#ifdef PARALLAX_HAVE_DNNL
  EXPECT_TRUE(kOnednn == kOnednnBytes || kOnednn == kOnednnAvx2Bytes);
#else
  EXPECT_EQ(kOnednn, 0);
#endif
}

TEST(KernelMemory, OneDnnFromItsThresholdPerThreadPiece) {
  // 64^3 multiply-adds on one thread reach oneDNN; one row fewer does not.
  EXPECT_EQ(libraryBytes(planOf("gemm", {{64, 64}, {64, 64}}, {{64, 64}}), 1), kOnednn);
  EXPECT_EQ(libraryBytes(planOf("gemm", {{63, 64}, {64, 64}}, {{63, 64}}), 1), 0);
  // 128 x 128 x 64 cut over 4 threads by 16-column blocks: 32 columns a
  // piece, 128 * 32 * 64 = 64^3; over 8 threads 16 columns, half that.
  Plan wide = planOf("gemm", {{128, 64}, {64, 128}}, {{128, 128}});
  EXPECT_EQ(libraryBytes(wide, 4), kOnednn);
  EXPECT_EQ(libraryBytes(wide, 8), 0);
  // trans_a: the depth is a's first dimension (64: 32 x 128 x 64 = 64^3;
  // its last, 32, would give half).
  EXPECT_EQ(libraryBytes(planOf("gemm", {{64, 32}, {64, 128}}, {{32, 128}},
                                {{"trans_a", true}}),
                         1),
            kOnednn);
}

TEST(KernelMemory, ARecurrentLayerOnlyWhenOneOfItsProductsIsLarge) {
  // Forward: the input projection [12 B, 96] = x [12 B, 8] W^T, 147456
  // multiply-adds at B = 16, and each step's [16, 96] from the state,
  // 49152: under the threshold.
  EXPECT_EQ(libraryBytes(gruOf(16, false), 2), 0);
  // Gradient: dR [96, 32] over 192 rows, 589824 (each direction on one of
  // 2 threads); with 4 sequences a rank, 147456: OpenBLAS only.
  EXPECT_EQ(libraryBytes(gruOf(16, true), 2), kOnednn);
  EXPECT_EQ(libraryBytes(gruOf(4, true), 2), 0);
}

TEST(KernelMemory, ARecurrentLayersStepProductsCount) {
  // One input, 128 hidden, 64 sequences: the projection is 6144 multiply-
  // adds a step, each step's state product [64, 384] from [64, 128]
  // 3145728: oneDNN.
  std::vector<int64_t> x{12, 64, 1}, w{1, 384, 1}, r{1, 384, 128};
  EXPECT_EQ(libraryBytes(planOf("gru", {x, w, r}, {x}), 1), kOnednn);
}
