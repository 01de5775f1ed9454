//===- parallax-opt.cpp - the Parallax compiler driver --------------------===//
//
// mlir-opt for Parallax. `.mlir` input goes through upstream MlirOptMain (so
// --split-input-file, --verify-diagnostics and every mlir-opt flag work as
// usual); `.onnx` / `.onnxtxt` input is imported into the px dialect first
// and then runs the same pass pipeline options. `--emit=plan` (or `--train`)
// first runs the training pipeline (px-autodiff, px-optimizer, cleanup) and
// writes the plan parallax-run executes. `--report` prints the variable
// table after the pipeline, and with a plan its memory estimate.
//
//===----------------------------------------------------------------------===//

#include "parallax/Analysis/FrontierOutput.h"
#include "parallax/Analysis/Layers.h"
#include "parallax/Analysis/StepPrediction.h"
#include "parallax/Analysis/StrategySpace.h"
#include "parallax/Analysis/VariableAccess.h"
#include "parallax/Dialect/Px/PxDialect.h"
#include "parallax/Dialect/Px/PxShardingInterface.h"
#include "parallax/Importer/OnnxImporter.h"
#include "parallax/Runtime/MachineMemory.h"
#include "parallax/Target/PlanEmitter.h"
#include "parallax/Transforms/Cluster.h"
#include "parallax/Transforms/Passes.h"
#include "parallax/Transforms/ClusterMachine.h"
#include "parallax/Transforms/Pipeline.h"
#include "parallax/Transforms/SplitBatch.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/Transforms/Passes.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

#include <chrono>
#include <map>

using namespace mlir;
namespace cl = llvm::cl;
namespace px = parallax::px;

static cl::OptionCategory parallaxCategory("Parallax options");

enum class EmitKind { None, Mlir, Plan };
static cl::opt<EmitKind> emit(
    "emit", cl::desc("What to write to -o"), cl::init(EmitKind::Mlir),
    cl::values(clEnumValN(EmitKind::Mlir, "mlir", "px dialect IR (default)"),
               clEnumValN(EmitKind::Plan, "plan",
                          "the executable plan for parallax-run (runs the "
                          "training pipeline first)"),
               clEnumValN(EmitKind::None, "none", "nothing")),
    cl::cat(parallaxCategory));
static cl::opt<bool> train(
    "train",
    cl::desc("Run the training pipeline (px-autodiff, px-optimizer, "
             "canonicalize, cse) before any other pass; implied by "
             "--emit=plan"),
    cl::cat(parallaxCategory));
static cl::opt<bool> inference(
    "inference",
    cl::desc("Compile the forward graph only: no loss is needed, every graph "
             "output is a result, nothing is trained"),
    cl::cat(parallaxCategory));
static cl::opt<std::string> optimizerKind(
    "optimizer", cl::desc("sgd, momentum, adam or adagrad (default sgd)"),
    cl::init("sgd"), cl::cat(parallaxCategory));
static cl::opt<double> lr(
    "lr",
    cl::desc("Learning rate (default as torch.optim: 0.01 for sgd, momentum "
             "and adagrad, 0.001 for adam)"),
    cl::init(-1.0), cl::cat(parallaxCategory));
static cl::opt<double> momentum("momentum",
                                cl::desc("Momentum (default 0.9)"),
                                cl::init(0.9), cl::cat(parallaxCategory));
static cl::opt<bool> nesterov("nesterov", cl::desc("Nesterov momentum"),
                              cl::cat(parallaxCategory));
static cl::opt<double> beta1("beta1", cl::desc("Adam beta1 (default 0.9)"),
                             cl::init(0.9), cl::cat(parallaxCategory));
static cl::opt<double> beta2("beta2", cl::desc("Adam beta2 (default 0.999)"),
                             cl::init(0.999), cl::cat(parallaxCategory));
static cl::opt<double> epsilon(
    "epsilon",
    cl::desc("Optimizer epsilon (default 1e-8 for adam, 1e-10 for adagrad)"),
    cl::init(-1.0), cl::cat(parallaxCategory));
static cl::opt<double> weightDecay("weight-decay",
                                   cl::desc("L2 weight decay (default 0)"),
                                   cl::init(0.0), cl::cat(parallaxCategory));
static cl::opt<int> numRanks(
    "np",
    cl::desc("Data-parallel ranks the plan is for (one machine); with it the "
             "batch size is the global batch. Without --np and --cluster the "
             "plan is single-process, with no synchronization at all"),
    cl::init(1), cl::cat(parallaxCategory));
static cl::opt<std::string> target(
    "target",
    cl::desc("The device kind the plan runs on: cpu (default) or cuda "
             "(parallax-run --device must match)"),
    cl::init("cpu"), cl::cat(parallaxCategory));
static cl::opt<std::string> clusterFile(
    "cluster", cl::desc("Cluster description (JSON: machines, ranks per "
                        "machine, links); see docs/sync.md"),
    cl::cat(parallaxCategory));
static cl::opt<std::string> profileFile(
    "profile", cl::desc("Calibration profile from parallax-run --calibrate"),
    cl::cat(parallaxCategory));
static cl::opt<std::string> profileData(
    "profile-data",
    cl::desc("Directory of .npy inputs to measure each sparse variable's alpha on"),
    cl::cat(parallaxCategory));
static cl::opt<int> profileSteps("profile-steps",
                                 cl::desc("Batches of --profile-data to use"),
                                 cl::init(20), cl::cat(parallaxCategory));
static cl::opt<std::string> syncScheme(
    "sync",
    cl::desc("hybrid (default: the cheapest per variable), allreduce, ps or "
             "allgatherv (every variable)"),
    cl::init("hybrid"), cl::cat(parallaxCategory));
static cl::list<std::string> syncVariables(
    "sync-variable",
    cl::desc("NAME=SCHEME (repeatable or comma-separated): synchronize the trainable "
             "variable NAME by allreduce, ps or allgatherv (a row-sparse table only), "
             "whatever --sync says for the others"),
    cl::CommaSeparated, cl::cat(parallaxCategory));
static cl::opt<double> bucketMiB(
    "bucket-size", cl::desc("All-reduce fusion bucket in MiB (default 25)"),
    cl::init(25.0), cl::cat(parallaxCategory));
static cl::opt<int> forcedPartitions(
    "partitions",
    cl::desc("Parameter-server partitions of every sparse variable (default: "
             "the cost model's choice)"),
    cl::init(0), cl::cat(parallaxCategory));
static cl::opt<bool> globalLossMean(
    "global-loss-mean",
    cl::desc("A mean cross entropy whose lines may count unequally over the batch ranks "
             "(labels equal to ignore_index, such as padding, or class weights) divides "
             "by the whole batch's count, as one rank does, at one scalar all-reduce a "
             "step; without it each rank's mean is averaged (PyTorch DDP's behaviour)"),
    cl::cat(parallaxCategory));
static cl::opt<bool> localBatchnorm(
    "local-batchnorm",
    cl::desc("Normalise with each rank's own batch statistics (PyTorch DDP's "
             "behaviour) instead of the whole batch's"),
    cl::cat(parallaxCategory));
enum class ShardMode { Auto, On, Off };
static cl::opt<ShardMode> shardWeightUpdate(
    "shard-weight-update",
    cl::desc("Split each all-reduce bucket's dense updates over its ranks "
             "(reduce-scatter, update 1/N, all-gather the parameters)"),
    cl::values(clEnumValN(ShardMode::Auto, "auto",
                          "groups of 4 ranks or more on one machine (default; "
                          "measured slower at 2 ranks and between machines)"),
               clEnumValN(ShardMode::On, "on", "every group of 2 ranks or more"),
               clEnumValN(ShardMode::Off, "off",
                          "all-reduce in full, update on every rank")),
    cl::init(ShardMode::Auto), cl::cat(parallaxCategory));
static cl::opt<double> shardWeightUpdateFraction(
    "shard-weight-update-fraction",
    cl::desc("With --shard-weight-update: shard the largest buckets until at least this "
             "share of their bytes is sharded (default 1: all)"),
    cl::init(1.0), cl::cat(parallaxCategory));
