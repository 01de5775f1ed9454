//===- BatchDimension.cpp - where a step's samples lie in each value ------===//
//
// One forward walk over the step function. Each op maps the placements of
// its operands' samples to its results' (elementwise ops through the
// Px_Elementwise trait, the others through the rules below), or fails
// naming how it combines samples. An op without a rule is accepted as long
// as none of its operands holds samples.
//
//===----------------------------------------------------------------------===//

#include "parallax/Analysis/BatchDimension.h"

#include "parallax/Dialect/Px/PxDialect.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cstdlib>
#include <tuple>

using namespace mlir;

namespace parallax {

int64_t BatchLayout::sampleStride(Value value) const {
  auto it = batched.find(value);
  if (it == batched.end())
    return 0;
  auto shape = cast<ShapedType>(value.getType()).getShape();
  int64_t stride = it->second.inner;
  for (size_t d = it->second.axis + 1; d < shape.size(); ++d)
    stride *= shape[d];
  return stride;
}

namespace {

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<ShapedType>(v.getType()).getShape();
}
int64_t rankOf(Value v) { return (int64_t)shapeOf(v).size(); }
int64_t normalizeAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

class BatchTracer {
public:
  BatchTracer(BatchLayout &layout) : layout(layout), batch(layout.batch) {}

  llvm::Error visit(Operation *op);

private:
  using Placement = BatchPlacement;

  std::optional<Placement> placementOf(Value v) const {
    auto it = layout.batched.find(v);
    if (it == layout.batched.end())
      return std::nullopt;
    return it->second;
  }
  void place(Value v, Placement p) { layout.batched[v] = p; }

  llvm::Error fail(Operation *op, const llvm::Twine &how) const {
    std::string node = locationName(op->getLoc());
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        (node.empty() ? "" : "node '" + node + "' ") + "(" +
            op->getName().getStringRef() + ") " + how);
  }

  /// `op` meets the samples with operand `index`, which does not come from
  /// them yet is as long as they are along their dimension and not the same
  /// for every sample.
  llvm::Error notPerSample(Operation *op, size_t index) const {
    return fail(op, "combines the samples with operand #" + llvm::Twine(index) +
                        ", which does not come from them but has as many "
                        "elements along their dimension and differs along it");
  }

  /// Whether `v`, which does not come from the samples but is as long as
  /// they are along `at.axis`, is the same for every sample there (so that
  /// it can shrink with the batch); records the values that shrink.
  bool uniformAlong(Value v, Placement at);
  bool constantUniformAlong(ElementsAttr value, Placement at) const;

  /// An operand that holds no samples, broadcast against a result whose
  /// samples lie at `at`: it must be of size 1 there (or absent), or the
  /// same for every sample.
  llvm::Error broadcastOperand(Operation *op, unsigned index, Value operand,
                               Value result, Placement at);

  llvm::Error elementwise(Operation *op);
  llvm::Error gather(px::GatherOp op);
  llvm::Error gatherElements(px::GatherElementsOp op);
  llvm::Error slice(px::SliceOp op);
  llvm::Error matmul(px::MatMulOp op);
  llvm::Error gemm(px::GemmOp op);
  llvm::Error softmax(Operation *op, int64_t axis);
  llvm::Error alongAxis(Operation *op, int64_t axis, bool keepdims);
  llvm::Error pad(px::PadOp op);
  llvm::Error segmentReduce(px::SegmentReduceOp op);
  llvm::Error loss(Operation *op, Value scores, Value labels, StringRef reduction);
  llvm::Error layerNorm(px::LayerNormOp op);
  llvm::Error samplesFirst(Operation *op, Value x);
  llvm::Error recurrent(Operation *op, Value x, ValueRange weights,
                        ValueRange states);
  llvm::Error reduce(Operation *op, ArrayRef<int64_t> axes, bool keepdims,
                     bool isMean);
  llvm::Error reshape(px::ReshapeOp op);
  llvm::Error transpose(px::TransposeOp op);
  llvm::Error concat(px::ConcatOp op);
  llvm::Error expand(px::ExpandOp op);
  llvm::Error useOfMeans(Operation *op);
  llvm::Error useOfSums(Operation *op);
  /// Whether `v` is a scalar px.constant equal to `value`.
  static bool isConstant(Value v, double value);

