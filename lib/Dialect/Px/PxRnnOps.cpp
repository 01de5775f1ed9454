//===- PxRnnOps.cpp - shape rules of px.lstm, px.gru, px.rnn, gradients ---===//
//
// One rule for the three layers (ONNX LSTM, GRU and RNN differ only in the
// number of gates). The gradient ops run the forward op's rule on the forward operands
// and check the saved results and incoming gradients against it, so a
// mis-built gradient fails in the pass that built it.
//
//===----------------------------------------------------------------------===//

#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Dialect/Px/PxShapes.h"
#include "PxOpUtils.h"

using namespace mlir;
using namespace parallax::px;
using namespace parallax::px::detail;

namespace {

/// The sizes of a recurrent layer: T steps of B samples with I inputs, H
/// hidden units, D directions.
struct RnnSizes {
  int64_t t = 0, b = 0, i = 0, h = 0, d = 0;
  Type elem;

  RankedTensorType type(ArrayRef<int64_t> shape) const {
    return RankedTensorType::get(shape, elem);
  }
  RankedTensorType y() const { return type({t, d, b, h}); }
  RankedTensorType state() const { return type({d, b, h}); }
  /// The saved gates: [D, T, B, 4H] for both layers.
  RankedTensorType gates() const { return type({d, t, b, 4 * h}); }
  RankedTensorType cells() const { return type({d, t, b, h}); }
};

/// px.lstm's (gateCount 4), px.gru's (3) and px.rnn's (1) shape rule over the forward
/// operands; `b` and `initialC` may be null (not an operand of the op).
FailureOr<RnnSizes> inferRecurrent(std::optional<Location> loc,
                                   int64_t gateCount, StringRef direction,
                                   Value xV, Value wV, Value rV, Value bV,
                                   Value initialH, Value initialC) {
  if (direction != "forward" && direction != "reverse" &&
      direction != "bidirectional")
    return emitOptionalError(loc, "direction must be forward, reverse or "
                                  "bidirectional, got '",
                             direction, "'");
  auto x = ranked(loc, xV, "x");
  auto w = ranked(loc, wV, "w");
  auto r = ranked(loc, rV, "r");
  if (failed(x) || failed(w) || failed(r))
    return failure();
  RnnSizes s;
  s.elem = x->getElementType();
  s.d = direction == "bidirectional" ? 2 : 1;
  if (x->getRank() != 3)
    return emitOptionalError(loc, "x must be [seq_length, batch, input_size], "
                                  "got ",
                             fmt(x->getShape()));
  s.t = x->getDimSize(0);
  s.b = x->getDimSize(1);
  s.i = x->getDimSize(2);
  if (r->getRank() != 3 || r->getDimSize(2) < 1)
    return emitOptionalError(
        loc, "r must be [num_directions, ",
        gateCount == 1 ? std::string() : std::to_string(gateCount) + "*",
        "hidden_size, hidden_size], got ", fmt(r->getShape()));
  s.h = r->getDimSize(2);
  int64_t rows = gateCount * s.h;
  auto expect = [&](RankedTensorType t, ArrayRef<int64_t> shape,
                    StringRef what) -> LogicalResult {
    if (t.getElementType() != s.elem)
      return emitOptionalError(loc, what, " must have the element type of x (",
                               s.elem, "), got ", t.getElementType());
    if (t.getShape() != shape)
      return emitOptionalError(loc, what, " must be ", fmt(shape), " (",
                               direction, ", hidden size ", s.h, "), got ",
                               fmt(t.getShape()));
    return success();
  };
  if (failed(expect(*r, {s.d, rows, s.h}, "r")) ||
      failed(expect(*w, {s.d, rows, s.i}, "w")))
    return failure();
  for (auto [v, what] : {std::pair<Value, StringRef>{bV, "b"},
                         {initialH, "initial_h"},
                         {initialC, "initial_c"}}) {
    if (!v)
      continue;
    auto t = ranked(loc, v, what);
    if (failed(t))
      return failure();
    SmallVector<int64_t> shape =
        what == "b" ? SmallVector<int64_t>{s.d, 2 * rows}
                    : SmallVector<int64_t>{s.d, s.b, s.h};
    if (failed(expect(*t, shape, what)))
      return failure();
  }
  return s;
}

/// A saved result or incoming gradient must have the type of the forward
/// result it belongs to.
LogicalResult checkGradOf(std::optional<Location> loc, Value v,
                          RankedTensorType expected, StringRef what) {
  if (v.getType() != expected)
    return emitOptionalError(loc, what, " must be ", expected,
                             " (the forward result's type), got ",
                             v.getType());
  return success();
}

} // namespace

LogicalResult LstmOp::inferReturnTypes(MLIRContext *ctx,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttributes(ctx, loc, adaptor)))
    return failure();
  auto s = inferRecurrent(loc, 4, strOr(adaptor.getDirectionAttr(), "forward"),
                          adaptor.getX(), adaptor.getW(), adaptor.getR(),
                          adaptor.getB(), adaptor.getInitialH(),
                          adaptor.getInitialC());
  if (failed(s))
    return failure();
  inferred.append({s->y(), s->state(), s->state(), s->gates(), s->cells()});
  return success();
}

