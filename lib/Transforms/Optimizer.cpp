//===- Optimizer.cpp - px.gradient -> optimizer updates -------------------===//
//
// Each update runs in place on its variable, so it must come after every
// read of the variable in the step; and it is the last use of the gradient,
// so placing it as early as that allows frees the gradient's memory early
// (the plan's memory planner sees the shorter lifetime). The state variables
// the optimizer needs are ordinary px.variable ops, so they show up in the
// report's and the plan's memory figures like any other variable.
//
//===----------------------------------------------------------------------===//

#include "parallax/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringSet.h"

namespace parallax {
#define GEN_PASS_DEF_PXOPTIMIZER
#include "parallax/Transforms/Passes.h.inc"
} // namespace parallax

using namespace mlir;
using namespace parallax;

namespace {

struct OptimizerPass : parallax::impl::PxOptimizerBase<OptimizerPass> {
  using PxOptimizerBase::PxOptimizerBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp func = getEntryFunction(module);
    if (!func) {
      module.emitError("px-optimizer: no step function");
      return signalPassFailure();
    }
    if (kind != "sgd" && kind != "momentum" && kind != "adam" &&
        kind != "adagrad") {
      module.emitError("px-optimizer: unknown optimizer '")
          << kind << "' (expected sgd, momentum, adam or adagrad)";
      return signalPassFailure();
    }
    if (!(lr >= 0)) {
      module.emitError("px-optimizer: lr must be >= 0");
      return signalPassFailure();
    }
    Block &block = func.getBody().front();
    llvm::StringSet<> names;
    for (auto var : func.getOps<px::VariableOp>())
      names.insert(var.getName());

    OpBuilder b(func.getContext());
    commitBatchNormStatistics(func, b);
    SmallVector<px::GradientOp> gradients(func.getOps<px::GradientOp>());
    for (px::GradientOp g : gradients)
      if (failed(rewrite(g, block, names, b)))
        return signalPassFailure();
  }

  /// Training-mode batch_norm returns updated running statistics; write them
  /// to the state variables they came from.
  void commitBatchNormStatistics(func::FuncOp func, OpBuilder &b) {
    func.walk([&](px::BatchNormOp bn) {
      if (!bn.getTraining())
        return;
      for (auto [input, updated] :
           {std::pair{bn.getInputMean(), bn.getRunningMean()},
            std::pair{bn.getInputVar(), bn.getRunningVar()}}) {
        auto var = input.getDefiningOp<px::VariableOp>();
        if (!var || var.getTrainable())
          continue;
        b.setInsertionPointAfter(lastUser(var.getOutput(), bn));
        px::AssignOp::create(b, bn.getLoc(), var.getOutput(), updated);
      }
    });
  }

  /// The last op in the block that uses `v`, or `floor` if that is later.
  static Operation *lastUser(Value v, Operation *floor) {
    Operation *last = floor;
    for (Operation *user : v.getUsers()) {
      Operation *inBlock = floor->getBlock()->findAncestorOpInBlock(*user);
      if (inBlock && last->isBeforeInBlock(inBlock))
        last = inBlock;
    }
    return last;
  }

  Value stateVariable(px::VariableOp var, StringRef slot,
                      llvm::StringSet<> &names, OpBuilder &b) {
    std::string name = (var.getName() + ":" + slot).str();
    for (int i = 1; names.contains(name); ++i)
      name = (var.getName() + ":" + slot + "." + std::to_string(i)).str();
    names.insert(name);
    auto type = var.getOutput().getType();
    double init = slot == "adagrad.sum" ? initialAccumulator() : 0.0;
    auto state = px::VariableOp::create(
        b, var.getLoc(), type, b.getStringAttr(name),
        DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), init)),
        UnitAttr());
    // The plan and the report count these as optimizer state.
    px::setAttr<px::PxDialect::OptimizerStateOfAttrHelper>(state, var.getNameAttr());
    return state.getOutput();
  }

  static double initialAccumulator() { return 0.0; } // torch's default

  LogicalResult rewrite(px::GradientOp g, Block &block,
                        llvm::StringSet<> &names, OpBuilder &b) {
    auto var = g.getVariable().getDefiningOp<px::VariableOp>();
    // After the gradient and after every other reader of the variable.
    Operation *after = g.getGrad().getDefiningOp();
    if (!after || after->getBlock() != &block)
      after = var;
    // Readers of a reshape of the variable read its storage too (a reshape
    // is a zero-copy view in the plan).
    SmallVector<Value> views{var.getOutput()};
    while (!views.empty())
      for (Operation *user : views.pop_back_val().getUsers()) {
        if (user == g)
          continue;
        if (auto reshape = dyn_cast<px::ReshapeOp>(user))
          views.push_back(reshape.getOutput());
        if (after->isBeforeInBlock(user))
          after = user;
      }
    // A gradient that arrives through a collective is applied at the end of
    // the step, so the collective overlaps the rest of the backward pass
    // instead of being awaited right away.
    if (isa_and_nonnull<px::AllReduceOp, px::AllGatherVOp, px::PsPushOp>(
            g.getGrad().getDefiningOp()))
      after = block.getTerminator()->getPrevNode();

    b.setInsertionPointAfter(var);
    SmallVector<Value> state;
    if (kind == "momentum")
      state.push_back(stateVariable(var, "momentum", names, b));
    else if (kind == "adam") {
      state.push_back(stateVariable(var, "adam.m", names, b));
      state.push_back(stateVariable(var, "adam.v", names, b));
    } else if (kind == "adagrad")
      state.push_back(stateVariable(var, "adagrad.sum", names, b));

    b.setInsertionPointAfter(after);
    Location loc = g.getLoc();
    Value w = var.getOutput(), grad = g.getGrad();
    FloatAttr lrAttr = b.getF64FloatAttr(lr),
              wd = b.getF64FloatAttr(weightDecay);
    // Unsharded: px-shard-weight-update sets grid, grid_axes, shard_offset,
    // shard_bytes and shard_state where it shards.
    auto update = [&](auto op, auto... args) {
      decltype(op)::create(b, loc, args..., FlatSymbolRefAttr(), DenseI16ArrayAttr(),
                           IntegerAttr(), IntegerAttr(), UnitAttr());
    };
    if (kind == "sgd")
      update(px::SgdOp(), w, grad, lrAttr, wd);
    else if (kind == "momentum")
      update(px::MomentumOp(), w, state[0], grad, lrAttr, wd, b.getF64FloatAttr(momentum),
             nesterov ? b.getUnitAttr() : UnitAttr());
    else if (kind == "adam")
      update(px::AdamOp(), w, state[0], state[1], grad, lrAttr, wd, b.getF64FloatAttr(beta1),
             b.getF64FloatAttr(beta2), b.getF64FloatAttr(epsilon >= 0 ? epsilon : 1e-8));
    else
      update(px::AdagradOp(), w, state[0], grad, lrAttr, wd,
             b.getF64FloatAttr(epsilon >= 0 ? epsilon : 1e-10));
    g.erase();
    return success();
  }
};

} // namespace
