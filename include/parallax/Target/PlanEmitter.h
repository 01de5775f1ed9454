//===- PlanEmitter.h - px IR -> executable plan ----------------*- C++ -*-===//
//
// Lowers the step function of a px module to a parallax::rt::Plan: one plan
// tensor per SSA value (reshapes become zero-copy aliases, a sparse gradient
// becomes its index and row tensors), one kernel per remaining op in block
// order, arena offsets from the memory planner, and the memory estimate the
// report prints.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_TARGET_PLANEMITTER_H
#define PARALLAX_TARGET_PLANEMITTER_H

#include "parallax/Runtime/Plan.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace parallax {

struct PlanEmitOptions {
  int worldSize = 1;
  /// The device kind the plan is for ("cpu" or "cuda": --target).
  std::string target = "cpu";
  /// Let a gather from a trainable table wrap negative ids, as ONNX's
  /// Gather does, instead of refusing them as PyTorch's nn.Embedding does
  /// (the kernel's "nonnegative_ids" attribute).
  bool allowNegativeIds = false;
  /// Recorded in the plan (optimizer, flags) for reports and --print-plan.
  nlohmann::json description = nlohmann::json::object();
};

/// Builds the plan of `module`'s step function. The module must be fully
/// lowered for execution: no px.gradient left (run px-optimizer), every
/// shape static. Errors name the op that cannot be emitted.
llvm::Expected<rt::Plan> emitPlan(mlir::ModuleOp module,
                                  const PlanEmitOptions &options);

/// The memory part of `--report`: predicted bytes per rank by kind.
void printMemoryReport(const rt::Plan &plan, llvm::raw_ostream &os);

/// One interval of the memory planner: a buffer of `bytes` live from the
/// kernel that defines it to its last reader, both inclusive.
struct BufferLifetime {
  int64_t bytes = 0;
  int64_t first = 0, last = 0;
  int64_t offset = -1; ///< set by planArena
};

/// Assigns every buffer an offset (aligned to rt::alignmentOf its size) so
/// that no two buffers live at the same time overlap; returns the arena
/// size. Greedy by decreasing size, each at the lowest offset that fits (as
/// TFLite's arena planner), which is within a few percent of optimal on DNN
/// graphs.
int64_t planArena(std::vector<BufferLifetime> &buffers);

} // namespace parallax

#endif // PARALLAX_TARGET_PLANEMITTER_H
