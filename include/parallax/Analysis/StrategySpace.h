//===- StrategySpace.h - a model's parallelization strategies as an FT graph -*- C++ -*-===//
//
// TensorOpt's strategy space on Parallax's Pr x Pc grids: for each grid,
// every layer with a trainable weight (and every embedding table) chooses
// how the model axis splits it (whole, output features, input features, a
// convolution's rows or a table's vocabulary), and the whole model chooses
// whether its dense updates and optimizer state are sharded over the batch
// axis (ZeRO-1) and whether cheap activations are recomputed in the
// backward pass. Each choice costs per rank and step the SPAA'18 closed
// forms (GridCost.h): compute at the calibrated rates, the collectives the
// split needs inside the layer, the gradient's synchronization, and the
// memory of the weight, its gradient, its optimizer state and its kept
// activation, which each layer may recompute instead (a variant of its
// split that trades its forward time for that memory), and each table's
// synchronization over the batch axis (all-gatherv, parameter server or
// densified all-reduce: variants of its split where px-sync offers them);
// each edge between a producer and a consumer costs the
// resharding of the activation between them. searchStrategies runs the FT
// search (Frontier.h) on every grid and keeps the frontier of them all.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_ANALYSIS_STRATEGYSPACE_H
#define PARALLAX_ANALYSIS_STRATEGYSPACE_H

#include "parallax/Analysis/Frontier.h"
#include "parallax/Analysis/GridCost.h"
#include "parallax/Dialect/Px/PxShardingInterface.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

