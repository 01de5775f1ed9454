//===- PxTrainingOps.cpp - verifiers of the training ops ------------------===//
//
// A backward op is checked against the rule of its forward op: running the
// forward window over the gradient's result type must give dy's shape, so a
// mis-built gradient fails at the pass that built it, not in a kernel.
//
//===----------------------------------------------------------------------===//

#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Dialect/Px/PxShapes.h"
#include "PxOpUtils.h"

using namespace mlir;
using namespace parallax::px;
using namespace parallax::px::detail;

namespace {

LogicalResult sameElementTypes(Operation *op, ArrayRef<Value> values) {
  for (Value v : values.drop_front())
    if (v && getElementTypeOrSelf(v.getType()) !=
                 getElementTypeOrSelf(values.front().getType()))
      return op->emitOpError("operands and results must share one element type");
  return success();
}

/// `dy` must be the shape the forward window gives on `x`.
LogicalResult checkWindow(Operation *op, RankedTensorType x, int64_t channels,
                          ArrayRef<int64_t> kernel, ArrayRef<int64_t> strides,
                          ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations,
                          bool ceilMode, RankedTensorType dy) {
  if (x.getRank() < 3)
    return op->emitOpError("needs tensors [N, C, spatial...], got ")
           << fmt(x.getShape());
  auto out = windowShape(op->getLoc(), x, channels, kernel, strides, pads,
                         dilations, ceilMode);
  if (failed(out))
    return failure();
  if (dy.getShape() != ArrayRef<int64_t>(*out))
    return op->emitOpError("dy must have the forward output shape ")
           << fmt(*out) << ", got " << fmt(dy.getShape());
  return success();
}

LogicalResult checkGroups(Operation *op, int64_t group, int64_t inChannels,
                          RankedTensorType w) {
  if (group < 1 || w.getDimSize(0) % group != 0 ||
      w.getDimSize(1) * group != inChannels)
    return op->emitOpError("channels do not match: input has ")
           << inChannels << ", w is " << fmt(w.getShape()) << ", group "
           << group;
  return success();
}

/// Labels [N, D...] against scores [N, C, D...], and dloss per reduction.
LogicalResult checkLossGrad(Operation *op, RankedTensorType scores,
                            RankedTensorType labels, RankedTensorType dloss,
                            Value weights, StringRef reduction) {
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return op->emitOpError("reduction must be none, sum or mean, got '")
           << reduction << "'";
  if (scores.getRank() < 2)
    return op->emitOpError("scores must have rank >= 2 ([N, C, ...])");
  SmallVector<int64_t> expected{scores.getDimSize(0)};
  llvm::append_range(expected, scores.getShape().drop_front(2));
  if (labels.getShape() != ArrayRef<int64_t>(expected))
    return op->emitOpError("labels must have shape ") << fmt(expected);
  ArrayRef<int64_t> lossShape =
      reduction == "none" ? ArrayRef<int64_t>(expected) : ArrayRef<int64_t>();
  if (dloss.getShape() != lossShape)
    return op->emitOpError("dloss must have the loss's shape ")
           << fmt(lossShape) << ", got " << fmt(dloss.getShape());
  if (weights &&
      cast<RankedTensorType>(weights.getType()).getShape() !=
          ArrayRef<int64_t>{scores.getDimSize(1)})
    return op->emitOpError("weights must have shape [")
           << scores.getDimSize(1) << "]";
  return success();
}

/// The px.variable an update names, or an error. Sharding annotations
/// (shard.shard, between sharding-propagation and shard-partition) may
/// stand between them.
FailureOr<VariableOp> variableOf(Operation *op, Value v, StringRef what,
                                 bool trainable) {
  while (auto annotation = v.getDefiningOp<shard::ShardOp>())
    v = annotation.getSrc();
  auto var = v.getDefiningOp<VariableOp>();
  if (!var)
    return op->emitOpError(what) << " must be the result of a px.variable";
  if (var.getTrainable() != trainable)
    return op->emitOpError(what)
           << " '" << var.getName() << "' must "
           << (trainable ? "be trainable" : "be a state (non-trainable) variable");
  return var;
}

/// A dense gradient has the variable's type; a sparse one, it as dense type.
LogicalResult checkGradient(Operation *op, Value variable, Value grad) {
  Type expected = variable.getType();
  if (auto sparse = dyn_cast<SparseGradType>(grad.getType())) {
    if (sparse.getDenseType() != expected)
      return op->emitOpError("sparse gradient of dense type ")
             << sparse.getDenseType() << " does not match variable type "
             << expected;
    return success();
  }
  if (grad.getType() != expected)
    return op->emitOpError("gradient type ")
           << grad.getType() << " does not match variable type " << expected;
  return success();
}

/// Common checks of an optimizer update: a trainable variable, its gradient,
/// and state variables of the variable's type.
LogicalResult verifyUpdate(Operation *op, Value variable, Value grad,
                           ValueRange state) {
  if (failed(variableOf(op, variable, "variable", /*trainable=*/true)) ||
      failed(checkGradient(op, variable, grad)))
    return failure();
  auto shardBytes = op->getAttrOfType<IntegerAttr>("shard_bytes");
  bool shardState = op->hasAttr("shard_state");
  if ((op->hasAttr("shard_offset") || shardState) && !shardBytes)
    return op->emitOpError("a sharded update needs shard_bytes");
  if (shardBytes && (!op->hasAttr("shard_offset") || !op->hasAttr("grid")))
    return op->emitOpError("a sharded update needs shard_offset and grid");
  if (shardBytes && isa<SparseGradType>(grad.getType()))
    return op->emitOpError("a sparse update cannot be sharded");
  auto varType = cast<RankedTensorType>(variable.getType());
  for (Value s : state) {
    if (failed(variableOf(op, s, "optimizer state", /*trainable=*/false)))
      return failure();
    if (shardState) {
      // One block of the bucket: shard_bytes of the variable's elements.
      int64_t bits = varType.getElementTypeBitWidth();
      auto type = RankedTensorType::get({shardBytes.getInt() * 8 / bits},
                                        varType.getElementType());
      if (s.getType() != type)
        return op->emitOpError("sharded optimizer state must be one block ")
               << type << ", got " << s.getType();
    } else if (s.getType() != variable.getType()) {
      return op->emitOpError("optimizer state must have the variable's type ")
             << variable.getType() << ", got " << s.getType();
    }
  }
  if (auto lr = op->getAttrOfType<FloatAttr>("lr"))
    if (!(lr.getValueAsDouble() >= 0))
      return op->emitOpError("lr must be >= 0");
  return success();
}

LogicalResult checkRate(Operation *op, StringRef name, double value) {
  if (!(value >= 0.0 && value < 1.0))
    return op->emitOpError(name) << " must be in [0, 1), got " << value;
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Backward kernels
//===----------------------------------------------------------------------===//

LogicalResult ConvGradInputOp::verify() {
  auto dy = getDy().getType(), w = getW().getType(), dx = getDx().getType();
  if (failed(sameElementTypes(*this, {getDy(), getW(), getDx()})))
    return failure();
  if (w.getRank() != dx.getRank() || dy.getRank() != dx.getRank())
    return emitOpError("dy, w and dx must have the same rank");
  if (failed(checkGroups(*this, getGroup(), dx.getDimSize(1), w)))
    return failure();
  return checkWindow(*this, dx, w.getDimSize(0), w.getShape().drop_front(2),
                     getStrides(), getPads(), getDilations(), false, dy);
}

LogicalResult ConvGradFilterOp::verify() {
  auto x = getX().getType(), dy = getDy().getType(), dw = getDw().getType();
  if (failed(sameElementTypes(*this, {getX(), getDy(), getDw()})))
    return failure();
  if (dw.getRank() != x.getRank() || dy.getRank() != x.getRank())
    return emitOpError("x, dy and dw must have the same rank");
  if (failed(checkGroups(*this, getGroup(), x.getDimSize(1), dw)))
    return failure();
  return checkWindow(*this, x, dw.getDimSize(0), dw.getShape().drop_front(2),
                     getStrides(), getPads(), getDilations(), false, dy);
}

LogicalResult MaxPoolGradOp::verify() {
  auto x = getX().getType();
  if (failed(sameElementTypes(*this, {getX(), getDy()})))
    return failure();
  return checkWindow(*this, x, x.getRank() > 1 ? x.getDimSize(1) : 0,
                     getKernelShape(), getStrides(), getPads(), getDilations(),
                     getCeilMode(), getDy().getType());
}

LogicalResult AvgPoolGradOp::verify() {
  auto dx = getDx().getType();
  if (failed(sameElementTypes(*this, {getDy(), getDx()})))
    return failure();
  SmallVector<int64_t> ones(getKernelShape().size(), 1);
  return checkWindow(*this, dx, dx.getRank() > 1 ? dx.getDimSize(1) : 0,
                     getKernelShape(), getStrides(), getPads(), ones,
                     getCeilMode(), getDy().getType());
}

template <typename Op>
static LogicalResult verifySoftmaxGrad(Op op) {
  int64_t axis = static_cast<int64_t>(op.getAxis());
  if (!normalizeAxis(axis, op.getY().getType().getRank()))
    return op.emitOpError("axis ") << axis << " is out of range for rank "
                                   << op.getY().getType().getRank();
  return success();
}
LogicalResult SoftmaxGradOp::verify() { return verifySoftmaxGrad(*this); }
LogicalResult LogSoftmaxGradOp::verify() { return verifySoftmaxGrad(*this); }

LogicalResult SoftmaxCrossEntropyLossGradOp::verify() {
  if (failed(sameElementTypes(*this, {getLogProb(), getDloss(), getWeights()})))
    return failure();
  if (failed(verifyClassBlock(*this, getGrid().has_value(), getGridAxes().has_value(),
                              getWeights())))
    return failure();
  return checkLossGrad(*this, getLogProb().getType(), getLabels().getType(),
                       getDloss().getType(), getWeights(), getReduction());
}

LogicalResult NegativeLogLikelihoodLossGradOp::verify() {
  if (failed(sameElementTypes(*this, {getDinput(), getDloss(), getWeight()})))
    return failure();
  return checkLossGrad(*this, getDinput().getType(), getTarget().getType(),
                       getDloss().getType(), getWeight(), getReduction());
}

LogicalResult LayerNormGradOp::verify() {
  auto x = getX().getType();
  int64_t rawAxis = static_cast<int64_t>(getAxis());
  auto axis = normalizeAxis(rawAxis, x.getRank());
  if (!axis)
    return emitOpError("axis ") << rawAxis << " is out of range for rank "
                                << x.getRank();
  Shape stats(x.getShape());
  for (int64_t d = *axis; d < x.getRank(); ++d)
    stats[d] = 1;
  if (getMean().getType().getShape() != ArrayRef<int64_t>(stats))
    return emitOpError("mean and inv_std_dev must have shape ") << fmt(stats);
  auto normalized = x.getShape().drop_front(*axis);
  auto scale = getScale().getType().getShape();
  auto b = broadcastShapes(scale, normalized);
  if (!b || ArrayRef<int64_t>(*b) != normalized)
    return emitOpError("scale of shape ")
           << fmt(scale) << " does not broadcast to " << fmt(normalized);
  return sameElementTypes(*this, {getX(), getScale(), getMean()});
}

LogicalResult BatchNormGradOp::verify() {
  auto x = getX().getType();
  if (x.getRank() < 2)
    return emitOpError("x must be [N, C, ...]");
  if (getScale().getType().getShape() != ArrayRef<int64_t>{x.getDimSize(1)})
    return emitOpError("scale must have shape [") << x.getDimSize(1) << "]";
  return sameElementTypes(*this, {getX(), getScale()});
}

LogicalResult ScatterAddOp::verify() {
  auto out = getOutput().getType(), updates = getUpdates().getType(),
       indices = getIndices().getType();
  if (failed(sameElementTypes(*this, {getUpdates(), getOutput()})))
    return failure();
  int64_t rawAxis = static_cast<int64_t>(getAxis());
  auto axis = normalizeAxis(rawAxis, out.getRank());
  if (!axis)
    return emitOpError("axis ") << rawAxis << " is out of range for rank "
                                << out.getRank();
  // updates = out[:axis] ++ indices.shape ++ out[axis+1:], as px.gather's
  // result is for data of the output's shape.
  Shape expected(out.getShape().take_front(*axis));
  llvm::append_range(expected, indices.getShape());
  llvm::append_range(expected, out.getShape().drop_front(*axis + 1));
  if (updates.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("updates must have shape ") << fmt(expected);
  return success();
}

LogicalResult ScatterElementsAddOp::verify() {
  auto out = getOutput().getType(), updates = getUpdates().getType(),
       indices = getIndices().getType();
  if (failed(sameElementTypes(*this, {getUpdates(), getOutput()})))
    return failure();
  if (updates.getShape() != indices.getShape())
    return emitOpError("updates and indices must have the same shape");
  if (out.getRank() != indices.getRank())
    return emitOpError("output and indices must have the same rank");
  int64_t rawAxis = static_cast<int64_t>(getAxis());
  auto axis = normalizeAxis(rawAxis, out.getRank());
  if (!axis)
    return emitOpError("axis ") << rawAxis << " is out of range for rank "
                                << out.getRank();
  for (int64_t d = 0; d < out.getRank(); ++d)
    if (d != *axis && indices.getDimSize(d) > out.getDimSize(d))
      return emitOpError("indices dimension ")
             << d << " exceeds the output's size " << out.getDimSize(d);
  return success();
}

LogicalResult SliceGradOp::verify() {
  auto dy = getDy().getType(), dx = getDx().getType();
  if (failed(sameElementTypes(*this, {getDy(), getDx()})))
    return failure();
  int64_t rank = dx.getRank();
  if (dy.getRank() != rank || (int64_t)getStarts().size() != rank ||
      (int64_t)getSteps().size() != rank)
    return emitOpError("dy, starts and steps must match the rank ") << rank;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t start = getStarts()[d], step = getSteps()[d], n = dy.getDimSize(d);
    if (step == 0)
      return emitOpError("steps must not be zero");
    if (n == 0)
      continue;
    int64_t last = start + (n - 1) * step;
    if (start < 0 || start >= dx.getDimSize(d) || last < 0 ||
        last >= dx.getDimSize(d))
      return emitOpError("dimension ") << d << " of dy does not fit in dx";
  }
  return success();
}

LogicalResult PadGradOp::verify() {
  if (failed(sameElementTypes(*this, {getDy(), getDx()})))
    return failure();
  auto out = padShape(getLoc(), getDx().getType(), getPads(), getMode());
  if (failed(out))
    return failure();
  if (getDy().getType().getShape() != ArrayRef<int64_t>(*out))
    return emitOpError("dy must have the padded shape ")
           << fmt(*out) << ", got " << fmt(getDy().getType().getShape());
  return success();
}

LogicalResult SegmentReduceGradOp::verify() {
  StringRef mode = getMode();
  if (mode != "sum" && mode != "mean" && mode != "max")
    return emitOpError("mode must be sum, mean or max, got '") << mode << "'";
  auto data = getData().getType(), dy = getDy().getType();
  auto starts = getStarts().getType();
  if (failed(sameElementTypes(*this, {getDy(), getData()})))
    return failure();
  if (starts.getRank() != 1 || starts != getEnds().getType() ||
      data.getRank() < 1)
    return emitOpError("needs starts and ends of one shape [M] and data of "
                       "rank >= 1");
  SmallVector<int64_t> expected{starts.getDimSize(0)};
  llvm::append_range(expected, data.getShape().drop_front());
  if (dy.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("dy must have shape ") << fmt(expected) << ", got "
                                               << fmt(dy.getShape());
  return success();
}

//===----------------------------------------------------------------------===//
// Gradients, state and updates
//===----------------------------------------------------------------------===//

LogicalResult GradientOp::verify() {
  if (failed(variableOf(*this, getVariable(), "variable", /*trainable=*/true)))
    return failure();
  return checkGradient(*this, getVariable(), getGrad());
}

LogicalResult AssignOp::verify() {
  if (failed(variableOf(*this, getVariable(), "assigned variable",
                        /*trainable=*/false)))
    return failure();
  if (getValue().getType() != getVariable().getType())
    return emitOpError("value type ") << getValue().getType()
                                      << " does not match variable type "
                                      << getVariable().getType();
  return success();
}

LogicalResult SgdOp::verify() {
  return verifyUpdate(*this, getVariable(), getGrad(), {});
}

LogicalResult MomentumOp::verify() {
  if (failed(verifyUpdate(*this, getVariable(), getGrad(), {getVelocity()})))
    return failure();
  return checkRate(*this, "momentum", getMomentum().convertToDouble());
}

LogicalResult AdamOp::verify() {
  if (failed(verifyUpdate(*this, getVariable(), getGrad(), {getM(), getV()})) ||
      failed(checkRate(*this, "beta1", getBeta1().convertToDouble())) ||
      failed(checkRate(*this, "beta2", getBeta2().convertToDouble())))
    return failure();
  if (!(getEpsilon().convertToDouble() > 0))
    return emitOpError("epsilon must be > 0");
  return success();
}

LogicalResult AdagradOp::verify() {
  if (failed(verifyUpdate(*this, getVariable(), getGrad(), {getSum()})))
    return failure();
  if (!(getEpsilon().convertToDouble() > 0))
    return emitOpError("epsilon must be > 0");
  return success();
}
