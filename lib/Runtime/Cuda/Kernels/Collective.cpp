//===- Collective.cpp - synchronization kernels on a GPU ------------------===//
//
// Collectives between ranks whose tensors live on GPUs. Where every rank of
// the group has a GPU of its own, NCCL runs them on the device's
// communication stream (NcclCollectives.cpp); otherwise (ranks sharing one
// GPU, which NCCL refuses) they fall back to the CPU kernels over MPI
// through host staging (HostStaged.h), and the step cannot be captured in a
// CUDA graph.
//
//===----------------------------------------------------------------------===//

#include "../CudaDevice.h"

#include "../../HostStaged.h"
#include "parallax/Runtime/Comm.h"

namespace parallax::rt {

namespace {

/// The CPU kernel of `op`, over host copies.
KernelFactory staged(const std::string &op) {
  KernelFactory cpu = *KernelRegistry::global().find(op);
  KernelFactory host = hostStaged(cpu);
  return [op, host](KernelArgs &args) {
    cudaDeviceOf(args).markHostSynchronizing(op + " through MPI with host staging");
    return host(args);
  };
}

/// Joins a collective started with a token: the CPU's wait, then what the
/// device does once it completed (host-staged outputs go back).
KernelFn waitKernel(KernelArgs &args) {
  KernelFn cpuWait = (*KernelRegistry::global().find("wait"))(args);
  ExecEnv *env = &args.env;
  int64_t token = args.i64("token");
  return [cpuWait, env, token] {
    cpuWait();
    if (token < (int64_t)env->afterWait.size() && env->afterWait[token])
      env->afterWait[token]();
  };
}

} // namespace

void registerCudaCollectiveKernels(KernelRegistry &r) {
  for (const char *op : {"all_reduce", "all_gather", "all_gather_variables",
                         "reduce_scatter", "all_to_all", "all_gatherv", "ps_pull",
                         "ps_push"})
    r.add(op, staged(op));
  r.add("wait", waitKernel);
}

} // namespace parallax::rt
