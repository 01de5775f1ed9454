//===- SplitBatch.h - which inputs hold the samples, and each rank's share -*- C++ -*-===//
//
// The C++ entry of px-split-batch, which parallax-opt calls right after
// importing an ONNX model (so that its errors name the model file, and its
// decision reaches --report).
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_TRANSFORMS_SPLITBATCH_H
#define PARALLAX_TRANSFORMS_SPLITBATCH_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace parallax {

struct SplitBatchOptions {
  /// Inputs to take as batched, or empty to detect them.
  std::vector<std::string> batchInputs;
  /// Inputs that are the same for every sample (never batched).
  std::vector<std::string> sharedInputs;
  /// The global batch; 0 keeps the exported one.
  int64_t globalBatch = 0;
  int64_t ranks = 1;
};

struct BatchDecision {
  std::vector<std::string> batched, shared;
  /// Samples per rank and step (0 when no input is batched).
  int64_t localBatch = 0;
  /// Why the inputs were (or were not) taken as batched, for --report.
  std::string why;
};

/// Marks the batched inputs of `module`'s step function and sets every
/// value's samples dimension to the per-rank batch (see px-split-batch).
llvm::Expected<BatchDecision> splitBatch(mlir::ModuleOp module,
                                         const SplitBatchOptions &options);

/// One line for --report: "batch: ...".
std::string describeBatch(const BatchDecision &decision);

} // namespace parallax

#endif // PARALLAX_TRANSFORMS_SPLITBATCH_H
