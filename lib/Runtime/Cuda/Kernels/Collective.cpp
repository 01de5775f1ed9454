//===- Collective.cpp - synchronization kernels on a GPU ------------------===//
//
// Collectives between ranks whose tensors live on GPUs. Where every rank
// has a GPU of its own, the dense collectives (bucketed all-reduce and the
// sharded update's reduce-scatter, the variables' all-gather, all-gather
// and reduce-scatter along an axis, the sparse all-gatherv) run through
// NCCL on the device's communication stream (NcclCollectives.h): inputs
// that later kernels may overwrite are first copied on the compute stream
// (all_gather and reduce_scatter read theirs in place: the plan keeps them
// alive until the wait), results are copied out once the compute stream has waited for the
// collective, and nothing synchronizes with the host, so the step can be
// captured in a CUDA graph; all_to_all, and the halo exchange and its
// adjoint with the two neighbours, are NCCL's grouped send/receive.
// Otherwise (ranks sharing one GPU, which NCCL refuses, or
// --collectives=mpi) and for the parameter server's pull and push, whose
// exchange is sized on the host, the CPU kernels run over MPI through host
// staging (HostStaged.h) and the step is not captured. Kernel attributes are read
// as the CPU kernels read them (CollectiveLayout.h).
//
//===----------------------------------------------------------------------===//

#include "../CudaDevice.h"

#include "../../HostStaged.h"
#include "../../Kernels/CollectiveLayout.h"
#include "PitchedKernels.h"
#include "parallax/Runtime/Collectives.h"
#include "parallax/Runtime/Comm.h"

#include <cuda_runtime.h>

#include <memory>

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

void checkCuda(cudaError_t e, const char *what) {
  if (e != cudaSuccess)
    throw KernelError(std::string("CUDA: ") + what + ": " + cudaGetErrorString(e));
}

/// What an NCCL kernel needs besides its layout: the device, the group's
/// collectives, the token it hands its Work to (-1: wait at once).
struct Nccl {
  CudaDevice *dev;
  Collectives *coll;
  ExecEnv *env;
  int64_t token;
  int g;

  /// Hands `work` to the token's wait kernel, `after` (copies out on the
  /// compute stream) following it; without a token, both now.
  void finish(std::shared_ptr<Work> work, std::function<void()> after) const {
    try {
      if (token >= 0) {
        env->pending[token] = after ? thenRun(std::move(work), std::move(after)) : work;
        return;
      }
      work->wait();
    } catch (const CommError &e) {
      throw KernelError(e.what());
    }
    if (after)
      after();
  }

  /// Counts `sent`/`received` bytes per variable every step.
  void countEveryStep(std::vector<std::string> names,
                      std::vector<std::pair<int64_t, int64_t>> bytes) const {
    for (size_t i = 0; i < names.size(); ++i)
      dev->countTrafficEveryStep(*env->comm, names[i], bytes[i].first, bytes[i].second);
  }

  /// Device scratch for the kernel's lifetime (never per step).
  std::shared_ptr<Buffer> scratch(int64_t bytes) const {
    return std::make_shared<Buffer>(std::max<int64_t>(bytes, 1), dev);
  }

  /// `c` on the compute stream (CollectiveLayout.h).
  void copy(const PitchedCopy &c, void *dst, const void *src) const {
    if (c.width > 0 && c.rows > 0)
      checkCuda(cudaMemcpy2DAsync(static_cast<char *>(dst) + c.dstOffset, c.dstPitch,
                                  static_cast<const char *>(src) + c.srcOffset, c.srcPitch,
                                  c.width, c.rows, cudaMemcpyDeviceToDevice, dev->stream()),
                "cudaMemcpy2DAsync");
  }
};

/// A factory that runs `make` over NCCL where the device offers it for the
/// kernel's group, and the CPU kernel through host staging otherwise.
KernelFactory overNccl(const std::string &op,
                       std::function<KernelFn(KernelArgs &, const Nccl &)> make) {
  KernelFactory fallback = staged(op);
  return [fallback, make](KernelArgs &args) -> KernelFn {
    CudaDevice &dev = cudaDeviceOf(args);
    Group &group = collectiveGroup(args);
    Collectives *coll = nullptr;
    try {
      coll = dev.collectives(*args.env.comm, group);
    } catch (const CommError &e) {
      args.fail(e.what());
    }
    if (!coll)
      return fallback(args);
    return make(args, Nccl{&dev, coll, &args.env, tokenOf(args), group.size()});
  };
}