namespace parallax::strategy {

/// How the model axis splits an operator (px-shard-model's layer-splits).
enum class Split { Whole, Out, In, Rows };
/// Its word in layer-splits, px.layer_split and --frontier ("whole", "out",
/// "in", "rows"), and back.
const char *nameOf(Split s);
std::optional<Split> splitNamed(llvm::StringRef name);

/// An operator that chooses a split: a layer with a trainable weight, or an
/// embedding table read only through row gathers.
struct Operator {
  grid::Layer layer;
  bool table = false;
  /// A table's rows and width, and the ids looked up per step (all ranks).
  int64_t tableRows = 0, tableWidth = 0, lookups = 0;
  /// Whether px-shard-model can split it at all (splittableWeightOf; a
  /// table always).
  bool splittable = true;
  /// A vocabulary (Vocabulary.h): a table's rows or an output layer's
  /// classes split on any grid, padded where the model ranks do not divide
  /// them (px-pad-vocabulary).
  bool vocabulary = false;
  /// A convolution's halo rows (domain split), none where its rows cannot
  /// be split (a stride that skips rows).
  std::optional<px::Halo> halo;
  /// The operators whose output reaches this one's input through ops that
  /// follow a split (element-wise ops, batch norm, pooling: px's sharding
  /// models), so that their splits meet.
  std::vector<int> producers;
  /// For each producer, what its split of features passes through on the
  /// way (carriedFeatures: model ranks that do not divide it leave it
  /// gathered), 0 where unknown (a residual join's other operand).
  std::vector<int64_t> producerFeatures;
  /// Whether its input comes through an op that runs whole (a reshape, a
  /// softmax, a layer norm, dropout: gathered there) or is data, and
  /// whether its output reaches such an op.
  bool inputWhole = false, outputWhole = false;
  /// The groups of the grouped convolutions its output passes through
  /// (their greatest common divisor; 0: none): model ranks that do not
  /// divide them compute such a convolution whole, its input gathered.
  int64_t outputGroups = 0;
  /// Whether its output is gathered on `g` (outputWhole, or a grouped
  /// convolution the model ranks would cut).
  bool outputGatheredOn(const grid::Grid &g) const {
    return outputWhole || (outputGroups > 0 && outputGroups % g.pr != 0);
  }
};

/// The operators of `module`'s forward step (imported, batch not yet
/// split: every count is the global batch's).
std::vector<Operator> operatorsOf(mlir::ModuleOp module);

/// The splits `op` can take on `g` (Whole only without a model axis).
std::vector<Split> splitsOf(const Operator &op, const grid::Grid &g);

/// px-sync's schemes for a table's row-sparse gradient, as a table's
/// variants number them (variant 0, its split's own cost: all-gatherv).
inline constexpr const char *kTableSchemes[] = {"allgatherv", "ps", "allreduce"};
/// Whether a table split `s` on `g` chooses its scheme: px-sync offers the
/// three for a whole table where the batch axis has two ranks or more (on
/// a model-split grid each model rank's batch group serves its replica);
/// a table split by vocabulary all-gathers its block's rows or has them
/// served by its batch group (never densified: see tableSchemeOn), and on
/// P x 1 nothing is synchronized.
bool tableSchemesOn(const grid::Grid &g, Split s);
/// Whether scheme kTableSchemes[k] is among those of a table split `s` on
/// `g` (tableSchemesOn).
bool tableSchemeOn(const grid::Grid &g, Split s, int k);

/// One point's strategy: the grid, each named operator's split, how much of
/// the update is sharded (ZeRO-1) and how much is recomputed.
struct Strategy {
  grid::Grid grid;
  /// The share of the all-reduce buckets' bytes whose updates and
  /// optimizer state are sharded over the batch axis (ZeRO-1; the largest
  /// buckets first): 0 none, 1 every bucket px-shard-weight-update can.
  double shardUpdates = 0;
  /// The share of the cheap activations the backward pass reads that it
  /// recomputes instead of keeping (px-recompute's fraction, from the first
  /// in forward order): 0 keeps them all, 1 recomputes all it can.
  double recompute = 0;
  std::vector<std::pair<std::string, Split>> splits;
  /// The layers whose outputs are recomputed from their inputs
  /// (checkpointed; px-recompute's `layers`), by weight name.
  std::vector<std::string> recomputed;
  /// The layers whose weight's update and optimizer state are sharded over
  /// the batch axis (ZeRO-1 per variable:
  /// --shard-weight-update-variables), by weight name.
  std::vector<std::string> shardedUpdates;
  /// Each table's synchronization (kTableSchemes), by variable name, where
  /// the grid offers a choice (px-sync's `variables`).
  std::vector<std::pair<std::string, std::string>> tableSchemes;
  /// Compiled by px-shard-model's pairing rule (no layer-splits), `splits`
  /// read back from what it chose.
  bool byPairingRule = false;
  /// The layer norms' rows (and the element-wise ops around them) split
  /// over the model axis (--sequence-parallel): a twin the driver compiles
  /// of each point whose grid splits the model, for the memory it saves
  /// (the closed forms do not price it).
  bool sequenceParallel = false;
  /// px-shard-model's layer-splits entries, VARIABLE=split (none for the
  /// pairing rule).
  std::vector<std::string> layerSplits() const;
  /// px-sync's `variables` entries, VARIABLE=scheme (parallax-opt
  /// --sync-variable).
  std::vector<std::string> syncVariables() const;
  /// "2x2, ZeRO-1, 3 of 5 layers split" and the like.
  std::string summary() const;
  /// Pure data parallelism (1 x P) or pure model parallelism (P x 1 with
  /// every operator split).
  bool pureData() const;
  bool pureModel() const;
};

/// The choices a grid's strategies make for the whole model: whether the
/// cheap activations are recomputed (kRecomputeLevels: none or all; the
/// layers' own recomputation, a variant of each one's split, gives the
/// levels between, and px-recompute's fraction stays a hand option).
/// ZeRO-1 is each layer's choice (a variant, where shardsUpdatesOn); a
/// space's `shardUpdates` (ZeRO-1 on that share of every bucket, the
/// largest first: --shard-weight-update-fraction) prices --grid's
/// references only.
struct SpaceOptions {
  double shardUpdates = 0;
  double recompute = 0;
};
inline constexpr double kRecomputeLevels[] = {0, 1};
std::vector<SpaceOptions> spaceOptionsOf(const grid::Grid &g);
/// Whether a layer may shard its update on `g`: a batch axis of two ranks
/// or more.
bool shardsUpdatesOn(const grid::Grid &g);

/// The FT graph of `ops` on one grid.
struct Space {
  grid::Grid grid;
  double shardUpdates = 0;
  double recompute = 0;
  Graph graph;
  /// Node i is operator i; its configuration c is splits[i][c], and its
  /// variant k > 0 does what variants[i][c][k - 1] says.
  std::vector<std::vector<Split>> splits;
  /// What a variant changes: a layer's output recomputed, its update
  /// sharded, or both; a table's scheme (where tableSchemesOn).
  struct Variant {
    bool recomputes = false;
    bool shardsUpdate = false;
    int tableScheme = 0;
  };
  std::vector<std::vector<std::vector<Variant>>> variants;

  Strategy strategyOf(const Solution &s, const std::vector<Operator> &ops) const;
};
Space spaceOf(const std::vector<Operator> &ops, const grid::Grid &g, double shardUpdates,
              double recompute, const grid::Machine &m);

/// A point of the model's frontier: what the closed forms predict.
struct Point {
  Cost predicted;
  Strategy strategy;
};

struct StrategySearch {
  /// Ascending in time, descending in memory.
  std::vector<Point> frontier;
  /// Each space's own frontier, at most `pointsPerSpace` of its points
  /// spread over it (its fastest and its smallest among them): the closed
  /// forms rank the strategies of one grid better than they compare grids
  /// (they leave out what no split changes), so the driver compiles these
  /// and compares the compiled steps.
  std::vector<Point> candidates;
  /// Grid and ZeRO combinations searched, nodes and edges of each graph.
  int spaces = 0;
  size_t nodes = 0, edges = 0;
  SearchStats stats;
};

/// Every grid of `ranks` ranks whose model groups fit on a machine, with
/// and without ZeRO-1 where the batch axis has two ranks or more, each
/// with and without recomputation.
StrategySearch searchStrategies(const std::vector<Operator> &ops, int64_t ranks,
                                const grid::Machine &m, size_t pointsPerSpace = 6,
                                const SearchOptions &options = {});

} // namespace parallax::strategy

#endif // PARALLAX_ANALYSIS_STRATEGYSPACE_H