static cl::list<std::string> shardWeightUpdateVariables(
    "shard-weight-update-variables",
    cl::desc("VARIABLE,... (repeatable or comma-separated): shard the updates and optimizer "
             "state of these all-reduced variables only (ZeRO-1 per variable, on groups of 2 "
             "ranks or more): they fill all-reduce buckets of their own"),
    cl::CommaSeparated, cl::cat(parallaxCategory));
enum class BatchnormVariance { Default, Biased, Unbiased };
static cl::opt<BatchnormVariance> batchnormVariance(
    "batchnorm-variance",
    cl::desc("The batch variance BatchNormalization's running variance is "
             "updated with (default: unbiased for models exported by PyTorch, "
             "biased otherwise)"),
    cl::values(clEnumValN(BatchnormVariance::Biased, "biased",
                          "as the ONNX specification (divide by n)"),
               clEnumValN(BatchnormVariance::Unbiased, "unbiased",
                          "as PyTorch (divide by n - 1)")),
    cl::init(BatchnormVariance::Default), cl::cat(parallaxCategory));
static cl::opt<bool> recompute(
    "recompute",
    cl::desc("Recompute cheap activations (element-wise ops) in the backward pass "
             "instead of keeping them from the forward pass (px-recompute): less "
             "memory, a little more time"),
    cl::cat(parallaxCategory));
static cl::opt<double> recomputeFraction(
    "recompute-fraction",
    cl::desc("With --recompute: recompute only this share of those activations' bytes, "
             "the first in forward order (a segment from the input on; default 1: all)"),
    cl::init(1.0), cl::cat(parallaxCategory));
static cl::list<std::string> recomputeLayers(
    "recompute-layers",
    cl::desc("LAYER,... (repeatable or comma-separated): recompute these layers' outputs "
             "in the backward pass from their inputs, with the cheap ops after them "
             "(activation checkpointing; LAYER names the weight variable, as "
             "--layer-split does): less memory, a layer's forward time more each"),
    cl::CommaSeparated, cl::cat(parallaxCategory));
static cl::opt<bool> noLocalAggregation(
    "no-local-aggregation",
    cl::desc("Push sparse gradients to their servers without summing them "
             "within each machine first"),
    cl::cat(parallaxCategory));
static cl::opt<bool> lossAlone(
    "loss-alone",
    cl::desc("All-reduce the reported loss on its own instead of in the "
             "first gradient bucket when that is at most 1 MiB (implied by "
             "--shard-weight-update=on)"),
    cl::cat(parallaxCategory));
static cl::opt<bool> allowNegativeIds(
    "allow-negative-ids",
    cl::desc("Let embedding lookups (gathers from a trainable table) wrap "
             "negative ids as ONNX's Gather does, instead of refusing them "
             "at run time as PyTorch's nn.Embedding does"),
    cl::cat(parallaxCategory));
static cl::opt<bool>
    report("report",
           cl::desc("Print the variable table (name, shape, bytes, how it is "
                    "read) and totals; without an explicit --emit, print only "
                    "the table"),
           cl::cat(parallaxCategory));
static cl::opt<std::string> gridSpec(
    "grid",
    cl::desc("PrxPc: split each layer's model over Pr consecutive ranks and the "
             "batch over Pc (SPAA'18; Pr x Pc = --np); auto: compile every grid "
             "and keep the one whose predicted step is the shortest"),
    cl::cat(parallaxCategory));
static cl::opt<std::string> convSplit(
    "conv-split",
    cl::desc("How --grid's model axis splits a convolution: channels (output "
             "or input channels, paired like the dense layers; the default), "
             "domain (its input rows, with halo exchanges between neighbours; "
             "SPAA'18's domain parallelism), or auto (each convolution the way "
             "the closed-form grid model prices cheaper, the convolutions a "
             "residual addition joins alike)"),
    cl::init("channels"), cl::cat(parallaxCategory));
static cl::opt<bool> sequenceParallel(
    "sequence-parallel",
    cl::desc("With --grid: split each layer norm's rows (tokens), and the dropouts and "
             "residual additions around it, over the model axis (Megatron-LM's sequence "
             "parallelism): a layer pair's all-reduce becomes an all-gather before it "
             "and a reduce-scatter after it, and those activations take 1/Pr of the "
             "memory"),
    cl::cat(parallaxCategory));
static cl::list<std::string> layerSplit(
    "layer-split",
    cl::desc("With --grid: LAYER=whole|out|in|rows (repeatable or comma-separated) fixes "
             "how the model axis splits the layer whose weight (or embedding table) is "
             "the variable LAYER, instead of the pairing rule: whole on every model rank, "
             "by output or input features (channels), or by a convolution's input rows "
             "or a table's vocabulary"),
    cl::CommaSeparated, cl::cat(parallaxCategory));
static cl::opt<bool> gridCosts(
    "grid-costs",
    cl::desc("Print the predicted cost of every Pr x Pc grid of the --np "
             "ranks (Pr splits the model, Pc the batch; SPAA'18) and exit"),
    cl::cat(parallaxCategory));
static cl::opt<std::string> memoryLimit(
    "memory-limit",
    cl::desc("Search per-operator strategies (docs/strategy.md) and compile the "
             "fastest whose predicted peak per rank is at most BYTES (e.g. 2GiB)"),
    cl::value_desc("BYTES"), cl::cat(parallaxCategory));
enum class Objective { Time, Memory };
static cl::opt<Objective> objective(
    "objective",
    cl::desc("Search per-operator strategies and compile an end of the frontier"),
    cl::values(clEnumValN(Objective::Time, "time", "the fastest (default)"),
               clEnumValN(Objective::Memory, "memory", "the least memory per rank")),
    cl::init(Objective::Time), cl::cat(parallaxCategory));
static cl::opt<std::string> frontierFile(
    "frontier",
    cl::desc("Search per-operator strategies and write every point of the (step "
             "time, memory per rank) frontier, with each operator's split, to FILE.json"),
    cl::value_desc("FILE.json"), cl::cat(parallaxCategory));
static cl::opt<std::string> frontierSvg(
    "frontier-svg",
    cl::desc("Search per-operator strategies and draw the frontier to FILE.svg"),
    cl::value_desc("FILE.svg"), cl::cat(parallaxCategory));
static cl::opt<std::string> frontierMeasured(
    "frontier-measured",
    cl::desc("Measured points to put beside the prediction in --frontier and "
             "--frontier-svg: a JSON list of {\"point\": K (or \"reference\": R, the "
             "dominated references as --frontier lists them), \"step_seconds\": S, "
             "\"memory_bytes\": B} (bench/frontier.py writes it)"),
    cl::value_desc("FILE.json"), cl::cat(parallaxCategory));
static cl::opt<int> planPoint(
    "plan-point",
    cl::desc("Search per-operator strategies and compile point K of the frontier "
             "(0: the fastest; as --frontier numbers them)"),
    cl::value_desc("K"), cl::init(-1), cl::cat(parallaxCategory));
static cl::opt<int64_t> batchSize(
    "batch-size",
    cl::desc("The global batch: binds dimension 0 of inputs whose batch "
             "dimension is dynamic, and replaces the batch a static model "
             "was exported with"),
    cl::init(0), cl::cat(parallaxCategory));
static cl::list<std::string> batchInputs(
    "batch-inputs",
    cl::desc("Inputs whose dimension 0 holds the samples, for a model "
             "exported with static shapes (default: detected): a,b,..."),
    cl::CommaSeparated, cl::cat(parallaxCategory));
static cl::list<std::string> sharedInputs(
    "shared-inputs",
    cl::desc("Inputs that are the same for every sample (never split over "
             "ranks): a,b,..."),
    cl::CommaSeparated, cl::cat(parallaxCategory));
static cl::list<std::string> inputShapes(
    "input-shape", cl::desc("Static shape of an input: name=d0,d1,... "
                            "(repeatable)"),
    cl::cat(parallaxCategory));
static cl::list<std::string>
    freeze("freeze", cl::desc("Float initializers to keep constant: a,b,..."),
           cl::CommaSeparated, cl::cat(parallaxCategory));
static cl::opt<std::string>
    loss("loss", cl::desc("The graph output to use as the loss (default: the "
                          "single scalar output)"),
         cl::cat(parallaxCategory));

