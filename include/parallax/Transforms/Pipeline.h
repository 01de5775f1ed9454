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

#include <string>
#include <vector>

namespace parallax {

/// How buckets become buffers: in place always; weight updates sharded
/// when `shardWeightUpdate`, with `shard`'s thresholds.
struct PlanLayoutOptions {
  bool shardWeightUpdate = true;
  PxShardWeightUpdateOptions shard;
};

/// Adds px-bucket-in-place, then (if asked) px-shard-weight-update and
/// px-shard-optimizer-state: the rewrites that decide how the plan lays out
/// all-reduce buckets, parameters and optimizer state.
void addPlanLayoutPasses(mlir::OpPassManager &pm, const PlanLayoutOptions &options);

struct TrainingPipelineOptions {
  PxOptimizerOptions optimizer;
  /// Data parallelism: px-cluster, px-sparsity, px-partition and px-sync
  /// run (with the options below) between px-autodiff and px-optimizer.
  bool distributed = false;
  PxClusterOptions cluster;
  /// px-global-loss-mean after px-cluster: a mean loss over the whole
  /// batch's count rather than the ranks' means averaged.
  bool globalLossMean = false;
  PxShardModelOptions shardModel;
  PxSparsityOptions sparsity;
  PxPartitionOptions partition;
  PxSyncOptions sync;
  /// px-recompute after the cleanup: cheap activations recomputed in the
  /// backward pass instead of kept.
  bool recompute = false;
  /// px-recompute's `fraction`: the share of those activations' bytes
  /// recomputed, from the first in forward order.
  double recomputeFraction = 1.0;
  /// px-recompute's `layers`: layers (by weight) whose outputs are
  /// recomputed from their inputs (checkpointed), with or without
  /// `recompute`.
  std::vector<std::string> recomputeLayers;
  /// The plan layout passes (addPlanLayoutPasses) after the rest.
  PlanLayoutOptions layout;
};

/// Adds canonicalize, [px-cluster, px-pad-vocabulary, the attention
/// layout passes, [px-global-loss-mean]], px-autodiff, [px-shard-model,
/// px-sparsity, px-partition, px-sync], px-optimizer, canonicalize, cse
/// [px-recompute] [and the plan layout passes] to `pm`.
void addTrainingPipeline(mlir::OpPassManager &pm,
                         const TrainingPipelineOptions &options);

/// px-split-fused-qkv and px-unmerge-heads: the layout every distributed
/// compile gives nn.MultiheadAttention, which the strategy search's
/// operators must see too (they name the variables the passes make).
void addAttentionLayoutPasses(mlir::OpPassManager &pm);

} // namespace parallax

#endif // PARALLAX_TRANSFORMS_PIPELINE_H
