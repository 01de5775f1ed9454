//===- Recompute.cpp - cheap activations recomputed in the backward pass --===//
//
// Selective activation recomputation: the backward pass reads a clone of an
// element-wise forward op instead of its kept result, where the clone's
// operands are live there anyway. The arena (liveness in step order) then
// frees the forward result after its last forward reader.
//
//===----------------------------------------------------------------------===//

#include "parallax/Transforms/Passes.h"
#include "parallax/Dialect/Px/PxDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace parallax {
#define GEN_PASS_DEF_PXRECOMPUTE
#include "parallax/Transforms/Passes.h.inc"
} // namespace parallax

using namespace mlir;
using namespace parallax;

namespace {

struct RecomputePass : parallax::impl::PxRecomputeBase<RecomputePass> {
  void runOnOperation() override {
    func::FuncOp func = getEntryFunction(getOperation());
    if (!func || func.getBody().empty() || !px::hasAttr<px::PxDialect::LossAttrHelper>(func))
      return;
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    int64_t lossIndex = px::getAttr<px::PxDialect::LossAttrHelper>(func).getInt();
    if (lossIndex < 0 || lossIndex >= (int64_t)ret.getNumOperands())
      return;
    // The loss as the forward pass computes it (on several ranks the step
    // returns its all-reduce, which runs with the gradients').
    Value lossValue = ret.getOperand(lossIndex);
    while (auto ar = lossValue.getDefiningOp<px::AllReduceOp>())
      lossValue = ar.getInput();
    Operation *loss = lossValue.getDefiningOp();
    if (!loss)
      return;
    auto backward = [&](Operation *user) { return loss->isBeforeInBlock(user) && user != ret; };
    auto liveInBackward = [&](Value v) {
      Operation *def = v.getDefiningOp();
      if (def && isa<px::VariableOp, px::ConstantOp, px::InputOp>(def))
        return true;
      return llvm::any_of(v.getUsers(), backward);
    };
    OpBuilder b(func.getContext());
    for (Operation &op : llvm::make_early_inc_range(func.getBody().front())) {
      if (&op == loss)
        break;
      if (!op.hasTrait<px::OpTrait::Elementwise>() || op.getNumResults() != 1 ||
          op.getNumOperands() == 0 || !isMemoryEffectFree(&op))
        continue;
      Value v = op.getResult(0);
      SmallVector<OpOperand *> later;
      for (OpOperand &use : v.getUses())
        if (backward(use.getOwner()))
          later.push_back(&use);
      if (later.empty() || !llvm::all_of(op.getOperands(), liveInBackward))
        continue;
      Operation *first = later.front()->getOwner();
      for (OpOperand *use : later)
        if (use->getOwner()->isBeforeInBlock(first))
          first = use->getOwner();
      b.setInsertionPoint(first);
      Operation *clone = b.clone(op);
      px::setAttr<px::PxDialect::RecomputedAttrHelper>(clone, b.getUnitAttr());
      for (OpOperand *use : later)
        use->set(clone->getResult(0));
    }
  }
};

} // namespace
