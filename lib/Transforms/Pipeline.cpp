//===- Pipeline.cpp - the training pipeline parallax-opt runs -------------===//

#include "parallax/Transforms/Pipeline.h"

#include "mlir/Transforms/Passes.h"

void parallax::addTrainingPipeline(mlir::OpPassManager &pm,
                                   const TrainingPipelineOptions &options) {
  // Canonical forms first (e.g. matmul of a transposed weight -> gemm), so
  // that px-autodiff differentiates the simpler graph.
  pm.addPass(mlir::createCanonicalizerPass());
  if (options.distributed) {
    pm.addPass(createPxCluster(options.cluster));
    pm.addPass(createPxPadVocabulary());
    addAttentionLayoutPasses(pm);
    if (options.globalLossMean)
      pm.addPass(createPxGlobalLossMean());
  }
  pm.addPass(createPxAutodiff());
  if (options.distributed) {
    pm.addPass(createPxShardModel(options.shardModel));
    pm.addPass(createPxSparsity(options.sparsity));
    pm.addPass(createPxPartition(options.partition));
    pm.addPass(createPxSync(options.sync));
  }
  pm.addPass(createPxOptimizer(options.optimizer));
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addPass(mlir::createCSEPass());
  if (options.recompute || !options.recomputeLayers.empty()) {
    PxRecomputeOptions recompute;
    recompute.fraction = options.recompute ? options.recomputeFraction : 0.0;
    recompute.layers.assign(options.recomputeLayers.begin(), options.recomputeLayers.end());
    pm.addPass(createPxRecompute(recompute));
  }
  if (options.distributed)
    addPlanLayoutPasses(pm, options.layout);
}

void parallax::addPlanLayoutPasses(mlir::OpPassManager &pm,
                                   const PlanLayoutOptions &options) {
  pm.addPass(createPxBucketInPlace());
  if (options.shardWeightUpdate) {
    pm.addPass(createPxShardWeightUpdate(options.shard));
    pm.addPass(createPxShardOptimizerState());
  }
}

void parallax::addAttentionLayoutPasses(mlir::OpPassManager &pm) {
  pm.addPass(createPxSplitFusedQkv());
  pm.addPass(createPxUnmergeHeads());
}
