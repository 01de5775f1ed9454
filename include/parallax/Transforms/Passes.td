//===- Passes.td - Parallax passes ----------------------------*- tablegen -*-===//
//
// Every pass over px IR, one per file in lib/Transforms. parallax-opt
// registers them all, so each stage can be run and dumped on its own:
//
//   parallax-opt m.onnx --px-autodiff --px-optimizer='kind=adam lr=1e-3'
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_TRANSFORMS_PASSES_TD
#define PARALLAX_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def PxAutodiff : Pass<"px-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of the loss with respect to every trainable variable";
  let description = [{
    Appends the backward pass to the function that carries `px.loss` and
    ends it with one `px.gradient` per trainable variable. Gradients are
    built from px ops (and the backward kernels in PxTrainingOps.td); the
    gradient of a variable read only through `px.gather` on axis 0 is a
    `!px.sparse_grad` of the gathered rows and is never densified. The loss
    is seeded with 1, so a mean-reduced loss gets exactly the single-process
    gradients; on N data-parallel ranks (`px.world_size`, from px-cluster)
    with 1/N, so that each gradient is the rank's share of the gradient of
    the global mean loss and the ranks' shares sum to it (recorded as
    `px.gradient_scale` on the module, which px-sync reads). Ops with no
    useful gradient (comparisons, Shape-like integer computations, casts to
    integers) propagate none. A trainable variable
    the loss does not depend on gets no `px.gradient`.
  }];
  let dependentDialects = ["::parallax::px::PxDialect"];
}

def PxOptimizer : Pass<"px-optimizer", "mlir::ModuleOp"> {
  let summary = "Replace each px.gradient by an optimizer update";
  let description = [{
    Creates the optimizer's state variables (zero-initialised, named
    `<variable>:<slot>`) and replaces every `px.gradient` with `px.sgd`,
    `px.momentum`, `px.adam` or `px.adagrad`, placed right after the later
    of the gradient and the variable's last reader, so that each gradient
    dies as early as it can. Training-mode BatchNormalization's updated
    running statistics are written back with `px.assign`.
  }];
  let dependentDialects = ["::parallax::px::PxDialect"];
  let options = [
    Option<"kind", "kind", "std::string", /*default=*/"\"sgd\"",
           "sgd, momentum, adam or adagrad">,
    Option<"lr", "lr", "double", /*default=*/"0.01", "learning rate">,
    Option<"momentum", "momentum", "double", /*default=*/"0.9",
           "momentum (kind=momentum)">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false",
           "Nesterov momentum (kind=momentum)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "Adam beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "Adam beta2">,
    Option<"epsilon", "epsilon", "double", /*default=*/"-1",
           "epsilon (default: 1e-8 for adam, 1e-10 for adagrad)">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.0",
           "L2 weight decay added to the gradient">,
  ];
}