  BatchLayout &layout;
  int64_t batch;
  /// Values computed from a mean over the samples (the loss, and what is
  /// computed from it by scaling and adding).
  llvm::SmallPtrSet<Value, 8> means;
  /// Values computed from a sum over the samples, each with the op that
  /// summed: it becomes a mean when divided by the batch size.
  llvm::DenseMap<Value, Operation *> sums;
};

bool BatchTracer::constantUniformAlong(ElementsAttr value, Placement at) const {
  if (value.isSplat())
    return true;
  auto shape = value.getShapedType().getShape();
  // Element e is sample s's when its index along the axis is
  // o * batch * inner + s * inner + i; compare it with sample 0's.
  int64_t stride = at.inner;
  for (size_t d = at.axis + 1; d < shape.size(); ++d)
    stride *= shape[d];
  int64_t n = value.getNumElements();
  if (n > (int64_t)1 << 22)
    return false; // too large to be worth checking
  auto values = value.getValues<Attribute>();
  for (int64_t e = 0; e < n; ++e) {
    int64_t sample = e / stride % batch;
    if (sample != 0 && values[e] != values[e - sample * stride])
      return false;
  }
  return true;
}

bool BatchTracer::uniformAlong(Value v, Placement at) {
  int64_t axis = at.axis;
  if (placementOf(v) || axis < 0 || axis >= rankOf(v) ||
      shapeOf(v)[axis] % (batch * at.inner) != 0)
    return false;
  if (auto it = layout.uniform.find(v); it != layout.uniform.end())
    return it->second == at;
  Operation *def = v.getDefiningOp();
  if (!def)
    return false;
  int64_t rank = rankOf(v);
  // An operand of `def` that is broadcast along `axis`, or uniform itself.
  auto operandUniform = [&](Value operand, int64_t operandAxis) {
    return operandAxis < 0 || shapeOf(operand)[operandAxis] == 1 ||
           uniformAlong(operand, {operandAxis, at.inner});
  };
  bool ok =
      llvm::TypeSwitch<Operation *, bool>(def)
          .Case([&](px::ConstantOp c) {
            auto value = dyn_cast<ElementsAttr>(c.getValue());
            return value && constantUniformAlong(value, at);
          })
          .Case([&](px::ExpandOp e) {
            return operandUniform(e.getInput(),
                                  axis - (rank - rankOf(e.getInput())));
          })
          .Case([&](px::TransposeOp t) {
            return operandUniform(t.getInput(), t.getPerm()[axis]);
          })
          .Case([&](px::GatherOp g) {
            int64_t gAxis = normalizeAxis(g.getAxis(), rankOf(g.getData()));
            int64_t idxRank = rankOf(g.getIndices());
            if (axis < gAxis)
              return operandUniform(g.getData(), axis);
            if (axis < gAxis + idxRank)
              return operandUniform(g.getIndices(), axis - gAxis);
            return operandUniform(g.getData(), axis - idxRank + 1);
          })
          .Default([&](Operation *op) {
            if (!op->hasTrait<px::OpTrait::Elementwise>())
              return false;
            return llvm::all_of(op->getOperands(), [&](Value operand) {
              return operandUniform(operand, axis - (rank - rankOf(operand)));
            });
          });
  if (ok)
    layout.uniform[v] = at;
  return ok;
}

llvm::Error BatchTracer::broadcastOperand(Operation *op, unsigned index,
                                          Value operand, Value result,
                                          Placement at) {
  int64_t resultDim = shapeOf(result)[at.axis];
  int64_t a = at.axis - (rankOf(result) - rankOf(operand));
  if (a < 0 || shapeOf(operand)[a] == 1)
    return llvm::Error::success();
  if (shapeOf(operand)[a] == resultDim && uniformAlong(operand, {a, at.inner}))
    return llvm::Error::success();
  return notPerSample(op, index);
}

