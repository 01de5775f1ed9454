//===- NcclCollectives.cpp - NCCL communicators on the comm stream --------===//

#include "NcclCollectives.h"

#include "CudaDevice.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <utility>
#include <vector>

namespace parallax::rt {

namespace {

void checkCuda(cudaError_t e, const char *what) {
  if (e != cudaSuccess)
    throw CommError(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

ncclDataType_t ncclTypeOf(DType t) {
  switch (t) {
  case DType::F32: return ncclFloat32;
  case DType::F64: return ncclFloat64;
  case DType::F16: return ncclFloat16;
  case DType::BF16: return ncclBfloat16;
  case DType::I64: return ncclInt64;
  case DType::I32: return ncclInt32;
  case DType::I8: return ncclInt8;
  case DType::U8:
  case DType::Bool: return ncclUint8;
  default:
    throw CommError(std::string("NCCL cannot reduce ") + nameOf(t) + " tensors");
  }
}

ncclRedOp_t ncclOpOf(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum: return ncclSum;
  case ReduceOp::Average: return ncclAvg;
  case ReduceOp::Max: return ncclMax;
  case ReduceOp::Min: return ncclMin;
  }
  return ncclSum;
}

/// Events reused across steps: a step records the same number in the same
/// order, so after the first the pool never grows (and a captured step
/// creates none).
class EventPool {
public:
  ~EventPool() {
    for (cudaEvent_t e : free_)
      cudaEventDestroy(e);
  }
  cudaEvent_t acquire() {
    if (!free_.empty()) {
      cudaEvent_t e = free_.back();
      free_.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    checkCuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
    return e;
  }
  /// A stream that waited for `e` keeps waiting for that record: the event
  /// may be recorded again at once.
  void release(cudaEvent_t e) { free_.push_back(e); }

private:
  std::vector<cudaEvent_t> free_;
};

/// The compute stream waits for `done` (recorded after the collective on
/// the communication stream).
class NcclWork final : public Work {
public:
  NcclWork(std::shared_ptr<EventPool> pool, cudaEvent_t done, cudaStream_t compute)
      : pool(std::move(pool)), done(done), compute(compute) {}
  ~NcclWork() override {
    if (done)
      pool->release(done);
  }
  void wait() override {
    if (!done)
      return;
    cudaEvent_t e = std::exchange(done, nullptr);
    cudaError_t r = cudaStreamWaitEvent(compute, e, 0);
    pool->release(e);
    checkCuda(r, "cudaStreamWaitEvent");
  }

private:
  std::shared_ptr<EventPool> pool;
  cudaEvent_t done;
  cudaStream_t compute;
};

class NcclCollectives final : public Collectives {
public:
  NcclCollectives(CudaDevice &device, Group &group, ncclComm_t comm)
      : Collectives(group), device(device), comm(comm) {}
  ~NcclCollectives() override {
    if (!comm)
      return; // aborted
    cudaStreamSynchronize(device.commStream());
    ncclCommDestroy(comm);
  }

  const char *transport() const override { return "nccl"; }

  std::shared_ptr<Work> allReduce(void *buf, int64_t count, DType dtype,
                                  ReduceOp op) override {
    ncclDataType_t t = ncclTypeOf(dtype);
    return enqueue("ncclAllReduce", [&](cudaStream_t s) {
      return ncclAllReduce(buf, buf, (size_t)count, t, ncclOpOf(op), comm, s);
    });
  }

  std::shared_ptr<Work> reduceScatterBlock(void *buf, int64_t count, DType dtype,
                                           ReduceOp op) override {
    ncclDataType_t t = ncclTypeOf(dtype);
    int64_t bytes = count * (int64_t)sizeOf(dtype);
    char *mine = static_cast<char *>(buf) + group().rank() * bytes;
    return enqueue("ncclReduceScatter", [&](cudaStream_t s) {
      // In place, NCCL leaves block r at block r; Comm.h's contract (and
      // the sharded updates) want it first.
      ncclResult_t r = ncclReduceScatter(buf, mine, (size_t)count, t, ncclOpOf(op), comm, s);
      if (r == ncclSuccess && mine != buf)
        checkCuda(cudaMemcpyAsync(buf, mine, (size_t)bytes, cudaMemcpyDeviceToDevice, s),
                  "moving the reduced block");
      return r;
    });
  }

  std::shared_ptr<Work> reduceScatter(const void *send, void *recv, int64_t count,
                                      DType dtype, ReduceOp op) override {
    ncclDataType_t t = ncclTypeOf(dtype);
    return enqueue("ncclReduceScatter", [&](cudaStream_t s) {
      return ncclReduceScatter(send, recv, (size_t)count, t, ncclOpOf(op), comm, s);
    });
  }

  std::shared_ptr<Work> allGatherBlock(void *buf, int64_t bytes) override {
    char *mine = static_cast<char *>(buf) + group().rank() * bytes;
    return enqueue("ncclAllGather", [&](cudaStream_t s) {
      return ncclAllGather(mine, buf, (size_t)bytes, ncclInt8, comm, s);
    });
  }

  std::shared_ptr<Work> allGather(const void *send, void *recv, int64_t bytes) override {
    return enqueue("ncclAllGather", [&](cudaStream_t s) {
      return ncclAllGather(send, recv, (size_t)bytes, ncclInt8, comm, s);
    });
  }

  std::shared_ptr<Work> allToAll(const void *send, void *recv, int64_t bytes) override {
    return enqueue("ncclSend/ncclRecv", [&](cudaStream_t s) {
      ncclResult_t r = ncclGroupStart();
      for (int p = 0; r == ncclSuccess && p < group().size(); ++p) {
        r = ncclSend(static_cast<const char *>(send) + p * bytes, (size_t)bytes,
                     ncclInt8, p, comm, s);
        if (r == ncclSuccess)
          r = ncclRecv(static_cast<char *>(recv) + p * bytes, (size_t)bytes, ncclInt8,
                       p, comm, s);
      }
      ncclResult_t end = ncclGroupEnd();
      return r != ncclSuccess ? r : end;
    });
  }

  std::shared_ptr<Work> sendRecv(const std::vector<PeerTransfer> &transfers) override {
    for (const PeerTransfer &t : transfers)
      if (t.peer < 0 || t.peer >= group().size() || t.peer == group().rank())
        throw CommError("NCCL: send/receive with group rank " + std::to_string(t.peer) +
                        ", not another member of a group of " +
                        std::to_string(group().size()));
    return enqueue("ncclSend/ncclRecv", [&](cudaStream_t s) {
      ncclResult_t r = ncclGroupStart();
      for (size_t i = 0; r == ncclSuccess && i < transfers.size(); ++i) {
        const PeerTransfer &t = transfers[i];
        if (t.sendBytes > 0)
          r = ncclSend(t.send, (size_t)t.sendBytes, ncclInt8, t.peer, comm, s);
        if (r == ncclSuccess && t.recvBytes > 0)
          r = ncclRecv(t.recv, (size_t)t.recvBytes, ncclInt8, t.peer, comm, s);
      }
      ncclResult_t end = ncclGroupEnd();
      return r != ncclSuccess ? r : end;
    });
  }

  ncclComm_t communicator() const { return comm; }
  void abort() {
    if (comm)
      ncclCommAbort(std::exchange(comm, nullptr));
  }

private:
  /// The compute stream's work so far, then `call` on the communication
  /// stream; the Work orders the compute stream after it.
  template <typename Call>
  std::shared_ptr<Work> enqueue(const char *what, Call call) {
    cudaStream_t compute = device.stream(), side = device.commStream();
    cudaEvent_t ready = pool->acquire();
    checkCuda(cudaEventRecord(ready, compute), "cudaEventRecord");
    cudaError_t waited = cudaStreamWaitEvent(side, ready, 0);
    pool->release(ready);
    checkCuda(waited, "cudaStreamWaitEvent");
    ncclResult_t r = call(side);
    if (r != ncclSuccess && r != ncclInProgress)
      throw CommError(std::string("NCCL: ") + what + " over a group of " +
                      std::to_string(group().size()) + ": " + ncclGetErrorString(r) +
                      " (" + ncclGetLastError(comm) + ")");
    cudaEvent_t done = pool->acquire();
    checkCuda(cudaEventRecord(done, side), "cudaEventRecord");
    return std::make_shared<NcclWork>(pool, done, compute);
  }

  CudaDevice &device;
  ncclComm_t comm;
  std::shared_ptr<EventPool> pool = std::make_shared<EventPool>();
};

} // namespace

std::string ncclRefusal(CudaDevice &device, Comm &comm) {
  cudaDeviceProp prop{};
  checkCuda(cudaGetDeviceProperties(&prop, device.ordinal()), "cudaGetDeviceProperties");
  const int64_t n = (int64_t)sizeof prop.uuid;
  std::vector<char> all(n * comm.size());
  Group &world = comm.group({comm.size()}, {0});
  comm.run([&] {
    comm.allgatherv(world, &prop.uuid, n, all.data(), std::vector<int64_t>(comm.size(), n));
  });
  for (int a = 0; a < comm.size(); ++a)
    for (int b = a + 1; b < comm.size(); ++b)
      if (std::memcmp(&all[a * n], &all[b * n], n) == 0)
        return "ranks " + std::to_string(a) + " and " + std::to_string(b) +
               " share one GPU, which NCCL refuses";
  return "";
}

std::unique_ptr<Collectives> makeNcclCollectives(CudaDevice &device, Comm &comm,
                                                 Group &group) {
  ncclUniqueId id{};
  if (group.rank() == 0) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess)
      throw CommError(std::string("NCCL: ncclGetUniqueId: ") + ncclGetErrorString(r));
  }
  // The first member's id to every member: an all-gather where only it
  // sends.
  std::vector<int64_t> sizes(group.size(), 0);
  sizes[0] = (int64_t)sizeof id;
  ncclUniqueId got{};
  comm.run([&] {
    comm.allgatherv(group, &id, group.rank() == 0 ? (int64_t)sizeof id : 0, &got, sizes);
  });
  checkCuda(cudaSetDevice(device.ordinal()), "cudaSetDevice");
  ncclComm_t c = nullptr;
  ncclResult_t r = ncclCommInitRank(&c, group.size(), got, group.rank());
  if (r != ncclSuccess)
    throw CommError(std::string("NCCL: ncclCommInitRank (rank ") +
                    std::to_string(group.rank()) + " of a group of " +
                    std::to_string(group.size()) + "): " + ncclGetErrorString(r) +
                    " (" + ncclGetLastError(nullptr) + ")");
  return std::make_unique<NcclCollectives>(device, group, c);
}

std::string ncclAsyncError(Collectives &nccl) {
  ncclComm_t c = static_cast<NcclCollectives &>(nccl).communicator();
  ncclResult_t state = ncclSuccess;
  if (!c || ncclCommGetAsyncError(c, &state) != ncclSuccess || state == ncclSuccess ||
      state == ncclInProgress)
    return "";
  return std::string(ncclGetErrorString(state)) + " (" + ncclGetLastError(c) + ")";
}

void abortNccl(Collectives &nccl) { static_cast<NcclCollectives &>(nccl).abort(); }

} // namespace parallax::rt
