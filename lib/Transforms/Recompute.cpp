//===- Recompute.cpp - cheap activations recomputed in the backward pass --===//
//
// Selective activation recomputation: the backward pass reads a clone of a
// cheap forward op instead of its kept result, where the clone's operands
// are live there anyway (or recomputed themselves). The arena (liveness in
// step order) then frees the forward result after its last forward reader.
// Besides element-wise ops this is Megatron-LM's selective recomputation of
// attention: the scores, softmax and dropout of [B, heads, T, T], the
// largest activations of a transformer and the cheapest to compute again,
// are recomputed from the queries and keys (which their gradients read
// anyway) and the dropout's kept mask. The layers the `layers` option
// names are checkpointed: their products run again from their inputs,
// with the cheap ops that follow them.
//
//===----------------------------------------------------------------------===//

#include "parallax/Transforms/Passes.h"
#include "parallax/Analysis/Layers.h"
#include "parallax/Dialect/Px/PxDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"

namespace parallax {
#define GEN_PASS_DEF_PXRECOMPUTE
#include "parallax/Transforms/Passes.h.inc"
} // namespace parallax

using namespace mlir;
using namespace parallax;

namespace {

bool computed(Value v) {
  Operation *def = v.getDefiningOp();
  return def && !isa<px::VariableOp, px::ConstantOp, px::InputOp>(def);
}

/// Whether `op` is cheap enough to run again in the backward pass: a
/// side-effect-free element-wise op; and, on activations (a weight's
/// transpose stays as it is), a transpose or reshape, a softmax or
/// log-softmax, a batched product neither of whose operands is a layer's
/// weight (attention's scores and context), or a dropout (rebuilt from its
/// kept mask).
bool recomputable(Operation *op) {
  if (op->getNumResults() == 1 && op->getNumOperands() > 0 && isMemoryEffectFree(op) &&
      op->hasTrait<px::OpTrait::Elementwise>())
    return true;
  if (!llvm::any_of(op->getOperands(), computed))
    return false;
  if (isa<px::DropoutOp>(op))
    return true;
  if (op->getNumResults() != 1 || !isMemoryEffectFree(op))
    return false;
  if (isa<px::TransposeOp, px::ReshapeOp, px::SoftmaxOp, px::LogSoftmaxOp>(op))
    return true;
  return isActivationProduct(op);
}

/// The operands a clone of `op` reads: a dropout's output is rebuilt from
/// its input and kept mask.
SmallVector<Value> recomputedFrom(Operation *op) {
  if (auto d = dyn_cast<px::DropoutOp>(op))
    return {d.getInput(), d.getMask()};
  return SmallVector<Value>(op->getOperands());
}

/// Bytes of a tensor value (0 for anything else).
int64_t bytesOf(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || !t.hasStaticShape())
    return 0;
  return t.getNumElements() * std::max<int64_t>(1, t.getElementTypeBitWidth() / 8);
}

struct RecomputePass : parallax::impl::PxRecomputeBase<RecomputePass> {
  using PxRecomputeBase::PxRecomputeBase;

  /// Ops recomputed from what a chain of recomputed ops may reach back:
  /// past it, keeping the activation costs less than computing it again.
  static constexpr int kMaxChain = 16;

  Operation *loss = nullptr;
  func::ReturnOp ret;
  llvm::DenseMap<Value, bool> availability;
  llvm::SetVector<Value> marked;
  llvm::DenseMap<Value, Value> clones;

  bool backward(Operation *user) const { return loss->isBeforeInBlock(user) && user != ret; }

  llvm::StringSet<> checkpointed;
  /// A layer op the `layers` option names.
  bool checkpointedLayer(Operation *op) const {
    px::VariableOp w = layerWeightOf(op);
    return w && op->getNumResults() == 1 && checkpointed.contains(w.getName());
  }