llvm::Error BatchTracer::elementwise(Operation *op) {
  int64_t rank = rankOf(op->getResult(0));
  std::optional<Placement> at;
  for (Value operand : op->getOperands())
    if (auto p = placementOf(operand)) {
      Placement q{p->axis + rank - rankOf(operand), p->inner};
      if (at && !(*at == q))
        return fail(op, "combines samples that lie along different dimensions");
      at = q;
    }
  if (!at)
    return llvm::Error::success();
  for (auto [i, operand] : llvm::enumerate(op->getOperands()))
    if (!placementOf(operand))
      if (auto err = broadcastOperand(op, i, operand, op->getResult(0), *at))
        return err;
  for (Value r : op->getResults())
    place(r, *at);
  return llvm::Error::success();
}

llvm::Error BatchTracer::gather(px::GatherOp op) {
  int64_t axis = normalizeAxis(op.getAxis(), rankOf(op.getData()));
  auto data = placementOf(op.getData()), idx = placementOf(op.getIndices());
  if (data && idx)
    return fail(op, "indexes the samples with indices that also hold samples");
  if (data) {
    if (data->axis == axis)
      return fail(op, "selects samples (it gathers along their dimension)");
    int64_t shift = data->axis < axis ? 0 : rankOf(op.getIndices()) - 1;
    place(op.getOutput(), {data->axis + shift, data->inner});
  } else if (idx) {
    place(op.getOutput(), {axis + idx->axis, idx->inner});
  }
  return llvm::Error::success();
}

llvm::Error BatchTracer::gatherElements(px::GatherElementsOp op) {
  auto data = placementOf(op.getData()), idx = placementOf(op.getIndices());
  if (!data && !idx)
    return llvm::Error::success();
  int64_t axis = normalizeAxis(op.getAxis(), rankOf(op.getData()));
  if (!data || !idx || !(*data == *idx))
    return fail(op, "picks elements of the samples with indices that are not "
                    "laid out like them");
  if (data->axis == axis)
    return fail(op, "picks elements across the samples (along their dimension)");
  place(op.getOutput(), *idx);
  return llvm::Error::success();
}

llvm::Error BatchTracer::slice(px::SliceOp op) {
  auto p = placementOf(op.getInput());
  if (!p)
    return llvm::Error::success();
  if (op.getStarts()[p->axis] != 0 || op.getSteps()[p->axis] != 1 ||
      shapeOf(op.getOutput())[p->axis] != shapeOf(op.getInput())[p->axis])
    return fail(op, "takes only some of the samples (it slices their dimension)");
  place(op.getOutput(), *p);
  return llvm::Error::success();
}

llvm::Error BatchTracer::matmul(px::MatMulOp op) {
  Value lhs = op.getLhs(), rhs = op.getRhs();
  int64_t rl = rankOf(lhs), rr = rankOf(rhs), rank = rankOf(op.getOutput());
  // The result dimension of an operand's sample dimension, or none when it
  // is contracted.
  auto mapped = [&](Value v, Placement p, bool isLhs) -> std::optional<Placement> {
    int64_t r = isLhs ? rl : rr;
    if (r == 1)
      return std::nullopt; // a vector operand is all contraction dimension
    if (isLhs ? p.axis == r - 1 : p.axis == r - 2)
      return std::nullopt;
    if (p.axis == r - 2) // lhs rows
      return Placement{rr == 1 ? rank - 1 : rank - 2, p.inner};
    if (p.axis == r - 1) // rhs columns
      return Placement{rank - 1, p.inner};
    return Placement{p.axis + rank - r, p.inner}; // broadcast batch dims
  };
  std::optional<Placement> at;
  for (auto [isLhs, v] : {std::pair{true, lhs}, std::pair{false, rhs}}) {
    auto p = placementOf(v);
    if (!p)
      continue;
    auto q = mapped(v, *p, isLhs);
    if (!q)
      return fail(op, "sums over the samples (they lie along a contracted "
                      "dimension)");
    if (at && !(*at == *q))
      return fail(op, "multiplies samples that lie along different dimensions");
    at = q;
  }
  if (!at)
    return llvm::Error::success();
  // An operand without samples broadcast over the leading batch dimensions.
  for (auto [i, v] : llvm::enumerate(ValueRange{lhs, rhs})) {
    int64_t r = rankOf(v);
    if (placementOf(v) || r < 3)
      continue;
    int64_t a = at->axis - (rank - r);
    if (a >= 0 && a < r - 2 && shapeOf(v)[a] != 1 &&
        !uniformAlong(v, {a, at->inner}))
      return notPerSample(op, i);
  }
  place(op.getOutput(), *at);
  return llvm::Error::success();
}

