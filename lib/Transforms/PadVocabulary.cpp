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
#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Dialect/Px/PxShapes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace parallax {
#define GEN_PASS_DEF_PXPADVOCABULARY
#include "parallax/Transforms/Passes.h.inc"
} // namespace parallax

using namespace mlir;
using namespace parallax;

namespace {

/// A variable's dimension that holds the vocabulary.
using Pads = llvm::MapVector<px::VariableOp, int64_t>;

px::VariableOp trainableVariable(Value v) {
  auto var = v.getDefiningOp<px::VariableOp>();
  return var && var.getTrainable() ? var : px::VariableOp();
}

int64_t lastDim(Value v) { return cast<RankedTensorType>(v.getType()).getShape().back(); }

/// An embedding lookup: rows of `table` by ids from the data.
bool gathersRows(Operation *user, Value table) {
  auto g = dyn_cast<px::GatherOp>(user);
  if (!g || g.getData() != table || g.getIndices() == table ||
      g.getIndices().getDefiningOp<px::ConstantOp>())
    return false;
  auto type = g.getData().getType();
  return px::normalizeAxis((int64_t)g.getAxis(), type.getRank()) == std::optional<int64_t>(0);
}

/// The output layer whose [N, C] scores `scores` are, through reshapes
/// that keep C last and adds of a trainable [C] bias: the ops from the
/// layer's product (or its weight's transpose) to `scores`, each with C as
/// its result's last dimension, the variables' dimensions that hold C, and
/// the layer's weight.
bool outputLayerOf(Value scores, int64_t classes, SmallVector<Operation *> &chain, Pads &pads,
                   px::VariableOp &weight) {
  auto bias = [&](Value b) {
    px::VariableOp var = trainableVariable(b);
    auto type = var ? dyn_cast<RankedTensorType>(var.getType()) : RankedTensorType();
    if (!type || type.getRank() != 1 || type.getDimSize(0) != classes || !b.hasOneUse())
      return false;
    pads[var] = 0;
    return true;
  };
  for (Value v = scores;;) {
    Operation *def = v.getDefiningOp();
    if (!def || !v.hasOneUse() || lastDim(v) != classes)
      return false;
    chain.push_back(def);
    if (auto r = dyn_cast<px::ReshapeOp>(def)) {
      if (lastDim(r.getInput()) != classes)
        return false;
      v = r.getInput();
      continue;
    }
    if (auto a = dyn_cast<px::AddOp>(def)) {
      bool lhsCarries = a.getLhs().getType() == a.getType();
      Value carrier = lhsCarries ? a.getLhs() : a.getRhs();
      if (carrier.getType() != a.getType() || !bias(lhsCarries ? a.getRhs() : a.getLhs()))
        return false;
      v = carrier;
      continue;
    }
    if (auto g = dyn_cast<px::GemmOp>(def)) {
      px::VariableOp w = trainableVariable(g.getB());
      if (!w || (g.getC() && !bias(g.getC())))
        return false;
      pads[w] = g.getTransB() ? 0 : 1;
      weight = w;
      return true;
    }
    if (auto m = dyn_cast<px::MatMulOp>(def)) {
      if (cast<RankedTensorType>(m.getRhs().getType()).getRank() != 2)
        return false;
      if (px::VariableOp w = trainableVariable(m.getRhs())) {
        pads[w] = 1;
        weight = w;
        return true;
      }
      // A tied embedding: the output layer reads the table's transpose.
      auto t = m.getRhs().getDefiningOp<px::TransposeOp>();
      px::VariableOp table = t ? trainableVariable(t.getInput()) : px::VariableOp();
      if (!table || !t->hasOneUse() || t.getPerm() != ArrayRef<int64_t>{1, 0})
        return false;
      chain.push_back(t);
      pads[table] = 0;
      weight = table;
      return true;
    }
    return false;
  }
}

/// `type` with dimension `dim` of `to`.
RankedTensorType withDim(Type type, int64_t dim, int64_t to) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape[dim] = to;
  return t.clone(shape);
}

struct PadVocabularyPass : parallax::impl::PxPadVocabularyBase<PadVocabularyPass> {
  using PxPadVocabularyBase::PxPadVocabularyBase;

  int64_t ranks = 1;

  int64_t padded(int64_t n) const { return (n + ranks - 1) / ranks * ranks; }

  /// The variable padded along `dim`, its initial value the initializer
  /// `padded from` its own shape (a splat: the same splat). False, and
  /// nothing changed, for any other initial value.
  bool padVariable(px::VariableOp var, int64_t dim) {
    auto type = cast<RankedTensorType>(var.getType());
    RankedTensorType to = withDim(type, dim, padded(type.getDimSize(dim)));
    Attribute init = var.getInit();
    if (auto ref = dyn_cast<px::OnnxInitializerAttr>(init)) {
      init = px::OnnxInitializerAttr::get(var.getContext(), ref.getName(), to, type.getShape());
    } else if (auto dense = dyn_cast<DenseElementsAttr>(init); dense && dense.isSplat()) {
      init = DenseElementsAttr::get(to, dense.getSplatValue<Attribute>());
    } else {
      return false;
    }
    var.setInitAttr(init);
    var.getOutput().setType(to);
    return true;
  }