KernelFn allReduce(KernelArgs &args, const Nccl &n) {
  BucketLayout b = bucketLayoutOf(args, n.g);
  ReduceOp op = reduceOpOf(args);
  auto names = variablesOf(args, args.ins.size());
  std::vector<std::pair<int64_t, int64_t>> bytes;
  for (const TensorView &t : args.outs) {
    int64_t v = b.shardBytes > 0 ? ringHalves(t.bytes(), n.g).first : ringBytes(t.bytes(), n.g);
    bytes.push_back({v, v});
  }
  n.countEveryStep(names, bytes);
  if (b.shardBytes > 0) {
    // Weight-update sharding: the reduce-scatter half; block r reduced into
    // the bucket's first shard (as on the CPU).
    int64_t count = b.shardBytes / (int64_t)sizeOf(b.dtype);
    return [n, b, count, op] {
      n.finish(n.coll->reduceScatterBlock(b.bucket, count, b.dtype, op), nullptr);
    };
  }
  if (b.inPlace)
    return [n, b, op] { n.finish(n.coll->allReduce(b.bucket, b.count(), b.dtype, op), nullptr); };
  auto staging = n.scratch(b.totalBytes);
  std::vector<TensorView> ins = args.ins, outs = args.outs;
  return [n, b, op, staging, ins, outs] {
    char *buffer = static_cast<char *>(staging->data());
    for (size_t i = 0; i < ins.size(); ++i)
      n.dev->copy(buffer + b.offsets[i], ins[i].data, ins[i].bytes());
    n.finish(n.coll->allReduce(buffer, b.count(), b.dtype, op), [n, b, buffer, outs] {
      for (size_t i = 0; i < outs.size(); ++i)
        n.dev->copy(outs[i].data, buffer + b.offsets[i], outs[i].bytes());
    });
  };
}

KernelFn allGatherVariables(KernelArgs &args, const Nccl &n) {
  VariableBlockLayout v = variableBlockOf(args, n.g);
  std::vector<std::pair<int64_t, int64_t>> bytes;
  for (int64_t b : v.bytes) {
    int64_t other = ringHalves(b, n.g).second;
    bytes.push_back({other, other});
  }
  n.countEveryStep(variablesOf(args, args.ins.size()), bytes);
  return [n, v] { n.finish(n.coll->allGatherBlock(v.block, v.shardBytes), nullptr); };
}

/// Concatenation of the group's tensors along gather_axis: gathered as
/// [G][outer][inner] from the input where it lies (the plan keeps it alive
/// until the wait), into the output itself when that is its layout (an
/// outer of 1), else laid out as [outer][G][inner] after.
KernelFn allGather(KernelArgs &args, const Nccl &n) {
  TensorView x = args.in(0), y = args.out(0);
  int64_t xb = x.bytes();
  AxisSlices slices = allGatherSlicesOf(args);
  std::vector<PitchedCopy> placement = allGatherPlacement(slices, n.g, xb);
  n.countEveryStep(variablesOf(args, 1), {{xb * (n.g - 1), xb * (n.g - 1)}});
  bool direct = slices.outer == 1;
  auto recv = direct ? nullptr : n.scratch(xb * n.g);
  return [n, placement, x, y, xb, direct, recv] {
    char *got = direct ? static_cast<char *>(y.data) : static_cast<char *>(recv->data());
    n.finish(n.coll->allGather(x.data, got, xb), [n, placement, y, got, direct] {
      if (!direct)
        for (const PitchedCopy &c : placement)
          n.copy(c, y.data, got);
    });
  };
}

/// Reduce over the group, then keep this rank's slice along scatter_axis:
/// one ncclReduceScatter from the input where it lies (the plan keeps it
/// alive until the wait), or from the slices packed in group order where
/// they are not its contiguous blocks.
KernelFn reduceScatter(KernelArgs &args, const Nccl &n) {
  AxisSlices slices = reduceScatterSlicesOf(args, n.g);
  std::vector<PitchedCopy> pack = reduceScatterPacking(slices, n.g);
  ReduceOp op = reduceOpOf(args);
  TensorView x = args.in(0), y = args.out(0);
  int64_t v = x.bytes() * (n.g - 1) / n.g; // as a ring reduce-scatter
  n.countEveryStep(variablesOf(args, 1), {{v, v}});
  bool direct = slices.outer == 1;
  auto staging = direct ? nullptr : n.scratch(x.bytes());
  return [n, pack, op, x, y, direct, staging] {
    if (direct) {
      n.finish(n.coll->reduceScatter(x.data, y.data, y.numElements(), x.dtype, op), nullptr);
      return;
    }
    char *buffer = static_cast<char *>(staging->data());
    for (const PitchedCopy &c : pack)
      n.copy(c, buffer, x.data);
    n.finish(n.coll->reduceScatterBlock(buffer, y.numElements(), x.dtype, op),
             [n, y, buffer] { n.dev->copy(y.data, buffer, y.bytes()); });
  };
}