llvm::Error BatchTracer::gemm(px::GemmOp op) {
  auto a = placementOf(op.getA()), b = placementOf(op.getB());
  std::optional<Placement> at;
  if (a) {
    if (a->axis != (op.getTransA() ? 1 : 0))
      return fail(op, "sums over the samples (they lie along A's contracted "
                      "dimension)");
    at = Placement{0, a->inner};
  }
  if (b) {
    if (b->axis != (op.getTransB() ? 0 : 1))
      return fail(op, "sums over the samples (they lie along B's contracted "
                      "dimension)");
    if (at)
      return fail(op, "multiplies samples with samples");
    at = Placement{1, b->inner};
  }
  if (Value c = op.getC()) {
    if (auto p = placementOf(c)) {
      Placement q{p->axis + 2 - rankOf(c), p->inner};
      if (at && !(*at == q))
        return fail(op, "adds C's samples along another dimension than A*B's");
      at = q;
    } else if (at) {
      if (auto err = broadcastOperand(op, 2, c, op.getOutput(), *at))
        return err;
    }
  }
  if (at)
    place(op.getOutput(), *at);
  return llvm::Error::success();
}

llvm::Error BatchTracer::softmax(Operation *op, int64_t axis) {
  Value x = op->getOperand(0);
  auto p = placementOf(x);
  if (!p)
    return llvm::Error::success();
  if (p->axis == normalizeAxis(axis, rankOf(x)))
    return fail(op, "normalises across the samples (along their dimension)");
  place(op->getResult(0), *p);
  return llvm::Error::success();
}

/// Ops that work along one axis (cumsum, top-k, arg-max): not the samples'.
llvm::Error BatchTracer::alongAxis(Operation *op, int64_t axis, bool keepdims) {
  Value x = op->getOperand(0);
  auto p = placementOf(x);
  if (!p)
    return llvm::Error::success();
  axis = normalizeAxis(axis, rankOf(x));
  if (p->axis == axis)
    return fail(op, "works across the samples (along their dimension)");
  Placement q{keepdims || axis > p->axis ? p->axis : p->axis - 1, p->inner};
  for (Value r : op->getResults())
    place(r, q);
  return llvm::Error::success();
}

llvm::Error BatchTracer::pad(px::PadOp op) {
  auto p = placementOf(op.getInput());
  if (!p)
    return llvm::Error::success();
  auto pads = op.getPads();
  if (pads[p->axis] != 0 || pads[p->axis + rankOf(op.getInput())] != 0)
    return fail(op, "pads or crops the samples' dimension");
  place(op.getOutput(), *p);
  return llvm::Error::success();
}

/// nn.EmbeddingBag: rows [starts[m], ends[m]) of the gathered ids reduce to
/// bag m; the bags (starts, ends) are the samples.
llvm::Error BatchTracer::segmentReduce(px::SegmentReduceOp op) {
  auto s = placementOf(op.getStarts()), e = placementOf(op.getEnds());
  if (placementOf(op.getData()))
    return fail(op, "reduces rows that hold samples");
  if (!s && !e)
    return llvm::Error::success();
  if (!s || !e || !(*s == *e))
    return fail(op, "takes bag starts and ends that are not laid out alike");
  place(op.getOutput(), *s);
  return llvm::Error::success();
}

