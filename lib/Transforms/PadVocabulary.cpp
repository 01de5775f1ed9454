//===- PadVocabulary.cpp - a vocabulary padded to a multiple of Pr --------===//
//
// Megatron-LM's padded vocabulary: a vocabulary-parallel embedding or loss
// splits V rows or classes over the model axis, so V must divide by its Pr
// ranks; BERT's 30522 words do not divide by 4, GPT-2's 50257 by nothing.
// Upstream's shard types have no uneven static blocks, so the vocabulary
// is padded instead, before px-autodiff differentiates the padded step:
// the table's (and the output layer's) padding is zeros that no id reads,
// and the padded classes' scores are masked to -1e30 before the loss, so
// that the loss and every gradient are those of the V real classes.
//
//===----------------------------------------------------------------------===//

#include "parallax/Transforms/Passes.h"
#include "parallax/Analysis/Vocabulary.h"
#include "parallax/Dialect/Px/PxDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace parallax {
#define GEN_PASS_DEF_PXPADVOCABULARY
#include "parallax/Transforms/Passes.h.inc"
} // namespace parallax

using namespace mlir;
using namespace parallax;

namespace {

/// `type` with dimension `dim` of `to`.
RankedTensorType withDim(Type type, int64_t dim, int64_t to) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape[dim] = to;
  return t.clone(shape);
}

/// `var` padded along `dim` to `to`, its initial value the initializer
/// `padded from` its own shape (a splat: the same splat).
void padVariable(px::VariableOp var, int64_t dim, int64_t to) {
  auto type = cast<RankedTensorType>(var.getType());
  RankedTensorType padded = withDim(type, dim, to);
  Attribute init = var.getInit();
  if (auto ref = dyn_cast<px::OnnxInitializerAttr>(init))
    init = px::OnnxInitializerAttr::get(var.getContext(), ref.getName(), padded,
                                        type.getShape());
  else
    init = DenseElementsAttr::get(padded,
                                  cast<DenseElementsAttr>(init).getSplatValue<Attribute>());
  var.setInitAttr(init);
  var.getOutput().setType(padded);
}

/// The padded classes masked out of `loss`'s softmax: -1e30 added to their
/// scores (finite, so that no infinity makes a NaN; half the lowest finite
/// value where -1e30 is not, as in f16), the real classes recorded on the
/// loss.
void maskPadding(px::SoftmaxCrossEntropyLossOp loss, int64_t classes, int64_t to) {
  auto scores = cast<RankedTensorType>(loss.getScores().getType());
  Type elem = scores.getElementType();
  const llvm::fltSemantics &sem = cast<FloatType>(elem).getFloatSemantics();
  APFloat masked(-1e30);
  bool lost = false;
  if (masked.convert(sem, APFloat::rmNearestTiesToEven, &lost) & APFloat::opOverflow ||
      masked.isInfinity()) {
    masked = APFloat::getLargest(sem, /*Negative=*/true);
    masked.divide(APFloat(sem, 2), APFloat::rmNearestTiesToEven);
  }
  SmallVector<APFloat> mask(to, APFloat::getZero(sem));
  for (int64_t c = classes; c < to; ++c)
    mask[c] = masked;
  OpBuilder b(loss);
  Value maskValue = px::ConstantOp::create(
      b, loss.getLoc(), DenseElementsAttr::get(RankedTensorType::get({to}, elem), mask));
  Value maskedScores =
      px::AddOp::create(b, loss.getLoc(), scores, loss.getScores(), maskValue);
  loss.getScoresMutable().assign(maskedScores);
  loss.getLogProb().setType(scores);
  px::setAttr<px::PxDialect::ClassesAttrHelper>(
      loss, IntegerAttr::get(IntegerType::get(loss.getContext(), 64), classes));
}

struct PadVocabularyPass : parallax::impl::PxPadVocabularyBase<PadVocabularyPass> {
  using PxPadVocabularyBase::PxPadVocabularyBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto pr = px::getAttr<px::PxDialect::ModelRanksAttrHelper>(module);
    int64_t ranks = pr ? pr.getInt() : 1;
    func::FuncOp func = getEntryFunction(module);
    if (ranks <= 1 || !func || func.getBody().empty())
      return;
    for (const Vocabulary &v : vocabulariesOf(func)) {
      if (v.size % ranks == 0)
        continue;
      int64_t to = (v.size + ranks - 1) / ranks * ranks;
      for (auto &[var, dim] : v.variables)
        padVariable(var, dim, to);
      if (!v.loss)
        continue;
      // The layer's results, from the product on, carry the padded classes.
      for (Operation *op : llvm::reverse(v.chain)) {
        Value r = op->getResult(0);
        r.setType(withDim(r.getType(), cast<RankedTensorType>(r.getType()).getRank() - 1, to));
      }
      maskPadding(v.loss, v.size, to);
    }
  }
};

} // namespace
