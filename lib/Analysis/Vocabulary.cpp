//===- Vocabulary.cpp - what px-pad-vocabulary may pad --------------------===//

#include "parallax/Analysis/Vocabulary.h"

#include "parallax/Analysis/Layers.h"

#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace parallax {
namespace {

px::VariableOp trainableVariable(Value v) {
  auto var = v.getDefiningOp<px::VariableOp>();
  return var && var.getTrainable() ? var : px::VariableOp();
}

/// The last dimension of `v`, 0 for a scalar.
int64_t lastDim(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getRank() ? t.getShape().back() : 0;
}

/// An embedding lookup: rows of `table` by ids from the data.
bool gathersRows(Operation *user, Value table) {
  return isRowGatherOf(user, table) &&
         !cast<px::GatherOp>(user).getIndices().getDefiningOp<px::ConstantOp>();
}

/// Zeros can be appended to its initial value, which then names its own
/// shape (`padded from`): an ONNX initializer.
bool paddable(px::VariableOp var) { return isa<px::OnnxInitializerAttr>(var.getInit()); }

/// The output layer whose [N, C] scores `scores` are, through reshapes
/// that keep C last and adds of a trainable [C] bias (into `v`).
bool outputLayerOf(Value scores, Vocabulary &v) {
  const int64_t classes = v.size;
  auto bias = [&](Value b) {
    px::VariableOp var = trainableVariable(b);
    auto type = var ? dyn_cast<RankedTensorType>(var.getType()) : RankedTensorType();
    if (!type || type.getRank() != 1 || type.getDimSize(0) != classes || !b.hasOneUse())
      return false;
    v.variables[var] = 0;
    return true;
  };
  for (Value s = scores;;) {
    Operation *def = s.getDefiningOp();
    if (!def || !s.hasOneUse() || lastDim(s) != classes)
      return false;
    v.chain.push_back(def);
    if (auto r = dyn_cast<px::ReshapeOp>(def)) {
      if (lastDim(r.getInput()) != classes)
        return false;
      s = r.getInput();
      continue;
    }
    if (auto a = dyn_cast<px::AddOp>(def)) {
      bool lhsCarries = a.getLhs().getType() == a.getType();
      Value carrier = lhsCarries ? a.getLhs() : a.getRhs();
      if (carrier.getType() != a.getType() || !bias(lhsCarries ? a.getRhs() : a.getLhs()))
        return false;
      s = carrier;
      continue;
    }
    if (auto g = dyn_cast<px::GemmOp>(def)) {
      v.weight = trainableVariable(g.getB());
      if (!v.weight || (g.getC() && !bias(g.getC())))
        return false;
      v.variables[v.weight] = g.getTransB() ? 0 : 1;
      return true;
    }
    if (auto m = dyn_cast<px::MatMulOp>(def)) {
      if (cast<RankedTensorType>(m.getRhs().getType()).getRank() != 2)
        return false;
      if ((v.weight = trainableVariable(m.getRhs()))) {
        v.variables[v.weight] = 1;
        return true;
      }
      // A tied embedding: the output layer reads the table's transpose.
      auto t = m.getRhs().getDefiningOp<px::TransposeOp>();
      v.weight = t ? trainableVariable(t.getInput()) : px::VariableOp();
      if (!v.weight || !t->hasOneUse() || t.getPerm() != ArrayRef<int64_t>{1, 0})
        return false;
      v.chain.push_back(t);
      v.variables[v.weight] = 0;
      return true;
    }
    return false;
  }
}

/// Worth padding: classes at least as many as the layer's input features
/// (split by classes, it moves less than split by input features, whose
/// partial [N, C] scores are summed), or a table the embedding shares. A
/// classifier's few classes keep their split by input features.
bool isVocabulary(const Vocabulary &v) {
  px::VariableOp weight = v.weight;
  int64_t dim = v.variables.lookup(weight);
  int64_t inputs = cast<RankedTensorType>(weight.getType()).getDimSize(1 - dim);
  return v.size >= inputs || (dim == 0 && llvm::any_of(weight->getUsers(), [&](Operation *u) {
                                return gathersRows(u, weight.getOutput());
                              }));
}

} // namespace

std::vector<Vocabulary> vocabulariesOf(func::FuncOp func) {
  std::vector<Vocabulary> found;
  llvm::DenseSet<Operation *> taken;
  auto claim = [&](Vocabulary v) {
    llvm::SetVector<Operation *> chain(v.chain.begin(), v.chain.end());
    for (auto &[var, dim] : v.variables) {
      // A row gather reads a table padded by rows only.
      px::VariableOp table = var;
      bool rows = dim == 0;
      if (taken.contains(var) || !paddable(var) ||
          !llvm::all_of(var->getUsers(), [&](Operation *u) {
            return chain.contains(u) || (rows && gathersRows(u, table.getOutput()));
          }))
        return;
    }
    for (auto &entry : v.variables)
      taken.insert(entry.first);
    found.push_back(std::move(v));
  };
  func.walk([&](px::SoftmaxCrossEntropyLossOp loss) {
    auto scores = cast<RankedTensorType>(loss.getScores().getType());
    Vocabulary v;
    v.loss = loss;
    v.size = scores.getRank() == 2 ? scores.getDimSize(1) : 0;
    if (v.size > 0 && !loss.getWeights() && loss.getLogProb().use_empty() &&
        outputLayerOf(loss.getScores(), v) && isVocabulary(v))
      claim(std::move(v));
  });
  // Tables of at least as many rows as their width (a vocabulary, not a
  // small lookup such as BERT's two token types, which a split would cost
  // an all-reduce of every lookup to save a few rows).
  for (auto var : func.getOps<px::VariableOp>()) {
    auto type = dyn_cast<RankedTensorType>(var.getType());
    if (!var.getTrainable() || !type || type.getRank() != 2 ||
        type.getDimSize(0) < type.getDimSize(1) || var->use_empty() ||
        !llvm::all_of(var->getUsers(), [&](Operation *u) { return gathersRows(u, var.getOutput()); }))
      continue;
    Vocabulary v;
    v.size = type.getDimSize(0);
    v.variables[var] = 0;
    claim(std::move(v));
  }
  return found;
}

} // namespace parallax