llvm::Error BatchTracer::loss(Operation *op, Value scores, Value labels,
                              StringRef reduction) {
  auto s = placementOf(scores), l = placementOf(labels);
  if (!s && !l)
    return llvm::Error::success();
  // scores [N, C, D...], labels [N, D...]: the class dimension is scores' 1.
  // Labels that do not come from the samples may be the same for each (a
  // sampled softmax whose true class is always candidate 0).
  Placement labelsAt{s && s->axis > 1 ? s->axis - 1 : 0, s ? s->inner : 1};
  if (s && !l && s->axis != 1 && uniformAlong(labels, labelsAt))
    l = labelsAt;
  if (!s || !l || s->inner != l->inner || s->axis == 1 ||
      l->axis != labelsAt.axis)
    return fail(op, "pairs scores and labels whose samples are not laid out "
                    "alike");
  for (Value r : op->getResults().drop_front())
    place(r, *s); // log_prob, laid out like scores
  if (reduction == "none") {
    place(op->getResult(0), *l);
  } else if (reduction == "mean") {
    means.insert(op->getResult(0));
  } else {
    sums[op->getResult(0)] = op;
  }
  return llvm::Error::success();
}

llvm::Error BatchTracer::layerNorm(px::LayerNormOp op) {
  auto p = placementOf(op.getX());
  if (placementOf(op.getScale()) || (op.getBias() && placementOf(op.getBias())))
    return fail(op, "scales by values that hold samples");
  if (!p)
    return llvm::Error::success();
  if (p->axis >= normalizeAxis(op.getAxis(), rankOf(op.getX())))
    return fail(op, "normalises across the samples (along their dimension)");
  for (Value r : op->getResults())
    place(r, *p);
  return llvm::Error::success();
}

/// Convolution, pooling and batch normalisation take NCHW samples first;
/// batch normalisation's statistics over them are synchronized across ranks.
llvm::Error BatchTracer::samplesFirst(Operation *op, Value x) {
  auto p = placementOf(x);
  for (Value operand : op->getOperands().drop_front())
    if (placementOf(operand))
      return fail(op, "takes samples in an operand other than its input");
  if (!p)
    return llvm::Error::success();
  if (p->axis != 0 || p->inner != 1)
    return fail(op, "needs the samples along dimension 0 of its input");
  place(op->getResult(0), *p);
  return llvm::Error::success();
}

/// px.lstm, px.gru and px.rnn take x as [T, B, I] and states as [D, B, H];
/// every result (y [T, D, B, H], the final states, the saved gates) has the
/// samples in its second-to-last dimension.
llvm::Error BatchTracer::recurrent(Operation *op, Value x, ValueRange weights,
                                   ValueRange states) {
  for (Value w : weights)
    if (placementOf(w))
      return fail(op, "takes samples in its weights");
  bool any = false;
  for (Value v : llvm::concat<Value>(ValueRange{x}, states)) {
    auto p = placementOf(v);
    if (p && (p->axis != 1 || p->inner != 1))
      return fail(op, "needs the samples along dimension 1 of its input and "
                      "states (sequence first)");
    any |= p.has_value();
  }
  if (!any)
    return llvm::Error::success();
  for (auto [i, v] : llvm::enumerate(llvm::concat<Value>(ValueRange{x}, states)))
    if (!placementOf(v) && !uniformAlong(v, {1, 1}))
      return notPerSample(op, i);
  for (Value r : op->getResults())
    place(r, {rankOf(r) - 2, 1});
  return llvm::Error::success();
}

llvm::Error BatchTracer::reduce(Operation *op, ArrayRef<int64_t> axes,
                                bool keepdims, bool isMean) {
  auto p = placementOf(op->getOperand(0));
  if (!p)
    return llvm::Error::success();
  int64_t rank = rankOf(op->getOperand(0));
  int64_t before = 0;
  for (int64_t a : axes) {
    a = normalizeAxis(a, rank);
    if (a == p->axis) {
      if (isMean)
        means.insert(op->getResult(0));
      else if (isa<px::ReduceSumOp>(op))
        sums[op->getResult(0)] = op;
      else
        return fail(op, "reduces across the samples (along their dimension) "
                        "with something other than a sum or a mean");
      return llvm::Error::success();
    }
    before += a < p->axis;
  }
  place(op->getResult(0), {keepdims ? p->axis : p->axis - before, p->inner});
  return llvm::Error::success();
}

