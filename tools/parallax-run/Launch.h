//===- Launch.h - parallax-run's launcher and calibration -------*- C++ -*-===//

#ifndef PARALLAX_TOOLS_PARALLAX_RUN_LAUNCH_H
#define PARALLAX_TOOLS_PARALLAX_RUN_LAUNCH_H

#include "parallax/Runtime/Comm.h"

#include <string>
#include <vector>

namespace parallax::run {

/// Re-runs this command under `mpirun -np N` (horovodrun's way): every rank
/// runs `argv` without the launcher's own flags. Returns mpirun's exit
/// status, with a line naming the rank when one failed. SIGINT, SIGTERM and
/// SIGHUP are forwarded to mpirun (which ends the ranks), and then end the
/// launcher as they would have; mpirun gets SIGTERM when the launcher dies,
/// however it dies.
int launchRanks(int np, const std::string &hostfile,
                const std::vector<std::string> &argv);

/// In a rank: die (SIGKILL) when the process that started it does, so that
/// no rank trains on, orphaned, after mpirun or its daemon is killed.
void dieWithParent();

/// Measures the links (latency, bandwidth; inside and between machines) and
/// the sparse-update rate on this job's ranks and writes the profile that
/// parallax-opt --profile reads (rank 0 writes it). Returns an exit status.
int calibrate(rt::Comm &comm, const std::string &outPath, int threads);

} // namespace parallax::run

#endif // PARALLAX_TOOLS_PARALLAX_RUN_LAUNCH_H
