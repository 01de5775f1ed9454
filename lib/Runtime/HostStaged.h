//===- HostStaged.h - a CPU kernel run over host copies of device tensors -*- C++ -*-===//
//
// How a device runs a kernel that must run on the host: a collective through
// MPI (which cannot read GPU memory here) or, while a device lacks a kernel
// of its own, any op the CPU has. Each call synchronizes the device,
// downloads the kernel's tensors into host copies, runs the CPU closure over
// them and uploads the results. Tensors that overlap (an in-place output, a
// view into a bucket) share one host copy, so aliasing behaves as on the CPU.
// A kernel with a "token" only starts its collective: its outputs are
// uploaded when the token's wait kernel waits (ExecEnv::pending).
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_HOSTSTAGED_H
#define PARALLAX_RUNTIME_HOSTSTAGED_H

#include "parallax/Runtime/Kernel.h"

namespace parallax::rt {

/// `cpuFactory` bound over host copies of the tensors of a kernel whose
/// tensors live on args.env.device.
KernelFactory hostStaged(KernelFactory cpuFactory);

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_HOSTSTAGED_H