// In row-major order the samples of a [.., d_axis, ..] value are A runs of
// batch * M elements (M = inner * the dimensions after the axis). A
// reshape keeps that order, so the samples lie along the one result
// dimension j whose trailing size S_j divides M and whose extent spans a
// multiple of batch * M elements.
//
// A batch of one sample (a dynamic export bound to one sample per rank)
// does not pin j: every dimension whose extent spans a multiple of M
// qualifies, the innermost first ([1, 8, 6, 6] -> [1, 288]: j = 1, as if
// the 288 features were the samples). There the samples are taken on the
// dimension spanning the fewest elements (what the innermost match of a
// batch of two spans: attention's [T, 1, E] -> [T, H, Dh] keeps them on
// dimension 1, not on the T steps), among those the largest S_j (the size-1
// dimension of a flatten), and among dimensions of size 1 the one nearest
// the input's ([1, D] -> [1, 1, D]: j = 0).
llvm::Error BatchTracer::reshape(px::ReshapeOp op) {
  auto p = placementOf(op.getInput());
  if (!p)
    return llvm::Error::success();
  auto in = shapeOf(op.getInput()), out = shapeOf(op.getOutput());
  int64_t m = p->inner;
  for (size_t d = p->axis + 1; d < in.size(); ++d)
    m *= in[d];
  std::optional<Placement> found;
  // The preference among candidates of one sample: fewer elements
  // spanned, then larger S_j, then (dimensions of size 1 alike) nearer the
  // input's.
  auto rank = [&](int64_t j, int64_t t) {
    return std::make_tuple(t * out[j], -t, std::abs(j - p->axis));
  };
  std::tuple<int64_t, int64_t, int64_t> best;
  int64_t trailing = 1;
  for (int64_t j = (int64_t)out.size() - 1; j >= 0; trailing *= out[j], --j) {
    if (trailing > m)
      break;
    if (m % trailing == 0 && (trailing * out[j]) % (batch * m) == 0 &&
        (!found || rank(j, trailing) < best)) {
      found = Placement{j, m / trailing};
      best = rank(j, trailing);
      if (batch > 1)
        break;
    }
  }
  if (!found)
    return fail(op, "splits the samples' dimension across several dimensions");
  place(op.getOutput(), *found);
  return llvm::Error::success();
}

llvm::Error BatchTracer::transpose(px::TransposeOp op) {
  auto p = placementOf(op.getInput());
  if (!p)
    return llvm::Error::success();
  auto perm = op.getPerm();
  int64_t axis = std::find(perm.begin(), perm.end(), p->axis) - perm.begin();
  place(op.getOutput(), {axis, p->inner});
  return llvm::Error::success();
}

llvm::Error BatchTracer::concat(px::ConcatOp op) {
  int64_t rank = rankOf(op.getOutput());
  std::optional<Placement> at;
  for (Value v : op.getInputs())
    if (auto p = placementOf(v)) {
      if (at && !(*at == *p))
        return fail(op, "joins samples that lie along different dimensions");
      at = p;
    }
  if (!at)
    return llvm::Error::success();
  if (at->axis == normalizeAxis(op.getAxis(), rank))
    return fail(op, "appends along the samples' dimension");
  for (auto [i, v] : llvm::enumerate(op.getInputs()))
    if (!placementOf(v) && !uniformAlong(v, *at))
      return notPerSample(op, i);
  place(op.getOutput(), *at);
  return llvm::Error::success();
}

llvm::Error BatchTracer::expand(px::ExpandOp op) {
  auto p = placementOf(op.getInput());
  if (p)
    place(op.getOutput(),
          {p->axis + rankOf(op.getOutput()) - rankOf(op.getInput()), p->inner});
  return llvm::Error::success();
}

/// A mean over the samples may only be scaled, shifted by values that hold
/// no samples, and returned (the loss): anything else would compute with
/// one rank's mean where one process has the whole batch's.
llvm::Error BatchTracer::useOfMeans(Operation *op) {
  if (llvm::none_of(op->getOperands(), [&](Value v) { return means.count(v); }))
    return llvm::Error::success();
  if (isa<func::ReturnOp>(op))
    return llvm::Error::success();
  bool linear = isa<px::AddOp, px::SubOp, px::NegOp, px::ReshapeOp, px::CastOp>(op) ||
                (isa<px::MulOp>(op) && !(means.count(op->getOperand(0)) &&
                                         means.count(op->getOperand(1)))) ||
                (isa<px::DivOp>(op) && !means.count(op->getOperand(1)));
  if (!linear || llvm::any_of(op->getOperands(),
                              [&](Value v) { return placementOf(v).has_value(); }))
    return fail(op, "uses a mean over the samples inside the model: only the "
                    "loss may average over them");
  for (Value r : op->getResults())
    means.insert(r);
  return llvm::Error::success();
}