/// Whether the plan synchronizes ranks (--np or --cluster given).
static bool distributed() {
  return numRanks.getNumOccurrences() > 0 || !clusterFile.empty();
}

/// The world size: --np, or the cluster file's ranks. Reading the file
/// here is only for batch splitting; px-cluster validates it.
static int64_t worldSize() {
  if (clusterFile.empty())
    return numRanks;
  auto buffer = llvm::MemoryBuffer::getFile(clusterFile);
  if (!buffer)
    return numRanks;
  auto json = llvm::json::parse((*buffer)->getBuffer());
  if (!json) {
    llvm::consumeError(json.takeError());
    return numRanks;
  }
  auto *obj = json->getAsObject();
  if (!obj)
    return numRanks;
  if (auto *machines = obj->getArray("machines")) {
    int64_t n = 0;
    for (const auto &m : *machines)
      if (auto *mo = m.getAsObject())
        n += mo->getInteger("ranks").value_or(0);
    return n;
  }
  return obj->getInteger("machines").value_or(1) *
         obj->getInteger("ranks_per_machine").value_or(1);
}

/// The Pr --grid=auto or the strategy search is trying, then the one it chose.
static std::optional<int64_t> chosenModelRanks;
/// Import and split the batch only, over one rank (the strategy search
/// reads the model's operators at the global batch).
static bool importOnly = false;

/// Whether an option asks for the strategy search (docs/strategy.md).
static bool searchesStrategies() {
  return memoryLimit.getNumOccurrences() || objective.getNumOccurrences() ||
         !frontierFile.empty() || !frontierSvg.empty() || !frontierMeasured.empty() ||
         planPoint.getNumOccurrences();
}

/// Pr of --grid=PrxPc (1 without it), checked against the world size.
static llvm::Expected<int64_t> modelRanks() {
  if (chosenModelRanks)
    return *chosenModelRanks;
  if (gridSpec.empty() || gridSpec == "auto")
    return 1;
  auto [pr, pc] = StringRef(gridSpec).split('x');
  int64_t r = 0, c = 0;
  if (pr.getAsInteger(10, r) || pc.getAsInteger(10, c) || r < 1 || c < 1)
    return llvm::createStringError("--grid=" + gridSpec +
                                   ": expected PrxPc, two positive counts (e.g. 2x4)");
  if (!distributed() || r * c != worldSize())
    return llvm::createStringError("--grid=" + gridSpec + " holds " +
                                   std::to_string(r * c) + " ranks, the run has " +
                                   std::to_string(distributed() ? worldSize() : 1) +
                                   " (--np or --cluster)");
  return r;
}

/// --lr, or torch.optim's default for the chosen optimizer.
/// --shard-weight-update as the layout passes' options: auto shards groups
/// of 4 ranks or more on one machine (docs/sync.md measures why), on every
/// group of 2 or more.
static parallax::PlanLayoutOptions planLayout() {
  parallax::PlanLayoutOptions layout;
  layout.shardWeightUpdate = shardWeightUpdate != ShardMode::Off;
  layout.shard.minRanks = shardWeightUpdate == ShardMode::On ? 2 : 4;
  layout.shard.acrossMachines = shardWeightUpdate == ShardMode::On;
  layout.shard.fraction = shardWeightUpdateFraction;
  // Named variables: theirs only, wherever --shard-weight-update=on would.
  if (!shardWeightUpdateVariables.empty()) {
    layout.shardWeightUpdate = true;
    layout.shard.minRanks = 2;
    layout.shard.acrossMachines = true;
    layout.shard.fraction = 1.0;
    layout.shard.variables.assign(shardWeightUpdateVariables.begin(),
                                  shardWeightUpdateVariables.end());
  }
  return layout;
}

static double learningRate() {
  if (lr >= 0)
    return lr;
  return optimizerKind == "adam" ? 0.001 : 0.01;
}

static int fail(const llvm::Twine &message) {
  llvm::WithColor::error(llvm::errs(), "parallax-opt") << message << "\n";
  return 1;
}

static bool isOnnx(StringRef path) {
  return path.ends_with(".onnx") || path.ends_with(".onnxtxt");
}

static llvm::Expected<parallax::ImportOptions> importOptions() {
  parallax::ImportOptions options;
  if (batchSize.getNumOccurrences()) {
    if (batchSize < 1)
      return llvm::createStringError("--batch-size must be >= 1");
    options.batchSize = batchSize;
  }
  for (const std::string &spec : inputShapes) {
    auto [name, dims] = StringRef(spec).rsplit('=');
    if (name.empty() || dims.empty())
      return llvm::createStringError("--input-shape expects name=d0,d1,..., got '" +
                                     spec + "'");
    std::vector<int64_t> shape;
    SmallVector<StringRef> parts;
    dims.split(parts, ',');
    for (StringRef part : parts) {
      int64_t d;
      if (part.trim().getAsInteger(10, d))
        return llvm::createStringError("--input-shape " + spec +
                                       ": '" + part + "' is not an integer");
      shape.push_back(d);
    }
    options.inputShapes[name.str()] = shape;
  }
  options.freeze.insert(freeze.begin(), freeze.end());
  options.loss = loss;
  options.requireLoss = !inference;
  // --grid-costs models the global batch: nothing is split yet. On a grid
  // the batch is split over Pc ranks.
  auto model = modelRanks();
  if (!model)
    return model.takeError();
  options.ranks = distributed() && !gridCosts && !importOnly ? worldSize() / *model : 1;
  if (batchnormVariance != BatchnormVariance::Default)
    options.unbiasedBatchnormVariance = batchnormVariance == BatchnormVariance::Unbiased;
  return options;
}

/// The plan's storage is allocated and zeroed when parallax-run starts it:
/// say so at compile time when that cannot fit this machine (MachineMemory.h).
static void warnIfTooLargeHere(const parallax::rt::Plan &plan, StringRef input) {
  int64_t usable = parallax::rt::usableMemoryBytes();
  int ranks = std::max(1, plan.ranksPerMachine);
  double peak = (double)plan.memory.peak();
  if (usable <= 0 || peak * ranks <= (double)usable)
    return;
  auto text = [](double b) {
    return parallax::rt::bytesText((int64_t)std::min(b, 9.2e18));
  };
  llvm::WithColor::warning(llvm::errs(), "parallax-opt")
      << input << ": the plan needs " << text(peak)
      << " of memory per rank (predicted peak; arena "
      << text((double)plan.memory.arena) << ")";
  if (ranks > 1)
    llvm::errs() << ", " << text(peak * ranks) << " for the " << ranks
                 << " ranks of a machine";
  llvm::errs() << ", more than this machine's " << text((double)usable)
               << "; parallax-run will refuse to start it on a machine like "
                  "this one\n";
}

/// The cost model's machine: px-cluster's links and rate (--np, --cluster,
/// --profile) and the optimizer's state per parameter.
static parallax::grid::Machine machineFor(const parallax::ClusterModel &c) {
  return parallax::machineOf(c, optimizerKind == "adam" ? 2 : optimizerKind == "sgd" ? 0 : 1);
}

/// The cluster px-cluster reads from --np, --cluster and --profile (run on
/// an empty module: only the file's checks and figures are wanted).
static std::optional<parallax::ClusterModel> clusterOf(MLIRContext &context,
                                                       StringRef inputFilename) {
  OwningOpRef<ModuleOp> module =
      ModuleOp::create(FileLineColLoc::get(&context, inputFilename, 0, 0));
  PassManager pm(&context);
  parallax::PxClusterOptions cluster;
  cluster.np = numRanks;
  cluster.clusterFile = clusterFile;
  cluster.profileFile = profileFile;
  pm.addPass(parallax::createPxCluster(cluster));
  if (failed(pm.run(*module)))
    return std::nullopt;
  return parallax::ClusterModel::fromModule(*module);
}

/// --grid-costs: every grid's closed-form cost for the model's layers.
static int printGridCosts(ModuleOp module, StringRef inputFilename) {
  auto c = clusterOf(*module.getContext(), inputFilename);
  if (!c)
    return 1;
  parallax::printGridReport(parallax::layersOf(module), c->worldSize, machineFor(*c),
                            llvm::outs());
  return 0;
}

namespace {
/// A module through the pipeline, and how its batch was split.
struct Built {
  OwningOpRef<ModuleOp> module;
  std::optional<parallax::BatchDecision> batch;
};
} // namespace

