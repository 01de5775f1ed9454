//===- Autodiff.cpp - reverse-mode differentiation of px graphs -----------===//
//
// Classic tape-free reverse mode over one block: the ops are visited from the
// loss backwards; each op with an incoming gradient (adjoint) on a result
// contributes gradients to its active operands, and the contributions to a
// value are summed when its defining op is reached (all of its users come
// later in the block, so they have been visited). A value is active when it
// is a float tensor computed from a trainable variable; nothing is built for
// inactive operands (data inputs, labels, constants).
//
// Variables read only through px.gather on axis 0 (embeddings) collect their
// gradient as rows: (flattened indices, gathered-row gradients), concatenated
// over all such reads, ending in a !px.sparse_grad. They are never
// densified: that is what makes their synchronization cost proportional to
// the rows a step touches (Parallax, EuroSys'19).
//
// Collectives in the forward pass get their adjoints over the same group
// (AutodiffCollectives.h).
//
//===----------------------------------------------------------------------===//

#include "parallax/Transforms/Passes.h"

#include "AutodiffCollectives.h"
#include "PxBuilder.h"

#include "parallax/Analysis/Layers.h"
#include "parallax/Dialect/Px/PxShapes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

namespace parallax {
#define GEN_PASS_DEF_PXAUTODIFF
#include "parallax/Transforms/Passes.h.inc"
} // namespace parallax

using namespace mlir;
using namespace parallax;

namespace {

bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

/// A trainable variable read only through px.gather on axis 0.
bool isRowGathered(px::VariableOp var) {
  return var.getTrainable() && !var.getOutput().use_empty() &&
         llvm::all_of(var->getUsers(),
                      [&](Operation *u) { return isRowGatherOf(u, var.getOutput()); });
}

class Differentiator {
public:
  Differentiator(func::FuncOp func, OpBuilder &b)
      : func(func), b(b), pb(b, func.getLoc()) {}

  /// Differentiates `loss`, its adjoint seeded with `seed` (1, or 1/N on N
  /// data-parallel ranks).
  LogicalResult run(Value loss, double seed);

private:
  void markActive();
  bool isActive(Value v) const { return active.contains(v); }
  void contribute(Value x, Value g) {
    if (g && isActive(x))
      grads[x].push_back(g);
  }
  /// The summed gradient of `v`, or null if nothing flows into it.
  Value gradOf(Value v);
  LogicalResult visit(Operation *op);
  LogicalResult emitGradients();

  // Rules for ops that need more than a few lines.
  LogicalResult visitMatMul(px::MatMulOp op, Value dy);
  LogicalResult visitGemm(px::GemmOp op, Value dy);
  LogicalResult visitGather(px::GatherOp op, Value dy);
  LogicalResult visitReduce(Operation *op, Value dy, bool mean, bool max);
  LogicalResult visitMaxMin(Operation *op, Value dy, bool isMax);
  LogicalResult visitUnaryFunction(Operation *op, Value dy);
  LogicalResult visitReduceProd(px::ReduceProdOp op, Value dy);
  LogicalResult visitBatchNorm(px::BatchNormOp op, Value dy);

