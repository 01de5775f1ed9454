//===- Launch.h - parallax-run's launcher ---------------------*- C++ -*-===//

#ifndef PARALLAX_TOOLS_PARALLAX_RUN_LAUNCH_H
#define PARALLAX_TOOLS_PARALLAX_RUN_LAUNCH_H

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

} // namespace parallax::run

#endif // PARALLAX_TOOLS_PARALLAX_RUN_LAUNCH_H
