//===- StepPrediction.h - what a partitioned step costs, layer by layer -*- C++ -*-===//
//
// The grid's closed forms (GridCost.h) rank grids before anything is
// split. Once px-shard-model and px-sync have run, the step itself says
// what each rank does: the block of every variable, each collective with
// its group and tensor, each product with its local shapes. This analysis
// reads them back, attributes every collective and product to the layer
// whose weight it serves (by the ONNX node its location names: autodiff and
// partition give the backward ops and the collectives the forward op's
// location), and predicts per rank and step the bytes each collective sends
// (the runtime's own count: a ring all-reduce sends 2 (g-1)/g of its
// tensor, an all-gather (g-1) inputs), their alpha-beta time, the products'
// time at the machine's rate, and the memory of each weight. `--report`
// prints it, and `--grid=auto` picks the grid whose predicted step is the
// shortest.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_ANALYSIS_STEPPREDICTION_H
#define PARALLAX_ANALYSIS_STEPPREDICTION_H

#include "parallax/Analysis/GridCost.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <string>
#include <vector>

namespace parallax {

/// One collective of the step (a variable's gradient synchronization is
/// counted with the variable instead).
struct PredictedCollective {
  std::string kind; ///< "all_reduce", "all_gather", ...
  bool backward = false;
  int64_t groupSize = 1;
  std::vector<int64_t> shape; ///< of its input on one rank
  int64_t bytes = 0;          ///< sent by each rank, as many received
  double seconds = 0;
  /// Where members differ (a halo exchange: the edge blocks have one
  /// neighbour), bytes sent and received by each member of the group over
  /// `axes`; `bytes` is then the most any member sends.
  std::vector<std::pair<int64_t, int64_t>> byMember;
  std::vector<int64_t> axes;
};

/// A trainable variable and what the step spends on its layer.
struct PredictedLayer {
  std::string name;
  /// "whole", or what the model axis splits ("output features", "input
  /// features", "rows", "dimension 2").
  std::string split = "whole";
  std::vector<int64_t> whole, block;
  std::vector<PredictedCollective> collectives;
  /// The batch-axis synchronization of its gradient (px-sync's count).
  int64_t syncBytes = 0;
  double syncSeconds = 0;
  /// Its block, its gradient and its optimizer state, on one rank.
  int64_t memoryBytes = 0;
  double flops = 0, computeSeconds = 0;

  int64_t collectiveBytes() const;
  double collectiveSeconds() const;
};

struct StepPrediction {
  grid::Grid grid;
  std::vector<PredictedLayer> layers;
  /// Collectives and products of no variable (attention scores, the
  /// loss's all-reduce), and the synchronized batch norms' traffic.
  PredictedLayer other;

  /// The grid's shape (the world's ranks).
  std::vector<int64_t> gridShape{1};

  /// The kernels' predicted time by op name (what parallax-run --profile
  /// measures as "kernel time by op"): compute, and a layer collective's
  /// staging copies and transfer.
  struct KernelTime {
    int64_t calls = 0;
    double seconds = 0;
  };
  std::map<std::string, KernelTime> byKernel;

  int64_t bytes() const;
  /// Bytes world rank `rank` sends and receives per step: bytes() unless
  /// some collective's members differ.
  std::pair<int64_t, int64_t> bytesOfRank(int rank) const;
  bool ranksDiffer() const;
  double commSeconds() const;
  double computeSeconds() const;
  double seconds() const { return commSeconds() + computeSeconds(); }
};

/// The prediction for `module`'s step, after the training pipeline, with
/// the links and rate of `machine`.
StepPrediction predictStep(mlir::ModuleOp module, const grid::Machine &machine);

/// `--report` on a grid: one line per layer and the totals.
void printStepPrediction(const StepPrediction &p, llvm::raw_ostream &os);

} // namespace parallax

#endif // PARALLAX_ANALYSIS_STEPPREDICTION_H
