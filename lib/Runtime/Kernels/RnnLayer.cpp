//===- RnnLayer.cpp - a recurrent layer's sizes, read and checked ---------===//

#include "RnnLayer.h"
#include "KernelUtil.h"

#include <map>

namespace parallax::rt::rnn {

using detail::shapeStr;

void expectTensor(const KernelArgs &args, const TensorView &v, DType dtype,
                  const std::vector<int64_t> &shape, const std::string &op,
                  const char *what) {
  if (v.dtype != dtype || v.shape != shape)
    args.fail(op + ": " + what + " must be " + nameOf(dtype) + " " +
              shapeStr(shape) + ", got " + nameOf(v.dtype) + " " +
              shapeStr(v.shape));
}

Layer readLayer(const KernelArgs &args, int64_t gates, const std::string &op) {
  const TensorView &x = args.in(0), &w = args.in(1), &r = args.in(2);
  Layer l;
  l.gates = gates;
  l.dtype = x.dtype;
  if (l.dtype != DType::F32 && l.dtype != DType::F64)
    args.fail(op + ": element type " + nameOf(l.dtype) +
              " is not supported by the CPU runtime");
  std::string direction = args.strOr("direction", "forward");
  if (direction == "bidirectional")
    l.d = 2;
  else if (direction == "reverse")
    l.reverseOnly = true;
  else if (direction != "forward")
    args.fail(op + ": unknown direction '" + direction + "'");
  if (x.rank() != 3)
    args.fail(op + ": x must be [seq_length, batch, input_size], got " +
              shapeStr(x.shape));
  if (r.rank() != 3)
    args.fail(op + ": r must be [num_directions, " + std::to_string(gates) +
              "*hidden_size, hidden_size], got " + shapeStr(r.shape));
  l.t = x.dim(0);
  l.b = x.dim(1);
  l.i = x.dim(2);
  l.h = r.dim(2);
  expectTensor(args, r, l.dtype, {l.d, gates * l.h, l.h}, op, "r");
  expectTensor(args, w, l.dtype, {l.d, gates * l.h, l.i}, op, "w");
  return l;
}

bool readRelu(const KernelArgs &args, const std::string &op) {
  std::string activation = args.strOr("activation", "tanh");
  if (activation != "tanh" && activation != "relu")
    args.fail(op + ": unknown activation '" + activation + "'");
  return activation == "relu";
}

namespace {

/// The shape of an operand, in terms of the layer.
enum class Shaped {
  Bias,     ///< [D, 2*G*H]
  State,    ///< [D, B, H]
  Sequence, ///< y and dy: [T, D, B, H]
  Gates,    ///< [D, T, B, 4H] (GRU saves a fourth row, q)
  Cells,    ///< [D, T, B, H]
  LikeX,    ///< x's, w's or r's shape: their gradients
  LikeW,
  LikeR,
};

struct Operand {
  const char *name;
  Shaped shape;
};

/// The operands after x, w, r and the results of one kernel, in order.
struct Signature {
  std::vector<Operand> ins, outs;
};

const std::map<std::string, Signature> &signatures() {
  using S = Shaped;
  static const std::map<std::string, Signature> table{
      {"lstm",
       {{{"b", S::Bias}, {"initial_h", S::State}, {"initial_c", S::State}},
        {{"y", S::Sequence},
         {"y_h", S::State},
         {"y_c", S::State},
         {"gates", S::Gates},
         {"cells", S::Cells}}}},
      {"lstm_grad",
       {{{"initial_h", S::State},
         {"initial_c", S::State},
         {"y", S::Sequence},
         {"gates", S::Gates},
         {"cells", S::Cells},
         {"dy", S::Sequence},
         {"dy_h", S::State},
         {"dy_c", S::State}},
        {{"dx", S::LikeX},
         {"dw", S::LikeW},
         {"dr", S::LikeR},
         {"db", S::Bias},
         {"dinitial_h", S::State},
         {"dinitial_c", S::State}}}},
      {"gru",
       {{{"b", S::Bias}, {"initial_h", S::State}},
        {{"y", S::Sequence}, {"y_h", S::State}, {"gates", S::Gates}}}},
      {"gru_grad",
       {{{"initial_h", S::State},
         {"y", S::Sequence},
         {"gates", S::Gates},
         {"dy", S::Sequence},
         {"dy_h", S::State}},
        {{"dx", S::LikeX},
         {"dw", S::LikeW},
         {"dr", S::LikeR},
         {"db", S::Bias},
         {"dinitial_h", S::State}}}},
      {"rnn",
       {{{"b", S::Bias}, {"initial_h", S::State}},
        {{"y", S::Sequence}, {"y_h", S::State}}}},
      {"rnn_grad",
       {{{"initial_h", S::State},
         {"y", S::Sequence},
         {"dy", S::Sequence},
         {"dy_h", S::State}},
        {{"dx", S::LikeX},
         {"dw", S::LikeW},
         {"dr", S::LikeR},
         {"db", S::Bias},
         {"dinitial_h", S::State}}}},
  };
  return table;
}

std::vector<int64_t> shapeOf(const KernelArgs &args, const Layer &l,
                             Shaped shape) {
  switch (shape) {
  case Shaped::Bias:
    return {l.d, 2 * l.gates * l.h};
  case Shaped::State:
    return {l.d, l.b, l.h};
  case Shaped::Sequence:
    return {l.t, l.d, l.b, l.h};
  case Shaped::Gates:
    return {l.d, l.t, l.b, 4 * l.h};
  case Shaped::Cells:
    return {l.d, l.t, l.b, l.h};
  case Shaped::LikeX:
    return args.in(0).shape;
  case Shaped::LikeW:
    return args.in(1).shape;
  case Shaped::LikeR:
    return args.in(2).shape;
  }
  return {};
}

} // namespace

void expectOperands(const KernelArgs &args, const Layer &l,
                    const std::string &op) {
  const Signature &sig = signatures().at(op);
  for (size_t k = 0; k < sig.ins.size(); ++k)
    expectTensor(args, args.in(3 + k), l.dtype, shapeOf(args, l, sig.ins[k].shape),
                 op, sig.ins[k].name);
  for (size_t k = 0; k < sig.outs.size(); ++k)
    expectTensor(args, args.out(k), l.dtype, shapeOf(args, l, sig.outs[k].shape),
                 op, sig.outs[k].name);
}

} // namespace parallax::rt::rnn
