//===- Calibrate.h - parallax-run --calibrate -------------------*- C++ -*-===//

#ifndef PARALLAX_TOOLS_PARALLAX_RUN_CALIBRATE_H
#define PARALLAX_TOOLS_PARALLAX_RUN_CALIBRATE_H

#include "parallax/Runtime/Comm.h"

#include <string>

namespace parallax::run {

/// Measures the links (latency, bandwidth; inside and between machines) and
/// the sparse-update rate on this job's ranks and writes the profile that
/// parallax-opt --profile reads (rank 0 writes it). Returns an exit status.
int calibrate(rt::Comm &comm, const std::string &outPath, int threads);

} // namespace parallax::run

#endif // PARALLAX_TOOLS_PARALLAX_RUN_CALIBRATE_H