/// The strategy search's imports, by the ranks the batch is split over:
/// its candidates compile one model many times, and reading a large ONNX
/// file is most of a compile. Cleared before the context goes.
static std::map<int64_t, Built> importCache;
static bool cacheImports = false;

/// Imports (and splits the batch of) or parses `inputFilename`, then runs
/// the pass pipeline on it. Errors go to `error` and the context's
/// diagnostics.
static std::optional<Built> build(MLIRContext &context, llvm::SourceMgr &sourceMgr,
                                  StringRef inputFilename,
                                  llvm::function_ref<void(const llvm::Twine &)> error) {
  Built built;
  if (isOnnx(inputFilename)) {
    auto options = importOptions();
    if (!options)
      return error(llvm::toString(options.takeError())), std::nullopt;
    if (auto cached = importCache.find(options->ranks);
        cacheImports && cached != importCache.end()) {
      built.module = OwningOpRef<ModuleOp>(cached->second.module->clone());
      built.batch = cached->second.batch;
    } else {
      auto imported = parallax::importOnnxModel(context, inputFilename.str(), *options);
      if (!imported)
        return error(llvm::toString(imported.takeError())), std::nullopt;
      built.module = std::move(*imported);
      parallax::SplitBatchOptions split;
      split.batchInputs.assign(batchInputs.begin(), batchInputs.end());
      split.sharedInputs.assign(sharedInputs.begin(), sharedInputs.end());
      split.globalBatch = batchSize.getNumOccurrences() ? (int64_t)batchSize : 0;
      split.ranks = options->ranks;
      auto decided = parallax::splitBatch(*built.module, split);
      if (!decided)
        return error(inputFilename + ": " + llvm::toString(decided.takeError())), std::nullopt;
      built.batch = std::move(*decided);
      if (cacheImports)
        importCache[options->ranks] = {OwningOpRef<ModuleOp>(built.module->clone()), built.batch};
    }
    if (importOnly) {
      // The strategy search reads the operators every grid compiles.
      PassManager layout(&context);
      parallax::addAttentionLayoutPasses(layout);
      if (failed(layout.run(*built.module)))
        return std::nullopt;
    }
    if (gridCosts || importOnly)
      return built;
  } else {
    std::string message;
    auto file = openInputFile(inputFilename, &message);
    if (!file)
      return error(message), std::nullopt;
    sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
    built.module = parseSourceFile<ModuleOp>(sourceMgr, &context);
    if (!built.module)
      return std::nullopt;
  }

  bool training =
      !inference && (train || emit == EmitKind::Plan || distributed());
  if (inference && train)
    return error("--train and --inference exclude each other"), std::nullopt;
  if (numRanks < 1)
    return error("--np must be >= 1"), std::nullopt;
  if (distributed() && !training && emit == EmitKind::Plan)
    return error("--np and --cluster make training plans; an --inference plan "
                 "runs on one process"),
           std::nullopt;
  auto config = MlirOptMainConfig::createFromCLOptions();
  PassManager pm(&context);
  if (failed(applyPassManagerCLOptions(pm)))
    return std::nullopt;
  if (training) {
    parallax::TrainingPipelineOptions pipeline;
    parallax::PxOptimizerOptions &opt = pipeline.optimizer;
    opt.kind = optimizerKind;
    opt.lr = learningRate();
    opt.momentum = momentum;
    opt.nesterov = nesterov;
    opt.beta1 = beta1;
    opt.beta2 = beta2;
    opt.epsilon = epsilon;
    opt.weightDecay = weightDecay;
    pipeline.distributed = distributed();
    pipeline.cluster.np = numRanks;
    pipeline.cluster.clusterFile = clusterFile;
    pipeline.cluster.profileFile = profileFile;
    auto model = modelRanks();
    if (!model)
      return error(llvm::toString(model.takeError())), std::nullopt;
    pipeline.cluster.modelRanks = *model;
    pipeline.globalLossMean = globalLossMean;
    pipeline.shardModel.convSplit = convSplit;
    pipeline.shardModel.sequenceParallel = sequenceParallel;
    pipeline.shardModel.layerSplits.assign(layerSplit.begin(), layerSplit.end());
    pipeline.sparsity.profileData = profileData;
    pipeline.sparsity.profileSteps = profileSteps;
    pipeline.partition.forced = forcedPartitions;
    parallax::PxSyncOptions &sync = pipeline.sync;
    sync.scheme = syncScheme;
    sync.variableSchemes.assign(syncVariables.begin(), syncVariables.end());
    sync.shardedVariables.assign(shardWeightUpdateVariables.begin(),
                                 shardWeightUpdateVariables.end());
    sync.bucketBytes = (int64_t)(bucketMiB * 1024 * 1024);
    sync.localBatchnorm = localBatchnorm;
    sync.localAggregation = !noLocalAggregation;
    // The loss in bucket 0 keeps that bucket's update whole: asked for
    // sharding everywhere, the loss goes on its own.
    sync.lossInBucket = !lossAlone && shardWeightUpdate != ShardMode::On;
    pipeline.layout = planLayout();
    pipeline.recompute = recompute;
    pipeline.recomputeFraction = recomputeFraction;
    pipeline.recomputeLayers.assign(recomputeLayers.begin(), recomputeLayers.end());
    parallax::addTrainingPipeline(pm, pipeline);
  } else if (emit == EmitKind::Plan) {
    pm.addPass(createCanonicalizerPass());
    pm.addPass(createCSEPass());
    parallax::addPlanLayoutPasses(pm, planLayout());
  }
  if (failed(config.setupPassPipeline(pm)) || failed(pm.run(*built.module)))
    return std::nullopt;
  return built;
}

/// The step's prediction on the grid it was compiled for.
static parallax::StepPrediction predict(ModuleOp module) {
  return parallax::predictStep(
      module, machineFor(parallax::ClusterModel::fromModule(module)));
}

/// How --grid=auto names a candidate's convolution split on a grid of Pr
/// model ranks (nothing where no model axis splits them).
static std::string convSplitLabel(StringRef split, int64_t pr) {
  if (pr <= 1)
    return "";
  return split == "domain" ? " (domain)" : split == "auto" ? " (mixed)" : "";
}

/// How --grid=auto names a sequence-parallel candidate.
static std::string sequenceLabel(bool sequence, int64_t pr) {
  return sequence && pr > 1 ? " (sequence)" : "";
}

