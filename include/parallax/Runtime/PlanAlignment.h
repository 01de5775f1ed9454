//===- PlanAlignment.h - alignment of plan buffers ------------*- C++ -*-===//
//
// On its own, without the plan's JSON, so that the compiler's layout passes
// (px-bucket-in-place, px-shard-weight-update) lay buckets out as the
// runtime checks them.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_PLANALIGNMENT_H
#define PARALLAX_RUNTIME_PLANALIGNMENT_H

#include <cstdint>

namespace parallax::rt {

/// The least alignment of every arena offset and buffer (a cache line; also
/// what AVX-512 loads like); see alignmentOf for larger buffers.
constexpr int64_t kPlanAlignment = 64;

/// `offset` rounded up to a multiple of `alignment`.
constexpr int64_t alignUp(int64_t offset, int64_t alignment) {
  return (offset + alignment - 1) / alignment * alignment;
}

/// `bytes` rounded up to kPlanAlignment: the arena planner's and an in-place
/// all-reduce bucket's layout (the plan emitter writes it, the kernel checks
/// it).
constexpr int64_t alignToPlan(int64_t bytes) { return alignUp(bytes, kPlanAlignment); }

/// Alignment of arena buffers and host allocations of a page or more. A
/// memory-bound kernel streams several of them at once (an optimizer reads
/// its variable, state and gradient and writes the first three back); at
/// different offsets within their pages, a load falsely waits for a pending
/// store to another stream whose address matches in its low 12 bits (4K
/// aliasing). At the same offset the streams never meet that way. Members
/// of an in-place bucket or a variable block keep kPlanAlignment within it
/// (padding them would add to the collectives' volume).
constexpr int64_t kPageAlignment = 4096;

/// The alignment of a buffer of `bytes`: a page from a page up, else
/// kPlanAlignment (small buffers would waste most of a page).
constexpr int64_t alignmentOf(int64_t bytes) {
  return bytes >= kPageAlignment ? kPageAlignment : kPlanAlignment;
}

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_PLANALIGNMENT_H