  func::FuncOp func;
  OpBuilder &b;
  PxBuilder pb;
  llvm::DenseSet<Value> active;
  llvm::DenseMap<Value, SmallVector<Value, 2>> grads;
  /// Row-sparse contributions per embedding: (indices [n] i64, rows [n, ...]).
  llvm::MapVector<Operation *, SmallVector<std::pair<Value, Value>>> rows;
  llvm::DenseSet<Operation *> rowGathered;
};

void Differentiator::markActive() {
  func.walk([&](px::VariableOp var) {
    if (!var.getTrainable())
      return;
    active.insert(var.getOutput());
    if (isRowGathered(var))
      rowGathered.insert(var);
  });
  for (Operation &op : func.getBody().front()) {
    bool anyActive =
        llvm::any_of(op.getOperands(), [&](Value v) { return isActive(v); });
    if (!anyActive)
      continue;
    for (Value r : op.getResults())
      if (isFloatTensor(r))
        active.insert(r);
  }
}

Value Differentiator::gradOf(Value v) {
  auto it = grads.find(v);
  if (it == grads.end() || it->second.empty())
    return nullptr;
  Value sum = it->second.front();
  for (Value g : llvm::drop_begin(it->second))
    sum = pb.add(sum, g);
  it->second.assign({sum});
  return sum;
}

LogicalResult Differentiator::run(Value loss, double seed) {
  markActive();
  Block &block = func.getBody().front();
  b.setInsertionPoint(block.getTerminator());
  if (!isActive(loss))
    return emitGradients(); // no trainable variable reaches the loss
  auto lossType = PxBuilder::typeOf(loss);
  pb.setLocation(loss.getLoc());
  grads[loss].push_back(pb.splat(seed, lossType));

  SmallVector<Operation *> ops;
  for (Operation &op : block.without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (failed(visit(op)))
      return failure();
  return emitGradients();
}

LogicalResult Differentiator::emitGradients() {
  pb.setLocation(func.getLoc());
  for (px::VariableOp var : func.getOps<px::VariableOp>()) {
    if (!var.getTrainable())
      continue;
    pb.setLocation(var.getLoc());
    auto type = var.getOutput().getType();
    if (rowGathered.contains(var)) {
      auto it = rows.find(var);
      if (it == rows.end())
        continue;
      SmallVector<Value> indices, values;
      for (auto &[i, v] : it->second) {
        indices.push_back(i);
        values.push_back(v);
      }
      Value idx = pb.concat(indices, 0), val = pb.concat(values, 0);
      int64_t n = PxBuilder::typeOf(idx).getDimSize(0);
      auto sparseType = px::SparseGradType::get(b.getContext(), n, type);
      Value g = px::MakeSparseGradOp::create(b, var.getLoc(), sparseType, idx, val);
      px::GradientOp::create(b, var.getLoc(), var.getOutput(), g);
      continue;
    }
    if (Value g = gradOf(var.getOutput()))
      px::GradientOp::create(b, var.getLoc(), var.getOutput(), g);
  }
  return success();
}

LogicalResult Differentiator::visit(Operation *op) {
  SmallVector<Value> dys;
  bool any = false;
  for (Value r : op->getResults()) {
    Value g = isActive(r) ? gradOf(r) : Value();
    dys.push_back(g);
    any |= (bool)g;
  }
  if (!any)
    return success();
  pb.setLocation(op->getLoc());
  Value dy = dys.empty() ? Value() : dys.front();
  auto zerosLike = [&](Value v) {
    return pb.scalar(0.0, PxBuilder::typeOf(v).getElementType());
  };
  auto typeOf = PxBuilder::typeOf;
  // The gradient `g` of `result`, or zeros of its type when none flows.
  auto orZeros = [&](Value g, Value result) {
    return g ? g : pb.splat(0.0, typeOf(result));
  };
  auto unb = [&](Value g, Value operand) {
    return pb.unbroadcast(g, typeOf(operand));
  };

  // The operands every recurrent layer shares get its gradient's results.
  auto contributeRecurrent = [&](auto layer, auto grad) {
    contribute(layer.getX(), grad.getDx());
    contribute(layer.getW(), grad.getDw());
    contribute(layer.getR(), grad.getDr());
    contribute(layer.getB(), grad.getDb());
    contribute(layer.getInitialH(), grad.getDinitialH());
  };
  return TypeSwitch<Operation *, LogicalResult>(op)
      // Elementwise arithmetic (broadcasting).
      .Case([&](px::AddOp o) {
        contribute(o.getLhs(), unb(dy, o.getLhs()));
        contribute(o.getRhs(), unb(dy, o.getRhs()));
        return success();
      })
      .Case([&](px::SubOp o) {
        contribute(o.getLhs(), unb(dy, o.getLhs()));
        if (isActive(o.getRhs()))
          contribute(o.getRhs(), unb(pb.neg(dy), o.getRhs()));
        return success();
      })
      .Case([&](px::MulOp o) {
        if (isActive(o.getLhs()))
          contribute(o.getLhs(), unb(pb.mul(dy, o.getRhs()), o.getLhs()));
        if (isActive(o.getRhs()))
          contribute(o.getRhs(), unb(pb.mul(dy, o.getLhs()), o.getRhs()));
        return success();
      })
      .Case([&](px::DivOp o) {
        if (isActive(o.getLhs()))
          contribute(o.getLhs(), unb(pb.div(dy, o.getRhs()), o.getLhs()));
        if (isActive(o.getRhs())) // d(a/b)/db = -(a/b)/b
          contribute(o.getRhs(),
                     unb(pb.neg(pb.div(pb.mul(dy, o.getOutput()), o.getRhs())),
                         o.getRhs()));
        return success();
      })
      .Case([&](px::PowOp o) {
        Value x = o.getLhs(), p = o.getRhs();
        Type elem = typeOf(x).getElementType();
        if (isActive(x)) { // p * x^(p-1)
          Value pf = pb.cast(p, elem);
          Value pm1 = pb.sub(pf, pb.scalar(1.0, elem));
          contribute(x, unb(pb.mul(dy, pb.mul(pf, pb.pow(x, pm1))), x));
        }
        if (isActive(p)) // x^p * log(x)
          contribute(p, unb(pb.mul(dy, pb.mul(o.getOutput(), pb.log(x))), p));
        return success();
      })
      .Case([&](px::MaxOp o) { return visitMaxMin(o, dy, /*isMax=*/true); })
      .Case([&](px::MinOp o) { return visitMaxMin(o, dy, /*isMax=*/false); })
      .Case([&](px::WhereOp o) {
        Value zero = zerosLike(dy);
        if (isActive(o.getX()))
          contribute(o.getX(), unb(pb.where(o.getCondition(), dy, zero), o.getX()));
        if (isActive(o.getY()))
          contribute(o.getY(), unb(pb.where(o.getCondition(), zero, dy), o.getY()));
        return success();
      })
      // Elementwise unary.
      .Case([&](px::NegOp o) {
        contribute(o.getInput(), pb.neg(dy));
        return success();
      })
      .Case([&](px::AbsOp o) {
        Value x = o.getInput(), zero = zerosLike(x);
        contribute(x, pb.where(pb.greater(x, zero), dy,
                               pb.where(pb.less(x, zero), pb.neg(dy), zero)));
        return success();
      })
      .Case([&](px::SqrtOp o) { // 0.5 / sqrt(x)
        contribute(o.getInput(), pb.div(pb.scale(dy, 0.5), o.getOutput()));
        return success();
      })
      .Case([&](px::ReciprocalOp o) { // -1 / x^2 = -y^2
        Value y = o.getOutput();
        contribute(o.getInput(), pb.neg(pb.mul(dy, pb.mul(y, y))));
        return success();
      })
      .Case([&](px::ExpOp o) {
        contribute(o.getInput(), pb.mul(dy, o.getOutput()));
        return success();
      })
      .Case([&](px::LogOp o) {
        contribute(o.getInput(), pb.div(dy, o.getInput()));
        return success();
      })
      .Case([&](px::ReluOp o) {
        Value x = o.getInput();
        contribute(x, pb.where(pb.greater(x, zerosLike(x)), dy, zerosLike(x)));
        return success();
      })
      .Case([&](px::LeakyReluOp o) {
        Value x = o.getInput();
        contribute(x, pb.where(pb.greater(x, zerosLike(x)), dy,
                               pb.scale(dy, o.getAlpha().convertToDouble())));
        return success();
      })
      .Case([&](px::TanhOp o) { // 1 - y^2
        Value y = o.getOutput();
        Type elem = typeOf(y).getElementType();
        contribute(o.getInput(),
                   pb.mul(dy, pb.sub(pb.scalar(1.0, elem), pb.mul(y, y))));
        return success();
      })
      .Case([&](px::SigmoidOp o) { // y (1 - y)
        Value y = o.getOutput();
        Type elem = typeOf(y).getElementType();
        contribute(o.getInput(),
                   pb.mul(dy, pb.mul(y, pb.sub(pb.scalar(1.0, elem), y))));
        return success();
      })
      .Case([&](px::ErfOp o) { // 2 / sqrt(pi) exp(-x^2)
        Value x = o.getInput();
        Value e = pb.exp(pb.neg(pb.mul(x, x)));
        contribute(x, pb.mul(dy, pb.scale(e, 2.0 / std::sqrt(M_PI))));
        return success();
      })
      .Case([&](px::SinOp o) { return visitUnaryFunction(o, dy); })
      .Case([&](px::CosOp o) { return visitUnaryFunction(o, dy); })
      .Case([&](px::TanOp o) { return visitUnaryFunction(o, dy); })
      .Case([&](px::AsinOp o) { return visitUnaryFunction(o, dy); })
      .Case([&](px::AcosOp o) { return visitUnaryFunction(o, dy); })
      .Case([&](px::AtanOp o) { return visitUnaryFunction(o, dy); })
      .Case([&](px::SinhOp o) { return visitUnaryFunction(o, dy); })
      .Case([&](px::CoshOp o) { return visitUnaryFunction(o, dy); })
      .Case([&](px::AsinhOp o) { return visitUnaryFunction(o, dy); })
      .Case([&](px::AcoshOp o) { return visitUnaryFunction(o, dy); })
      .Case([&](px::AtanhOp o) { return visitUnaryFunction(o, dy); })
      // Piecewise constant: zero wherever the derivative exists.
      .Case([&](px::FloorOp) { return success(); })
      .Case([&](px::CeilOp) { return success(); })
      .Case([&](px::RoundOp) { return success(); })
      .Case([&](px::SignOp) { return success(); })
      .Case([&](px::ModOp o) { // a - b q with q = (a - y) / b constant nearby
        contribute(o.getLhs(), unb(dy, o.getLhs()));
        if (isActive(o.getRhs())) {
          Value q = pb.div(pb.sub(o.getLhs(), o.getOutput()), o.getRhs());
          contribute(o.getRhs(), unb(pb.neg(pb.mul(dy, q)), o.getRhs()));
        }
        return success();
      })
      .Case([&](px::ClipOp o) { // passes where min <= x <= max
        Value x = o.getInput(), g = dy, zero = zerosLike(x);
        Type elem = typeOf(x).getElementType();
        if (auto mn = o.getMinAttr())
          g = pb.where(pb.less(x, pb.scalar(mn.getValueAsDouble(), elem)), zero, g);
        if (auto mx = o.getMaxAttr())
          g = pb.where(pb.greater(x, pb.scalar(mx.getValueAsDouble(), elem)), zero, g);
        contribute(x, g);
        return success();
      })
      .Case([&](px::CastOp o) {
        if (isFloatTensor(o.getInput()))
          contribute(o.getInput(),
                     pb.cast(dy, typeOf(o.getInput()).getElementType()));
        return success();
      })
      // Indexing.
      .Case([&](px::GatherOp o) { return visitGather(o, dy); })
      .Case([&](px::GatherElementsOp o) {
        contribute(o.getData(),
                   px::ScatterElementsAddOp::create(
                       b, o.getLoc(), o.getData().getType(), o.getIndices(), dy,
                       o.getAxisAttr()));
        return success();
      })
      // The scatters as forward ops (ScatterND, ScatterElements): each
      // update's gradient is the dy element it was added to.
      .Case([&](px::ScatterAddOp o) {
        contribute(o.getUpdates(),
                   px::GatherOp::create(b, o.getLoc(), o.getUpdates().getType(), dy,
                                        o.getIndices(), o.getAxisAttr()));
        return success();
      })
      .Case([&](px::ScatterElementsAddOp o) {
        contribute(o.getUpdates(), px::GatherElementsOp::create(
                                       b, o.getLoc(), o.getUpdates().getType(), dy,
                                       o.getIndices(), o.getAxisAttr()));
        return success();
      })
      .Case([&](px::TopKOp o) {
        if (dys[0])
          contribute(o.getInput(),
                     px::ScatterElementsAddOp::create(
                         b, o.getLoc(), o.getInput().getType(), o.getIndices(),
                         dys[0], o.getAxisAttr()));
        return success();
      })
      .Case([&](px::SegmentReduceOp o) {
        contribute(o.getData(), px::SegmentReduceGradOp::create(
                                    b, o.getLoc(), o.getData().getType(), dy,
                                    o.getData(), o.getStarts(), o.getEnds(),
                                    o.getModeAttr()));
        return success();
      })
      .Case([&](px::PadOp o) {
        contribute(o.getInput(),
                   px::PadGradOp::create(b, o.getLoc(), o.getInput().getType(),
                                         dy, o.getPadsAttr(), o.getModeAttr()));
        return success();
      })
      .Case([&](px::CumSumOp o) { // the sum of the later (earlier) dys
        contribute(o.getInput(),
                   px::CumSumOp::create(b, o.getLoc(), dy.getType(), dy,
                                        o.getAxisAttr(), o.getExclusiveAttr(),
                                        o.getReverse() ? UnitAttr()
                                                       : b.getUnitAttr()));
        return success();
      })
      .Case([&](px::SliceOp o) {
        contribute(o.getInput(),
                   px::SliceGradOp::create(b, o.getLoc(), o.getInput().getType(),
                                           dy, o.getStartsAttr(),
                                           o.getStepsAttr()));
        return success();
      })
      // Linear algebra.
      .Case([&](px::MatMulOp o) { return visitMatMul(o, dy); })
      .Case([&](px::GemmOp o) { return visitGemm(o, dy); })
      // Activations with an axis, losses, normalisation.
      .Case([&](px::SoftmaxOp o) {
        contribute(o.getInput(),
                   px::SoftmaxGradOp::create(b, o.getLoc(), o.getOutput(), dy,
                                             o.getAxisAttr()));
        return success();
      })
      .Case([&](px::LogSoftmaxOp o) {
        contribute(o.getInput(),
                   px::LogSoftmaxGradOp::create(b, o.getLoc(), o.getOutput(), dy,
                                                o.getAxisAttr()));
        return success();
      })
      .Case([&](px::SoftmaxCrossEntropyLossOp o) -> LogicalResult {
        if (o.getWeights() && isActive(o.getWeights()))
          return o.emitOpError("px-autodiff: gradients with respect to the "
                               "class weights are not supported");
        Value dscores;
        if (Value dloss = dys[0])
          dscores = px::SoftmaxCrossEntropyLossGradOp::create(
              b, o.getLoc(), o.getLogProb().getType(), dloss, o.getLogProb(),
              o.getLabels(), o.getWeights(), o.getReductionAttr(),
              o.getIgnoreIndexAttr(), FlatSymbolRefAttr(), shard::GridAxesAttr());
        if (Value dlogp = dys[1]) {
          Value g = px::LogSoftmaxGradOp::create(
              b, o.getLoc(), o.getLogProb(), dlogp, b.getI64IntegerAttr(1));
          dscores = dscores ? pb.add(dscores, g) : g;
        }
        contribute(o.getScores(), dscores);
        return success();
      })
      .Case([&](px::NegativeLogLikelihoodLossOp o) -> LogicalResult {
        if (o.getWeight() && isActive(o.getWeight()))
          return o.emitOpError("px-autodiff: gradients with respect to the "
                               "class weights are not supported");
        contribute(o.getInput(),
                   px::NegativeLogLikelihoodLossGradOp::create(
                       b, o.getLoc(), o.getInput().getType(), dy, o.getTarget(),
                       o.getWeight(), o.getReductionAttr(),
                       o.getIgnoreIndexAttr()));
        return success();
      })
      .Case([&](px::LayerNormOp o) -> LogicalResult {
        if (dys[1] || dys[2])
          return o.emitOpError("px-autodiff: gradients through the mean or "
                               "inverse standard deviation outputs of "
                               "layer_norm are not supported");
        auto grad = px::LayerNormGradOp::create(
            b, o.getLoc(), o.getX().getType(), o.getScale().getType(),
            o.getScale().getType(), dy, o.getX(), o.getScale(), o.getMean(),
            o.getInvStdDev(), o.getAxisAttr());
        contribute(o.getX(), grad.getDx());
        contribute(o.getScale(), grad.getDscale());
        if (Value bias = o.getBias()) {
          // dbias comes folded onto scale's shape; a bias that does not
          // broadcast to that shape (bias [3, 4] with scale [4]) needs dy
          // summed over the leading dimensions instead.
          auto biasType = typeOf(bias);
          ArrayRef<int64_t> scaleShape = typeOf(o.getScale()).getShape();
          auto fits = px::broadcastShapes(biasType.getShape(), scaleShape);
          Value dbias = grad.getDbias();
          if (!fits || ArrayRef<int64_t>(*fits) != scaleShape) {
            int64_t axis = *px::normalizeAxis((int64_t)o.getAxis(),
                                              typeOf(o.getX()).getRank());
            SmallVector<int64_t> leading;
            for (int64_t d = 0; d < axis; ++d)
              leading.push_back(d);
            dbias = leading.empty() ? dy
                                    : pb.reduceSum(dy, leading, /*keepdims=*/false);
          }
          contribute(bias, pb.unbroadcast(dbias, biasType));
        }
        return success();
      })
      .Case([&](px::BatchNormOp o) { return visitBatchNorm(o, dy); })
      .Case([&](px::DropoutOp o) {
        contribute(o.getInput(),
                   px::DropoutGradOp::create(b, o.getLoc(), dy.getType(), dy,
                                             o.getMask(), o.getRatioAttr()));
        return success();
      })
      // Reductions and data movement.
      .Case([&](px::ReduceSumOp o) { return visitReduce(o, dy, false, false); })
      .Case([&](px::ReduceMeanOp o) { return visitReduce(o, dy, true, false); })
      .Case([&](px::ReduceMaxOp o) { return visitReduce(o, dy, false, true); })
      .Case([&](px::ReduceMinOp o) { return visitReduce(o, dy, false, true); })
      .Case([&](px::ReduceProdOp o) { return visitReduceProd(o, dy); })
      .Case([&](px::ReshapeOp o) {
        contribute(o.getInput(), pb.reshape(dy, typeOf(o.getInput()).getShape()));
        return success();
      })
      .Case([&](px::TransposeOp o) {
        ArrayRef<int64_t> perm = o.getPerm();
        SmallVector<int64_t> inverse(perm.size());
        for (size_t i = 0; i < perm.size(); ++i)
          inverse[perm[i]] = i;
        contribute(o.getInput(), pb.transpose(dy, inverse));
        return success();
      })
      .Case([&](px::ConcatOp o) {
        auto outType = typeOf(o.getOutput());
        int64_t axis = *px::normalizeAxis((int64_t)o.getAxis(), outType.getRank());
        int64_t offset = 0;
        for (Value in : o.getInputs()) {
          auto inType = typeOf(in);
          if (isActive(in)) {
            SmallVector<int64_t> starts(outType.getRank(), 0),
                steps(outType.getRank(), 1);
            starts[axis] = offset;
            contribute(in, pb.slice(dy, starts, steps, inType.getShape()));
          }
          offset += inType.getDimSize(axis);
        }
        return success();
      })
      .Case([&](px::ExpandOp o) {
        contribute(o.getInput(), unb(dy, o.getInput()));
        return success();
      })
      // Convolution and pooling.
      .Case([&](px::ConvOp o) {
        if (isActive(o.getX()))
          contribute(o.getX(), px::ConvGradInputOp::create(
                                   b, o.getLoc(), o.getX().getType(), dy,
                                   o.getW(), o.getStridesAttr(), o.getPadsAttr(),
                                   o.getDilationsAttr(), o.getGroupAttr()));
        if (isActive(o.getW()))
          contribute(o.getW(), px::ConvGradFilterOp::create(
                                   b, o.getLoc(), o.getW().getType(), o.getX(),
                                   dy, o.getStridesAttr(), o.getPadsAttr(),
                                   o.getDilationsAttr(), o.getGroupAttr()));
        if (Value bias = o.getB()) {
          SmallVector<int64_t> axes{0};
          for (int64_t d = 2; d < typeOf(dy).getRank(); ++d)
            axes.push_back(d);
          contribute(bias, pb.reduceSum(dy, axes, /*keepdims=*/false));
        }
        return success();
      })
      .Case([&](px::ConvGradInputOp o) { // ConvTranspose: dy is its input
        Value x = o.getDy(), w = o.getW();
        if (isActive(x))
          contribute(x, px::ConvOp::create(b, o.getLoc(), x.getType(), dy, w,
                                           Value(), o.getStridesAttr(),
                                           o.getPadsAttr(), o.getDilationsAttr(),
                                           o.getGroupAttr()));
        if (isActive(w))
          contribute(w, px::ConvGradFilterOp::create(
                            b, o.getLoc(), w.getType(), dy, x, o.getStridesAttr(),
                            o.getPadsAttr(), o.getDilationsAttr(),
                            o.getGroupAttr()));
        return success();
      })
      .Case([&](px::MaxPoolOp o) {
        contribute(o.getX(),
                   px::MaxPoolGradOp::create(
                       b, o.getLoc(), o.getX().getType(), o.getX(), dy,
                       o.getKernelShapeAttr(), o.getStridesAttr(),
                       o.getPadsAttr(), o.getDilationsAttr(),
                       o.getCeilModeAttr()));
        return success();
      })
      .Case([&](px::AveragePoolOp o) {
        contribute(o.getX(),
                   px::AvgPoolGradOp::create(
                       b, o.getLoc(), o.getX().getType(), dy,
                       o.getKernelShapeAttr(), o.getStridesAttr(),
                       o.getPadsAttr(), o.getCeilModeAttr(),
                       o.getCountIncludePadAttr()));
        return success();
      })
      // Recurrent layers: one backward kernel per layer (backpropagation
      // through time over the saved gates), not an unrolled graph. A result
      // nothing reads contributes a zero gradient.
      .Case([&](px::LstmOp o) -> LogicalResult {
        if (dys[3] || dys[4])
          return o.emitOpError("px-autodiff: gradients through the saved "
                               "gates or cells of lstm are not supported");
        auto grad = px::LstmGradOp::create(
            b, o.getLoc(), o.getX(), o.getW(), o.getR(), o.getInitialH(),
            o.getInitialC(), o.getY(), o.getGates(), o.getCells(),
            orZeros(dys[0], o.getY()), orZeros(dys[1], o.getYH()),
            orZeros(dys[2], o.getYC()), o.getDirectionAttr());
        contributeRecurrent(o, grad);
        contribute(o.getInitialC(), grad.getDinitialC());
        return success();
      })
      .Case([&](px::GruOp o) -> LogicalResult {
        if (dys[2])
          return o.emitOpError("px-autodiff: gradients through the saved "
                               "gates of gru are not supported");
        auto grad = px::GruGradOp::create(
            b, o.getLoc(), o.getX(), o.getW(), o.getR(), o.getInitialH(),
            o.getY(), o.getGates(), orZeros(dys[0], o.getY()),
            orZeros(dys[1], o.getYH()), o.getDirectionAttr(),
            o.getLinearBeforeResetAttr());
        contributeRecurrent(o, grad);
        return success();
      })
      .Case([&](px::RnnOp o) {
        auto grad = px::RnnGradOp::create(
            b, o.getLoc(), o.getX(), o.getW(), o.getR(), o.getInitialH(),
            o.getY(), orZeros(dys[0], o.getY()), orZeros(dys[1], o.getYH()),
            o.getDirectionAttr(), o.getActivationAttr());
        contributeRecurrent(o, grad);
        return success();
      })
      .Default([&](Operation *other) -> LogicalResult {
        if (isDifferentiableCollective(other)) {
          FailureOr<Value> dx = collectiveAdjoint(b, other, dy);
          if (failed(dx))
            return failure();
          contribute(other->getOperand(0), *dx);
          return success();
        }
        // Ops without a useful gradient: comparisons and logic (boolean
        // results are never active), integer computations, leaves.
        bool needs = llvm::any_of(other->getOperands(),
                                  [&](Value v) { return isActive(v); });
        if (!needs)
          return success();
        return other->emitOpError("px-autodiff: no gradient rule for this op");
      });
}

LogicalResult Differentiator::visitMaxMin(Operation *op, Value dy, bool isMax) {
  Value l = op->getOperand(0), r = op->getOperand(1);
  Value zero = pb.scalar(0.0, PxBuilder::typeOf(dy).getElementType());
  // The larger (smaller) operand gets the gradient; ties split it evenly.
  Value wins = isMax ? pb.greater(l, r) : pb.less(l, r);
  Value loses = isMax ? pb.less(l, r) : pb.greater(l, r);
  Value tie = pb.equal(l, r);
  Value half = pb.scale(dy, 0.5);
  if (isActive(l))
    contribute(l, pb.unbroadcast(pb.where(wins, dy, pb.where(tie, half, zero)),
                                 PxBuilder::typeOf(l)));
  if (isActive(r))
    contribute(r, pb.unbroadcast(pb.where(loses, dy, pb.where(tie, half, zero)),
                                 PxBuilder::typeOf(r)));
  return success();
}

/// Trigonometric and hyperbolic functions: dy * f'(x).
LogicalResult Differentiator::visitUnaryFunction(Operation *op, Value dy) {
  Value x = op->getOperand(0), y = op->getResult(0);
  Type elem = PxBuilder::typeOf(x).getElementType();
  auto make = [&](auto tag, Value v) -> Value {
    using OpTy = decltype(tag);
    return OpTy::create(b, op->getLoc(), v.getType(), v);
  };
  Value one = pb.scalar(1.0, elem);
  Value x2 = pb.mul(x, x);
  auto rsqrt = [&](Value v) {
    return make(px::ReciprocalOp(), make(px::SqrtOp(), v));
  };
  Value d = TypeSwitch<Operation *, Value>(op)
                .Case([&](px::SinOp) { return make(px::CosOp(), x); })
                .Case([&](px::CosOp) { return pb.neg(make(px::SinOp(), x)); })
                .Case([&](px::TanOp) { return pb.add(one, pb.mul(y, y)); })
                .Case([&](px::AsinOp) { return rsqrt(pb.sub(one, x2)); })
                .Case([&](px::AcosOp) { return pb.neg(rsqrt(pb.sub(one, x2))); })
                .Case([&](px::AtanOp) {
                  return make(px::ReciprocalOp(), pb.add(one, x2));
                })
                .Case([&](px::SinhOp) { return make(px::CoshOp(), x); })
                .Case([&](px::CoshOp) { return make(px::SinhOp(), x); })
                .Case([&](px::AsinhOp) { return rsqrt(pb.add(x2, one)); })
                .Case([&](px::AcoshOp) { return rsqrt(pb.sub(x2, one)); })
                .Case([&](px::AtanhOp) {
                  return make(px::ReciprocalOp(), pb.sub(one, x2));
                })
                .Default([](Operation *) { return Value(); });
  if (!d)
    return op->emitOpError("px-autodiff: no derivative for this function");
  contribute(x, pb.mul(dy, d));
  return success();
}

/// d prod(x) / dx_i is the product of the other elements, without dividing
/// by x_i (which may be 0): with no zero in the reduced set it is p / x_i;
/// with one zero, the product of the others at the zero and 0 elsewhere;
/// with more, 0.
LogicalResult Differentiator::visitReduceProd(px::ReduceProdOp op, Value dy) {
  Value x = op.getInput();
  auto xt = PxBuilder::typeOf(x);
  Type elem = xt.getElementType();
  ArrayRef<int64_t> axes = op.getAxes();
  SmallVector<int64_t> kept(xt.getShape());
  for (int64_t a : axes)
    kept[*px::normalizeAxis(a, xt.getRank())] = 1;
  Value g = pb.reshape(dy, kept);
  Value zero = pb.scalar(0.0, elem), one = pb.scalar(1.0, elem);
  Value isZero = pb.equal(x, zero);
  Value nonZero = pb.where(isZero, one, x);
  Value zeros = pb.reduceSum(pb.cast(isZero, elem), axes, /*keepdims=*/true);
  Value others = pb.inferred<px::ReduceProdOp>(
      {nonZero}, {pb.named("axes", op.getAxesAttr()),
                  pb.named("keepdims", b.getBoolAttr(true))});
  Value noZero = pb.div(others, nonZero);
  Value atTheZero = pb.where(pb.equal(zeros, one), others, zero);
  Value d = pb.where(pb.equal(zeros, zero), noZero,
                     pb.where(isZero, atTheZero, zero));
  contribute(x, pb.mul(g, d));
  return success();
}

LogicalResult Differentiator::visitGather(px::GatherOp op, Value dy) {
  Value data = op.getData(), indices = op.getIndices();
  auto dataType = PxBuilder::typeOf(data);
  int64_t axis = *px::normalizeAxis((int64_t)op.getAxis(), dataType.getRank());
  Operation *var = data.getDefiningOp();
  if (var && rowGathered.contains(var)) {
    // Rows: flat i64 indices in [0, rows) and one gradient row per index.
    auto idxType = PxBuilder::typeOf(indices);
    int64_t n = idxType.getNumElements();
    Value flat = pb.reshape(pb.cast(indices, b.getI64Type()), {n});
    Value zero = pb.scalar(0, b.getI64Type());
    Value wrapped = pb.add(flat, pb.scalar(dataType.getDimSize(0), b.getI64Type()));
    flat = pb.where(pb.less(flat, zero), wrapped, flat);
    SmallVector<int64_t> rowShape{n};
    llvm::append_range(rowShape, dataType.getShape().drop_front());
    rows[var].push_back({flat, pb.reshape(dy, rowShape)});
    return success();
  }
  contribute(data, px::ScatterAddOp::create(b, op.getLoc(), dataType, indices, dy,
                                            b.getI64IntegerAttr(axis)));
  return success();
}

LogicalResult Differentiator::visitMatMul(px::MatMulOp op, Value dy) {
  Value a = op.getLhs(), bm = op.getRhs();
  auto at = PxBuilder::typeOf(a), bt = PxBuilder::typeOf(bm);
  // Promote vectors to matrices as numpy does ([K] -> [1, K] / [K, 1]),
  // differentiate the matrix product, then undo.
  Value a2 = at.getRank() == 1 ? pb.reshape(a, {1, at.getDimSize(0)}) : a;
  Value b2 = bt.getRank() == 1 ? pb.reshape(bm, {bt.getDimSize(0), 1}) : bm;
  auto a2t = PxBuilder::typeOf(a2), b2t = PxBuilder::typeOf(b2);
  auto batch = px::broadcastShapes(a2t.getShape().drop_back(2),
                                   b2t.getShape().drop_back(2));
  if (!batch)
    return op.emitOpError("px-autodiff: batch dimensions do not broadcast");
  SmallVector<int64_t> y2(batch->begin(), batch->end());
  y2.push_back(a2t.getDimSize(a2t.getRank() - 2));
  y2.push_back(b2t.getDimSize(b2t.getRank() - 1));
  Value dy2 = pb.reshape(dy, y2);
  // A shared matrix B (a weight) against a batch of A: fold the batch into
  // rows, so that dA = dY B^T and dB = A^T dY are single GEMMs with
  // transposed operands, instead of a transposed copy of B and, for dB, one
  // product per batch element summed afterwards (a [batch, K, N] temporary).
  if (b2t.getRank() == 2 && isa<FloatType>(b2t.getElementType())) {
    int64_t k = b2t.getDimSize(0), n = b2t.getDimSize(1);
    int64_t rows = a2t.getNumElements() / std::max<int64_t>(k, 1);
    Value aFlat = pb.reshape(a2, {rows, k});
    Value dyFlat = pb.reshape(dy2, {rows, n});
    if (isActive(a))
      contribute(a, pb.reshape(pb.gemm(dyFlat, b2, false, true),
                               at.getShape()));
    if (isActive(bm))
      contribute(bm, pb.reshape(pb.gemm(aFlat, dyFlat, true, false),
                                bt.getShape()));
    return success();
  }
  if (isActive(a)) {
    Value da = pb.unbroadcast(pb.matmul(dy2, pb.transposeLast2(b2)), a2t);
    contribute(a, pb.reshape(da, at.getShape()));
  }
  if (isActive(bm)) {
    Value db = pb.unbroadcast(pb.matmul(pb.transposeLast2(a2), dy2), b2t);
    contribute(bm, pb.reshape(db, bt.getShape()));
  }
  return success();
}

LogicalResult Differentiator::visitGemm(px::GemmOp op, Value dy) {
  // Y = alpha op(A) op(B) + beta C, op(X) = X or X^T.
  bool ta = op.getTransA(), tb = op.getTransB();
  double alpha = op.getAlpha().convertToDouble();
  Value a = op.getA(), bm = op.getB();
  if (isActive(a))
    contribute(a, ta ? pb.gemm(bm, dy, tb, true, alpha)
                     : pb.gemm(dy, bm, false, !tb, alpha));
  if (isActive(bm))
    contribute(bm, tb ? pb.gemm(dy, a, true, ta, alpha)
                      : pb.gemm(a, dy, !ta, false, alpha));
  if (Value c = op.getC(); c && isActive(c))
    contribute(c, pb.unbroadcast(pb.scale(dy, op.getBeta().convertToDouble()),
                                 PxBuilder::typeOf(c)));
  return success();
}

LogicalResult Differentiator::visitReduce(Operation *op, Value dy, bool mean,
                                          bool max) {
  Value x = op->getOperand(0);
  auto xt = PxBuilder::typeOf(x);
  auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef();
  SmallVector<int64_t> kept(xt.getShape());
  int64_t count = 1;
  for (int64_t a : axes) {
    int64_t d = *px::normalizeAxis(a, xt.getRank());
    count *= kept[d];
    kept[d] = 1;
  }
  // dy with the reduced dimensions kept as 1, broadcast back over them.
  Value g = pb.reshape(dy, kept);
  if (mean)
    g = pb.scale(g, 1.0 / std::max<int64_t>(count, 1));
  if (!max) {
    contribute(x, pb.expand(g, xt.getShape()));
    return success();
  }
  // Max: the maxima share the gradient evenly (as torch.amax does).
  Type elem = xt.getElementType();
  Value y = pb.reshape(op->getResult(0), kept);
  Value hit = pb.equal(x, y);
  Value ones = pb.where(hit, pb.scalar(1.0, elem), pb.scalar(0.0, elem));
  Value ties = pb.reduceSum(ones, axes, /*keepdims=*/true);
  contribute(x, pb.where(hit, pb.div(g, ties), pb.scalar(0.0, elem)));
  return success();
}

LogicalResult Differentiator::visitBatchNorm(px::BatchNormOp op, Value dy) {
  if (op.getTraining() && (gradOf(op.getRunningMean()) || gradOf(op.getRunningVar())))
    return op.emitOpError("px-autodiff: the loss depends on the updated "
                          "running statistics of a training-mode batch_norm, "
                          "which have no gradient rule");
  if (!dy)
    return success();
  if (op.getTraining()) {
    auto grad = px::BatchNormGradOp::create(
        b, op.getLoc(), op.getX().getType(), op.getScale().getType(),
        op.getScale().getType(), dy, op.getX(), op.getScale(),
        op.getEpsilonAttr(), op.getGridAttr(), op.getGridAxesAttr());
    contribute(op.getX(), grad.getDx());
    contribute(op.getScale(), grad.getDscale());
    contribute(op.getBias(), grad.getDbias());
    return success();
  }
  // Inference mode: y = (x - mean) * scale / sqrt(var + eps) + bias with
  // the input statistics, differentiated as that formula (they are usually
  // non-trainable state, but get their gradients when they are active).
  auto xt = PxBuilder::typeOf(op.getX());
  Type elem = xt.getElementType();
  SmallVector<int64_t> channel(xt.getRank(), 1), axes{0};
  channel[1] = xt.getDimSize(1);
  for (int64_t d = 2; d < xt.getRank(); ++d)
    axes.push_back(d);
  Value var = pb.add(op.getInputVar(),
                     pb.scalar(op.getEpsilon().convertToDouble(), elem));
  Value invStdC = px::ReciprocalOp::create(
      b, op.getLoc(), var.getType(),
      px::SqrtOp::create(b, op.getLoc(), var.getType(), var));
  Value invStd = pb.reshape(invStdC, channel);
  Value scale = pb.reshape(op.getScale(), channel);
  Value xhat = pb.mul(pb.sub(op.getX(), pb.reshape(op.getInputMean(), channel)),
                      invStd);
  Value dx = pb.mul(dy, pb.mul(scale, invStd));
  Value dscale = pb.reduceSum(pb.mul(dy, xhat), axes, false);
  contribute(op.getX(), dx);
  contribute(op.getScale(), dscale);
  contribute(op.getBias(), pb.reduceSum(dy, axes, false));
  if (isActive(op.getInputMean())) // -sum(dy * scale * inv_std)
    contribute(op.getInputMean(), pb.neg(pb.reduceSum(dx, axes, false)));
  if (isActive(op.getInputVar())) // -1/2 scale inv_std^2 sum(dy * xhat)
    contribute(op.getInputVar(),
               pb.mul(pb.scale(dscale, -0.5),
                      pb.mul(op.getScale(), pb.mul(invStdC, invStdC))));
  return success();
}

struct AutodiffPass : parallax::impl::PxAutodiffBase<AutodiffPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp func = getEntryFunction(module);
    if (!func || !px::hasAttr<px::PxDialect::LossAttrHelper>(func)) {
      module.emitError("px-autodiff: no function with a px.loss attribute "
                       "(import a training graph, not an inference one)");
      return signalPassFailure();
    }
    if (!func.getBody().hasOneBlock()) {
      func.emitError("px-autodiff: the step function must have one block");
      return signalPassFailure();
    }
    if (!func.getOps<px::GradientOp>().empty()) {
      func.emitError("px-autodiff: the function is already differentiated");
      return signalPassFailure();
    }
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    int64_t lossIndex = px::getAttr<px::PxDialect::LossAttrHelper>(func).getInt();
    if (lossIndex < 0 || lossIndex >= (int64_t)ret.getNumOperands()) {
      func.emitError("px-autodiff: px.loss names no result");
      return signalPassFailure();
    }
    // On N data-parallel ranks (px-cluster's px.world_size) each rank holds
    // 1/N of the global batch, and the global mean loss is the mean of the
    // ranks' mean losses: seeding with 1/N makes every gradient this rank's
    // share of the global one (backward passes are linear in the seed), so
    // px-sync sums the shares instead of averaging them. That saves a pass
    // over every gradient (a division after each all-reduce, a scaling
    // before each sparse push or gather): about 4% of the lm example's step
    // on 4 ranks. px.gradient_scale tells px-sync it was done.
    // On a Pr x Pc grid only the Pc ranks of the batch axis hold different
    // samples: the model axis's ranks share theirs.
    int64_t world = 1;
    if (auto w = px::getAttr<px::PxDialect::WorldSizeAttrHelper>(module))
      world = std::max<int64_t>(1, w.getInt());
    if (auto m = px::getAttr<px::PxDialect::ModelRanksAttrHelper>(module))
      world = std::max<int64_t>(1, world / m.getInt());
    double seed = 1.0 / (double)world;
    OpBuilder b(func.getContext());
    Differentiator d(func, b);
    if (failed(d.run(ret.getOperand(lossIndex), seed)))
      return signalPassFailure();
    if (world > 1)
      px::setAttr<px::PxDialect::GradientScaleAttrHelper>(module, b.getF64FloatAttr(seed));
  }
};

} // namespace