/// --grid=auto: compiles the model for every Pr x Pc grid of the world
/// whose model groups fit on a machine and keeps the one whose predicted
/// step (StepPrediction.h) is the shortest. A grid the model cannot be
/// split on (a layer that does not divide) is passed over; the error says
/// why each failed when none compiles.
static std::optional<Built> buildOnCheapestGrid(MLIRContext &context,
                                                llvm::SourceMgr &sourceMgr,
                                                StringRef inputFilename) {
  if (!isOnnx(inputFilename) || !distributed() || emit != EmitKind::Plan) {
    fail("--grid=auto compiles an ONNX model into a plan for --np or --cluster ranks");
    return std::nullopt;
  }
  // A model group stays on one machine.
  auto cluster = clusterOf(context, inputFilename);
  if (!cluster)
    return std::nullopt;
  parallax::grid::Machine machine = machineFor(*cluster);
  std::optional<Built> best;
  parallax::grid::Grid chosen;
  double bestSeconds = 0;
  std::string why, tried;
  // Convolutions split by channels or, unless --conv-split names one, by
  // their rows too, and each the cheaper way (conv-split=auto's mix): a
  // candidate only where some convolution's rows split, and the mix only
  // where it differs from both.
  std::string chosenSplit = convSplit;
  std::vector<std::string> splits{convSplit};
  if (!convSplit.getNumOccurrences())
    splits = {"channels", "domain", "auto"};
  // And, unless --sequence-parallel is given, each model-split candidate
  // with its layer norms' rows split too, kept where it compiles to
  // another plan.
  bool chosenSequence = sequenceParallel;
  std::vector<bool> sequences{sequenceParallel};
  if (!sequenceParallel.getNumOccurrences())
    sequences = {false, true};
  for (const parallax::grid::Grid &g : parallax::grid::gridsOf(worldSize())) {
    if (!machine.holdsModelGroup(g))
      continue;
    chosenModelRanks = g.pr;
    std::vector<double> secondsOfSplits;
    double plainSeconds = -1;
    for (const std::string &split : splits)
    for (bool sequence : sequences) {
      if (g.pr == 1 && (split != splits.front() || sequence != sequences.front()))
        continue;
      if (!sequence)
        plainSeconds = -1; // until this split's plain candidate is kept
      else if (sequences.size() > 1 && plainSeconds < 0)
        continue; // its plain candidate was not: neither is its twin
      convSplit.setValue(split);
      sequenceParallel.setValue(sequence);
      std::string name = g.str() + convSplitLabel(split, g.pr) + sequenceLabel(sequence, g.pr);
      std::string errors;
      std::optional<Built> b;
      {
        // A grid that does not fit the model is an answer, not an error.
        ScopedDiagnosticHandler quiet(&context, [&](Diagnostic &d) {
          if (d.getSeverity() == DiagnosticSeverity::Error)
            errors += d.str() + "; ";
          return success();
        });
        b = build(context, sourceMgr, inputFilename,
                  [&](const llvm::Twine &m) { errors += m.str() + "; "; });
        if (b) {
          parallax::PlanEmitOptions check;
          check.target = target;
          if (auto plan = parallax::emitPlan(*b->module, check); !plan) {
            errors += llvm::toString(plan.takeError());
            b.reset();
          }
        }
      }
      bool splitsRows = false;
      if (b)
        b->module->walk([&](px::HaloExchangeOp) { splitsRows = true; });
      if (split != "channels" && splits.size() > 1 && (!b || !splitsRows))
        continue; // no convolution's rows split: the channels candidate
      if (!b) {
        why += "\n  " + name + ": " + StringRef(errors).rtrim("; ").str();
        tried += " " + name + " does not compile,";
        continue;
      }
      double seconds = predict(*b->module).seconds();
      if (split == "auto" && !sequence && llvm::is_contained(secondsOfSplits, seconds))
        continue; // the mix is one of the others
      if (sequence && sequences.size() > 1 && seconds == plainSeconds)
        continue; // no layer norm's rows split: the plain candidate
      if (!sequence) {
        plainSeconds = seconds;
        secondsOfSplits.push_back(seconds);
      }
      tried += llvm::formatv(" {0} {1:F3} ms,", name, seconds * 1e3).str();
      if (!best || seconds < bestSeconds) {
        best = std::move(b);
        bestSeconds = seconds;
        chosen = g;
        chosenSplit = split;
        chosenSequence = sequence;
      }
    }
  }
  convSplit.setValue(chosenSplit);
  sequenceParallel.setValue(chosenSequence);
  if (!best) {
    fail(inputFilename + ": --grid=auto: no grid of " + llvm::Twine(worldSize()) +
         " ranks compiles:" + why);
    return std::nullopt;
  }
  chosenModelRanks = chosen.pr;
  tried.pop_back();
  llvm::errs() << "parallax-opt: --grid=auto chose " << chosen.str()
               << convSplitLabel(chosenSplit, chosen.pr)
               << sequenceLabel(chosenSequence, chosen.pr)
               << " (predicted step:" << tried << ")\n";
  return best;
}

/// --report with the strategy search: the frontier, one line per point.
static void printFrontier(const std::vector<parallax::strategy::CompiledPoint> &points,
                          size_t onFrontier) {
  llvm::outs() << "strategy frontier (" << onFrontier << (onFrontier == 1 ? " point" : " points")
               << "; predicted per rank and step by the compiled step):\n";
  llvm::outs() << llvm::formatv("  {0,-5} {1,-46} {2,12} {3,12}\n", "point", "strategy",
                                "step ms", "memory MiB");
  for (size_t i = 0; i < points.size(); ++i) {
    const auto &p = points[i];
    std::string index = p.onFrontier ? std::to_string(i) : "-";
    llvm::outs() << llvm::formatv("  {0,-5} {1,-46} {2,12:F3} {3,12:F1}", index,
                                  p.point.strategy.summary(), p.seconds * 1e3,
                                  p.bytes / 1048576.0);
    if (p.chosen)
      llvm::outs() << "  <- chosen";
    if (!p.label.empty())
      llvm::outs() << "  (" << p.label << (p.onFrontier ? "" : ", dominated") << ")";
    llvm::outs() << "\n";
  }
}

/// --frontier-measured: each entry's measurement onto its frontier point.
static bool readMeasuredPoints(StringRef path, std::vector<parallax::strategy::CompiledPoint> &points,
                               size_t onFrontier) {
  namespace st = parallax::strategy;
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return fail(path + ": " + buffer.getError().message()), false;
  auto json = llvm::json::parse((*buffer)->getBuffer());
  if (!json)
    return fail(path + ": " + llvm::toString(json.takeError())), false;
  auto *list = json->getAsArray();
  if (!list)
    return fail(path + ": expected a list of {\"point\", \"step_seconds\", \"memory_bytes\"}"),
           false;
  size_t references = points.size() - onFrontier;
  for (size_t i = 0; i < list->size(); ++i) {
    auto *o = (*list)[i].getAsObject();
    std::optional<int64_t> point = o ? o->getInteger("point") : std::nullopt;
    std::optional<int64_t> reference = o ? o->getInteger("reference") : std::nullopt;
    std::optional<double> seconds = o ? o->getNumber("step_seconds") : std::nullopt;
    std::optional<int64_t> bytes = o ? o->getInteger("memory_bytes") : std::nullopt;
    bool isPoint = point && *point >= 0 && (size_t)*point < onFrontier;
    bool isReference = reference && *reference >= 0 && (size_t)*reference < references;
    if (isPoint == isReference || !seconds || !bytes || *seconds <= 0 || *bytes <= 0)
      return fail(path + ": entry " + llvm::Twine(i) + ": expected a frontier point (0 to " +
                  llvm::Twine(onFrontier - 1) + ")" +
                  (references ? " or a dominated reference (0 to " +
                                    std::to_string(references - 1) + ")"
                              : std::string()) +
                  " with step_seconds > 0 and memory_bytes > 0"),
             false;
    st::CompiledPoint &p = points[isPoint ? *point : onFrontier + *reference];
    p.measuredSeconds = *seconds;
    p.measuredBytes = *bytes;
  }
  return true;
}

namespace {
/// A strategy compiled, with the compiled step's prediction.
struct Compiled {
  Built built;
  double seconds = 0;
  int64_t bytes = 0;
  /// What px-shard-model split, by variable (px.layer_split).
  llvm::StringMap<parallax::strategy::Split> splits;
};
} // namespace

/// The options a strategy sets, as --grid, the layer splits,
/// --shard-weight-update[-fraction] and --recompute[-fraction] would.
static void applyStrategy(const parallax::strategy::Strategy &s) {
  chosenModelRanks = s.grid.pr;
  // The search's splits where --layer-split would put them (which the
  // search refuses on its command line).
  layerSplit.clear();
  for (std::string &split : s.layerSplits())
    layerSplit.push_back(split);
  shardWeightUpdate.setValue(s.shardUpdates > 0 ? ShardMode::On : ShardMode::Off);
  shardWeightUpdateFraction.setValue(s.shardUpdates > 0 ? s.shardUpdates : 1.0);
  recompute.setValue(s.recompute > 0);
  recomputeFraction.setValue(s.recompute > 0 ? s.recompute : 1.0);
  recomputeLayers.clear();
  for (const std::string &layer : s.recomputed)
    recomputeLayers.push_back(layer);
  syncVariables.clear();
  for (std::string &entry : s.syncVariables())
    syncVariables.push_back(entry);
  shardWeightUpdateVariables.clear();
  for (const std::string &layer : s.shardedUpdates)
    shardWeightUpdateVariables.push_back(layer);
  sequenceParallel.setValue(s.sequenceParallel);
}

