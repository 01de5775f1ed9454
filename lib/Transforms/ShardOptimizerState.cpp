//===- ShardOptimizerState.cpp - one block of state per sharded bucket ----===//
//
// Takes all of a bucket's state j or none: the update kernels index every
// state operand by the element's place in the rank's block.
//
//===----------------------------------------------------------------------===//

#include "parallax/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <optional>
#include <string>

namespace parallax {
#define GEN_PASS_DEF_PXSHARDOPTIMIZERSTATE
#include "parallax/Transforms/Passes.h.inc"
} // namespace parallax

using namespace mlir;
using namespace parallax;

namespace {

using StateOf = px::PxDialect::OptimizerStateOfAttrHelper;

/// The sharded update of `var` (px-shard-weight-update's).
Operation *shardedUpdateOf(Value var) {
  for (Operation *user : var.getUsers())
    if (user->hasAttr("shard_bytes") && !isa<px::AllGatherVariablesOp>(user) &&
        user->getOperand(0) == var)
      return user;
  return nullptr;
}

/// The splat value a state variable that only `update` reads starts from.
std::optional<double> splatStart(Value state) {
  auto var = state.getDefiningOp<px::VariableOp>();
  if (!var || !state.hasOneUse() || !px::hasAttr<StateOf>(var))
    return std::nullopt;
  auto init = dyn_cast<DenseElementsAttr>(var.getInit());
  if (!init || !init.isSplat() || !isa<FloatType>(init.getElementType()))
    return std::nullopt;
  return init.getSplatValue<APFloat>().convertToDouble();
}

struct ShardOptimizerStatePass
    : parallax::impl::PxShardOptimizerStateBase<ShardOptimizerStatePass> {
  void runOnOperation() override {
    func::FuncOp func = getEntryFunction(getOperation());
    if (!func || func.getBody().empty())
      return;
    int64_t block = 0;
    for (auto gather : llvm::make_early_inc_range(
             func.getBody().front().getOps<px::AllGatherVariablesOp>()))
      shardState(gather, block++);
  }

  void shardState(px::AllGatherVariablesOp gather, int64_t block) {
    SmallVector<Operation *> updates;
    for (Value var : gather.getVariables()) {
      Operation *u = shardedUpdateOf(var);
      if (!u || u->hasAttr("shard_state")) // none, or sharded already
        return;
      updates.push_back(u);
    }
    Operation *first = updates.front();
    // variable, states..., gradient
    unsigned states = first->getNumOperands() - 2;
    if (states == 0)
      return;
    for (unsigned j = 1; j <= states; ++j) {
      std::optional<double> splat;
      for (Operation *u : updates) {
        std::optional<double> s = u->getName() == first->getName()
                                      ? splatStart(u->getOperand(j))
                                      : std::nullopt;
        if (!s || (splat && *splat != *s))
          return;
        splat = s;
      }
    }
    int64_t shard = gather.getShardBytes();
    OpBuilder b(gather);
    for (unsigned j = 1; j <= states; ++j) {
      auto firstVar = first->getOperand(j).getDefiningOp<px::VariableOp>();
      auto type = cast<RankedTensorType>(firstVar.getType());
      auto blockType = RankedTensorType::get(
          {shard * 8 / (int64_t)type.getElementTypeBitWidth()}, type.getElementType());
      auto init = cast<DenseElementsAttr>(firstVar.getInit());
      b.setInsertionPoint(firstVar);
      std::string name = "optimizer state " + std::to_string(j - 1) +
                         " of variable block " + std::to_string(block) + " (" +
                         firstVar.getName().str() + "...)";
      auto state = px::VariableOp::create(
          b, firstVar.getLoc(), blockType, b.getStringAttr(name),
          DenseElementsAttr::get(blockType, init.getSplatValue<Attribute>()), UnitAttr());
      px::setAttr<StateOf>(state, px::getAttr<StateOf>(firstVar));
      for (Operation *u : updates) {
        Operation *old = u->getOperand(j).getDefiningOp();
        u->setOperand(j, state.getOutput());
        old->erase();
      }
    }
    for (Operation *u : updates)
      u->setAttr("shard_state", b.getUnitAttr());
  }
};

} // namespace
