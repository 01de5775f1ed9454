//===- IndexProfiler.h - which rows real data touches ----------*- C++ -*-===//
//
// Runs the index computations of a step (everything the gather indices of
// the listed variables depend on) on real batches with the runtime, and
// reports the distinct rows each rank touches per step. The synchronization
// passes use it to measure alpha and to predict parameter-server traffic
// exactly for a given dataset.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_TARGET_INDEXPROFILER_H
#define PARALLAX_TARGET_INDEXPROFILER_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <map>
#include <string>
#include <vector>

namespace parallax {

struct RowProfile {
  int64_t steps = 0, ranks = 1;
  /// Per variable: rows[step * ranks + rank] = the sorted distinct rows that
  /// rank reads in that step.
  std::map<std::string, std::vector<std::vector<int64_t>>> rows;
  /// The same per read of the variable (each gather or pull), in IR order:
  /// reads[name][read][step * ranks + rank].
  std::map<std::string, std::vector<std::vector<std::vector<int64_t>>>> reads;
};

/// Profiles the variables in `names` (read only through px.gather on axis
/// 0) on `steps` global batches of the .npy files in `dataDir`, split over
/// `ranks` ranks as parallax-run splits them. The module's inputs have the
/// per-rank batch.
llvm::Expected<RowProfile> profileRows(mlir::ModuleOp module,
                                       const std::vector<std::string> &names,
                                       const std::string &dataDir,
                                       int64_t steps, int64_t ranks);

} // namespace parallax

#endif // PARALLAX_TARGET_INDEXPROFILER_H