bool BatchTracer::isConstant(Value v, double value) {
  auto c = v.getDefiningOp<px::ConstantOp>();
  auto attr = c ? dyn_cast<DenseElementsAttr>(c.getValue()) : nullptr;
  if (!attr || !attr.isSplat() || attr.getType().getNumElements() != 1)
    return false;
  double x = isa<FloatType>(attr.getElementType())
                 ? attr.getSplatValue<APFloat>().convertToDouble()
                 : (double)attr.getSplatValue<APInt>().getSExtValue();
  return std::abs(x - value) <= 1e-6 * std::abs(value);
}

/// A sum over the samples (a loss with reduction 'sum', `loss.sum()`) may
/// be scaled and added to other such sums, and becomes a mean when divided
/// by the batch size (`/ x.size(0)`, a number in a static export: it is
/// recorded so that it becomes the per-rank batch): KL divergence's
/// 'batchmean'. Returned as it is, it would make N ranks' averaged losses
/// 1/N of one process's.
llvm::Error BatchTracer::useOfSums(Operation *op) {
  auto sumOperand = llvm::find_if(op->getOperands(),
                                  [&](Value v) { return sums.count(v); });
  if (sumOperand == op->getOperands().end())
    return llvm::Error::success();
  Operation *origin = sums.lookup(*sumOperand);
  auto isSum = [&](Value v) { return sums.count(v) > 0; };
  auto holdsNothing = [&](Value v) {
    return !placementOf(v) && !means.count(v) && !sums.count(v);
  };
  if (isa<px::DivOp>(op) && isSum(op->getOperand(0)) &&
      isConstant(op->getOperand(1), (double)batch)) {
    layout.batchSizeOperands.push_back({op, 1, /*inverse=*/false});
    means.insert(op->getResult(0));
    return llvm::Error::success();
  }
  if (isa<px::MulOp>(op))
    for (unsigned i : {0u, 1u})
      if (isSum(op->getOperand(1 - i)) &&
          isConstant(op->getOperand(i), 1.0 / (double)batch)) {
        layout.batchSizeOperands.push_back({op, i, /*inverse=*/true});
        means.insert(op->getResult(0));
        return llvm::Error::success();
      }
  bool scaled =
      isa<px::NegOp, px::ReshapeOp, px::CastOp>(op) ||
      (isa<px::AddOp, px::SubOp>(op) && llvm::all_of(op->getOperands(), isSum)) ||
      (isa<px::MulOp>(op) && llvm::any_of(op->getOperands(), holdsNothing)) ||
      (isa<px::DivOp>(op) && holdsNothing(op->getOperand(1)));
  if (scaled) {
    for (Value r : op->getResults())
      sums[r] = origin;
    return llvm::Error::success();
  }
  if (isa<func::ReturnOp>(op))
    return fail(origin, "sums over the samples, and the step returns that sum: "
                        "data parallelism averages the ranks' losses, so "
                        "divide it by the batch size or use a mean "
                        "(reduction='mean')");
  return fail(origin, "sums over the samples, and " +
                          op->getName().getStringRef() +
                          " uses that sum inside the model");
}

