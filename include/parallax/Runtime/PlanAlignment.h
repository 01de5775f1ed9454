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

/// Alignment of every arena offset and buffer (a cache line; also what
/// AVX-512 loads like).
constexpr int64_t kPlanAlignment = 64;

/// `bytes` rounded up to kPlanAlignment: the arena planner's and an in-place
/// all-reduce bucket's layout (the plan emitter writes it, the kernel checks
/// it).
constexpr int64_t alignToPlan(int64_t bytes) {
  return (bytes + kPlanAlignment - 1) / kPlanAlignment * kPlanAlignment;
}

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_PLANALIGNMENT_H
