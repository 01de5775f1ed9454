//===- Checkpointing.h - parallax-run's --checkpoint and --resume -*- C++ -*-===//
//
// The driver's side of checkpoints (lib/Runtime/Checkpoint.h has the
// format): when to write one, where a resumed run starts, and the metrics
// file of a resumed run, which keeps the lines of the steps before the
// checkpoint and continues after them.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_TOOLS_PARALLAX_RUN_CHECKPOINTING_H
#define PARALLAX_TOOLS_PARALLAX_RUN_CHECKPOINTING_H

#include "parallax/Runtime/Session.h"

#include <cstdint>
#include <optional>
#include <string>

namespace parallax::run {

struct CheckpointOptions {
  std::string dir;       ///< --checkpoint (empty: none)
  int64_t every = 0;     ///< --checkpoint-every (0: only at the end)
  std::string resumeDir; ///< --resume (empty: a fresh run)
};

class Checkpointing {
public:
  /// Checks the options and the directories before any work is done.
  /// Throws RuntimeError.
  Checkpointing(CheckpointOptions options, int rank);

  /// With --resume: agrees with the other ranks on the step to continue
  /// from, verifies and restores this rank's checkpoint of it into
  /// `session`. `seed` is --seed when the command line gave one: it must be
  /// the checkpoint's. Returns the step the run continues after (0 for a
  /// fresh run).
  int64_t resume(rt::Session &session, rt::Comm &comm,
                 std::optional<uint64_t> seed);

  /// After a step: writes a checkpoint when one is due (every K steps, and
  /// after `lastStep`). Returns the seconds it took, 0 when none was due.
  double afterStep(const rt::Session &session, int64_t lastStep);

private:
  CheckpointOptions options;
  int rank;
  int64_t lastWritten = -1;
};

/// A resumed run's --metrics file: drops the lines of steps after `step`
/// (written after the checkpoint by the run that stopped) and keeps the
/// rest, to be appended to.
void keepMetricsUpTo(const std::string &path, int64_t step);

} // namespace parallax::run

#endif // PARALLAX_TOOLS_PARALLAX_RUN_CHECKPOINTING_H
