//===- KernelMemory.cpp - memory the CPU kernels take besides tensors -----===//

#include "parallax/Runtime/KernelMemory.h"
#include "parallax/Runtime/ConvTiling.h"
#include "parallax/Runtime/Plan.h"

#include <algorithm>

namespace parallax::rt {

namespace {

/// The plan tensor of `ids[i]`; null for an absent operand.
const PlanTensor *tensorOf(const Plan &plan, const std::vector<int32_t> &ids, size_t i) {
  return i < ids.size() && ids[i] >= 0 && ids[i] < (int32_t)plan.tensors.size()
             ? &plan.tensors[ids[i]]
             : nullptr;
}

/// A recurrent layer's kernel (Rnn.cpp): x [T, B, I], w [D, G H, I] and
/// r [D, G H, H] are its first three operands.
bool isRecurrent(std::string_view op) {
  for (std::string_view name : {"lstm", "gru", "rnn", "lstm_grad", "gru_grad", "rnn_grad"})
    if (op == name)
      return true;
  return false;
}

} // namespace

std::vector<int64_t> recurrentScratch(std::string_view op, int64_t d, int64_t t, int64_t b,
                                      int64_t h) {
  int64_t rows = t * b, state = b * h;
  if (op == "lstm")
    return {d * 4 * h};
  if (op == "lstm_grad")
    return {d * rows * 4 * h, d * rows * h, d * state};
  if (op == "gru")
    return {d * b * 3 * h};
  if (op == "gru_grad")
    return {d * rows * 3 * h, d * rows * 3 * h, d * rows * h, d * state};
  if (op == "rnn")
    return {d * rows * h};
  if (op == "rnn_grad")
    return {d * rows * h, d * rows * h};
  return {};
}

int64_t workspaceBytes(const Plan &plan, int threads) {
  using namespace conv;
  int64_t largest = 0;
  for (const PlanKernel &k : plan.kernels) {
    auto ints = [&](const char *name, std::vector<int64_t> dflt) {
      auto it = k.attrs.find(name);
      return it != k.attrs.end() && it->is_array() ? it->get<std::vector<int64_t>>() : dflt;
    };
    int64_t bytes = 0;
    if (k.op == "conv" || k.op == "conv_grad_input" || k.op == "conv_grad_filter") {
      ConvKind kind = k.op == "conv"              ? ConvKind::Forward
                      : k.op == "conv_grad_input" ? ConvKind::GradInput
                                                  : ConvKind::GradFilter;
      // x [N, C, in...] and w [M, C/group, k...] of each kernel's operands.
      const PlanTensor *x = kind == ConvKind::GradInput ? tensorOf(plan, k.outputs, 0) : tensorOf(plan, k.inputs, 0);
      const PlanTensor *w = kind == ConvKind::GradFilter ? tensorOf(plan, k.outputs, 0) : tensorOf(plan, k.inputs, 1);
      if (!x || !w || x->shape.size() < 3 || w->shape.size() != x->shape.size())
        continue;
      size_t nd = x->shape.size() - 2;
      ConvShapes shapes = convShapes(x->shape, w->shape, k.attrs.value("group", int64_t(1)),
                                     ints("strides", std::vector<int64_t>(nd, 1)),
                                     ints("pads", std::vector<int64_t>(2 * nd, 0)),
                                     ints("dilations", std::vector<int64_t>(nd, 1)));
      int64_t elem = (int64_t)sizeOf(x->dtype);
      bytes = scratchBytes(convScratch(tileConv(shapes, kind, elem, threads), kind), elem);
    } else if (isRecurrent(k.op)) {
      const PlanTensor *x = tensorOf(plan, k.inputs, 0), *r = tensorOf(plan, k.inputs, 2);
      if (!x || !r || x->shape.size() != 3 || r->shape.size() != 3)
        continue;
      bytes = scratchBytes(
          recurrentScratch(k.op, r->shape[0], x->shape[0], x->shape[1], r->shape[2]),
          (int64_t)sizeOf(x->dtype));
    } else if (k.op == "max_pool_grad") {
      const PlanTensor *x = tensorOf(plan, k.inputs, 0);
      if (!x || x->shape.size() < 3)
        continue;
      size_t nd = x->shape.size() - 2;
      Geo g = windowGeo(x->shape, ints("kernel_shape", std::vector<int64_t>(nd, 1)),
                        ints("strides", std::vector<int64_t>(nd, 1)),
                        ints("pads", std::vector<int64_t>(2 * nd, 0)),
                        ints("dilations", std::vector<int64_t>(nd, 1)),
                        k.attrs.value("ceil_mode", false));
      int64_t n = maxPoolGradScratch(g, threads);
      bytes = scratchOffset(n * (int64_t)sizeOf(x->dtype)) + n * maxPoolGradIndexBytes(g);
    }
    largest = std::max(largest, bytes);
  }
  return largest;
}

#ifdef PARALLAX_HAVE_DNNL
/// Whether Blas.cpp's gemmImpl runs some piece of the f32 product
/// y [m, n] = a [m, depth] b [depth, n] on oneDNN at `threads` threads: from
/// OpenBLAS's threading threshold (the same m*n*k) on, a product is cut over
/// the threads, by 16-column blocks when n >= m, else by rows, and each piece
/// picks its library.
bool onOnednn(int64_t m, int64_t n, int64_t depth, int threads) {
  if (threads > 1 && (double)m * n * depth >= (double)kOnednnMinWork) {
    if (n >= m)
      n = std::min(n, ((n + 15) / 16 + threads - 1) / threads * 16);
    else
      m = (m + threads - 1) / threads;
  }
  return (double)m * n * depth >= (double)kOnednnMinWork;
}

/// The same for the products a recurrent layer's kernel runs (Rnn.cpp),
/// over T*B rows, G*H gate columns, I inputs and H hidden: forward, the
/// whole sequence's input projection [T B, G H] and each step's [B, G H]
/// from the state; backward, each step's state gradient [B, H], dW [G H, I]
/// and dR [G H, H] summed over the rows, and dx [T B, I]. A bidirectional
/// layer runs its directions on half the threads each, except dx.
bool recurrentOnOnednn(const Plan &plan, const PlanKernel &k, int threads) {
  const PlanTensor *x = tensorOf(plan, k.inputs, 0), *w = tensorOf(plan, k.inputs, 1),
                   *r = tensorOf(plan, k.inputs, 2);
  if (!x || !w || !r || x->shape.size() != 3 || w->shape.size() != 3 || r->shape.size() != 3)
    return false;
  int64_t batch = x->shape[1], rows = x->shape[0] * batch, gates = w->shape[1],
          in = w->shape[2], hidden = r->shape[2];
  int nt = w->shape[0] == 2 && threads >= 2 ? threads / 2 : threads;
  bool grad = k.op.size() > 5 && k.op.compare(k.op.size() - 5, 5, "_grad") == 0;
  if (!grad)
    return onOnednn(rows, gates, in, nt) || onOnednn(batch, gates, hidden, nt);
  return onOnednn(batch, hidden, gates, nt) || onOnednn(gates, in, rows, nt) ||
         onOnednn(gates, hidden, rows, nt) || onOnednn(rows, in, gates, threads);
}
#endif

int64_t onednnBytes() {
#ifdef PARALLAX_HAVE_DNNL
  // oneDNN's avx512_core: AVX-512 F, BW, VL and DQ (its cpu_isa_traits).
  // From the CPU's own flags: this library (shared with the compiler) does
  // not link oneDNN.
  static const int64_t bytes = [] {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init(); // may run before the CPU's flags are read otherwise
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
      return kOnednnBytes;
#endif
    return kOnednnAvx2Bytes;
  }();
  return bytes;
#else
  return 0;
#endif
}

int64_t libraryBytes(const Plan &plan, int threads) {
#ifdef PARALLAX_HAVE_DNNL
  if (plan.target != "cpu")
    return 0;
  for (const PlanKernel &k : plan.kernels) {
    const PlanTensor *a = tensorOf(plan, k.inputs, 0), *y = tensorOf(plan, k.outputs, 0);
    if (!a || !y || a->dtype != DType::F32)
      continue;
    if (isRecurrent(k.op)) {
      if (recurrentOnOnednn(plan, k, threads))
        return onednnBytes();
      continue;
    }
    if ((k.op == "matmul" || k.op == "gemm") && a->shape.size() >= 2 && y->shape.size() >= 2) {
      // y [..., m, n] = a [..., m, k] b [..., k, n] (gemm: a transposed
      // with trans_a).
      bool transA = k.op == "gemm" && k.attrs.value("trans_a", false);
      int64_t depth = transA ? a->shape[a->shape.size() - 2] : a->shape.back();
      if (onOnednn(y->shape[y->shape.size() - 2], y->shape.back(), depth, threads))
        return onednnBytes();
    }
  }
#endif
  (void)plan;
  (void)threads;
  return 0;
}

} // namespace parallax::rt
