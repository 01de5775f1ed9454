//===- RnnLayer.cpp - a recurrent layer's sizes, read and checked ---------===//

#include "RnnLayer.h"
#include "KernelUtil.h"

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

} // namespace parallax::rt::rnn
