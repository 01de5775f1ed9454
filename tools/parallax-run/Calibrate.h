//===- Calibrate.h - parallax-run --calibrate -------------------*- C++ -*-===//

#ifndef PARALLAX_TOOLS_PARALLAX_RUN_CALIBRATE_H
#define PARALLAX_TOOLS_PARALLAX_RUN_CALIBRATE_H

#include "parallax/Runtime/Comm.h"

#include <string>

namespace parallax::run {

/// Measures, on this job's ranks at once, the links (latency, bandwidth;
/// inside and between machines), the sparse-update rate, the generic
/// compute rates, a kernel call's cost and the rated kernels' rates
/// (KernelRates.h), and writes the profile that parallax-opt --profile
/// reads (rank 0 writes it). Returns an exit status.
int calibrate(rt::Comm &comm, const std::string &outPath, int threads);

} // namespace parallax::run

#endif // PARALLAX_TOOLS_PARALLAX_RUN_CALIBRATE_H