  /// The values of the named layers' segments, each with its layer: the
  /// layer's output and what cheap ops compute from it alone (every
  /// computed operand in the same layer's segment; variables and constants
  /// aside), up to the next layer. A residual join's other operand comes
  /// from elsewhere (the stream, another layer, the model's input): the
  /// join is the next segment's input, kept, so that the residual stream
  /// is the checkpoint and no recomputation reaches back through it.
  llvm::DenseMap<Value, Operation *> segments(func::FuncOp func) {
    llvm::DenseMap<Value, Operation *> layerOf;
    auto free = [](Value o) {
      Operation *def = o.getDefiningOp();
      return def && isa<px::VariableOp, px::ConstantOp>(def);
    };
    for (Operation &op : func.getBody().front()) {
      if (&op == loss)
        break;
      if (checkpointedLayer(&op)) {
        if (llvm::all_of(op.getOperands(), [&](Value o) { return available(o, 1); }))
          layerOf[op.getResult(0)] = &op;
        continue;
      }
      if (!recomputable(&op) || layerWeightOf(&op))
        continue;
      Operation *root = nullptr;
      bool follows = true;
      for (Value o : op.getOperands()) {
        if (free(o))
          continue;
        auto it = layerOf.find(o);
        if (it == layerOf.end() || (root && root != it->second)) {
          follows = false;
          break;
        }
        root = it->second;
      }
      if (follows && root)
        layerOf[op.getResult(0)] = root;
    }
    return layerOf;
  }

  /// Whether the backward pass can have `v`: it reads it anyway (or it is
  /// a variable, constant or input), or `v` can be recomputed from such
  /// values through cheap ops (which are then marked for recomputation).
  bool available(Value v, int depth) {
    if (auto it = availability.find(v); it != availability.end())
      return it->second;
    Operation *def = v.getDefiningOp();
    bool ok = !computed(v) ||
              llvm::any_of(v.getUsers(), [&](Operation *u) { return backward(u); });
    // A view of a weight (a layer's transposed or reshaped weight, which
    // a checkpointed layer reads) is taken again.
    if (!ok && def->isBeforeInBlock(loss) && def->getNumResults() == 1 &&
        isa<px::TransposeOp, px::ReshapeOp>(def) && trainableWeightOf(v)) {
      ok = true;
      marked.insert(v);
    }
    if (!ok && depth < kMaxChain && def->isBeforeInBlock(loss) && recomputable(def) &&
        v == def->getResult(0)) {
      ok = llvm::all_of(recomputedFrom(def), [&](Value o) { return available(o, depth + 1); });
      if (ok)
        marked.insert(v);
    }
    availability[v] = ok;
    return ok;
  }

  /// `v` as the backward pass reads it before `before`: its clone (created
  /// there, or moved there with the clones it reads), or `v` itself.
  Value materialize(Value v, Operation *before, OpBuilder &b) {
    if (auto it = clones.find(v); it != clones.end()) {
      hoistBefore(it->second.getDefiningOp(), before);
      return it->second;
    }
    if (!marked.contains(v))
      return v;
    Operation *op = v.getDefiningOp();
    b.setInsertionPoint(before);
    Operation *clone;
    if (auto d = dyn_cast<px::DropoutOp>(op))
      clone = px::DropoutGradOp::create(b, op->getLoc(), d.getOutput().getType(), d.getInput(),
                                        d.getMask(), d.getRatioAttr());
    else
      clone = b.clone(*op);
    px::setAttr<px::PxDialect::RecomputedAttrHelper>(clone, b.getUnitAttr());
    clones[v] = clone->getResult(0);
    for (OpOperand &o : clone->getOpOperands())
      o.set(materialize(o.get(), clone, b));
    return clone->getResult(0);
  }

  /// Moves `clone` (and the recomputed ops it reads) before `point` where
  /// it is not already.
  static void hoistBefore(Operation *clone, Operation *point) {
    if (!clone || clone->isBeforeInBlock(point))
      return;
    clone->moveBefore(point);
    for (Value operand : clone->getOperands())
      if (Operation *def = operand.getDefiningOp();
          def && px::hasAttr<px::PxDialect::RecomputedAttrHelper>(def))
        hoistBefore(def, clone);
  }

  /// Every name in `layers` is a trainable variable's (one whose product
  /// a collective reads, a weight resharded on a model axis, recomputes
  /// nothing); an error lists the layers' weights otherwise.
  LogicalResult checkLayerNames(func::FuncOp func) const {
    llvm::SetVector<StringRef> names;
    llvm::StringSet<> variables;
    for (Operation &op : func.getBody().front()) {
      if (px::VariableOp w = layerWeightOf(&op))
        names.insert(w.getName());
      if (auto var = dyn_cast<px::VariableOp>(op); var && var.getTrainable())
        variables.insert(var.getName());
    }
    for (const std::string &name : layers)
      if (!variables.contains(name)) {
        std::string known;
        for (StringRef n : names)
          known += (known.empty() ? "" : ", ") + n.str();
        return emitError(func.getLoc(), "px-recompute: layers: no layer's weight is named '")
               << name << "' (the layers: " << (known.empty() ? "none" : known) << ")";
      }
    return success();
  }