def PxSplitBatch : Pass<"px-split-batch", "mlir::ModuleOp"> {
  let summary = "Find the inputs that hold the step's samples and give each rank its share";
  let description = [{
    A model exported with a dynamic batch dimension names its batched inputs
    (`px.input ... batched`, their dimension 0 already the per-rank batch).
    A static export (torch.onnx.export's default) does not: this pass finds
    them. The candidates are the inputs that share the most common leading
    dimension (or those given with `inputs=`, less those in `shared=`); they
    are batched if the batch analysis (lib/Analysis/BatchDimension.cpp)
    follows their samples through the whole step without an op that
    combines them, trying each candidate left out in turn if all of them
    together fail. The batched inputs are then marked, and every value's
    samples dimension shrinks from the exported batch to
    `batch-size / ranks` (reshape results, constants repeated for every
    sample, ...). Fails, naming the op and how it combines samples, when
    `ranks` > 1 or `batch-size` is given and no batch is found. Every
    `px.dropout` gets `sample_stride`, so that a sample's mask is the same
    whichever rank draws it.
  }];
  let dependentDialects = ["::parallax::px::PxDialect"];
  let options = [
    ListOption<"inputs", "inputs", "std::string",
               "the batched inputs (default: detected)">,
    ListOption<"shared", "shared", "std::string",
               "inputs that are the same for every sample">,
    Option<"batchSize", "batch-size", "int64_t", /*default=*/"0",
           "the global batch (default: the exported one)">,
    Option<"ranks", "ranks", "int64_t", /*default=*/"1",
           "data-parallel ranks the batch is split over">,
  ];
}

def PxCluster : Pass<"px-cluster", "mlir::ModuleOp"> {
  let summary = "Describe the ranks and machines the step runs on";
  let description = [{
    Records the world (`px.world_size`, `px.ranks_per_machine`, and the
    link model `px.cluster`: bandwidth and latency within and between
    machines) on the module and declares the process grid the
    synchronization ops act over: `shard.grid @world(shape = N)` on one
    machine, `shard.grid @world(shape = M x R)` for M machines of R ranks
    (axis 0 crosses machines, axis 1 stays inside one). With
    `model-ranks=Pr` > 1 (a Pr x Pc grid, SPAA'18) the grid gains a last
    axis of Pr consecutive ranks that split each layer's model
    (`px.model_ranks`), and the other axes hold the Pc = N / Pr ranks the
    batch is split over. The cluster comes
    from `cluster=FILE` (JSON) or `np=N` (one machine); link figures from
    `profile=FILE` (parallax-run --calibrate) override the file's and the
    defaults.
  }];
  let dependentDialects = ["::parallax::px::PxDialect", "::mlir::shard::ShardDialect"];
  let options = [
    Option<"np", "np", "int", /*default=*/"1", "number of ranks (one machine)">,
    Option<"clusterFile", "cluster", "std::string", /*default=*/"\"\"",
           "cluster description (JSON)">,
    Option<"profileFile", "profile", "std::string", /*default=*/"\"\"",
           "calibration profile from parallax-run --calibrate (JSON)">,
    Option<"modelRanks", "model-ranks", "int64_t", /*default=*/"1",
           "Pr of a Pr x Pc grid: ranks each layer's model is split over "
           "(consecutive ranks of one machine; the grid's last axis)">,
  ];
}

def PxSparsity : Pass<"px-sparsity", "mlir::ModuleOp"> {
  let summary = "Classify each trainable variable dense or sparse and estimate alpha";
  let description = [{
    Annotates every trainable `px.variable` with `px.access` ("sparse": read
    only through px.gather on axis 0, so its gradient is row-sparse; else
    "dense"), and for sparse ones `px.rows_per_step` (an upper bound: the
    number of indices one rank gathers per step) and `px.alpha` (the
    fraction of rows a rank's step touches). With `profile-data=DIR` (one
    .npy per input, as parallax-run --data reads), the index computations
    are run on up to `profile-steps` real batches, split over the ranks as
    training splits them, and alpha becomes the measured mean of distinct
    rows per rank and step (`px.alpha_source = "profile"`).
  }];
  let dependentDialects = ["::parallax::px::PxDialect"];
  let options = [
    Option<"profileData", "profile-data", "std::string", /*default=*/"\"\"",
           "directory of .npy inputs to measure alpha on">,
    Option<"profileSteps", "profile-steps", "int", /*default=*/"20",
           "batches of the profile data to use">,
  ];
}

def PxPartition : Pass<"px-partition", "mlir::ModuleOp"> {
  let summary = "Choose the partition count and placement of each sparse variable";
  let description = [{
    For every sparse variable, chooses the number of row partitions P that
    minimises the cost model t(P) = theta1 / P + theta2 (P - 1) + theta0
    (Parallax, EuroSys'19, section 4.3): theta1 is the time one server would
    spend on the variable's rows each step (bytes over the link bandwidth
    plus the sparse update), theta2 the cost of one more partition (a
    message to every rank, one latency each), theta0 the rest. The
    partitions go to ranks greedily, each to the machine, then the rank,
    with the fewest bytes so far. Annotates `px.partitions` and
    `px.placement`. `partitions=P` forces P partitions on every sparse
    variable (to measure t(P), as bench/partitions.py does).
  }];
  let dependentDialects = ["::parallax::px::PxDialect"];
  let options = [
    Option<"forced", "partitions", "int64_t", /*default=*/"0",
           "use this many partitions for every sparse variable (0: choose)">,
  ];
}

def PxSync : Pass<"px-sync", "mlir::ModuleOp"> {
  let summary = "Insert each variable's synchronization";
  let description = [{
    Per trainable variable, the scheme `scheme` names, or with "hybrid" the
    cheapest under the link model: dense gradients are averaged by
    `px.all_reduce`, fused into buckets of about `bucket-bytes` in the order
    the backward pass produces them, each bucket issued as soon as its last
    gradient exists; sparse variables either go parameter-server style
    (reads become `px.ps_pull`, the row gradient a `px.ps_push` to the
    servers, aggregated per machine first, applied by the owners) or are
    all-gathered (`px.all_gatherv`, Horovod's way) or densified and
    all-reduced. Training-mode batch norms get `grid = @world` (statistics of
    the whole batch; on a grid that splits the model, `grid_axes` = the batch
    axes) unless `local-batchnorm`; the loss is averaged over the
    ranks, in the first gradient bucket when that is small
    (`loss-in-bucket`). `variables` = NAME=SCHEME,... fixes a variable's
    scheme whatever `scheme` says (allgatherv only for a row-sparse
    gradient; the strategy search names each table's). Annotates each
    variable with `px.sync` and the predicted bytes per rank and step,
    `px.bytes_per_step`.
  }];
  let dependentDialects = ["::parallax::px::PxDialect", "::mlir::shard::ShardDialect"];
  let options = [
    Option<"scheme", "scheme", "std::string", /*default=*/"\"hybrid\"",
           "hybrid, allreduce, ps or allgatherv">,
    Option<"bucketBytes", "bucket-bytes", "int64_t", /*default=*/"26214400",
           "all-reduce fusion bucket size (default 25 MiB, as PyTorch DDP)">,
    Option<"localBatchnorm", "local-batchnorm", "bool", /*default=*/"false",
           "normalise with each rank's own batch statistics">,
    Option<"localAggregation", "local-aggregation", "bool", /*default=*/"true",
           "sum sparse gradients within a machine before pushing them">,
    Option<"lossInBucket", "loss-in-bucket", "bool", /*default=*/"true",
           "all-reduce the loss in the first gradient bucket when that is "
           "at most 1 MiB, instead of on its own">,
    ListOption<"variableSchemes", "variables", "std::string",
               "NAME=SCHEME: this trainable variable's scheme (allreduce, ps or "
               "allgatherv), whatever `scheme` says">,
    ListOption<"shardedVariables", "sharded-variables", "std::string",
               "all-reduced variables whose updates px-shard-weight-update is to "
               "shard (its `variables`): bucketed apart from the others, and the "
               "loss rides none of their buckets">,
  ];
}

def PxBucketInPlace : Pass<"px-bucket-in-place", "mlir::ModuleOp"> {
  let summary = "Lay each all-reduce bucket out in one buffer, reduced where it lies";
  let description = [{
    Gradient buckets in place, as PyTorch DDP's gradient_as_bucket_view:
    the inputs of one all-reduce bucket (the `px.all_reduce` ops sharing a
    `bucket` id, or one all-reduce without) are placed back to back in one
    buffer, each at a 64-byte aligned `offset`, the collective reduces the
    buffer where it lies and each result shares its input's memory. Without
    this the runtime copies every gradient into a staging buffer before the
    collective and every result out of it after: two passes over all dense
    gradients a step. A bucket goes in place (`in_place`, `offset` on each
    member) when every input has one element type and is computed by the
    step (not a variable, input or constant) and read by nothing but its
    all-reduce, directly or through reshapes (which the plan makes views).
  }];
  let dependentDialects = ["::parallax::px::PxDialect"];
}

def PxShardWeightUpdate : Pass<"px-shard-weight-update", "mlir::ModuleOp"> {
  let summary = "Update 1/G of each in-place bucket's parameters per rank";
  let description = [{
    Weight-update sharding (Xu et al., "Automatic Cross-Replica Sharding of
    Weight Update in Data-Parallel Training", 2020; the optimizer half of
    ZeRO): an all-reduce is a reduce-scatter followed by an all-gather, and
    when every result of an in-place bucket is read only by a dense
    optimizer update that is its variable's last reader, the update can run
    between the two halves on 1/G of the bucket per rank, and the all-gather
    can move updated parameters instead of summed gradients. The bytes on
    the wire are the all-reduce's; each rank's optimizer work and passes
    over parameters and gradients shrink G-fold, and replicas stay bitwise
    identical. The bucket is padded to G blocks of `shard_bytes` (aligned)
    and its members get `shard_update`; each update gets `shard_offset` (its
    gradient's offset: the variables share one block laid out as the bucket)
    and the bucket's grid; a `px.all_gather_variables` after the bucket's
    last update hands every rank every block. Groups of fewer than
    `min-ranks` ranks, and groups spanning machines unless
    `across-machines`, keep the full all-reduce; with `fraction` < 1 only
    the largest buckets, until at least that share of the bytes, are
    sharded; with `variables`, only the buckets whose every member is one
    of them (px-sync's `sharded-variables` buckets them apart): ZeRO-1 per
    variable, as the strategy search chooses it.
  }];
  let dependentDialects = ["::parallax::px::PxDialect"];
  let options = [
    Option<"minRanks", "min-ranks", "int64_t", /*default=*/"4",
           "shard groups of at least this many ranks (from 4: with Open MPI "
           "4.1's reduce-scatter, sharding measured slower at 2 ranks)">,
    Option<"acrossMachines", "across-machines", "bool", /*default=*/"false",
           "also shard groups whose ranks are on several machines (measured "
           "slower between machines over TCP)">,
    Option<"fraction", "fraction", "double", /*default=*/"1.0",
           "shard the largest buckets until at least this share of the "
           "shardable buckets' bytes is (0 to 1)">,
    ListOption<"variables", "variables", "std::string",
               "shard only the buckets whose every member is one of these variables">,
  ];
}

def PxShardOptimizerState : Pass<"px-shard-optimizer-state", "mlir::ModuleOp"> {
  let summary = "Keep one block of optimizer state per sharded bucket (ZeRO stage 1)";
  let description = [{
    Rank r of a sharded update (px-shard-weight-update) only ever updates
    the elements of block r, so each optimizer state of the bucket's updates
    (momentum's velocity, Adam's m and v, Adagrad's sum) needs one block of
    `shard_bytes`, not a full copy per parameter. When every update of a
    bucket has the same kind and each of its state-j operands is a
    variable only that update reads, all starting from one splat value, the
    state-j variables are replaced by one variable of one block, named
    `optimizer state j of variable block B (first...)`, B counting the
    `px.all_gather_variables` ops in order; the updates get `shard_state`.
  }];
  let dependentDialects = ["::parallax::px::PxDialect"];
}

def PxRecompute : Pass<"px-recompute", "mlir::ModuleOp"> {
  let summary = "Recompute cheap activations in the backward pass instead of keeping them";
  let description = [{
    Selective activation recomputation, the strategy search's memory
    choice (docs/strategy.md): a cheap op of the forward pass whose result
    the backward pass reads is cloned just before its first backward
    reader, which reads the clone, so that the forward result is freed
    after its last forward reader instead of living until the backward
    pass. Cheap: an element-wise op (one result, no side effect: an
    activation, a bias add, a scaling); and, on computed activations, a
    transpose, reshape, softmax or log-softmax, a batched product neither
    of whose operands is a layer's weight, and a dropout, whose output is rebuilt from its input and kept mask
    (px.dropout_grad): Megatron-LM's recomputation of attention's scores,
    softmax and dropout from the queries and keys. Only where every
    operand of the op is live in the backward pass anyway (read there,
    recomputed itself, or a variable, constant or input): recomputing from
    an operand that would otherwise die would keep that operand instead.
    The clones carry `px.recomputed`, so that CSE leaves them. The forward
    pass is what precedes the loss. `fraction` < 1 recomputes a segment
    only: the activations the backward pass reads, in forward order, until
    their bytes reach that fraction of all of them (0: none).

    `layers` names layers (by weight variable, as --layer-split does) whose
    outputs are recomputed too, as activation checkpointing does: the
    product or convolution runs again from its input (which its weight's
    gradient reads anyway) and so does every cheap op that computes from
    that output alone, up to the next layer, an op that is not cheap (a
    collective, a layer norm) or a join with a value from elsewhere (a
    residual stream, which stays the checkpoint), whatever `fraction`
    says. A layer whose output goes through a collective before any
    backward reader (one split by input features) recomputes nothing, and
    the pass warns.
  }];
  let options = [
    Option<"fraction", "fraction", "double", /*default=*/"1.0",
           "the share of the recomputable activations' bytes to recompute, "
           "from the first in forward order (0 to 1)">,
    ListOption<"layers", "layers", "std::string",
               "layers whose outputs are recomputed from their inputs (weight "
               "variable names)">,
  ];
  let dependentDialects = ["::parallax::px::PxDialect"];
}

def PxGlobalLossMean : Pass<"px-global-loss-mean", "mlir::ModuleOp"> {
  let summary = "Make a mean loss the whole batch's mean over every batch rank";
  let description = [{
    On N data-parallel ranks each rank's mean loss divides by its own
    samples' count, and px-autodiff's 1/N seed averages those means: the
    global batch's mean where every rank counts the same, as for a
    classifier whose labels are never ignored. A cross entropy whose lines
    count unequally (labels equal to `ignore_index`, padding tokens marked
    -100, or class weights) gives another loss and other gradients than
    one rank on the whole batch (PyTorch DDP's behaviour). Before
    px-autodiff, this pass rewrites such a loss
    (`px.softmax_cross_entropy_loss` or `px.nll_loss` with reduction mean,
    and `ignore_index` or weights) to N x the rank's sum over the count
    of the whole batch:

        loss = sum * (N / all_reduce(count))

    the count (`countedLabels`, PxLossCount.h) all-reduced over the
    batch axes of @world (N / count taken as 0 where the whole batch counts
    nothing, so that no gradient is NaN; the loss then reads 0 where one
    rank's mean would be NaN). The seed's 1/N then makes every
    gradient this rank's share of the whole batch's, and the reported loss
    (the average of the ranks') is the whole batch's mean. It costs one
    scalar all-reduce a step per loss, which only labels and constant
    class weights feed: it is placed right after them, so that it can run
    while the forward pass does. Losses in f16 or bf16 are left alone (their sum
    and count would overflow or round where the kernels' mean does not).
    `parallax-opt --global-loss-mean` runs it after px-cluster.
  }];
  let dependentDialects = ["::parallax::px::PxDialect"];
}

def PxPadVocabulary : Pass<"px-pad-vocabulary", "mlir::ModuleOp"> {
  let summary = "Pad a vocabulary the model ranks do not divide, as Megatron-LM does";
  let description = [{
    On a grid whose model axis has Pr ranks (`px.model_ranks`), a
    vocabulary-parallel embedding splits its table's rows over them and a
    vocabulary-parallel loss its classes: both need the vocabulary to
    divide by Pr (BERT's 30522 words do not by 4, GPT-2's 50257 by
    nothing). Before px-autodiff, this pass pads such a vocabulary with
    zero rows to the next multiple of Pr, Megatron-LM's padded vocabulary:

    - a trainable table read only by `px.gather` (axis 0, ids from data)
      and, tied, by the output layer below, with at least as many rows as
      its width: its rows;
    - the classes of a `px.softmax_cross_entropy_loss` without class
      weights whose [N, C] scores come from an output layer with at least
      as many classes as input features, or tied to a table (a
      vocabulary, which splits by classes; a classifier's few classes
      split by input features and stay as they are) (a `px.gemm`
      or `px.matmul` by a trainable weight, or by the transpose of a
      table) through reshapes that keep C last and adds of a trainable
      [C] bias: the weight's and the bias's C, the scores in between, and
      a mask added before the loss that gives the padded classes a score
      of -1e30, so that the softmax, the loss and every gradient are
      those of the C classes (the padding's gradients are zero, its
      values never change). The loss records C in `px.classes`.

    A padded variable's initial value is its ONNX initializer `padded
    from` its own shape (the runtime appends the zeros, `--save` writes
    the initializer's part back; only ONNX initializers are padded). A
    vocabulary with any other use is left as it is (split where it
    divides, else whole). Which variables are vocabularies is
    `vocabulariesOf` (Analysis/Vocabulary.h), which the strategy search
    reads too.
  }];
  let dependentDialects = ["::parallax::px::PxDialect"];
}

def PxSplitFusedQkv : Pass<"px-split-fused-qkv", "mlir::ModuleOp"> {
  let summary = "Split a fused query-key-value projection into its three products";
  let description = [{
    nn.MultiheadAttention, as torch.onnx.export writes it, computes the
    queries, keys and values in one product by a [E, 3E] weight (plus a
    [3E] bias) and slices the result's last dimension in thirds. A block
    split of those 3E output features would not give a rank the same heads
    of all three. In a distributed compile, before px-autodiff (on every
    grid, so that every grid's plan, and the strategy search, name the
    same variables), this pass makes the weight (and the bias) three
    variables, `<name>.q`, `<name>.k` and `<name>.v`, each the block of
    the ONNX initializer its third is (`#px.onnx_initializer<..., block at
    [0, kE] of [E, 3E]>`; `--save` writes them back into place), and the
    product three products (a cross-attention's keys-and-values product,
    read in halves, two: `<name>.0`, `<name>.1`), so that px-shard-model splits each by output
    features, Megatron-LM's way. Only a product whose result is read by
    exactly the three thirds' slices, by a trainable weight and bias read
    nowhere else, is split.
  }];
  let dependentDialects = ["::parallax::px::PxDialect"];
}

def PxUnmergeHeads : Pass<"px-unmerge-heads", "mlir::ModuleOp"> {
  let summary = "Keep attention's batch and heads apart, so that a split of the heads carries";
  let description = [{
    nn.MultiheadAttention, as torch.onnx.export writes it, reshapes each
    [T, B, E] projection to [T, B*H, Dh]: the batch and the heads merged
    into one dimension, the heads its inner factor, which no block split of
    that dimension can hold. In a distributed compile, before px-autodiff,
    this pass gives such a
    merging reshape's result the dimensions it merged back ([T, B, H, Dh]:
    the same bytes) and rewrites what attention does with it in that form:
    transposes, element-wise ops (other operands reshaped alike), batched
    products of two such values, softmax over another dimension; any
    other use, and a reshape, reads the value back in its merged form (a
    reshape of the same bytes). A split of a projection's output features
    is then a split of the heads, which px-shard-model carries through the
    attention to the output projection, as it does for attention written
    with its heads apart. Only merges that reach a batched product are
    rewritten.
  }];
  let dependentDialects = ["::parallax::px::PxDialect"];
}

def PxShardModel : Pass<"px-shard-model", "mlir::ModuleOp"> {
  let summary = "Split each layer's weight over the grid's model axis and partition the step";
  let description = [{
    On a Pr x Pc grid (px-cluster's `model-ranks`), after px-autodiff: each
    layer (a px.gemm or px.matmul with a trainable weight) gets its weight
    split over the model axis, Megatron-LM style: by output features, or
    by input features when its input comes (through element-wise ops) from
    a layer split by output features, so that a pair needs one all-reduce.
    Upstream's `sharding-propagation` and `shard-partition` then carry the
    splits through the forward and backward pass (the px ops' sharding
    models), variables become their blocks, and the `shard` collectives
    partition inserts become px collectives on the model axis. A no-op
    without a model axis.

    Convolutions split their channels the same way (`conv-split=channels`)
    or, with `conv-split=domain`, their spatial domain (SPAA'18): the input
    rows of every convolution whose blocks of rows map onto blocks of
    output rows are split over the model axis, the weights stay whole, and
    the partitioned step exchanges halos between neighbouring blocks
    (px.halo_exchange, px.halo_reduce). A convolution whose rows cannot be
    split so (a stride that skips rows, rows the model ranks do not divide,
    halos wider than a block) runs whole. `conv-split=auto` chooses per
    convolution from the grid cost model's closed forms (GridCost.h): by
    rows where that is cheaper than by channels on this grid.

    `layer-splits` fixes the split of the layers it names (the strategy
    search's points, docs/strategy.md): `whole` keeps the weight whole on
    every model rank, `out`/`in` split its output or input features
    (channels), `rows` a convolution's input rows or an embedding table's
    vocabulary. A split the layer cannot take, or a name that is no
    layer's, is an error naming it.

    `sequence-parallel` (Megatron-LM's sequence parallelism): the rows (the
    leading dimension) of every px.layer_norm the model ranks divide, and
    of the element-wise ops, dropouts and gradients that share a tensor of
    those rows with it, are split over the model axis, so that they run on
    each model rank's block of rows instead of redundantly on every one.
    The region's edges are annotated too: a value leaving it (for a
    product split by features) is all-gathered, and the all-reduce of a
    product's partial sums followed by the slice of the rank's block
    becomes one reduce-scatter: the same bytes as the all-reduce it
    replaces, and 1/Pr of those activations per rank.
  }];
  let options = [
    Option<"sequenceParallel", "sequence-parallel", "bool", "false",
           "Split the layer norms' rows (and the element-wise ops around them) over the model axis, Megatron-LM's sequence parallelism">,
    Option<"convSplit", "conv-split", "std::string", "\"channels\"",
           "How a convolution is split over the model axis: channels, domain, or auto (per convolution, the cheaper)">,
    ListOption<"layerSplits", "layer-splits", "std::string",
               "A strategy's split of named layers, VARIABLE=whole|out|in|rows, "
               "instead of the pairing rule (a layer's weight or an embedding table; "
               "rows: a convolution's domain or a table's vocabulary)">,
  ];
  let dependentDialects = ["::parallax::px::PxDialect", "::mlir::shard::ShardDialect",
                           "::mlir::tensor::TensorDialect"];
}

#endif // PARALLAX_TRANSFORMS_PASSES_TD
