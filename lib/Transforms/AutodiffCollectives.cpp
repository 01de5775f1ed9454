//===- AutodiffCollectives.cpp - adjoints of px collectives ---------------===//

#include "AutodiffCollectives.h"

#include "PxBuilder.h"

#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Runtime/Grid.h"
#include "parallax/Transforms/Cluster.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace parallax;
using shard::ReductionKind;

namespace {

/// What every px collective names: its grid and the axes of its group.
struct Group {
  FlatSymbolRefAttr grid;
  DenseI16ArrayAttr axes;
};

template <typename OpTy>
Group groupOf(OpTy op) {
  return {op.getGridAttr(), op.getGridAxesAttr()};
}

/// The ranks in `op`'s group, or failure (reported) for a grid it cannot
/// find or a model-axis group.
FailureOr<int64_t> checkedGroupSize(Operation *op, Group g) {
  auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, g.grid);
  if (!grid)
    return op->emitOpError("px-autodiff: no shard.grid @") << g.grid.getValue();
  std::vector<int64_t> shape(grid.getShape().begin(), grid.getShape().end());
  std::vector<int64_t> axes = rt::groupAxes(
      shape, std::vector<int64_t>(g.axes.asArrayRef().begin(), g.axes.asArrayRef().end()));
  auto module = op->getParentOfType<ModuleOp>();
  SmallVector<int16_t> batch = ClusterModel::fromModule(module).batchAxes(shape.size());
  if (g.grid.getValue() == kWorldGrid &&
      llvm::any_of(axes, [&](int64_t a) { return !llvm::is_contained(batch, a); }))
    return op->emitOpError(
        "px-autodiff: a collective over the model axis cannot be differentiated "
        "(its ranks share one loss): write it over the batch axes, or leave the "
        "model axis to px-shard-model");
  int64_t size = 1;
  for (int64_t a : axes) // the symbol's verifier checked the axes
    size *= shape[a];
  return size;
}

Value allReduce(OpBuilder &b, Location loc, Group g, Value v, ReductionKind kind) {
  return px::AllReduceOp::create(b, loc, v.getType(), g.grid, g.axes, v,
                                 shard::ReductionKindAttr::get(b.getContext(), kind),
                                 IntegerAttr());
}

/// A max or min all-reduce passes the summed gradient to the ranks that
/// hold the extreme, split evenly among ties.
Value extremeAdjoint(PxBuilder &pb, Group g, px::AllReduceOp op, Value dy) {
  OpBuilder &b = pb.builder();
  Location loc = op.getLoc();
  Type elem = PxBuilder::typeOf(dy).getElementType();
  Value holds = pb.equal(op.getInput(), op.getOutput());
  Value holders = allReduce(b, loc, g, pb.cast(holds, elem), ReductionKind::Sum);
  Value total = allReduce(b, loc, g, dy, ReductionKind::Sum);
  return pb.where(holds, pb.div(total, holders), pb.scalar(0.0, elem));
}

} // namespace

bool parallax::isDifferentiableCollective(Operation *op) {
  return isa<px::AllReduceOp, px::AllGatherOp, px::ReduceScatterOp, px::AllSliceOp,
             px::AllToAllOp, px::HaloExchangeOp, px::HaloReduceOp>(op);
}

FailureOr<Value> parallax::collectiveAdjoint(OpBuilder &b, Operation *op, Value dy) {
  Location loc = op->getLoc();
  PxBuilder pb(b, loc);
  Type inputType = op->getOperand(0).getType();
  auto unsupported = [&](StringRef what) -> FailureOr<Value> {
    return op->emitOpError("px-autodiff: no gradient rule for ") << what;
  };
  return TypeSwitch<Operation *, FailureOr<Value>>(op)
      .Case([&](px::AllReduceOp o) -> FailureOr<Value> {
        Group g = groupOf(o);
        auto size = checkedGroupSize(o, g);
        if (failed(size))
          return failure();
        switch (o.getReduction()) {
        case ReductionKind::Sum: // every rank's input reaches every result
        case ReductionKind::Average:
          return allReduce(b, loc, g, dy, o.getReduction());
        case ReductionKind::Max:
        case ReductionKind::Min:
          return extremeAdjoint(pb, g, o, dy);
        default:
          return unsupported("an all_reduce of this reduction kind");
        }
      })
      .Case([&](px::AllGatherOp o) -> FailureOr<Value> {
        Group g = groupOf(o);
        if (failed(checkedGroupSize(o, g)))
          return failure();
        return Value(px::ReduceScatterOp::create(
            b, loc, inputType, g.grid, g.axes, dy, o.getGatherAxisAttr(),
            shard::ReductionKindAttr::get(b.getContext(), ReductionKind::Sum)));
      })
      .Case([&](px::ReduceScatterOp o) -> FailureOr<Value> {
        Group g = groupOf(o);
        auto size = checkedGroupSize(o, g);
        if (failed(size))
          return failure();
        ReductionKind kind = o.getReduction();
        if (kind != ReductionKind::Sum && kind != ReductionKind::Average)
          return unsupported("a reduce_scatter of this reduction kind");
        Value dx = px::AllGatherOp::create(b, loc, inputType, g.grid, g.axes, dy,
                                           o.getScatterAxisAttr());
        return kind == ReductionKind::Sum ? dx : pb.scale(dx, 1.0 / (double)*size);
      })
      .Case([&](px::AllSliceOp o) -> FailureOr<Value> {
        // The input is the same on every rank of the group, so any shares
        // that sum to the slices' gradients put back in place are its
        // gradient: each rank takes 1/G of them all.
        Group g = groupOf(o);
        auto size = checkedGroupSize(o, g);
        if (failed(size))
          return failure();
        Value all = px::AllGatherOp::create(b, loc, inputType, g.grid, g.axes, dy,
                                            o.getSliceAxisAttr());
        return *size == 1 ? all : pb.scale(all, 1.0 / (double)*size);
      })
      .Case([&](px::AllToAllOp o) -> FailureOr<Value> {
        Group g = groupOf(o);
        if (failed(checkedGroupSize(o, g)))
          return failure();
        return Value(px::AllToAllOp::create(b, loc, inputType, g.grid, g.axes, dy,
                                            o.getConcatAxisAttr(), o.getSplitAxisAttr()));
      })
      .Case([&](px::HaloExchangeOp o) -> FailureOr<Value> {
        // The rows past the group's edges are constants.
        Group g = groupOf(o);
        if (failed(checkedGroupSize(o, g)))
          return failure();
        return Value(px::HaloReduceOp::create(b, loc, inputType, g.grid, g.axes, dy,
                                              o.getAxisAttr(), o.getLoAttr(), o.getHiAttr()));
      })
      .Case([&](px::HaloReduceOp o) -> FailureOr<Value> {
        // The edge members' dropped halos get no gradient: zeros past the edges.
        Group g = groupOf(o);
        if (failed(checkedGroupSize(o, g)))
          return failure();
        return Value(px::HaloExchangeOp::create(b, loc, inputType, g.grid, g.axes, dy,
                                                o.getAxisAttr(), o.getLoAttr(), o.getHiAttr(),
                                                b.getF64FloatAttr(0.0)));
      })
      .Default([&](Operation *) { return unsupported("this collective"); });
}
