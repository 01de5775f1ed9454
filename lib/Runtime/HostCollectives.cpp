//===- HostCollectives.cpp - Collectives over Comm's host transports ------===//

#include "parallax/Runtime/Collectives.h"

#include <vector>

namespace parallax::rt {

Collectives::~Collectives() = default;

namespace {

class HostCollectives final : public Collectives {
public:
  HostCollectives(Comm &comm, Group &group) : Collectives(group), comm(comm) {}

  const char *transport() const override { return comm.transport(); }

  std::shared_ptr<Work> allReduce(void *buf, int64_t count, DType dtype,
                                  ReduceOp op) override {
    return comm.submit([this, buf, count, dtype, op] {
      comm.allreduce(group(), buf, count, dtype, op);
    });
  }
  std::shared_ptr<Work> reduceScatterBlock(void *buf, int64_t count, DType dtype,
                                           ReduceOp op) override {
    return comm.submit([this, buf, count, dtype, op] {
      comm.reduceScatterBlock(group(), buf, count, dtype, op);
    });
  }
  std::shared_ptr<Work> reduceScatter(const void *send, void *recv, int64_t count,
                                      DType dtype, ReduceOp op) override {
    return comm.submit([this, send, recv, count, dtype, op] {
      comm.reduceScatter(group(), send, recv, count, dtype, op);
    });
  }
  std::shared_ptr<Work> allGatherBlock(void *buf, int64_t bytes) override {
    return comm.submit([this, buf, bytes] { comm.allgatherBlock(group(), buf, bytes); });
  }
  std::shared_ptr<Work> allGather(const void *send, void *recv, int64_t bytes) override {
    return comm.submit([this, send, recv, bytes] {
      comm.allgatherv(group(), send, bytes, recv,
                      std::vector<int64_t>(group().size(), bytes));
    });
  }
  std::shared_ptr<Work> allToAll(const void *send, void *recv, int64_t bytes) override {
    return comm.submit([this, send, recv, bytes] {
      std::vector<int64_t> sizes(group().size(), bytes);
      comm.alltoallv(group(), send, sizes, recv, sizes);
    });
  }
  std::shared_ptr<Work> sendRecv(const std::vector<PeerTransfer> &transfers) override {
    return comm.submit([this, transfers] { comm.sendrecv(group(), transfers); });
  }

private:
  Comm &comm;
};

} // namespace

std::unique_ptr<Collectives> makeHostCollectives(Comm &comm, Group &group) {
  return std::make_unique<HostCollectives>(comm, group);
}

} // namespace parallax::rt