/// Compiles `s` (its grid, its layer splits, ZeRO-1 or not) into a plan's
/// module; an error (a split the model cannot take) goes to `why`.
static std::optional<Compiled> compileStrategy(MLIRContext &context, llvm::SourceMgr &sourceMgr,
                                               StringRef inputFilename,
                                               const parallax::strategy::Strategy &s,
                                               std::string &why) {
  applyStrategy(s);
  std::string errors;
  ScopedDiagnosticHandler quiet(&context, [&](Diagnostic &d) {
    if (d.getSeverity() == DiagnosticSeverity::Error)
      errors += d.str() + "; ";
    return success();
  });
  std::optional<Built> b =
      build(context, sourceMgr, inputFilename, [&](const llvm::Twine &m) { errors += m.str() + "; "; });
  std::optional<Compiled> c;
  if (b) {
    parallax::PlanEmitOptions check;
    check.target = target;
    if (auto plan = parallax::emitPlan(*b->module, check)) {
      c.emplace();
      c->seconds = predict(*b->module).seconds();
      c->bytes = plan->memory.peak();
      b->module->walk([&](px::VariableOp var) {
        if (auto split = px::getAttr<px::PxDialect::LayerSplitAttrHelper>(var))
          if (auto named = parallax::strategy::splitNamed(split.getValue()))
            c->splits[var.getName()] = *named;
      });
      c->built = std::move(*b);
    } else {
      errors += llvm::toString(plan.takeError());
    }
  }
  if (!c)
    why = StringRef(errors).rtrim("; ").str();
  return c;
}

/// The strategy search (docs/strategy.md): the FT search over every grid's
/// per-operator splits with the closed forms, then each frontier point
/// compiled and priced by the compiled step's prediction and the plan's
/// memory estimate (what --report and parallax-run's --memory-limit use),
/// the frontier taken again over those, and the point the options ask for
/// compiled. Without --emit=plan it stops after writing the frontier.
static std::optional<Built> buildOnChosenStrategy(MLIRContext &context, llvm::SourceMgr &sourceMgr,
                                                  StringRef inputFilename, bool &searchOnly) {
  namespace st = parallax::strategy;
  using Clock = std::chrono::steady_clock;
  auto secondsSince = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  if (!isOnnx(inputFilename) || !distributed()) {
    fail("the strategy search (--memory-limit, --objective, --frontier, --frontier-svg, "
         "--plan-point) compiles an ONNX model for --np or --cluster ranks");
    return std::nullopt;
  }
  if (inference || gridCosts) {
    fail("the strategy search compiles a training plan: drop --inference and --grid-costs");
    return std::nullopt;
  }
  if (emit.getNumOccurrences() && emit == EmitKind::Mlir) {
    fail("the strategy search writes a plan (--emit=plan) or only the frontier (no --emit)");
    return std::nullopt;
  }
  if (planPoint.getNumOccurrences() && objective.getNumOccurrences()) {
    fail("--plan-point names the point: drop --objective");
    return std::nullopt;
  }
  if (!gridSpec.empty() || shardWeightUpdate.getNumOccurrences() ||
      shardWeightUpdateFraction.getNumOccurrences() ||
      convSplit.getNumOccurrences() || recompute.getNumOccurrences() ||
      sequenceParallel.getNumOccurrences() ||
      recomputeFraction.getNumOccurrences() || layerSplit.getNumOccurrences() ||
      recomputeLayers.getNumOccurrences() || syncVariables.getNumOccurrences() ||
      shardWeightUpdateVariables.getNumOccurrences() ||
      (syncScheme.getNumOccurrences() && syncScheme != "hybrid")) {
    fail("the strategy search chooses the grid, each layer's split, ZeRO-1, recomputation "
         "and each variable's synchronization itself: drop --grid, --conv-split, "
         "--sequence-parallel, "
         "--layer-split, --shard-weight-update[-variables], --recompute[-fraction], "
         "--recompute-layers, --sync and --sync-variable");
    return std::nullopt;
  }
  std::optional<int64_t> limit;
  if (memoryLimit.getNumOccurrences()) {
    limit = parallax::rt::parseBytes(memoryLimit);
    if (!limit || *limit <= 0) {
      fail("--memory-limit " + memoryLimit + ": expected a size such as 2GiB, 512MiB or 1e9");
      return std::nullopt;
    }
  }
  auto cluster = clusterOf(context, inputFilename);
  if (!cluster)
    return std::nullopt;
  parallax::grid::Machine machine = machineFor(*cluster);

  // The operators, at the global batch.
  Clock::time_point start = Clock::now();
  importOnly = true;
  std::optional<Built> whole =
      build(context, sourceMgr, inputFilename, [](const llvm::Twine &m) { fail(m); });
  importOnly = false;
  if (!whole)
    return std::nullopt;
  std::vector<st::Operator> ops = st::operatorsOf(*whole->module);
  st::StrategySearch search = st::searchStrategies(ops, worldSize(), machine);
  st::FrontierSummary summary;
  summary.model = inputFilename.str();
  summary.ranks = worldSize();
  summary.memoryLimit = limit;
  summary.objective = objective == Objective::Memory ? "memory" : "time";
  summary.searchSeconds = secondsSince(start);
  summary.spaces = search.spaces;
  summary.closedFormPoints = search.frontier.size();

  cacheImports = true;
  llvm::scope_exit uncache([] {
    cacheImports = false;
    importCache.clear();
  });
  // Each point compiled, and the references: pure data parallelism, and
  // pure model parallelism where a model group fits on a machine (every
  // layer split by the pairing rule).
  start = Clock::now();
  std::vector<st::CompiledPoint> points;
  std::string why;
  int failed = 0;
  auto addOne = [&](const st::Point &p, std::string label, bool searched) -> bool {
    std::string error;
    std::optional<Compiled> c = compileStrategy(context, sourceMgr, inputFilename, p.strategy, error);
    if (!c) {
      why += "\n  " + p.strategy.summary() + ": " + error;
      ++failed;
      return false;
    }
    st::CompiledPoint point;
    point.point = p;
    point.closedForm = searched;
    // A grid compiled by the pairing rule: the splits px-shard-model chose.
    if (p.strategy.splits.empty() && p.strategy.grid.pr > 1) {
      point.point.strategy.byPairingRule = true;
      for (const st::Operator &op : ops)
        if (op.splittable)
          point.point.strategy.splits.push_back(
              {op.layer.name, c->splits.lookup(op.layer.name)});
      // The same plan as a searched point: that point stands for both.
      auto same = [&](const st::CompiledPoint &o) {
        const st::Strategy &a = o.point.strategy, &b = point.point.strategy;
        return a.grid.pr == b.grid.pr && a.shardUpdates == b.shardUpdates &&
               a.recompute == b.recompute && a.splits == b.splits &&
               a.recomputed == b.recomputed && a.shardedUpdates == b.shardedUpdates &&
               a.tableSchemes == b.tableSchemes && a.sequenceParallel == b.sequenceParallel;
      };
      if (llvm::any_of(points, same))
        return false;
    }
    point.seconds = c->seconds;
    point.bytes = c->bytes;
    point.label = std::move(label);
    points.push_back(std::move(point));
    return true;
  };
  // Each point that splits the model of a model with layer norms, also with
  // sequence parallelism: the closed forms do not price it, the compiled
  // plan does.
  bool layerNorms = false;
  whole->module->walk([&](px::LayerNormOp) { layerNorms = true; });
  auto add = [&](const st::Point &p, std::string label, bool searched) {
    if (!addOne(p, label, searched) || !layerNorms || p.strategy.grid.pr <= 1)
      return;
    const st::CompiledPoint plain = points.back();
    st::Point twin = p;
    twin.strategy.sequenceParallel = true;
    // A twin whose layer norms' rows the model ranks do not divide is the
    // same plan.
    if (addOne(twin, "", searched) && points.back().seconds == plain.seconds &&
        points.back().bytes == plain.bytes)
      points.pop_back();
  };
  bool data = false, model = false;
  for (const st::Point &p : search.candidates) {
    bool isData = p.strategy.pureData() && !p.strategy.shardUpdates && !p.strategy.recompute &&
                  p.strategy.recomputed.empty() && p.strategy.shardedUpdates.empty();
    bool isModel = p.strategy.pureModel() && !model;
    data |= isData;
    model |= isModel;
    add(p, isData ? "pure data parallelism" : isModel ? "pure model parallelism" : "", true);
  }
  if (!data) {
    st::Point p;
    p.strategy.grid = {1, worldSize()};
    add(p, "pure data parallelism", false);
  }
  // Every grid as --grid=PrxPc compiles it (no splits named: the pairing
  // rule's), with and without ZeRO-1, so that the search never misses what
  // a hand-picked grid gives; P x 1 so is pure model parallelism.
  for (const parallax::grid::Grid &g : parallax::grid::gridsOf(worldSize())) {
    if (g.pr == 1 || !machine.holdsModelGroup(g))
      continue;
    for (st::SpaceOptions o : st::spaceOptionsOf(g))
      for (double zero : {0.0, 1.0}) {
        if (zero > 0 && !st::shardsUpdatesOn(g))
          continue;
        st::Point p;
        p.strategy.grid = g;
        p.strategy.shardUpdates = zero;
        p.strategy.recompute = o.recompute;
        bool isModel = g.pc == 1 && !model;
        model |= isModel;
        add(p, isModel ? "pure model parallelism" : "", false);
      }
  }
  summary.compileSeconds = secondsSince(start);
  // The frontier again, over the compiled predictions: a slower point
  // stays only where it saves more than 1% of memory (TensorOpt's epsilon
  // merge; recomputation or ZeRO-1 that frees a few KiB is not a choice
  // worth listing), and of equal points the first.
  // In a sweep by time, each point kept is compared with the last kept
  // one, so that every point left out has a kept point no slower and at
  // most 1% smaller.
  constexpr double kMemoryEpsilon = 0.01;
  llvm::stable_sort(points, [](const st::CompiledPoint &a, const st::CompiledPoint &b) {
    return a.seconds != b.seconds ? a.seconds < b.seconds : a.bytes < b.bytes;
  });
  const st::CompiledPoint *kept = nullptr;
  for (st::CompiledPoint &p : points) {
    p.onFrontier = !kept || (double)p.bytes * (1 + kMemoryEpsilon) < (double)kept->bytes;
    if (p.onFrontier)
      kept = &p;
  }
  llvm::stable_sort(points, [](const st::CompiledPoint &a, const st::CompiledPoint &b) {
    return a.onFrontier > b.onFrontier;
  });
  size_t onFrontier = llvm::count_if(points, [](const st::CompiledPoint &p) { return p.onFrontier; });
  if (onFrontier == 0) {
    fail(inputFilename + ": the strategy search: no strategy compiles:" + why);
    return std::nullopt;
  }

  // The point asked for: by index, the fastest under the limit, or an end.
  std::optional<size_t> chosen;
  if (planPoint.getNumOccurrences()) {
    if (planPoint < 0 || (size_t)planPoint >= onFrontier) {
      fail("--plan-point " + llvm::Twine(planPoint) + ": the frontier has " +
           llvm::Twine(onFrontier) + (onFrontier == 1 ? " point (0)" : " points (0 to ") +
           (onFrontier == 1 ? "" : llvm::Twine(onFrontier - 1) + ")"));
      return std::nullopt;
    }
    chosen = planPoint;
  } else if (objective == Objective::Memory) {
    chosen = onFrontier - 1;
  } else {
    for (size_t i = 0; i < onFrontier && !chosen; ++i)
      if (!limit || points[i].bytes <= *limit)
        chosen = i;
  }
  if (chosen && limit && points[*chosen].bytes > *limit) {
    const st::CompiledPoint &p = points[*chosen];
    fail(inputFilename + ": point " + llvm::Twine(*chosen) + " (" + p.point.strategy.summary() +
         ") needs " + parallax::rt::bytesText(p.bytes) + " per rank, " +
         parallax::rt::bytesText(p.bytes - *limit) + " more than --memory-limit " +
         parallax::rt::bytesText(*limit));
    return std::nullopt;
  }
  if (!chosen) {
    const st::CompiledPoint &smallest = points[onFrontier - 1];
    fail(inputFilename + ": no strategy on " + llvm::Twine(worldSize()) +
         " ranks fits --memory-limit " + parallax::rt::bytesText(*limit) +
         " per rank: the smallest (" + smallest.point.strategy.summary() + ") needs " +
         parallax::rt::bytesText(smallest.bytes) + ", " +
         parallax::rt::bytesText(smallest.bytes - *limit) + " more");
    return std::nullopt;
  }
  points[*chosen].chosen = true;

  if (!frontierMeasured.empty() && !readMeasuredPoints(frontierMeasured, points, onFrontier))
    return std::nullopt;
  auto writeTo = [&](StringRef path, auto writer) {
    std::string error;
    auto output = openOutputFile(path, &error);
    if (!output)
      return fail(error), false;
    writer(summary, points, output->os());
    output->keep();
    return true;
  };
  if (!frontierFile.empty() && !writeTo(frontierFile, st::writeFrontierJson))
    return std::nullopt;
  if (!frontierSvg.empty() && !writeTo(frontierSvg, st::writeFrontierSvg))
    return std::nullopt;
  const st::CompiledPoint &c = points[*chosen];
  llvm::errs() << llvm::formatv(
      "parallax-opt: strategy search: {0} frontier point(s) of {1} strategies compiled ({2} "
      "spaces of grid and recomputation level, search {3:F2} s, compiling {4:F2} s); "
      "point {5}: {6}, "
      "predicted {7:F3} ms/step, {8} per rank\n",
      onFrontier, points.size(), summary.spaces, summary.searchSeconds, summary.compileSeconds,
      *chosen, c.point.strategy.summary(), c.seconds * 1e3, parallax::rt::bytesText(c.bytes));
  if (failed)
    llvm::errs() << "parallax-opt: strategy search: " << failed
                 << " candidate(s) did not compile:" << why << "\n";
  if (report)
    printFrontier(points, onFrontier);
  if (emit != EmitKind::Plan) {
    searchOnly = true;
    return std::nullopt;
  }
  // Compiled again with the diagnostics shown (its warnings included).
  applyStrategy(c.point.strategy);
  return build(context, sourceMgr, inputFilename, [](const llvm::Twine &m) { fail(m); });
}

