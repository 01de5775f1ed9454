//===- CollectiveLayout.h - what a collective kernel's attributes mean -*- C++ -*-===//
//
// The bind-time reading of the collective kernels' tensors and attributes
// (a fused bucket's layout, a sharded update's blocks, the slices of an
// all-gather or reduce-scatter along an axis), checked once for the CPU
// kernels over Comm and the GPU kernels over NCCL, which run the same plan.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_LIB_RUNTIME_KERNELS_COLLECTIVELAYOUT_H
#define PARALLAX_LIB_RUNTIME_KERNELS_COLLECTIVELAYOUT_H

#include "parallax/Runtime/CollectiveVolume.h"
#include "parallax/Runtime/Comm.h"
#include "parallax/Runtime/Kernel.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace parallax::rt {

/// The "reduction" attribute (sum when absent).
ReduceOp reduceOpOf(KernelArgs &args);

/// The "variables" a kernel's traffic is counted under, one per tensor
/// (the last repeated; "(other)" without any).
std::vector<std::string> variablesOf(KernelArgs &args, size_t n);

/// The "token" a kernel hands its collective's Work to (ExecEnv::pending),
/// -1 without one; fails the kernel when the session has no such slot.
int64_t tokenOf(KernelArgs &args);


/// An all_reduce over one or more tensors of one element type (a fused
/// bucket: one collective over a contiguous buffer). In place, the plan
/// has laid the tensors out back to back in one buffer, each at an
/// aligned offset, every output the memory of its input (px's
/// gradient-as-bucket-view); otherwise they are staged in a buffer of
/// `totalBytes` at the same offsets.
struct BucketLayout {
  DType dtype = DType::F32;
  bool inPlace = false;
  std::vector<int64_t> offsets;
  int64_t totalBytes = 0;
  /// In place: the bucket (input 0's memory).
  char *bucket = nullptr;
  /// shard_update: the reduce-scatter half only, in blocks of this many
  /// bytes, one per group rank (0: a whole all-reduce).
  int64_t shardBytes = 0;
  int64_t count() const { return totalBytes / (int64_t)sizeOf(dtype); }
};
BucketLayout bucketLayoutOf(KernelArgs &args, int groupSize);

/// all_gather_variables: the variables (inputs) back to back at `offsets`
/// in one block of G shards of shardBytes; group rank r updated shard r.
struct VariableBlockLayout {
  char *block = nullptr;
  int64_t shardBytes = 0;
  std::vector<int64_t> bytes; ///< per variable
};
VariableBlockLayout variableBlockOf(KernelArgs &args, int groupSize);

/// all_gather along gather_axis (output [outer][G][inner]) and
/// reduce_scatter along scatter_axis (output slice r of [outer][G][inner]):
/// `outer` slices before the axis and `inner` bytes of each after it, per
/// member.
struct AxisSlices {
  int64_t outer = 1, inner = 0;
};
AxisSlices allGatherSlicesOf(KernelArgs &args);
AxisSlices reduceScatterSlicesOf(KernelArgs &args, int groupSize);
/// all_slice along slice_axis: rank r keeps slice r, as reduce_scatter's.
AxisSlices allSliceSlicesOf(KernelArgs &args, int groupSize);

/// all_gatherv's outputs hold the G members' indices and rows.
void checkAllGatherV(KernelArgs &args, int groupSize);

/// A pitched copy (cudaMemcpy2D's shape): `rows` rows of `width` bytes from
/// src + srcOffset, rows srcPitch apart, to dst + dstOffset, rows dstPitch
/// apart. The collectives' layouts are lists of them, which the CPU runs
/// with memcpy (copyOnHost) and the GPU with cudaMemcpy2DAsync, so both
/// lay out G members' data the same way (and tests check it for G > 1,
/// which one GPU cannot run).
struct PitchedCopy {
  int64_t dstOffset = 0, dstPitch = 0, srcOffset = 0, srcPitch = 0, width = 0, rows = 0;
};
void copyOnHost(const PitchedCopy &c, char *dst, const char *src);

