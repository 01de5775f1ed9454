//===- Pipeline.h - the training pipeline parallax-opt runs ----*- C++ -*-===//
//
// The passes between import and plan emission, in one place so that
// parallax-opt and the importer's fuzzer (test/Fuzz) run the same pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_TRANSFORMS_PIPELINE_H
#define PARALLAX_TRANSFORMS_PIPELINE_H

#include "parallax/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"

namespace parallax {

struct TrainingPipelineOptions {
  PxOptimizerOptions optimizer;
  /// Data parallelism: px-cluster, px-sparsity, px-partition and px-sync
  /// run (with the options below) between px-autodiff and px-optimizer.
  bool distributed = false;
  PxClusterOptions cluster;
  PxSparsityOptions sparsity;
  PxPartitionOptions partition;
  PxSyncOptions sync;
};

/// Adds canonicalize, [px-cluster], px-autodiff, [px-sparsity, px-partition,
/// px-sync], px-optimizer, canonicalize and cse to `pm`.
void addTrainingPipeline(mlir::OpPassManager &pm,
                         const TrainingPipelineOptions &options);

} // namespace parallax

#endif // PARALLAX_TRANSFORMS_PIPELINE_H