LogicalResult GruOp::inferReturnTypes(MLIRContext *ctx,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttributes(ctx, loc, adaptor)))
    return failure();
  auto s = inferRecurrent(loc, 3, strOr(adaptor.getDirectionAttr(), "forward"),
                          adaptor.getX(), adaptor.getW(), adaptor.getR(),
                          adaptor.getB(), adaptor.getInitialH(), Value());
  if (failed(s))
    return failure();
  inferred.append({s->y(), s->state(), s->gates()});
  return success();
}

LogicalResult LstmGradOp::inferReturnTypes(MLIRContext *ctx,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttributes(ctx, loc, adaptor)))
    return failure();
  auto s = inferRecurrent(loc, 4, strOr(adaptor.getDirectionAttr(), "forward"),
                          adaptor.getX(), adaptor.getW(), adaptor.getR(),
                          Value(), adaptor.getInitialH(),
                          adaptor.getInitialC());
  if (failed(s) || failed(checkGradOf(loc, adaptor.getY(), s->y(), "y")) ||
      failed(checkGradOf(loc, adaptor.getGates(), s->gates(), "gates")) ||
      failed(checkGradOf(loc, adaptor.getCells(), s->cells(), "cells")) ||
      failed(checkGradOf(loc, adaptor.getDy(), s->y(), "dy")) ||
      failed(checkGradOf(loc, adaptor.getDyH(), s->state(), "dy_h")) ||
      failed(checkGradOf(loc, adaptor.getDyC(), s->state(), "dy_c")))
    return failure();
  inferred.append({adaptor.getX().getType(), adaptor.getW().getType(),
                   adaptor.getR().getType(), s->type({s->d, 8 * s->h}),
                   s->state(), s->state()});
  return success();
}

LogicalResult GruGradOp::inferReturnTypes(MLIRContext *ctx,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttributes(ctx, loc, adaptor)))
    return failure();
  auto s = inferRecurrent(loc, 3, strOr(adaptor.getDirectionAttr(), "forward"),
                          adaptor.getX(), adaptor.getW(), adaptor.getR(),
                          Value(), adaptor.getInitialH(), Value());
  if (failed(s) || failed(checkGradOf(loc, adaptor.getY(), s->y(), "y")) ||
      failed(checkGradOf(loc, adaptor.getGates(), s->gates(), "gates")) ||
      failed(checkGradOf(loc, adaptor.getDy(), s->y(), "dy")) ||
      failed(checkGradOf(loc, adaptor.getDyH(), s->state(), "dy_h")))
    return failure();
  inferred.append({adaptor.getX().getType(), adaptor.getW().getType(),
                   adaptor.getR().getType(), s->type({s->d, 6 * s->h}),
                   s->state()});
  return success();
}

/// px.rnn's activation: "tanh" or "relu".
static LogicalResult checkActivation(std::optional<Location> loc,
                                     StringRef activation) {
  if (activation != "tanh" && activation != "relu")
    return emitOptionalError(loc, "activation must be tanh or relu, got '",
                             activation, "'");
  return success();
}

LogicalResult RnnOp::inferReturnTypes(MLIRContext *ctx,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttributes(ctx, loc, adaptor)) ||
      failed(checkActivation(loc, strOr(adaptor.getActivationAttr(), "tanh"))))
    return failure();
  auto s = inferRecurrent(loc, 1, strOr(adaptor.getDirectionAttr(), "forward"),
                          adaptor.getX(), adaptor.getW(), adaptor.getR(),
                          adaptor.getB(), adaptor.getInitialH(), Value());
  if (failed(s))
    return failure();
  inferred.append({s->y(), s->state()});
  return success();
}

LogicalResult RnnGradOp::inferReturnTypes(MLIRContext *ctx,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  if (failed(verifyAttributes(ctx, loc, adaptor)) ||
      failed(checkActivation(loc, strOr(adaptor.getActivationAttr(), "tanh"))))
    return failure();
  auto s = inferRecurrent(loc, 1, strOr(adaptor.getDirectionAttr(), "forward"),
                          adaptor.getX(), adaptor.getW(), adaptor.getR(),
                          Value(), adaptor.getInitialH(), Value());
  if (failed(s) || failed(checkGradOf(loc, adaptor.getY(), s->y(), "y")) ||
      failed(checkGradOf(loc, adaptor.getDy(), s->y(), "dy")) ||
      failed(checkGradOf(loc, adaptor.getDyH(), s->state(), "dy_h")))
    return failure();
  inferred.append({adaptor.getX().getType(), adaptor.getW().getType(),
                   adaptor.getR().getType(), s->type({s->d, 2 * s->h}),
                   s->state()});
  return success();
}