llvm::Error BatchTracer::visit(Operation *op) {
  if (auto err = useOfSums(op))
    return err;
  if (auto err = useOfMeans(op))
    return err;
  if (op->getNumResults() &&
      (means.count(op->getResult(0)) || sums.count(op->getResult(0))))
    return llvm::Error::success();
  if (op->hasTrait<px::OpTrait::Elementwise>())
    return elementwise(op);
  return llvm::TypeSwitch<Operation *, llvm::Error>(op)
      .Case([&](px::GatherOp o) { return gather(o); })
      .Case([&](px::GatherElementsOp o) { return gatherElements(o); })
      .Case([&](px::SliceOp o) { return slice(o); })
      .Case([&](px::MatMulOp o) { return matmul(o); })
      .Case([&](px::GemmOp o) { return gemm(o); })
      .Case<px::SoftmaxOp, px::LogSoftmaxOp>(
          [&](auto o) { return softmax(o, o.getAxis()); })
      .Case([&](px::SoftmaxCrossEntropyLossOp o) {
        return loss(o, o.getScores(), o.getLabels(), o.getReduction());
      })
      .Case([&](px::NegativeLogLikelihoodLossOp o) {
        return loss(o, o.getInput(), o.getTarget(), o.getReduction());
      })
      .Case([&](px::LayerNormOp o) { return layerNorm(o); })
      .Case<px::BatchNormOp, px::ConvOp, px::MaxPoolOp, px::AveragePoolOp>(
          [&](auto o) { return samplesFirst(o, o.getX()); })
      .Case([&](px::ConvGradInputOp o) { return samplesFirst(o, o.getDy()); })
      .Case<px::ArgMaxOp, px::ArgMinOp>(
          [&](auto o) { return alongAxis(o, o.getAxis(), o.getKeepdims()); })
      .Case<px::TopKOp, px::CumSumOp>(
          [&](auto o) { return alongAxis(o, o.getAxis(), /*keepdims=*/true); })
      .Case([&](px::PadOp o) { return pad(o); })
      .Case([&](px::SegmentReduceOp o) { return segmentReduce(o); })
      .Case<px::ReduceSumOp, px::ReduceMaxOp, px::ReduceMinOp, px::ReduceProdOp>(
          [&](auto o) {
        return reduce(o, o.getAxes(), o.getKeepdims(), /*isMean=*/false);
      })
      .Case([&](px::ReduceMeanOp o) {
        return reduce(o, o.getAxes(), o.getKeepdims(), /*isMean=*/true);
      })
      .Case([&](px::LstmOp o) {
        return recurrent(o, o.getX(), ValueRange{o.getW(), o.getR(), o.getB()},
                         ValueRange{o.getInitialH(), o.getInitialC()});
      })
      .Case([&](px::GruOp o) {
        return recurrent(o, o.getX(), ValueRange{o.getW(), o.getR(), o.getB()},
                         ValueRange{o.getInitialH()});
      })
      .Case([&](px::RnnOp o) {
        return recurrent(o, o.getX(), ValueRange{o.getW(), o.getR(), o.getB()},
                         ValueRange{o.getInitialH()});
      })
      .Case([&](px::ReshapeOp o) { return reshape(o); })
      .Case([&](px::TransposeOp o) { return transpose(o); })
      .Case([&](px::ConcatOp o) { return concat(o); })
      .Case([&](px::ExpandOp o) { return expand(o); })
      .Default([&](Operation *o) -> llvm::Error {
        if (isa<func::ReturnOp>(o) ||
            llvm::none_of(o->getOperands(),
                          [&](Value v) { return placementOf(v).has_value(); }))
          return llvm::Error::success();
        return fail(o, "has no rule for following samples through it");
      });
}

} // namespace

llvm::Expected<BatchLayout> analyzeBatch(func::FuncOp func,
                                         ArrayRef<Operation *> inputs,
                                         int64_t batch) {
  BatchLayout layout;
  layout.batch = batch;
  for (Operation *input : inputs)
    layout.batched[input->getResult(0)] = BatchPlacement{0, 1};
  BatchTracer tracer(layout);
  for (Operation &op : func.getBody().front())
    if (auto err = tracer.visit(&op))
      return std::move(err);
  // A value that shrinks with the batch must not also be used whole.
  for (auto [value, axis] : layout.uniform)
    for (Operation *user : value.getUsers())
      if (llvm::none_of(user->getResults(), [&](Value r) {
            return layout.batched.count(r) || layout.uniform.count(r);
          }))
        return llvm::createStringError(
            llvm::inconvertibleErrorCode(),
            "a value repeated for every sample (" +
                locationName(value.getLoc()) + ") is also used whole by " +
                user->getName().getStringRef() + " at " +
                locationName(user->getLoc()));
  return layout;
}

} // namespace parallax