/// Horovod's sparse all-reduce: every rank gets every rank's rows, sent as
/// one block of [indices | rows] per rank.
KernelFn allGatherV(KernelArgs &args, const Nccl &n) {
  checkAllGatherV(args, n.g);
  TensorView i0 = args.in(0), v0 = args.in(1), i1 = args.out(0), v1 = args.out(1);
  int64_t ib = i0.bytes(), vb = v0.bytes(), block = ib + vb;
  n.countEveryStep(variablesOf(args, 1), {{block * (n.g - 1), block * (n.g - 1)}});
  auto send = n.scratch(block), recv = n.scratch(block * n.g);
  return [n, i0, v0, i1, v1, ib, vb, block, send, recv] {
    char *out = static_cast<char *>(send->data());
    n.dev->copy(out, i0.data, ib);
    n.dev->copy(out + ib, v0.data, vb);
    char *got = static_cast<char *>(recv->data());
    n.finish(n.coll->allGather(out, got, block), [n, i1, v1, ib, vb, got] {
      auto split = allGatherVSplit(ib, vb, n.g);
      n.copy(split.first, i1.data, got);
      n.copy(split.second, v1.data, got);
    });
  };
}

/// Split along split_axis, piece i to group rank i, the received pieces
/// concatenated along concat_axis: each piece is packed and unpacked with
/// one pitched copy, and the exchange is NCCL's grouped send/receive.
KernelFn allToAll(KernelArgs &args, const Nccl &n) {
  const TensorView &x = args.in(0), &y = args.out(0);
  AllToAllLayout layout = allToAllLayoutOf(args, n.g);
  int64_t moved = layout.pieceBytes * (n.g - 1);
  n.countEveryStep(variablesOf(args, 1), {{moved, moved}});
  auto send = n.scratch(x.bytes()), recv = n.scratch(x.bytes());
  void *xp = x.data, *yp = y.data;
  return [n, layout, send, recv, xp, yp] {
    char *out = static_cast<char *>(send->data()), *got = static_cast<char *>(recv->data());
    for (const PitchedCopy &c : layout.pack)
      n.copy(c, out, xp);
    n.finish(n.coll->allToAll(out, got, layout.pieceBytes), [n, layout, got, yp] {
      for (const PitchedCopy &c : layout.unpack)
        n.copy(c, yp, got);
    });
  };
}

/// Domain parallelism's halo exchange and its adjoint (HaloLayout): the
/// halos packed, the block copied and the edge halos filled with pitched
/// copies on the compute stream, NCCL's grouped send/receive with the two
/// neighbours, and the received halos copied into (the reduce: added onto)
/// the output once the compute stream has waited for it.
KernelFn halo(KernelArgs &args, const Nccl &n) {
  int member = n.coll->group().rank();
  HaloLayout layout = haloLayoutOf(args, n.g, member);
  auto [sent, received] = haloBytes(
      !layout.reduce, layout.loBytes, layout.hiBytes, member, n.g);
  n.countEveryStep(variablesOf(args, 1), {{sent, received}});
  auto send = n.scratch(layout.sendBytes), recv = n.scratch(layout.recvBytes);
  std::vector<PeerTransfer> transfers = layout.transfers(send->data(), recv->data());
  const void *xp = args.in(0).data;
  void *yp = args.out(0).data;
  return [n, layout, send, recv, transfers, xp, yp] {
    for (const PitchedCopy &c : layout.pack)
      n.copy(c, send->data(), xp);
    n.copy(layout.body, yp, xp);
    for (const PitchedCopy &c : layout.fill)
      cuda::fillPitchedAsync(c, yp, layout.edge, layout.dtype, n.dev->stream());
    const void *got = recv->data();
    n.finish(n.coll->sendRecv(transfers), [n, layout, got, yp] {
      for (const PitchedCopy &c : layout.unpack) {
        if (layout.reduce)
          cuda::addPitchedAsync(c, yp, got, layout.dtype, n.dev->stream());
        else
          n.copy(c, yp, got);
      }
    });
  };
}

} // namespace

void registerCudaCollectiveKernels(KernelRegistry &r) {
  r.add("all_reduce", overNccl("all_reduce", allReduce));
  r.add("all_gather_variables", overNccl("all_gather_variables", allGatherVariables));
  r.add("all_gather", overNccl("all_gather", allGather));
  r.add("reduce_scatter", overNccl("reduce_scatter", reduceScatter));
  r.add("all_gatherv", overNccl("all_gatherv", allGatherV));
  r.add("all_to_all", overNccl("all_to_all", allToAll));
  r.add("halo_exchange", overNccl("halo_exchange", halo));
  r.add("halo_reduce", overNccl("halo_reduce", halo));
  for (const char *op : {"ps_pull", "ps_push"})
    r.add(op, staged(op));
  // Waiting is the transport's: a host job blocks, NCCL's work orders the
  // compute stream; staged results are uploaded after either.
  r.add("wait", *KernelRegistry::global().find("wait"));
}

} // namespace parallax::rt
