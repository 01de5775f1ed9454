//===- NcclCollectives.h - Collectives over NCCL on a GPU ------*- C++ -*-===//
//
// One NCCL communicator per group, created through an ncclUniqueId that
// the group's first rank makes and hands to the others over the host
// transport (Comm). Operations run on the device's communication stream:
// it waits for an event recorded on the compute stream (everything queued
// so far), NCCL runs, and the Work's wait() makes the compute stream wait
// for the event recorded after it. Nothing blocks the host and no memory is
// allocated per step (events come from a pool), so a CUDA graph captures
// both streams.
//
// NCCL needs a GPU per rank: it refuses two ranks on one device. Whether
// every rank has its own is found once over the world (ncclRefusal).
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_CUDA_NCCLCOLLECTIVES_H
#define PARALLAX_RUNTIME_CUDA_NCCLCOLLECTIVES_H

#include "parallax/Runtime/Collectives.h"

#include <memory>
#include <string>

namespace parallax::rt {

class CudaDevice;

/// Why NCCL cannot carry the collectives of `comm`'s ranks ("ranks 0 and 1
/// share GPU ..."), or "" when it can. Collective over the world.
std::string ncclRefusal(CudaDevice &device, Comm &comm);

/// `group`'s NCCL communicator on `device`. Collective over the group;
/// throws CommError with NCCL's message when it cannot be made.
std::unique_ptr<Collectives> makeNcclCollectives(CudaDevice &device, Comm &comm,
                                                 Group &group);

/// Whether any NCCL communicator reported an asynchronous error (a peer
/// gone): its message, or "". After a timeout, abortNccl ends them so
/// that the device's streams drain.
std::string ncclAsyncError(Collectives &nccl);
void abortNccl(Collectives &nccl);

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_CUDA_NCCLCOLLECTIVES_H