  void runOnOperation() override {
    func::FuncOp func = getEntryFunction(getOperation());
    if (!func || func.getBody().empty() || !px::hasAttr<px::PxDialect::LossAttrHelper>(func))
      return;
    ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    int64_t lossIndex = px::getAttr<px::PxDialect::LossAttrHelper>(func).getInt();
    if (lossIndex < 0 || lossIndex >= (int64_t)ret.getNumOperands())
      return;
    // The loss as the forward pass computes it (on several ranks the step
    // returns its all-reduce, which runs with the gradients').
    Value lossValue = ret.getOperand(lossIndex);
    while (auto ar = lossValue.getDefiningOp<px::AllReduceOp>())
      lossValue = ar.getInput();
    loss = lossValue.getDefiningOp();
    if (!loss)
      return;
    availability.clear();
    marked.clear();
    clones.clear();
    checkpointed.clear();
    for (const std::string &name : layers)
      checkpointed.insert(name);
    if (failed(checkLayerNames(func)))
      return signalPassFailure();
    // What to recompute: each cheap forward op the backward pass reads
    // whose operands it can have, with the chains they need; and what the
    // named layers' segments hold.
    SmallVector<Value> read;
    for (Operation &op : func.getBody().front()) {
      if (&op == loss || fraction <= 0)
        break;
      if (!recomputable(&op))
        continue;
      Value v = op.getResult(0);
      if (llvm::none_of(v.getUsers(), [&](Operation *u) { return backward(u); }))
        continue;
      if (llvm::all_of(recomputedFrom(&op), [&](Value o) { return available(o, 1); })) {
        marked.insert(v);
        read.push_back(v);
      }
    }
    // A segment: the first of them, in forward order, up to `fraction` of
    // their bytes.
    if (fraction < 1.0) {
      int64_t total = 0, kept = 0;
      for (Value v : read)
        total += bytesOf(v);
      size_t n = 0;
      while (n < read.size() && (double)(kept + bytesOf(read[n])) <= fraction * (double)total)
        kept += bytesOf(read[n++]);
      // The rest stay kept: a clone that reads one reads it as it is.
      for (size_t i = n; i < read.size(); ++i)
        marked.remove(read[i]);
      read.resize(n);
    }
    // The named layers' segments, whatever the fraction: what the
    // backward pass reads of them.
    llvm::DenseMap<Value, Operation *> segment = segments(func);
    llvm::SmallPtrSet<Operation *, 8> recomputing;
    for (Operation &op : func.getBody().front()) {
      if (&op == loss)
        break;
      Value v = op.getNumResults() ? op.getResult(0) : Value();
      auto it = v ? segment.find(v) : segment.end();
      if (it == segment.end())
        continue;
      marked.insert(v);
      if (llvm::none_of(v.getUsers(), [&](Operation *u) { return backward(u); }))
        continue;
      recomputing.insert(it->second);
      if (!llvm::is_contained(read, v))
        read.push_back(v);
    }
    // A named layer that frees nothing: what the backward pass reads is
    // not computed from its output alone (a collective, a residual join or
    // an op that is not cheap comes first), or what it reads is not kept.
    for (Operation &op : func.getBody().front()) {
      if (loss->isBeforeInBlock(&op))
        break;
      if (checkpointedLayer(&op) && !recomputing.contains(&op))
        emitWarning(op.getLoc(), "px-recompute: layers: '")
            << layerWeightOf(&op).getName()
            << "' frees nothing: the backward pass reads nothing computed from its output "
               "alone (a collective, a residual join or an op that is not cheap comes first)";
    }
    // The backward readers read clones, each made just before its first
    // reader.
    OpBuilder b(func.getContext());
    for (Value v : read) {
      SmallVector<OpOperand *> later;
      for (OpOperand &use : v.getUses())
        if (backward(use.getOwner()) &&
            !px::hasAttr<px::PxDialect::RecomputedAttrHelper>(use.getOwner()))
          later.push_back(&use);
      if (later.empty())
        continue;
      Operation *first = later.front()->getOwner();
      for (OpOperand *use : later)
        if (use->getOwner()->isBeforeInBlock(first))
          first = use->getOwner();
      Value clone = materialize(v, first, b);
      for (OpOperand *use : later)
        use->set(clone);
    }
  }
};

} // namespace