/// all_gather: member r's block (`blockBytes`, s.outer rows of s.inner)
/// of the gathered [G][block] buffer into the output [outer][G][inner].
std::vector<PitchedCopy> allGatherPlacement(const AxisSlices &s, int groupSize,
                                            int64_t blockBytes);
/// reduce_scatter: group rank r's slice of the reduced [outer][G][inner]
/// tensor into the output [outer][inner].
PitchedCopy reduceScatterSlice(const AxisSlices &s, int groupSize, int rank);
/// reduce_scatter's input [outer][G][inner] packed as [G][outer][inner],
/// so that group rank r's slice is the r-th contiguous block.
std::vector<PitchedCopy> reduceScatterPacking(const AxisSlices &s, int groupSize);
/// all_gatherv: the indices and the rows of G blocks [indices | rows] into
/// the outputs [G][indices] and [G][rows].
std::pair<PitchedCopy, PitchedCopy> allGatherVSplit(int64_t indexBytes, int64_t rowBytes,
                                                    int groupSize);

/// all_to_all: piece i of x (x split along split_axis) packed at
/// i * pieceBytes for member i, and the piece received from member j
/// unpacked into y at offset j along concat_axis.
struct AllToAllLayout {
  int64_t pieceBytes = 0;
  std::vector<PitchedCopy> pack, unpack;
};
AllToAllLayout allToAllLayoutOf(KernelArgs &args, int groupSize);

/// halo_exchange and halo_reduce (domain parallelism) along `axis` with
/// `lo` and `hi` halo rows, for member m of a group of G. A row along the
/// axis is a strided slab, [outer][row][inner bytes], so each halo is one
/// pitched copy. The exchange returns [m-1's last lo rows | x | m+1's
/// first hi rows], rows of `edge` without that neighbour (the padding of
/// what the block feeds: 0 for a convolution, -inf for a max pool): it
/// sends its first hi rows to m-1 and its last lo rows to m+1. The reduce (its adjoint) takes
/// such an extended block, keeps the middle, sends its lo halo to m-1 and
/// its hi halo to m+1, and adds m+1's lo halo into its last lo rows and
/// m-1's hi halo into its first hi rows (the group's edge halos are
/// dropped). The send and receive buffers are [prev's part | next's part].
struct HaloLayout {
  bool reduce = false; ///< halo_reduce: unpacking adds
  DType dtype = DType::F32;
  /// The exchange's value past the group's ends.
  double edge = 0;
  /// The lo and hi halos' bytes (lo and hi rows of every outer slice).
  int64_t loBytes = 0, hiBytes = 0;
  /// A neighbour (group rank -1: none) and its parts of the buffers.
  struct Peer {
    int rank = -1;
    int64_t sendOffset = 0, sendBytes = 0, recvOffset = 0, recvBytes = 0;
  };
  Peer prev, next;
  int64_t sendBytes = 0, recvBytes = 0;
  /// Input -> send buffer.
  std::vector<PitchedCopy> pack;
  /// Input -> output: the block.
  PitchedCopy body;
  /// Receive buffer -> output: copied (exchange) or added (reduce).
  std::vector<PitchedCopy> unpack;
  /// The exchange's halos without a neighbour: destination rows filled
  /// with `edge` (the source fields are unused).
  std::vector<PitchedCopy> fill;
  /// The messages to the neighbours over the two buffers (none for a
  /// group of one, or without halos).
  std::vector<PeerTransfer> transfers(const void *send, void *recv) const;
};
HaloLayout haloLayoutOf(KernelArgs &args, int groupSize, int member);
/// `c`'s destination rows filled with `value`; `c`'s destination rows +=
/// its source rows; elementwise in `dtype` (f32 or f64).
void fillOnHost(const PitchedCopy &c, char *dst, double value, DType dtype);
void addOnHost(const PitchedCopy &c, char *dst, const char *src, DType dtype);

/// The group a synchronized batch norm (a "grid" attribute) sums its
/// statistics over: its grid_axes of its grid_shape, as collectiveGroup.
Group &batchNormGroup(KernelArgs &args);

} // namespace parallax::rt

#endif // PARALLAX_LIB_RUNTIME_KERNELS_COLLECTIVELAYOUT_H
