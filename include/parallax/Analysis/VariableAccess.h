//===- VariableAccess.h - how each variable is read ------------*- C++ -*-===//
//
// The classification Parallax's synchronization rests on (Parallax,
// EuroSys'19, section 3): a variable read only through px.gather on axis 0
// has a row-sparse gradient; any other read makes it dense. `--report`
// prints this table, and the sparsity pass builds on it.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_ANALYSIS_VARIABLEACCESS_H
#define PARALLAX_ANALYSIS_VARIABLEACCESS_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace parallax {

enum class VariableAccess {
  /// Read only through px.gather on axis 0: row-sparse gradient.
  RowGather,
  /// Read by anything else: dense gradient.
  Dense,
  /// Never read (only possible for unused state).
  Unused,
};

struct VariableInfo {
  std::string name;
  std::vector<int64_t> shape;
  std::string elementType; // "f32", ...
  int64_t bytes = 0;
  bool trainable = false;
  VariableAccess access = VariableAccess::Unused;
  /// For RowGather: the number of row indices one step reads (all gathers
  /// together): an upper bound on the rows it touches.
  int64_t rowsReadPerStep = 0;
  /// After px-sync: the scheme ("allreduce", "ps", "allgatherv"), the
  /// parameter-server partitions and the rank serving each, and the
  /// predicted bytes one rank sends (and receives) per step for it; exact
  /// for all-reduce and all-gatherv, an estimate for the parameter server.
  std::string sync;
  std::vector<int64_t> placement;
  /// The placement's ranks are a batch group's (on a grid that splits the
  /// model, each model rank's group serves its replica).
  bool placementInBatchGroup = false;
  int64_t bytesPerStep = -1;
  bool bytesExact = false;
  /// The prediction replays --profile-data (exact for that data).
  bool bytesProfiled = false;
  /// Rows one rank's step touches (px-sparsity; measured with
  /// --profile-data), or -1.
  int64_t rowsTouched = -1;
  bool alphaMeasured = false;
  /// Why a row-gathered table stays whole on a model-split grid
  /// (px-shard-model), or empty.
  std::string wholeOnGrid;
  /// The initializer's own shape where the variable pads it
  /// (px-pad-vocabulary), or empty.
  std::vector<int64_t> paddedFrom;
};

/// The variables of `module`'s entry function, in IR order.
std::vector<VariableInfo> analyzeVariables(mlir::ModuleOp module);

/// Prints the `--report` table: one line per variable, then totals.
void printVariableReport(llvm::ArrayRef<VariableInfo> variables,
                         llvm::raw_ostream &os);

} // namespace parallax

#endif // PARALLAX_ANALYSIS_VARIABLEACCESS_H
