//===- CollectiveVolume.h - the bytes a collective moves per rank -*- C++ -*-===//
//
// What each member of a group of g sends (and as much it receives) in one
// collective, as the runtime's kernels count it in their traffic and the
// compiler predicts it (StepPrediction.h), so that the two agree to the
// byte. Ring algorithms: an all-reduce is a reduce-scatter and an
// all-gather, each moving (g-1)/g of the tensor.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_COLLECTIVEVOLUME_H
#define PARALLAX_RUNTIME_COLLECTIVEVOLUME_H

#include <cstdint>
#include <utility>

namespace parallax::rt {

/// All-reduce of `bytes` in a ring: 2 (g-1)/g of them (0 alone).
inline int64_t ringBytes(int64_t bytes, int64_t g) {
  return g <= 1 ? 0 : 2 * bytes * (g - 1) / g;
}

/// The same split into the reduce-scatter's half and the all-gather's rest
/// (a sharded weight update counts them apart).
inline std::pair<int64_t, int64_t> ringHalves(int64_t bytes, int64_t g) {
  int64_t scatter = g <= 1 ? 0 : bytes * (g - 1) / g;
  return {scatter, ringBytes(bytes, g) - scatter};
}

/// All-gather of `inputBytes` from every member: the g-1 others' inputs.
inline int64_t allGatherBytes(int64_t inputBytes, int64_t g) {
  return g <= 1 ? 0 : inputBytes * (g - 1);
}

/// Reduce-scatter of `bytes`: the scatter half of a ring all-reduce.
inline int64_t reduceScatterBytes(int64_t bytes, int64_t g) { return ringHalves(bytes, g).first; }

/// All-to-all of `bytes` split into g pieces: all but one's own piece.
inline int64_t allToAllBytes(int64_t bytes, int64_t g) {
  return g <= 1 ? 0 : bytes / g * (g - 1);
}

/// A halo exchange (or, `exchange` false, its adjoint px.halo_reduce) by
/// member m of g consecutive blocks, halos of `lo` bytes above a block and
/// `hi` below: {sent, received}. The exchange sends a block's first hi
/// bytes up and its last lo bytes down and receives the halos; the adjoint
/// sends the halos back. The edge members have one neighbour.
inline std::pair<int64_t, int64_t> haloBytes(bool exchange, int64_t lo, int64_t hi, int64_t m,
                                             int64_t g) {
  int64_t up = m > 0 ? 1 : 0, down = m + 1 < g ? 1 : 0;
  int64_t toUp = exchange ? hi : lo, toDown = exchange ? lo : hi;
  return {up * toUp + down * toDown, up * (exchange ? lo : hi) + down * (exchange ? hi : lo)};
}

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_COLLECTIVEVOLUME_H