  /// Whether every use of a variable to pad is one the padding leaves
  /// right: a row gather, or the output layer being padded.
  static bool onlyPaddedUses(px::VariableOp var, const llvm::SetVector<Operation *> &chain) {
    return llvm::all_of(var->getUsers(), [&](Operation *u) {
      return chain.contains(u) || gathersRows(u, var.getOutput());
    });
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto pr = px::getAttr<px::PxDialect::ModelRanksAttrHelper>(module);
    ranks = pr ? pr.getInt() : 1;
    func::FuncOp func = getEntryFunction(module);
    if (ranks <= 1 || !func || func.getBody().empty())
      return;
    MLIRContext *ctx = module.getContext();
    OpBuilder b(ctx);
    llvm::DenseSet<Operation *> done;

    // Losses over classes the ranks do not divide, with their output layers.
    SmallVector<px::SoftmaxCrossEntropyLossOp> losses;
    func.walk([&](px::SoftmaxCrossEntropyLossOp l) { losses.push_back(l); });
    for (px::SoftmaxCrossEntropyLossOp loss : losses) {
      auto scores = cast<RankedTensorType>(loss.getScores().getType());
      int64_t classes = scores.getRank() == 2 ? scores.getDimSize(1) : 0;
      if (classes <= 0 || classes % ranks == 0 || loss.getWeights() ||
          !loss.getLogProb().use_empty())
        continue;
      SmallVector<Operation *> found;
      Pads pads;
      px::VariableOp weight;
      if (!outputLayerOf(loss.getScores(), classes, found, pads, weight))
        continue;
      // Worth it where the layer is a vocabulary: classes at least as many
      // as its input features (a split by classes then moves less than
      // one by input features, whose partial [N, C] scores are summed), or
      // a table the embedding shares. A classifier's few classes keep
      // their split by input features, unpadded.
      int64_t inputs = cast<RankedTensorType>(weight.getType()).getDimSize(1 - pads[weight]);
      bool tied = llvm::any_of(weight->getUsers(), [&](Operation *u) {
        return gathersRows(u, weight.getOutput());
      });
      if (classes < inputs && !tied)
        continue;
      llvm::SetVector<Operation *> chain(found.begin(), found.end());
      if (!llvm::all_of(pads, [&](auto &p) { return onlyPaddedUses(p.first, chain); }) ||
          llvm::any_of(pads, [&](auto &p) { return done.contains(p.first); }))
        continue;
      // Initial values first: a variable whose value cannot be padded
      // leaves the whole layer as it is.
      if (!llvm::all_of(pads, [&](auto &p) {
            auto init = p.first.getInit();
            auto dense = dyn_cast<DenseElementsAttr>(init);
            return isa<px::OnnxInitializerAttr>(init) || (dense && dense.isSplat());
          }))
        continue;
      int64_t to = padded(classes);
      for (auto &[var, dim] : pads) {
        padVariable(var, dim);
        done.insert(var);
      }
      // The layer's results, from the product on.
      for (Operation *op : llvm::reverse(found))
        op->getResult(0).setType(withDim(op->getResult(0).getType(),
                                         cast<RankedTensorType>(op->getResult(0).getType())
                                                 .getRank() - 1,
                                         to));
      // The padded classes masked out of the softmax.
      Type elem = scores.getElementType();
      auto maskType = RankedTensorType::get({to}, elem);
      const llvm::fltSemantics &sem = cast<FloatType>(elem).getFloatSemantics();
      SmallVector<APFloat> mask(to, APFloat::getZero(sem));
      bool lost = false;
      APFloat masked(-1e30);
      masked.convert(sem, APFloat::rmNearestTiesToEven, &lost);
      for (int64_t c = classes; c < to; ++c)
        mask[c] = masked;
      b.setInsertionPoint(loss);
      Value maskValue =
          px::ConstantOp::create(b, loss.getLoc(), DenseElementsAttr::get(maskType, mask));
      Value maskedScores = px::AddOp::create(b, loss.getLoc(), loss.getScores().getType(),
                                             loss.getScores(), maskValue);
      loss.getScoresMutable().assign(maskedScores);
      loss.getLogProb().setType(cast<RankedTensorType>(maskedScores.getType()));
      px::setAttr<px::PxDialect::ClassesAttrHelper>(
          loss, IntegerAttr::get(IntegerType::get(ctx, 64), classes));
    }

    // Tables read only by row gathers.
    for (auto var : llvm::make_early_inc_range(func.getOps<px::VariableOp>())) {
      auto type = dyn_cast<RankedTensorType>(var.getType());
      if (!var.getTrainable() || done.contains(var) || !type || type.getRank() < 1 ||
          type.getDimSize(0) % ranks == 0 || var->use_empty() ||
          !llvm::all_of(var->getUsers(),
                        [&](Operation *u) { return gathersRows(u, var.getOutput()); }))
        continue;
      padVariable(var, 0);
    }
  }
};

} // namespace
