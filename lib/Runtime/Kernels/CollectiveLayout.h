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

/// Bytes a member of a group of g sends (and receives) for `bytes` of
/// all-reduce in a ring, 2 (g-1)/g of them, split into the reduce-scatter's
/// half and the all-gather's rest (a sharded update counts them apart).
std::pair<int64_t, int64_t> ringHalves(int64_t bytes, int g);

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

/// all_gatherv's outputs hold the G members' indices and rows.
void checkAllGatherV(KernelArgs &args, int groupSize);

/// The group a synchronized batch norm (a "grid" attribute) sums its
/// statistics over: every axis of its grid.
Group &batchNormGroup(KernelArgs &args);

} // namespace parallax::rt

#endif // PARALLAX_LIB_RUNTIME_KERNELS_COLLECTIVELAYOUT_H
