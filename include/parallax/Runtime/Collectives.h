//===- Collectives.h - one group's collectives over one transport -*- C++ -*-===//
//
// The transport seam under the collective kernels, shaped like c10d's
// ProcessGroup backends and IREE's channels: a Collectives object serves
// one group (Comm.h) over one transport, on the memory of the device it was
// made for, and each operation starts a collective and returns Work to wait
// on.
//
//   local, mpi  the host's transports (Comm): each operation is one job on
//               the communication thread, so waiting blocks the host;
//   nccl        a GPU's (lib/Runtime/Cuda/NcclCollectives.cpp): the
//               collective is queued on the device's communication stream
//               after the compute stream's work so far, and waiting orders
//               the compute stream after it; the host never blocks, and a
//               CUDA graph can capture both streams.
//
// Device::collectives picks the transport for a group; the CPU kernels,
// whose jobs also copy results out on the communication thread, submit
// those jobs to Comm directly (Comm::submit returns the same Work).
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_COLLECTIVES_H
#define PARALLAX_RUNTIME_COLLECTIVES_H

#include "parallax/Runtime/Comm.h"

#include <memory>
#include <vector>

namespace parallax::rt {

class Collectives {
public:
  virtual ~Collectives();

  /// "local", "mpi" or "nccl", for reports.
  virtual const char *transport() const = 0;
  Group &group() const { return group_; }

  /// In place on `count` elements.
  virtual std::shared_ptr<Work> allReduce(void *buf, int64_t count, DType dtype,
                                          ReduceOp op) = 0;
  /// In place on G blocks of `count` elements: afterwards the first block
  /// holds the reduction of every member's block group().rank() (as
  /// Comm::reduceScatterBlock).
  virtual std::shared_ptr<Work> reduceScatterBlock(void *buf, int64_t count,
                                                   DType dtype, ReduceOp op) = 0;
  /// Out of place (Comm::reduceScatter): recv (`count` elements) gets the
  /// reduction of every member's block group().rank() of send.
  virtual std::shared_ptr<Work> reduceScatter(const void *send, void *recv, int64_t count,
                                              DType dtype, ReduceOp op) = 0;
  /// In place on G blocks of `bytes`: afterwards block i holds member i's.
  virtual std::shared_ptr<Work> allGatherBlock(void *buf, int64_t bytes) = 0;
  /// recv (G x bytes) holds every member's `bytes` of send, in group order.
  virtual std::shared_ptr<Work> allGather(const void *send, void *recv,
                                          int64_t bytes) = 0;
  /// Block i (of `bytes`) of send goes to member i; block j of recv came
  /// from member j.
  virtual std::shared_ptr<Work> allToAll(const void *send, void *recv,
                                         int64_t bytes) = 0;
  /// Point-to-point with some members (Comm::sendrecv): every message at
  /// once; every member of the group makes the call.
  virtual std::shared_ptr<Work> sendRecv(const std::vector<PeerTransfer> &transfers) = 0;

protected:
  explicit Collectives(Group &group) : group_(group) {}

private:
  Group &group_;
};

/// `group`'s collectives through `comm` (MPI, or the local world of one):
/// each operation one job on the communication thread, on host memory.
std::unique_ptr<Collectives> makeHostCollectives(Comm &comm, Group &group);

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_COLLECTIVES_H
