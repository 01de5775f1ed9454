//===- RnnLayer.h - a recurrent layer's sizes, for CPU and CUDA kernels -*- C++ -*-===//
//
// The sizes and direction of an LSTM/GRU/RNN layer and the layout of its
// tensors, read and checked from a kernel's operands and attributes with
// the same messages on every backend.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_KERNELS_RNNLAYER_H
#define PARALLAX_RUNTIME_KERNELS_RNNLAYER_H

#include "HostDevice.h"

#include "parallax/Runtime/Kernel.h"

#include <cstdint>
#include <string>
#include <vector>

namespace parallax::rt::rnn {

/// Sizes and direction of one recurrent layer, checked at bind time;
/// usable in device code.
struct Layer {
  int64_t t = 0, b = 0, i = 0, h = 0, d = 1;
  int64_t gates = 4; ///< G: 4 (LSTM), 3 (GRU) or 1 (RNN)
  bool reverseOnly = false;
  DType dtype = DType::F32;

  PX_HD bool reversed(int64_t dir) const {
    return reverseOnly || dir == 1;
  }
  /// The time index of processing step `s` of direction `dir`.
  PX_HD int64_t timeAt(int64_t dir, int64_t s) const {
    return reversed(dir) ? t - 1 - s : s;
  }
  PX_HD int64_t stateSize() const { return b * h; }
  PX_HD int64_t rows() const { return t * b; }
  /// Offsets: y [T, D, B, H]; saved gates [D, T, B, 4H]; cells [D, T, B, H].
  PX_HD int64_t yAt(int64_t time, int64_t dir) const {
    return (time * d + dir) * b * h;
  }
  PX_HD int64_t gatesAt(int64_t dir, int64_t time) const {
    return (dir * t + time) * b * 4 * h;
  }
  PX_HD int64_t cellsAt(int64_t dir, int64_t time) const {
    return (dir * t + time) * b * h;
  }
  /// The hidden state that step `s` of `dir` read (s == t: the last one
  /// written): the previous step's output in y, or the initial state.
  template <typename T>
  PX_HD const T *stateBefore(int64_t dir, int64_t s, const T *y,
                                           const T *h0) const {
    return s > 0 ? y + yAt(timeAt(dir, s - 1), dir) : h0 + dir * stateSize();
  }
};

/// `v` is a `dtype` tensor of `shape`, else KernelError naming `op` and `what`.
void expectTensor(const KernelArgs &args, const TensorView &v, DType dtype,
                  const std::vector<int64_t> &shape, const std::string &op,
                  const char *what);

/// Reads the sizes from x [T, B, I] and r [D, G*H, H] and checks w and the
/// direction attribute; `op` names the kernel in messages.
Layer readLayer(const KernelArgs &args, int64_t gates, const std::string &op);

/// px.rnn's activation, read and checked at bind time: whether it is relu
/// (else tanh).
bool readRelu(const KernelArgs &args, const std::string &op);

/// Checks the operands after x, w, r and every result of `op` (lstm, gru,
/// rnn or their _grad) against the layer `l`, from one table of each
/// kernel's operands.
void expectOperands(const KernelArgs &args, const Layer &l,
                    const std::string &op);

} // namespace parallax::rt::rnn

/// A factory that binds TYPED<double> or TYPED<float> by x's element type.
#define PX_RNN_BY_DTYPE(TYPED)                                                 \
  [](::parallax::rt::KernelArgs &args) -> ::parallax::rt::KernelFn {          \
    if (args.in(0).dtype == ::parallax::rt::DType::F64)                        \
      return TYPED<double>(args);                                              \
    return TYPED<float>(args);                                                 \
  }

/// Registers a backend's six recurrent kernels into REGISTRY from the typed
/// factories lstmTyped, lstmGradTyped, gruTyped, gruGradTyped, rnnTyped and
/// rnnGradTyped of the file that expands it.
#define PX_ADD_RNN_KERNELS(REGISTRY)                                           \
  do {                                                                         \
    (REGISTRY).add("lstm", PX_RNN_BY_DTYPE(lstmTyped));                        \
    (REGISTRY).add("lstm_grad", PX_RNN_BY_DTYPE(lstmGradTyped));               \
    (REGISTRY).add("gru", PX_RNN_BY_DTYPE(gruTyped));                          \
    (REGISTRY).add("gru_grad", PX_RNN_BY_DTYPE(gruGradTyped));                 \
    (REGISTRY).add("rnn", PX_RNN_BY_DTYPE(rnnTyped));                          \
    (REGISTRY).add("rnn_grad", PX_RNN_BY_DTYPE(rnnGradTyped));                 \
  } while (false)

#endif // PARALLAX_RUNTIME_KERNELS_RNNLAYER_H