/// Imports or parses, runs the pass pipeline, writes IR and the report.
static int compile(DialectRegistry &registry, StringRef inputFilename,
                   StringRef outputFilename) {
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  // Before any compile (the strategy search's are many).
  if (emit == EmitKind::Plan && outputFilename == "-")
    return fail("--emit=plan writes a binary file: give it with -o FILE");
  if (recomputeFraction.getNumOccurrences() &&
      !(recomputeFraction > 0.0 && recomputeFraction <= 1.0))
    return fail("--recompute-fraction " + llvm::formatv("{0}", recomputeFraction.getValue()).str() +
                ": expected a share in (0, 1]");
  if (recomputeFraction.getNumOccurrences() && !recompute && !searchesStrategies())
    return fail("--recompute-fraction says how much --recompute recomputes: add --recompute");
  if (shardWeightUpdateFraction.getNumOccurrences() &&
      !(shardWeightUpdateFraction > 0.0 && shardWeightUpdateFraction <= 1.0))
    return fail("--shard-weight-update-fraction " +
                llvm::formatv("{0}", shardWeightUpdateFraction.getValue()).str() +
                ": expected a share in (0, 1]");
  if (shardWeightUpdateVariables.getNumOccurrences() &&
      (shardWeightUpdate.getNumOccurrences() || shardWeightUpdateFraction.getNumOccurrences()))
    return fail("--shard-weight-update-variables names the variables whose updates are "
                "sharded: drop --shard-weight-update and --shard-weight-update-fraction");
  if (layerSplit.getNumOccurrences() && !searchesStrategies()) {
    llvm::Expected<int64_t> pr = modelRanks();
    bool split = pr && *pr > 1 && gridSpec != "auto";
    if (!pr)
      llvm::consumeError(pr.takeError()); // the build reports it
    else if (!split)
      return fail("--layer-split fixes how --grid's model axis splits a layer: give "
                  "--grid=PrxPc with Pr > 1");
  }
  if (sequenceParallel && !searchesStrategies() && gridSpec != "auto") {
    llvm::Expected<int64_t> pr = modelRanks();
    if (!pr)
      llvm::consumeError(pr.takeError()); // the build reports it
    else if (*pr <= 1)
      return fail("--sequence-parallel splits rows over --grid's model axis: give "
                  "--grid=PrxPc with Pr > 1 (or --grid=auto)");
  }
  bool searchOnly = false;
  std::optional<Built> built =
      searchesStrategies()
          ? buildOnChosenStrategy(context, sourceMgr, inputFilename, searchOnly)
      : gridSpec == "auto" && !gridCosts
          ? buildOnCheapestGrid(context, sourceMgr, inputFilename)
          : build(context, sourceMgr, inputFilename, [](const llvm::Twine &m) { fail(m); });
  if (searchOnly)
    return 0;
  if (!built)
    return 1;
  if (gridCosts) {
    if (!isOnnx(inputFilename))
      return fail("--grid-costs reads an ONNX model");
    return printGridCosts(*built->module, inputFilename);
  }
  OwningOpRef<ModuleOp> module = std::move(built->module);
  std::optional<parallax::BatchDecision> batch = std::move(built->batch);
  bool training =
      !inference && (train || emit == EmitKind::Plan || distributed());

  std::optional<parallax::rt::Plan> plan;
  if (emit == EmitKind::Plan) {
    parallax::PlanEmitOptions planOptions;
    planOptions.worldSize = 1; // px-cluster's px.world_size overrides it
    if (target != "cpu" && target != "cuda") {
      llvm::errs() << "error: --target=" << target
                   << ": unknown target (expected cpu or cuda)\n";
      return 1;
    }
    planOptions.target = target;
    planOptions.allowNegativeIds = allowNegativeIds;
    auto &d = planOptions.description;
    d["source"] = inputFilename.str();
    if (training) {
      d["optimizer"] = optimizerKind;
      d["lr"] = learningRate();
      if (optimizerKind == "momentum") {
        d["momentum"] = (double)momentum;
        d["nesterov"] = (bool)nesterov;
      }
      if (optimizerKind == "adam") {
        d["beta1"] = (double)beta1;
        d["beta2"] = (double)beta2;
      }
      if (epsilon >= 0)
        d["epsilon"] = (double)epsilon;
      d["weight_decay"] = (double)weightDecay;
      if (allowNegativeIds)
        d["allow_negative_ids"] = true;
      if (recompute) {
        d["recompute"] = true;
        if (recomputeFraction < 1.0)
          d["recompute_fraction"] = recomputeFraction.getValue();
      }
      if (!recomputeLayers.empty()) {
        auto &layers = d["recompute_layers"] = nlohmann::json::array();
        for (const std::string &layer : recomputeLayers)
          layers.push_back(layer);
      }
      if (distributed()) {
        d["sync"] = syncScheme;
        if (!syncVariables.empty()) {
          auto &fixed = d["sync_variables"] = nlohmann::json::object();
          for (const std::string &entry : syncVariables) {
            auto [name, scheme] = StringRef(entry).split('=');
            fixed[name.str()] = scheme.str();
          }
        }
        // What --report predicts, for parallax-run's metrics to be held to.
        parallax::StepPrediction predicted = predict(*module);
        d["predicted"] = {{"bytes_per_step", predicted.bytes()},
                          {"comm_seconds", predicted.commSeconds()},
                          {"compute_seconds", predicted.computeSeconds()},
                          {"step_seconds", predicted.seconds()}};
        // A parameter server's bytes are estimated (its rows per step are
        // bounded, not known, and its servers send more than its clients):
        // named, with their estimate, so that the rest can be held exact.
        nlohmann::json estimated = nlohmann::json::object();
        module->walk([&](px::VariableOp var) {
          auto e = px::getAttr<px::PxDialect::BytesExactAttrHelper>(var);
          auto b = px::getAttr<px::PxDialect::BytesPerStepAttrHelper>(var);
          if (e && !e.getValue() && b)
            estimated[var.getName().str()] = b.getInt();
        });
        if (!estimated.empty())
          d["predicted"]["estimated_bytes"] = std::move(estimated);
        if (predicted.ranksDiffer()) {
          // Halo exchanges: the edge blocks' ranks have one neighbour.
          auto &byRank = d["predicted"]["bytes_by_rank"] = nlohmann::json::array();
          for (int r = 0, n = (int)worldSize(); r < n; ++r) {
            auto [sent, received] = predicted.bytesOfRank(r);
            byRank.push_back({{"sent", sent}, {"received", received}});
          }
        }
        if (convSplit != "channels")
          d["conv_split"] = convSplit.getValue();
        if (sequenceParallel && modelRanks() && *modelRanks() > 1)
          d["sequence_parallel"] = true;
        if (!layerSplit.empty()) {
          auto &splits = d["layer_splits"] = nlohmann::json::array();
          for (const std::string &split : layerSplit)
            splits.push_back(split);
        }
        if (auto pr = modelRanks(); pr && *pr > 1)
          d["grid"] = std::to_string(*pr) + "x" + std::to_string(worldSize() / *pr);
        else if (!pr)
          llvm::consumeError(pr.takeError());
        d["local_batchnorm"] = (bool)localBatchnorm;
        d["shard_weight_update"] = shardWeightUpdate == ShardMode::Off  ? "off"
                                   : shardWeightUpdate == ShardMode::On ? "on"
                                                                        : "auto";
        if (shardWeightUpdate != ShardMode::Off && shardWeightUpdateFraction < 1.0)
          d["shard_weight_update_fraction"] = shardWeightUpdateFraction.getValue();
        if (!shardWeightUpdateVariables.empty()) {
          d["shard_weight_update"] = "variables";
          auto &vars = d["shard_weight_update_variables"] = nlohmann::json::array();
          for (const std::string &v : shardWeightUpdateVariables)
            vars.push_back(v);
        }
      }
    }
    auto emitted = parallax::emitPlan(*module, planOptions);
    if (!emitted)
      return fail(llvm::toString(emitted.takeError()));
    plan = std::move(*emitted);
    warnIfTooLargeHere(*plan, inputFilename);
  }

  // With --report alone the table is the output; ask for IR with --emit.
  bool writeIr = emit == EmitKind::Mlir &&
                 (!report || emit.getNumOccurrences() > 0 ||
                  outputFilename != "-");
  if (plan) {
    std::string error;
    auto output = openOutputFile(outputFilename, &error);
    if (!output)
      return fail(error);
    output->os() << parallax::rt::serializePlan(*plan);
    output->keep();
  } else if (writeIr) {
    std::string error;
    auto output = openOutputFile(outputFilename, &error);
    if (!output)
      return fail(error);
    module->print(output->os());
    output->os() << "\n";
    output->keep();
  }
  if (report) {
    if (batch)
      llvm::outs() << parallax::describeBatch(*batch);
    parallax::printVariableReport(parallax::analyzeVariables(*module),
                                  llvm::outs());
    if (auto bn = px::getAttr<px::PxDialect::BatchnormBytesPerStepAttrHelper>(*module))
      llvm::outs() << "synchronized batch norm statistics: " << bn.getInt()
                   << " B per rank and step, each way\n";
    if ((!gridSpec.empty() || searchesStrategies()) && training) {
      llvm::outs() << "\n";
      if (gridSpec == "auto")
        llvm::outs() << "--grid=auto chose " << *chosenModelRanks << "x"
                     << worldSize() / *chosenModelRanks
                     << convSplitLabel(convSplit, *chosenModelRanks) << "\n";
      parallax::printStepPrediction(predict(*module), llvm::outs());
    }
    if (plan) {
      llvm::outs() << "\n";
      parallax::printMemoryReport(*plan, llvm::outs());
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  DialectRegistry registry;
  registry.insert<parallax::px::PxDialect, func::FuncDialect,
                  shard::ShardDialect>();
  parallax::px::registerShardingInterfaceModels(registry);
  registerTransformsPasses();
  parallax::registerParallaxPasses();
  // Upstream's SPMD passes, which the px ops' ShardingInterface models serve.
  shard::registerShardingPropagation();
  shard::registerPartition();

  auto [inputFilename, outputFilename] = registerAndParseCLIOptions(
      argc, argv, "Parallax compiler driver: ONNX or px IR in, px IR out",
      registry);

  if (isOnnx(inputFilename) || report || emit == EmitKind::Plan || train ||
      distributed())
    return compile(registry, inputFilename, outputFilename);
  return asMainReturnCode(
      MlirOptMain(argc, argv, inputFilename, outputFilename, registry));
}
