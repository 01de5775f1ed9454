//===- KernelMemory.h - memory the CPU kernels take besides tensors -*- C++ -*-===//
//
// What a session's kernels hold beyond the plan's tensors, as the compiler
// predicts it (PlanEmitter's memory estimate) and the runtime allocates it:
// the shared workspace of their scratch, and what the libraries under them
// keep once they run.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_KERNELMEMORY_H
#define PARALLAX_RUNTIME_KERNELMEMORY_H

#include <cstdint>
#include <string_view>
#include <vector>

namespace parallax::rt {

struct Plan;

/// Below this m*n*k an f32 product runs on OpenBLAS's small-matrix kernels,
/// from it on oneDNN's (lib/Runtime/Kernels/Blas.cpp).
constexpr int64_t kOnednnMinWork = 64 * 64 * 64;

/// What oneDNN holds once it has run a product: its generated kernels and
/// its packing buffers (measured with --metrics' memory_bytes, oneDNN
/// against OpenBLAS on the same plans), which depend on the instructions it
/// generates them for. With AVX-512: 3.8 MiB for the GRU example, 5.0 for
/// NMT, 6.8 for the LM with its 10k-word softmax product. With AVX2 only
/// (an AMD EPYC): 1.4 MiB for NMT, 1.7 for the GRU example on 2x1, 1.8 for
/// an nn.TransformerDecoder.
constexpr int64_t kOnednnBytes = int64_t(4) << 20;
constexpr int64_t kOnednnAvx2Bytes = int64_t(7) << 18; // 1.75 MiB

/// kOnednnBytes or kOnednnAvx2Bytes, by the instructions oneDNN finds on
/// this machine (the compiler's: a CPU plan is priced for the kind of
/// machine it is compiled on); 0 without oneDNN.
int64_t onednnBytes();

/// A recurrent kernel's scratch (lib/Runtime/Kernels/Rnn.cpp), in elements,
/// in the order it takes it, for `d` directions, `t` steps, `b` sequences
/// and `h` hidden units: the gradients' pre-activation gradients, the
/// states each step read and per-step temporaries, the forward kernels'
/// summed biases, recurrent products or input projections. Empty for
/// another op.
std::vector<int64_t> recurrentScratch(std::string_view op, int64_t d, int64_t t, int64_t b,
                                      int64_t h);

/// The workspace the CPU kernels of `plan` take at `threads` threads per
/// rank: the largest scratch of one kernel (ConvTiling.h, recurrentScratch),
/// the size a session allocates.
int64_t workspaceBytes(const Plan &plan, int threads);

/// What the libraries under `plan`'s CPU kernels keep at `threads` threads
/// per rank: kOnednnBytes when one of its products runs on oneDNN (an f32
/// matmul or gemm whose largest per-thread piece has m*n*k >=
/// kOnednnMinWork, or a recurrent layer whose sequence-wide products are),
/// else 0.
int64_t libraryBytes(const Plan &plan, int threads);

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_KERNELMEMORY_H
