//===- FrontierOutput.h - a strategy frontier as JSON and as a figure -*- C++ -*-===//
//
// parallax-opt's --frontier FILE.json and --frontier-svg FILE.svg: every
// point of the (step time, memory per rank) frontier with the strategy of
// each operator, the chosen point marked and the pure data- and
// model-parallel strategies labelled (drawn even where the frontier
// dominates them).
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_ANALYSIS_FRONTIEROUTPUT_H
#define PARALLAX_ANALYSIS_FRONTIEROUTPUT_H

#include "parallax/Analysis/StrategySpace.h"

#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace parallax::strategy {

/// A strategy as compiled: the search's closed-form cost and what the
/// compiled step predicts (StepPrediction's step time, the plan's peak).
struct CompiledPoint {
  Point point;
  double seconds = 0;
  int64_t bytes = 0;
  /// "pure data parallelism", "pure model parallelism", or empty.
  std::string label;
  bool onFrontier = true, chosen = false;
  /// Whether `point.predicted` is the search's closed form (a point the
  /// search found, not a reference the driver added).
  bool closedForm = false;
  /// Measured by parallax-run (the validation figure), where known.
  std::optional<double> measuredSeconds;
  std::optional<int64_t> measuredBytes;
};

/// What the search did, for the file's header.
struct FrontierSummary {
  std::string model;
  int64_t ranks = 0;
  std::optional<int64_t> memoryLimit;
  std::string objective;
  double searchSeconds = 0, compileSeconds = 0;
  int spaces = 0;
  size_t closedFormPoints = 0;
};

void writeFrontierJson(const FrontierSummary &summary, const std::vector<CompiledPoint> &points,
                       llvm::raw_ostream &os);
void writeFrontierSvg(const FrontierSummary &summary, const std::vector<CompiledPoint> &points,
                      llvm::raw_ostream &os);

} // namespace parallax::strategy

#endif // PARALLAX_ANALYSIS_FRONTIEROUTPUT_H
