//===- RecurrentConverters.cpp - ONNX LSTM, GRU, RNN -> px.lstm, ... ------===//
//
// What torch.nn.LSTM, nn.GRU and nn.RNN export (opsets 13-17): one node per
// layer with the default activations (RNN: Tanh or Relu, torch's
// nonlinearity), no clip, every sequence of the full length, and, for GRU,
// linear_before_reset = 1 (0, ONNX's default, is supported too). What ONNX allows beyond that and torch never emits (other
// activations, clip, input_forget, sequence_lens with shorter sequences,
// peepholes) is refused by name: a model relying on it would train
// differently than it should. layout = 1 (batch-major) becomes transposes
// around the layer; an absent B or initial state becomes zeros, as ONNX
// defines it.
//
//===----------------------------------------------------------------------===//

#include "GraphImporter.h"

#include "parallax/Dialect/Px/PxShapes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace parallax;
using namespace parallax::detail;

llvm::Error GraphImporter::convertRecurrent(const onnx::NodeProto &node) {
  const bool lstm = node.op_type() == "LSTM", rnn = node.op_type() == "RNN";
  if (auto err = lstm ? checkAttributes(node, {"activation_alpha", "activation_beta",
                                               "activations", "clip", "direction",
                                               "hidden_size", "input_forget", "layout"})
                 : rnn ? checkAttributes(node, {"activation_alpha", "activation_beta",
                                                "activations", "clip", "direction",
                                                "hidden_size", "layout"})
                       : checkAttributes(node, {"activation_alpha", "activation_beta",
                                                "activations", "clip", "direction",
                                                "hidden_size", "layout",
                                                "linear_before_reset"}))
    return err;

  // ONNX allows these; torch.nn.LSTM / nn.GRU never export them.
  for (const char *name : {"clip", "activation_alpha", "activation_beta"})
    if (attr(node, name))
      return nodeError(node, llvm::Twine("unsupported attribute '") + name +
                                 "': only unclipped cells with the default "
                                 "activations are supported");
  std::string direction = attrString(node, "direction", "forward");
  if (direction != "forward" && direction != "reverse" &&
      direction != "bidirectional")
    return nodeError(node, "unsupported direction '" + direction + "'");
  int64_t directions = direction == "bidirectional" ? 2 : 1;
  // RNN: one activation per direction, Tanh (ONNX's default) or Relu, the
  // same in every direction (torch.nn.RNN's nonlinearity).
  std::string activation = "tanh";
  if (const auto *a = rnn ? attr(node, "activations") : nullptr) {
    SmallVector<std::string> got(a->strings().begin(), a->strings().end());
    bool same = (int64_t)got.size() == directions &&
                llvm::all_equal(got) &&
                (got.front() == "Tanh" || got.front() == "Relu");
    if (!same)
      return nodeError(node, "unsupported attribute 'activations' [" +
                                 llvm::join(got, ", ") +
                                 "]: only Tanh or Relu, the same for every "
                                 "direction (torch.nn.RNN's nonlinearity), "
                                 "are supported");
    activation = got.front() == "Relu" ? "relu" : "tanh";
  } else if (const auto *a = attr(node, "activations")) {
    SmallVector<std::string> defaults =
        lstm ? SmallVector<std::string>{"Sigmoid", "Tanh", "Tanh"}
             : SmallVector<std::string>{"Sigmoid", "Tanh"};
    SmallVector<std::string> got(a->strings().begin(), a->strings().end());
    SmallVector<std::string> want;
    for (int64_t d = 0; d < directions; ++d)
      want.append(defaults);
    if (got != want)
      return nodeError(node, "unsupported attribute 'activations' [" +
                                 llvm::join(got, ", ") +
                                 "]: only the default activations (" +
                                 llvm::join(defaults, ", ") +
                                 " per direction) are supported");
  }
  if (lstm && attrInt(node, "input_forget", 0) != 0)
    return nodeError(node, "unsupported attribute 'input_forget' = " +
                               llvm::Twine(attrInt(node, "input_forget", 0)) +
                               ": coupled input and forget gates are not "
                               "supported");
  int64_t layout = attrInt(node, "layout", 0);
  if (layout != 0 && layout != 1)
    return nodeError(node, "unsupported layout " + llvm::Twine(layout));
  int64_t linearBeforeReset =
      lstm || rnn ? 0 : attrInt(node, "linear_before_reset", 0);
  if (linearBeforeReset != 0 && linearBeforeReset != 1)
    return nodeError(node, "unsupported linear_before_reset " +
                               llvm::Twine(linearBeforeReset));
  if (lstm && node.input_size() > 7 && !node.input(7).empty())
    return nodeError(node, "unsupported input 'P' (peephole weights)");

  auto x = value(node, 0), w = value(node, 1), r = value(node, 2);
  if (!x || !w || !r)
    return !x ? x.takeError() : !w ? w.takeError() : r.takeError();
  if (!*x || !*w || !*r)
    return nodeError(node, "X, W and R are required");
  auto typeOf = [](Value v) { return cast<RankedTensorType>(v.getType()); };
  auto transpose = [&](Value v, ArrayRef<int64_t> perm) -> llvm::Expected<Value> {
    auto made = make<px::TransposeOp>(
        node, ValueRange{v}, {named("perm", b.getDenseI64ArrayAttr(perm))});
    if (!made)
      return made.takeError();
    return (*made)->getResult(0);
  };
  Value input = *x;
  if (typeOf(input).getRank() != 3)
    return nodeError(node, "X must have rank 3, got " +
                               px::shapeToString(typeOf(input).getShape()));
  if (!isa<FloatType>(typeOf(input).getElementType()))
    return nodeError(node, "X must be a float tensor");
  if (layout == 1) { // [batch, seq, input] -> [seq, batch, input]
    auto t = transpose(input, {1, 0, 2});
    if (!t)
      return t.takeError();
    input = *t;
  }
  int64_t steps = typeOf(input).getDimSize(0);
  if (const auto *a = attr(node, "hidden_size"))
    if (typeOf(*r).getRank() == 3 && a->i() != typeOf(*r).getDimSize(2))
      return nodeError(node, "hidden_size " + llvm::Twine(a->i()) +
                                 " does not match R of shape " +
                                 px::shapeToString(typeOf(*r).getShape()));

  // sequence_lens: only every sequence at the full length, which is what an
  // absent input means.
  if (node.input_size() > 4 && !node.input(4).empty()) {
    auto lens = constInput(node, 4, "sequence_lens", /*required=*/false);
    if (!lens)
      return lens.takeError();
    std::vector<int64_t> values = (*lens)->asInts();
    if (llvm::any_of(values, [&](int64_t n) { return n != steps; })) {
      SmallVector<std::string> text;
      for (int64_t n : values)
        text.push_back(std::to_string(n));
      return nodeError(node, "unsupported sequence_lens [" + llvm::join(text, ", ") +
                                 "]: every sequence must have the full length " +
                                 llvm::Twine(steps));
    }
  }

  // B and the initial states: zeros when absent.
  int64_t batch = typeOf(input).getDimSize(1);
  int64_t hidden = typeOf(*r).getRank() == 3 ? typeOf(*r).getDimSize(2) : 0;
  Type elem = typeOf(input).getElementType();
  SmallVector<Value> operands{input, *w, *r};
  auto optional = [&](int index, ArrayRef<int64_t> zerosShape,
                      bool isState) -> llvm::Error {
    auto v = value(node, index);
    if (!v)
      return v.takeError();
    Value operand = *v;
    if (!operand) {
      auto type = RankedTensorType::get(zerosShape, elem);
      operand = px::ConstantOp::create(
          b, NameLoc::get(b.getStringAttr(nodeName(node))),
          DenseElementsAttr::get(type, b.getFloatAttr(elem, 0.0)));
    } else if (isState && layout == 1) {
      // [batch, directions, hidden] -> [directions, batch, hidden]
      if (typeOf(operand).getRank() != 3)
        return nodeError(node, "initial states must have rank 3");
      auto t = transpose(operand, {1, 0, 2});
      if (!t)
        return t.takeError();
      operand = *t;
    }
    operands.push_back(operand);
    return llvm::Error::success();
  };
  int64_t gateRows = (lstm ? 4 : rnn ? 1 : 3) * hidden;
  if (auto err = optional(3, {directions, 2 * gateRows}, /*isState=*/false))
    return err;
  if (auto err = optional(5, {directions, batch, hidden}, /*isState=*/true))
    return err;
  if (lstm)
    if (auto err = optional(6, {directions, batch, hidden}, /*isState=*/true))
      return err;

  SmallVector<NamedAttribute> attrs;
  if (direction != "forward")
    attrs.push_back(named("direction", b.getStringAttr(direction)));
  if (linearBeforeReset)
    attrs.push_back(named("linear_before_reset", b.getUnitAttr()));
  if (activation != "tanh")
    attrs.push_back(named("activation", b.getStringAttr(activation)));
  auto made = lstm  ? make<px::LstmOp>(node, operands, attrs)
              : rnn ? make<px::RnnOp>(node, operands, attrs)
                    : make<px::GruOp>(node, operands, attrs);
  if (!made)
    return made.takeError();

  // Y, Y_h and (LSTM) Y_c; the saved gates are not ONNX outputs.
  int outputs = lstm ? 3 : 2;
  for (int i = 0; i < outputs && i < node.output_size(); ++i) {
    if (node.output(i).empty())
      continue;
    Value result = (*made)->getResult(i);
    if (layout == 1) {
      // Y [seq, dirs, batch, hidden] -> [batch, seq, dirs, hidden]; the
      // states [dirs, batch, hidden] -> [batch, dirs, hidden].
      auto t = i == 0 ? transpose(result, {2, 0, 1, 3})
                      : transpose(result, {1, 0, 2});
      if (!t)
        return t.takeError();
      result = *t;
    }
    define(node, i, result);
  }
  return llvm::Error::success();
}
