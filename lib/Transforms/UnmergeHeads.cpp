//===- UnmergeHeads.cpp - attention's batch and heads kept apart ----------===//
//
// A reshape that merges two dimensions into one ([T, B, H*Dh] -> [T, B*H,
// Dh]) has the same bytes as the unmerged [T, B, H, Dh], so every op after
// it can run on the unmerged form instead, with each use that needs the
// merged form reading a reshape back. The rewrite is therefore always
// exact; it is kept to merges that reach a batched product (attention's),
// where the heads must stay a dimension of their own for a model-axis
// split to follow them.
//
//===----------------------------------------------------------------------===//

#include "parallax/Transforms/Passes.h"

#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Dialect/Px/PxShapes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace parallax {
#define GEN_PASS_DEF_PXUNMERGEHEADS
#include "parallax/Transforms/Passes.h.inc"
} // namespace parallax

using namespace mlir;
using namespace parallax;

namespace {

/// A value's unmerged form: `dim` of the merged value is dimensions `dim`
/// and `dim + 1` of `value`, of sizes `outer` and `inner`.
struct Unmerged {
  Value value;
  int64_t dim = 0, outer = 1, inner = 1;
};

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// The shape of the merged form `shape` (rank r) with dimension `dim`
/// unmerged into (outer, inner) (rank r + 1).
SmallVector<int64_t> unmergedShape(ArrayRef<int64_t> shape, int64_t dim, int64_t outer,
                                   int64_t inner) {
  SmallVector<int64_t> out(shape.begin(), shape.begin() + dim);
  out.append({outer, inner});
  out.append(shape.begin() + dim + 1, shape.end());
  return out;
}

/// The finest shape both `a` and `b` are merges of consecutive dimensions
/// of, each of `b`'s dimensions as the run of its dimensions it covers;
/// none where sizes interleave.
std::optional<std::pair<SmallVector<int64_t>, SmallVector<int64_t>>>
refinement(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  SmallVector<int64_t> fine, runs(b.size(), 0);
  size_t i = 0, j = 0;
  int64_t ra = a.empty() ? 1 : a[0], rb = b.empty() ? 1 : b[0];
  while (i < a.size() && j < b.size()) {
    int64_t f = ra == rb ? ra : ra > 0 && rb > 0 && ra % rb == 0 ? rb
                              : ra > 0 && rb > 0 && rb % ra == 0 ? ra : -1;
    if (f <= 0)
      return std::nullopt;
    fine.push_back(f);
    ++runs[j];
    ra /= f;
    rb /= f;
    if (ra == 1 && ++i < a.size())
      ra = a[i];
    if (rb == 1 && ++j < b.size())
      rb = b[j];
  }
  if (i < a.size() || j < b.size())
    return std::nullopt;
  return std::make_pair(fine, runs);
}

/// Whether `v` reaches, through transposes and element-wise ops, a batched
/// product of two activations.
bool reachesBatchedProduct(Value v, int depth = 0) {
  if (depth > 6)
    return false;
  for (Operation *user : v.getUsers()) {
    if (auto m = dyn_cast<px::MatMulOp>(user))
      if (typeOf(m.getLhs()).getRank() >= 3 && typeOf(m.getRhs()).getRank() >= 3 &&
          !m.getLhs().getDefiningOp<px::VariableOp>() &&
          !m.getRhs().getDefiningOp<px::VariableOp>())
        return true;
    if ((isa<px::TransposeOp, px::SoftmaxOp>(user) ||
         user->hasTrait<px::OpTrait::Elementwise>()) &&
        user->getNumResults() == 1 && reachesBatchedProduct(user->getResult(0), depth + 1))
      return true;
  }
  return false;
}

class Unmerger {
public:
  explicit Unmerger(OpBuilder &b) : b(b) {}

  void visit(Operation *op);

private:
  /// A merging reshape's result in its unmerged form, if it is one.
  void enter(px::ReshapeOp r);
  /// `op` on unmerged operands; false where it has no rule (its operands
  /// are then read merged).
  bool rewrite(Operation *op);
  /// `v` in the unmerged form of `like`'s merged dimension, if its shape
  /// allows (an operand outside the attention: broadcast or merged).
  std::optional<Value> unmergeOperand(Value v, int64_t resultRank, const Unmerged &like);

  OpBuilder &b;
  llvm::DenseMap<Value, Unmerged> unmerged;
};

void Unmerger::enter(px::ReshapeOp r) {
  ArrayRef<int64_t> in = typeOf(r.getInput()).getShape(), out = r.getType().getShape();
  auto fine = refinement(in, out);
  if (!fine || fine->first.size() != out.size() + 1)
    return;
  // One output dimension of two factors (the first at `first` of the
  // refinement), each other of one.
  int64_t dim = -1, first = 0;
  for (size_t d = 0, f = 0; d < out.size(); f += fine->second[d], ++d) {
    if (fine->second[d] == 2) {
      if (dim >= 0)
        return;
      dim = d;
      first = f;
    } else if (fine->second[d] != 1) {
      return;
    }
  }
  if (dim < 0)
    return;
  int64_t outer = fine->first[first], inner = fine->first[first + 1];
  if (outer == 1 || inner == 1 || !reachesBatchedProduct(r.getResult()))
    return;
  b.setInsertionPointAfter(r);
  auto type = RankedTensorType::get(fine->first, r.getType().getElementType());
  Value u = r.getInput();
  if (typeOf(u).getShape() != ArrayRef<int64_t>(fine->first))
    u = px::ReshapeOp::create(b, r.getLoc(), type, r.getInput());
  unmerged[r.getResult()] = Unmerged{u, dim, outer, inner};
}

std::optional<Value> Unmerger::unmergeOperand(Value v, int64_t resultRank,
                                              const Unmerged &like) {
  if (auto it = unmerged.find(v); it != unmerged.end()) {
    const Unmerged &u = it->second;
    int64_t offset = resultRank - typeOf(v).getRank();
    if (u.dim + offset != like.dim || u.outer != like.outer || u.inner != like.inner)
      return std::nullopt;
    return u.value;
  }
  // Aligned to the result's trailing dimensions (ONNX broadcasting).
  auto type = typeOf(v);
  int64_t dim = like.dim - (resultRank - type.getRank());
  if (dim < 0) // short of the merged dimension: it aligns as it is
    return v;
  int64_t size = type.getDimSize(dim);
  SmallVector<int64_t> shape;
  if (size == 1)
    shape = unmergedShape(type.getShape(), dim, 1, 1);
  else if (size == like.outer * like.inner)
    shape = unmergedShape(type.getShape(), dim, like.outer, like.inner);
  else
    return std::nullopt;
  return px::ReshapeOp::create(b, v.getLoc(),
                               RankedTensorType::get(shape, type.getElementType()), v)
      .getResult();
}

bool Unmerger::rewrite(Operation *op) {
  if (op->getNumResults() != 1)
    return false;
  auto result = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!result)
    return false;
  // The first operand in unmerged form carries the merged dimension.
  auto carrier = llvm::find_if(op->getOperands(), [&](Value v) { return unmerged.count(v); });
  if (carrier == op->getOperands().end())
    return false;
  const Unmerged first = unmerged.lookup(*carrier);
  int64_t rank = result.getRank();
  // Where the merged dimension lands in the result.
  Unmerged like = first;
  b.setInsertionPoint(op);
  Location loc = op->getLoc();

  if (auto t = dyn_cast<px::TransposeOp>(op)) {
    SmallVector<int64_t> perm;
    int64_t at = -1;
    for (int64_t p : t.getPerm()) {
      if (p == like.dim) {
        at = perm.size();
        perm.append({like.dim, like.dim + 1});
      } else {
        perm.push_back(p < like.dim ? p : p + 1);
      }
    }
    Value u = px::TransposeOp::create(b, loc, like.value, b.getDenseI64ArrayAttr(perm));
    unmerged[op->getResult(0)] = Unmerged{u, at, like.outer, like.inner};
    return true;
  }

  if (auto s = dyn_cast<px::SoftmaxOp>(op)) {
    std::optional<int64_t> axis = px::normalizeAxis(s.getAxis(), rank);
    if (!axis || *axis == like.dim)
      return false;
    Value u = px::SoftmaxOp::create(b, loc, like.value, *axis < like.dim ? *axis : *axis + 1);
    unmerged[op->getResult(0)] = Unmerged{u, like.dim, like.outer, like.inner};
    return true;
  }

  if (auto m = dyn_cast<px::MatMulOp>(op)) {
    // Batched over the merged dimension: both operands of the result's rank.
    if (typeOf(m.getLhs()).getRank() != rank || typeOf(m.getRhs()).getRank() != rank ||
        first.dim >= rank - 2)
      return false;
  } else if (!op->hasTrait<px::OpTrait::Elementwise>()) {
    return false;
  }
  // The merged dimension's place in the result (operands align to its
  // trailing dimensions).
  like.dim = first.dim + rank - typeOf(*carrier).getRank();
  SmallVector<Value> operands;
  for (Value v : op->getOperands()) {
    if (!isa<RankedTensorType>(v.getType()))
      return false;
    std::optional<Value> u = unmergeOperand(v, rank, like);
    if (!u)
      return false;
    operands.push_back(*u);
  }
  OperationState state(loc, op->getName());
  state.addOperands(operands);
  state.addAttributes(op->getAttrs());
  state.addTypes(RankedTensorType::get(
      unmergedShape(result.getShape(), like.dim, like.outer, like.inner), result.getElementType()));
  Operation *made = b.create(state);
  unmerged[op->getResult(0)] = Unmerged{made->getResult(0), like.dim, like.outer, like.inner};
  return true;
}

void Unmerger::visit(Operation *op) {
  if (auto r = dyn_cast<px::ReshapeOp>(op)) {
    if (auto it = unmerged.find(r.getInput()); it != unmerged.end()) {
      // The same bytes, from the unmerged form.
      b.setInsertionPoint(op);
      r.getInputMutable().assign(it->second.value);
      return;
    }
    enter(r);
    return;
  }
  if (!rewrite(op))
    return;
  // Every use reads the merged form back: those the later ops rewrite read
  // the unmerged one instead, and what is left canonicalizes away.
  Value merged = op->getResult(0);
  Unmerged u = unmerged.lookup(merged);
  b.setInsertionPointAfter(u.value.getDefiningOp());
  Value back = px::ReshapeOp::create(b, op->getLoc(), merged.getType(), u.value);
  merged.replaceAllUsesWith(back);
  unmerged.erase(merged);
  unmerged[back] = u;
  op->erase();
}

struct UnmergeHeadsPass : parallax::impl::PxUnmergeHeadsBase<UnmergeHeadsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp func = getEntryFunction(module);
    if (!func || func.getBody().empty())
      return;
    OpBuilder b(module.getContext());
    Unmerger unmerger(b);
    for (Operation &op : llvm::make_early_inc_range(func.getBody().front()))
      unmerger.visit(&op);
  }
};

} // namespace
