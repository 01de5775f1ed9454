//===- Collective.cpp - synchronization kernels ---------------------------===//
//
// The px synchronization ops on top of Comm. Each kernel's work runs as one
// job on the communication thread. With a "token" attribute the kernel only
// starts it and a later "wait" kernel, placed by the plan emitter before the
// first reader of the outputs, joins it: that is how gradient all-reduces
// overlap the rest of the backward pass. Without a token the kernel waits.
// Most kernels copy their inputs before they start, so that that memory may
// be reused at once; all_gather and reduce_scatter (and ps_pull's table)
// read theirs while they run, and the plan lists them among the wait's
// inputs so that they stay alive until then.
//
// The halo exchange of domain parallelism and its adjoint (halo_exchange,
// halo_reduce) trade boundary rows with the two neighbours in the group
// point-to-point (Comm::sendrecv), laid out by HaloLayout.
//
// Parameter-server exchanges (ps_pull, ps_push) are two all-to-alls each
// way: counts, then payload. Rows are partitioned as the px dialect defines:
// partition p holds rows [p*ceil(R/P), (p+1)*ceil(R/P)) and lives on group
// rank placement[p].
//
//===----------------------------------------------------------------------===//

#include "parallax/Runtime/Comm.h"
#include "parallax/Runtime/Grid.h"
#include "parallax/Runtime/Kernel.h"
#include "parallax/Runtime/RowPartition.h"
#include "parallax/Runtime/Plan.h"

#include "CollectiveLayout.h"
#include "IndexingLayout.h"
#include "KernelUtil.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <type_traits>
#include <utility>

namespace parallax::rt {

Group &collectiveGroup(KernelArgs &args) {
  if (!args.env.comm)
    args.fail("no communicator");
  try {
    KernelGrid grid = kernelGridOf(args.kernel.attrs, args.env.worldSize);
    return args.env.comm->group(grid.shape, grid.axes);
  } catch (const CommError &e) {
    args.fail(e.what());
  }
}

namespace {

using Bytes = std::vector<char>;

/// Runs `job` on the communication thread: started (token) or awaited now.
KernelFn launch(KernelArgs &args, std::function<void()> prepare,
                std::function<void()> job) {
  Comm *comm = args.env.comm;
  ExecEnv *env = &args.env;
  int64_t token = tokenOf(args);
  auto info = std::make_shared<JobInfo>(jobInfoOf(args));
  return [=] {
    if (prepare)
      prepare();
    try {
      if (token >= 0)
        env->pending[token] = comm->submit(job, info.get());
      else
        comm->run(job, info.get());
    } catch (const CommError &e) {
      throw KernelError(e.what());
    }
  };
}

//===----------------------------------------------------------------------===//
// Dense collectives
//===----------------------------------------------------------------------===//

/// out = in / by, elementwise, for f32 or f64 (the division, not a
/// multiplication by 1/by: results do not depend on where it happens).
void divideInto(const TensorView &out, const char *in, int by) {
  auto run = [&](auto *o) {
    using T = std::remove_pointer_t<decltype(o)>;
    const T *x = reinterpret_cast<const T *>(in);
    T d = (T)by;
    for (int64_t k = 0, n = out.numElements(); k < n; ++k)
      o[k] = x[k] / d;
  };
  if (out.dtype == DType::F32)
    run(static_cast<float *>(out.data));
  else
    run(static_cast<double *>(out.data));
}

/// all_reduce over a fused bucket (CollectiveLayout.h): in place, the
/// collective runs on the bucket's memory; otherwise the inputs are copied
/// into a staging buffer and the results out of it.
KernelFn allReduce(KernelArgs &args) {
  Group &group = collectiveGroup(args);
  BucketLayout layout = bucketLayoutOf(args, group.size());
  DType dtype = layout.dtype;
  bool inPlace = layout.inPlace;
  int64_t total = layout.totalBytes;
  std::vector<int64_t> offsets = layout.offsets;
  char *bucket = layout.bucket;
  ReduceOp op = reduceOpOf(args);
  auto staging = inPlace ? nullptr : std::make_shared<Bytes>(std::max<int64_t>(total, 1));
  char *buffer = inPlace ? bucket : staging->data();
  auto names = variablesOf(args, args.ins.size());
  std::vector<TensorView> ins = args.ins, outs = args.outs;
  Comm *comm = args.env.comm;
  int64_t count = total / (int64_t)sizeOf(dtype);
  std::function<void()> prepare;
  if (!inPlace)
    prepare = [=] {
      for (size_t i = 0; i < ins.size(); ++i)
        std::memcpy(staging->data() + offsets[i], ins[i].data, ins[i].bytes());
    };
  // A float average is a sum whose division by the group size happens
  // while the result is copied out (or, in place, in one pass after).
  bool divideOut = op == ReduceOp::Average && (dtype == DType::F32 || dtype == DType::F64);
  if (layout.shardBytes > 0) {
    // Weight-update sharding (px-shard-weight-update): only
    // the reduce-scatter half of the all-reduce. Group rank r's block
    // [r*S, (r+1)*S) of the bucket ends up reduced in the bucket's first S
    // bytes (where MPI_IN_PLACE leaves it); the
    // optimizer kernels update the parameters in that block and
    // all_gather_variables hands every rank all of them.
    int64_t shard = layout.shardBytes;
    int g = group.size();
    int64_t eb = (int64_t)sizeOf(dtype);
    auto rs = [=, &group] {
      comm->reduceScatterBlock(group, buffer, shard / eb, dtype, op);
      // Half of the ring all-reduce's volume; all_gather_variables counts
      // the other half.
      for (size_t i = 0; i < outs.size(); ++i) {
        int64_t half = ringHalves(outs[i].bytes(), g).first;
        comm->traffic.add(names[i], half, half);
      }
    };
    return launch(args, nullptr, rs);
  }
  auto job = [=, &group] {
    int g = group.size();
    comm->allreduce(group, buffer, count, dtype, divideOut ? ReduceOp::Sum : op);
    for (size_t i = 0; i < outs.size(); ++i) {
      const char *from = buffer + offsets[i];
      if (divideOut && g > 1)
        divideInto(outs[i], from, g);
      else if (!inPlace)
        std::memcpy(outs[i].data, from, outs[i].bytes());
      // The ring algorithm's volume: 2 (G-1)/G of the buffer each way.
      int64_t ring = ringBytes(outs[i].bytes(), g);
      comm->traffic.add(names[i], ring, ring);
    }
  };
  return launch(args, prepare, job);
}

/// The second half of a sharded weight update: the variables (inputs, no
/// outputs) lie back to back in one variable block at `offsets`, split
/// into G blocks of shard_bytes; group rank r has just updated block r, and
/// an in-place all-gather gives every rank every block.
KernelFn allGatherVariables(KernelArgs &args) {
  Group &group = collectiveGroup(args);
  int g = group.size();
  VariableBlockLayout layout = variableBlockOf(args, g);
  char *block = layout.block;
  int64_t shard = layout.shardBytes;
  std::vector<int64_t> bytes = layout.bytes;
  auto names = variablesOf(args, args.ins.size());
  Comm *comm = args.env.comm;
  auto job = [=, &group] {
    comm->allgatherBlock(group, block, shard);
    for (size_t i = 0; i < bytes.size(); ++i) {
      int64_t other = ringHalves(bytes[i], g).second;
      comm->traffic.add(names[i], other, other);
    }
  };
  return launch(args, nullptr, job);
}

/// Concatenation of the group's tensors along gather_axis. The input is
/// sent as it lies (the plan keeps it alive until the wait); the members'
/// blocks are received into the output itself where they are its
/// contiguous blocks (gather_axis 0, or only size-1 dimensions before it).
KernelFn allGather(KernelArgs &args) {
  const TensorView &x = args.in(0), &y = args.out(0);
  Group &group = collectiveGroup(args);
  int g = group.size();
  AxisSlices slices = allGatherSlicesOf(args);
  std::vector<PitchedCopy> placement = allGatherPlacement(slices, g, x.bytes());
  bool direct = slices.outer == 1;
  auto recv = std::make_shared<Bytes>(direct ? 0 : std::max<int64_t>(x.bytes() * g, 1));
  auto names = variablesOf(args, 1);
  Comm *comm = args.env.comm;
  TensorView xin = x, yout = y;
  auto job = [=, &group] {
    std::vector<int64_t> sizes(g, xin.bytes());
    char *to = direct ? static_cast<char *>(yout.data) : recv->data();
    comm->allgatherv(group, xin.data, xin.bytes(), to, sizes);
    if (!direct)
      for (const PitchedCopy &c : placement)
        copyOnHost(c, static_cast<char *>(yout.data), recv->data());
    int64_t v = allGatherBytes(xin.bytes(), g);
    comm->traffic.add(names[0], v, v);
  };
  return launch(args, nullptr, job);
}

/// This rank's slice along slice_axis of a value every rank holds whole:
/// a local copy, no communication.
KernelFn allSlice(KernelArgs &args) {
  const TensorView &x = args.in(0), &y = args.out(0);
  Group &group = collectiveGroup(args);
  PitchedCopy slice = reduceScatterSlice(allSliceSlicesOf(args, group.size()), group.size(),
                                         group.rank());
  TensorView xin = x, yout = y;
  return [=] {
    copyOnHost(slice, static_cast<char *>(yout.data), static_cast<const char *>(xin.data));
  };
}

/// Reduce over the group, then keep this rank's slice along scatter_axis,
/// reading the input where it lies (the plan keeps it alive until the
/// wait): one MPI_Reduce_scatter_block sends each rank only its slice. Where
/// the slices are not the input's contiguous blocks (scatter_axis past
/// leading dimensions of more than one), they are packed in group order
/// first.
KernelFn reduceScatter(KernelArgs &args) {
  const TensorView &x = args.in(0), &y = args.out(0);
  Group &group = collectiveGroup(args);
  int g = group.size();
  AxisSlices slices = reduceScatterSlicesOf(args, g);
  std::vector<PitchedCopy> pack = reduceScatterPacking(slices, g);
  bool direct = slices.outer == 1;
  ReduceOp op = reduceOpOf(args);
  auto staging = std::make_shared<Bytes>(direct ? 0 : std::max<int64_t>(x.bytes(), 1));
  auto names = variablesOf(args, 1);
  Comm *comm = args.env.comm;
  TensorView xin = x, yout = y;
  auto job = [=, &group] {
    if (direct) {
      comm->reduceScatter(group, xin.data, yout.data, yout.numElements(), xin.dtype, op);
    } else {
      for (const PitchedCopy &c : pack)
        copyOnHost(c, staging->data(), static_cast<const char *>(xin.data));
      comm->reduceScatterBlock(group, staging->data(), yout.numElements(), xin.dtype, op);
      std::memcpy(yout.data, staging->data(), yout.bytes());
    }
    int64_t v = reduceScatterBytes(xin.bytes(), g);
    comm->traffic.add(names[0], v, v);
  };
  return launch(args, nullptr, job);
}

/// Split along split_axis, send piece i to group rank i, concatenate the
/// received pieces along concat_axis.
KernelFn allToAll(KernelArgs &args) {
  const TensorView &x = args.in(0), &y = args.out(0);
  Group &group = collectiveGroup(args);
  int g = group.size();
  AllToAllLayout layout = allToAllLayoutOf(args, g);
  auto send = std::make_shared<Bytes>(std::max<int64_t>(x.bytes(), 1));
  auto recv = std::make_shared<Bytes>(std::max<int64_t>(x.bytes(), 1));
  auto names = variablesOf(args, 1);
  Comm *comm = args.env.comm;
  TensorView xin = x, yout = y;
  auto prepare = [=] {
    for (const PitchedCopy &c : layout.pack)
      copyOnHost(c, send->data(), static_cast<const char *>(xin.data));
  };
  auto job = [=, &group] {
    std::vector<int64_t> sizes(g, layout.pieceBytes);
    comm->alltoallv(group, send->data(), sizes, recv->data(), sizes);
    for (const PitchedCopy &c : layout.unpack)
      copyOnHost(c, static_cast<char *>(yout.data), recv->data());
    int64_t v = layout.pieceBytes * (g - 1);
    comm->traffic.add(names[0], v, v);
  };
  return launch(args, prepare, job);
}

/// Domain parallelism's halo exchange and its adjoint (HaloLayout): the
/// block is copied into the output and the halos packed at once (the input
/// may be reused while the exchange runs), then the two neighbours trade
/// halos point-to-point and the received ones are copied into the output
/// (the reduce adds them).
KernelFn halo(KernelArgs &args) {
  Group &group = collectiveGroup(args);
  HaloLayout layout = haloLayoutOf(args, group.size(), group.rank());
  auto send = std::make_shared<Bytes>(std::max<int64_t>(layout.sendBytes, 1));
  auto recv = std::make_shared<Bytes>(std::max<int64_t>(layout.recvBytes, 1));
  std::vector<PeerTransfer> transfers = layout.transfers(send->data(), recv->data());
  auto [sent, received] = haloBytes(
      !layout.reduce, layout.loBytes, layout.hiBytes, group.rank(), group.size());
  auto names = variablesOf(args, 1);
  Comm *comm = args.env.comm;
  const char *x = static_cast<const char *>(args.in(0).data);
  char *y = static_cast<char *>(args.out(0).data);
  auto prepare = [=] {
    for (const PitchedCopy &c : layout.pack)
      copyOnHost(c, send->data(), x);
    copyOnHost(layout.body, y, x);
    for (const PitchedCopy &c : layout.fill)
      fillOnHost(c, y, layout.edge, layout.dtype);
  };
  auto job = [=, s = sent, r = received, &group] {
    comm->sendrecv(group, transfers);
    for (const PitchedCopy &c : layout.unpack) {
      if (layout.reduce)
        addOnHost(c, y, recv->data(), layout.dtype);
      else
        copyOnHost(c, y, recv->data());
    }
    comm->traffic.add(names[0], s, r);
  };
  return launch(args, prepare, job);
}

KernelFn wait(KernelArgs &args) {
  int64_t token = args.i64("token");
  if (token < 0 || token >= (int64_t)args.env.pending.size())
    args.fail("token out of range");
  ExecEnv *env = &args.env;
  return [env, token] {
    std::shared_ptr<Work> work = std::move(env->pending[token]);
    if (!work)
      throw KernelError("wait: no collective was started for token " +
                        std::to_string(token));
    try {
      work->wait();
    } catch (const CommError &e) {
      throw KernelError(e.what());
    }
  };
}

//===----------------------------------------------------------------------===//
// Sparse gradients
//===----------------------------------------------------------------------===//

/// Horovod's sparse all-reduce: every rank gets every rank's rows.
KernelFn allGatherV(KernelArgs &args) {
  const TensorView &idx = args.in(0), &vals = args.in(1);
  const TensorView &outIdx = args.out(0), &outVals = args.out(1);
  Group &group = collectiveGroup(args);
  int g = group.size();
  checkAllGatherV(args, g);
  auto send = std::make_shared<Bytes>(std::max<int64_t>(idx.bytes() + vals.bytes(), 1));
  auto recv = std::make_shared<Bytes>(std::max<int64_t>((idx.bytes() + vals.bytes()) * g, 1));
  auto names = variablesOf(args, 1);
  Comm *comm = args.env.comm;
  TensorView i0 = idx, v0 = vals, i1 = outIdx, v1 = outVals;
  auto prepare = [=] {
    std::memcpy(send->data(), i0.data, i0.bytes());
    std::memcpy(send->data() + i0.bytes(), v0.data, v0.bytes());
  };
  auto job = [=, &group] {
    int64_t block = i0.bytes() + v0.bytes();
    comm->allgatherv(group, send->data(), block, recv->data(),
                     std::vector<int64_t>(g, block));
    auto [indices, rows] = allGatherVSplit(i0.bytes(), v0.bytes(), g);
    copyOnHost(indices, static_cast<char *>(i1.data), recv->data());
    copyOnHost(rows, static_cast<char *>(v1.data), recv->data());
    comm->traffic.add(names[0], block * (g - 1), block * (g - 1));
  };
  return launch(args, prepare, job);
}

/// The kernel's row partition of a table of `rows` rows, checked against
/// its group.
RowPartition partitioningOf(KernelArgs &args, int64_t rows, int groupSize) {
  int64_t parts = args.i64("partitions");
  std::vector<int64_t> placement = args.i64s("placement");
  if (parts < 1 || (int64_t)placement.size() != parts)
    args.fail("placement must name one rank per partition");
  for (int64_t r : placement)
    if (r < 0 || r >= groupSize)
      args.fail("placement names rank " + std::to_string(r) + " of a group of " +
                std::to_string(groupSize));
  return RowPartition(rows, std::move(placement));
}

int64_t readIndex(const TensorView &t, int64_t i) {
  return t.dtype == DType::I32 ? t.as<int32_t>()[i] : t.as<int64_t>()[i];
}

/// A variable-size all-to-all of packed blocks, one block per group rank.
/// An Exchange lives as long as its kernel and is reused every step (a
/// kernel's jobs run one at a time on the communication thread), so after
/// the first steps its buffers are never reallocated. That matters: a
/// fresh megabyte is 256 page faults, each zeroing a page in the kernel,
/// and with several ranks sharing the cores those faults cost more than
/// the copies themselves.
struct Exchange {
  std::vector<Bytes> blocks; ///< to send: one block per group rank
  Bytes send;                ///< the blocks, packed
  Bytes data;                ///< received: rank 0's block, rank 1's, ...
  std::vector<int64_t> sendBytes, bytes; ///< block sizes sent and received

  /// Empties the blocks for a new round (keeping their memory).
  void reset(int n) {
    blocks.resize(n);
    for (Bytes &b : blocks)
      b.clear();
  }

  /// Counts first, then the payload.
  void run(Comm &comm, Group &g) {
    int n = g.size();
    std::vector<int64_t> one(n, (int64_t)sizeof(int64_t));
    sendBytes.resize(n);
    bytes.assign(n, 0);
    int64_t total = 0;
    for (int i = 0; i < n; ++i)
      total += sendBytes[i] = (int64_t)blocks[i].size();
    comm.alltoallv(g, sendBytes.data(), one, bytes.data(), one);
    send.resize(total);
    int64_t at = 0;
    for (const Bytes &b : blocks) {
      if (!b.empty())
        std::memcpy(send.data() + at, b.data(), b.size());
      at += (int64_t)b.size();
    }
    data.resize(std::accumulate(bytes.begin(), bytes.end(), int64_t(0)));
    comm.alltoallv(g, send.data(), sendBytes, data.data(), bytes);
  }

  /// The payload alone, when both sides know the sizes (a reply to
  /// requests): the caller fills `sendBytes`, `send` (in place: no blocks,
  /// no packing copy) and `bytes`, what each rank sends here. One
  /// all-to-all instead of two.
  void runKnown(Comm &comm, Group &g) {
    data.resize(std::accumulate(bytes.begin(), bytes.end(), int64_t(0)));
    comm.alltoallv(g, send.data(), sendBytes, data.data(), bytes);
  }

  /// Traffic: everything but the blocks to and from oneself.
  std::pair<int64_t, int64_t> offRank(Group &g) const {
    int64_t s = 0, r = 0;
    for (int i = 0; i < g.size(); ++i)
      if (i != g.rank()) {
        s += sendBytes[i];
        r += bytes[i];
      }
    return {s, r};
  }
};

/// Pull the rows this rank's ids name from their servers: each distinct
/// row is requested once. With "block_axes" the table is this rank's block
/// of a table split by rows over those axes: ids outside the block read
/// zeros (the model axis's all-reduce adds the block that holds them).
KernelFn psPull(KernelArgs &args) {
  const TensorView &table = args.in(0), &ids = args.in(1), &rows = args.out(0);
  if (ids.dtype != DType::I64 && ids.dtype != DType::I32)
    args.fail("ids must be i32 or i64");
  if (table.rank() < 1)
    args.fail("the table must have rows");
  Group &group = collectiveGroup(args);
  RowPartition part = partitioningOf(args, table.dim(0), group.size());
  int64_t rowBytes = table.bytes() / std::max<int64_t>(table.dim(0), 1);
  if (rows.bytes() != ids.numElements() * rowBytes)
    args.fail("rows must be ids.shape x the table's row shape");
  auto names = variablesOf(args, 1);
  Comm *comm = args.env.comm;
  TensorView t = table, i = ids, out = rows;
  // Per-kernel scratch, reused every step (see Exchange).
  struct Scratch {
    std::vector<int64_t> wanted, unique, start, next;
    std::vector<const char *> rowOf;
    Exchange asked, got;
  };
  auto s = std::make_shared<Scratch>();
  // The ids are copied before the job starts: their buffer may be reused.
  s->wanted.resize(ids.numElements());
  bool nonnegative = args.flag("nonnegative_ids");
  // A block gather's rows (a padded vocabulary's real ones included), or
  // the whole table.
  detail::RowBlock block{0, part.rows, part.rows};
  if (args.has("block_axes"))
    block = detail::rowBlockOf(args, part.rows, "ps_pull", "block_axes");
  const int64_t tableRows = block.tableRows;
  auto prepare = [=] {
    for (int64_t k = 0; k < i.numElements(); ++k) {
      int64_t id = readIndex(i, k);
      if (id < 0 && nonnegative)
        throw detail::negativeIdError("ps_pull", id, k, tableRows);
      if (id < 0)
        id += tableRows;
      if (id < 0 || id >= tableRows)
        throw KernelError("id " + std::to_string(readIndex(i, k)) +
                          " at position " + std::to_string(k) +
                          " is out of range for a table of " +
                          std::to_string(tableRows) + " rows");
      s->wanted[k] = block.local(id); // -1: another block's
    }
  };
  auto job = [=, &group] {
    int n = group.size();
    std::vector<int64_t> &unique = s->unique;
    unique.clear();
    for (int64_t row : s->wanted)
      if (row >= 0)
        unique.push_back(row);
    std::sort(unique.begin(), unique.end());
    unique.erase(std::unique(unique.begin(), unique.end()), unique.end());
    // Requests, per server, in increasing row order.
    Exchange &asked = s->asked;
    asked.reset(n);
    for (int64_t row : unique) {
      Bytes &b = asked.blocks[part.owner(row)];
      b.insert(b.end(), reinterpret_cast<const char *>(&row),
               reinterpret_cast<const char *>(&row) + sizeof row);
    }
    asked.run(*comm, group);
    // Serve: the rows others asked for, from this rank's table, written
    // straight into the reply. Its sizes need no exchange of their own: a
    // rank that asked a server for k rows gets k rows back.
    Exchange &got = s->got;
    int64_t asks = (int64_t)asked.data.size() / (int64_t)sizeof(int64_t);
    got.sendBytes.resize(n);
    got.bytes.resize(n);
    for (int r = 0; r < n; ++r) {
      got.sendBytes[r] = asked.bytes[r] / (int64_t)sizeof(int64_t) * rowBytes;
      got.bytes[r] = asked.sendBytes[r] / (int64_t)sizeof(int64_t) * rowBytes;
    }
    got.send.resize(asks * rowBytes);
    for (int64_t k = 0; k < asks; ++k) {
      int64_t row;
      std::memcpy(&row, asked.data.data() + k * sizeof(int64_t), sizeof row);
      if (row < 0 || row >= part.rows || part.owner(row) != group.rank())
        throw KernelError("rank " + std::to_string(group.rank()) +
                          " was asked for row " + std::to_string(row) +
                          ", which it does not serve");
      std::memcpy(got.send.data() + k * rowBytes,
                  static_cast<const char *>(t.data) + row * rowBytes, rowBytes);
    }
    got.runKnown(*comm, group);
    // Received rows are in the order requested, server by server.
    s->start.assign(n, 0);
    for (int r = 1; r < n; ++r)
      s->start[r] = s->start[r - 1] + got.bytes[r - 1];
    s->rowOf.resize(unique.size());
    s->next.assign(n, 0);
    for (size_t u = 0; u < unique.size(); ++u) {
      int r = part.owner(unique[u]);
      s->rowOf[u] = got.data.data() + s->start[r] + s->next[r]++ * rowBytes;
    }
    char *dst = static_cast<char *>(out.data);
    for (int64_t k = 0; k < (int64_t)s->wanted.size(); ++k) {
      if (s->wanted[k] < 0) {
        std::memset(dst + k * rowBytes, 0, rowBytes);
        continue;
      }
      size_t u = std::lower_bound(unique.begin(), unique.end(), s->wanted[k]) -
                 unique.begin();
      std::memcpy(dst + k * rowBytes, s->rowOf[u], rowBytes);
    }
    auto a = asked.offRank(group);
    auto b = got.offRank(group);
    comm->traffic.add(names[0], a.first + b.first, a.second + b.second);
  };
  return launch(args, prepare, job);
}

/// Sum of rows per distinct index, index -1 dropped: (sorted indices, rows).
/// `order` is scratch.
template <typename T>
void coalesce(const std::vector<int64_t> &idx, const T *vals, int64_t width,
              std::vector<int64_t> &order, std::vector<int64_t> &outIdx,
              std::vector<T> &outVals) {
  order.clear();
  for (int64_t k = 0; k < (int64_t)idx.size(); ++k)
    if (idx[k] >= 0)
      order.push_back(k);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return idx[a] < idx[b]; });
  outIdx.clear();
  outVals.clear();
  for (int64_t k : order) {
    if (outIdx.empty() || outIdx.back() != idx[k]) {
      outIdx.push_back(idx[k]);
      outVals.insert(outVals.end(), vals + k * width, vals + (k + 1) * width);
    } else {
      T *acc = outVals.data() + (outIdx.size() - 1) * width;
      for (int64_t c = 0; c < width; ++c)
        acc[c] += vals[k * width + c];
    }
  }
}

/// Push a sparse gradient to the servers of its rows; the result is the
/// summed gradient of the rows this rank serves, padded with index -1.
template <typename T>
KernelFn psPushTyped(KernelArgs &args) {
  const TensorView &idx = args.in(0), &vals = args.in(1);
  const TensorView &outIdx = args.out(0), &outVals = args.out(1);
  Group &group = collectiveGroup(args);
  int64_t rows = 0;
  if (!args.has("table_rows"))
    args.fail("missing attribute 'table_rows'");
  rows = args.i64("table_rows");
  RowPartition part = partitioningOf(args, rows, group.size());
  int64_t width = vals.numElements() / std::max<int64_t>(idx.numElements(), 1);
  int64_t capacity = outIdx.numElements();
  bool localAggregation = args.flag("local_aggregation");
  // World ranks are numbered machine by machine (a Pr x Pc grid's too),
  // as the plan's cluster has them.
  int perMachine = std::max(1, args.env.ranksPerMachine);
  auto names = variablesOf(args, 1);
  Comm *comm = args.env.comm;
  TensorView i0 = idx, v0 = vals, i1 = outIdx, v1 = outVals;
  // Per-kernel scratch, reused every step (see Exchange). my* are the
  // inputs, copied before the job starts.
  struct Scratch {
    std::vector<int64_t> myIdx, order, ci, gotIdx, keepIdx, fwdIdx, si, served, fi;
    std::vector<T> myVals, cv, gotVals, keepVals, fwdVals, sv, servedVals, fv;
    Exchange e1, e2;
  };
  auto s = std::make_shared<Scratch>();
  s->myIdx.resize(idx.numElements());
  s->myVals.resize(vals.numElements());
  auto prepare = [=] {
    for (int64_t k = 0; k < i0.numElements(); ++k) {
      int64_t r = i0.as<int64_t>()[k];
      if (r < -1 || r >= rows)
        throw KernelError("row " + std::to_string(r) + " at position " +
                          std::to_string(k) + " is out of range for a table of " +
                          std::to_string(rows) + " rows");
      s->myIdx[k] = r;
    }
    std::memcpy(s->myVals.data(), v0.data, v0.bytes());
  };
  auto job = [=, &group] {
    int n = group.size();
    int64_t record = (int64_t)sizeof(int64_t) + width * (int64_t)sizeof(T);
    auto pack = [&](Exchange &e, int dest, int64_t row, const T *v) {
      Bytes &b = e.blocks[dest];
      size_t at = b.size();
      b.resize(at + record);
      std::memcpy(b.data() + at, &row, sizeof row);
      std::memcpy(b.data() + at + sizeof row, v, width * sizeof(T));
    };
    auto unpack = [&](const Exchange &e, std::vector<int64_t> &is, std::vector<T> &vs) {
      int64_t count = (int64_t)e.data.size() / record;
      for (int64_t k = 0; k < count; ++k) {
        int64_t row;
        std::memcpy(&row, e.data.data() + k * record, sizeof row);
        is.push_back(row);
        const T *v = reinterpret_cast<const T *>(e.data.data() + k * record + sizeof row);
        vs.insert(vs.end(), v, v + width);
      }
    };
    int64_t sent = 0, received = 0;
    auto count = [&](const Exchange &e) {
      auto t = e.offRank(group);
      sent += t.first;
      received += t.second;
    };
    coalesce(s->myIdx, s->myVals.data(), width, s->order, s->ci, s->cv);
    // Machine of a group rank (world ranks are numbered machine by machine).
    auto machine = [&](int r) { return group.members()[r] / perMachine; };
    auto leader = [&](int r) {
      for (int q = 0; q < n; ++q)
        if (machine(q) == machine(r))
          return q;
      return r;
    };
    s->served.clear();
    s->servedVals.clear();
    // A group on one machine has nothing to forward between machines: the
    // second round would be two empty all-to-alls. Every member sees the
    // same layout, so all of them skip it.
    bool oneMachine = true;
    for (int q = 0; q < n; ++q)
      oneMachine = oneMachine && machine(q) == machine(group.rank());
    if (!localAggregation || oneMachine) {
      s->e1.reset(n);
      for (size_t k = 0; k < s->ci.size(); ++k)
        pack(s->e1, part.owner(s->ci[k]), s->ci[k], s->cv.data() + k * width);
      s->e1.run(*comm, group);
      count(s->e1);
      unpack(s->e1, s->served, s->servedVals);
    } else {
      // Round 1: rows of servers on this machine go straight to them; the
      // rest to this machine's leader, which sums them up.
      s->e1.reset(n);
      for (size_t k = 0; k < s->ci.size(); ++k) {
        int owner = part.owner(s->ci[k]);
        int dest = machine(owner) == machine(group.rank()) ? owner : leader(group.rank());
        pack(s->e1, dest, s->ci[k], s->cv.data() + k * width);
      }
      s->e1.run(*comm, group);
      count(s->e1);
      s->gotIdx.clear();
      s->gotVals.clear();
      unpack(s->e1, s->gotIdx, s->gotVals);
      // Split what arrived: rows this rank serves stay; the leader forwards
      // the (summed) rows of other machines' servers in round 2.
      s->keepIdx.clear();
      s->keepVals.clear();
      s->fwdIdx.clear();
      s->fwdVals.clear();
      for (size_t k = 0; k < s->gotIdx.size(); ++k) {
        bool mine = part.owner(s->gotIdx[k]) == group.rank();
        (mine ? s->keepIdx : s->fwdIdx).push_back(s->gotIdx[k]);
        auto &dst = mine ? s->keepVals : s->fwdVals;
        dst.insert(dst.end(), s->gotVals.begin() + k * width,
                   s->gotVals.begin() + (k + 1) * width);
      }
      coalesce(s->fwdIdx, s->fwdVals.data(), width, s->order, s->si, s->sv);
      s->e2.reset(n);
      for (size_t k = 0; k < s->si.size(); ++k)
        pack(s->e2, part.owner(s->si[k]), s->si[k], s->sv.data() + k * width);
      s->e2.run(*comm, group);
      count(s->e2);
      s->served.assign(s->keepIdx.begin(), s->keepIdx.end());
      s->servedVals.assign(s->keepVals.begin(), s->keepVals.end());
      unpack(s->e2, s->served, s->servedVals);
    }
    coalesce(s->served, s->servedVals.data(), width, s->order, s->fi, s->fv);
    const std::vector<int64_t> &fi = s->fi;
    const std::vector<T> &fv = s->fv;
    if ((int64_t)fi.size() > capacity)
      throw KernelError("rank " + std::to_string(group.rank()) + " serves " +
                        std::to_string(fi.size()) + " rows this step, more than " +
                        "the capacity of " + std::to_string(capacity));
    int64_t *oi = i1.as<int64_t>();
    T *ov = v1.as<T>();
    std::copy(fi.begin(), fi.end(), oi);
    std::fill(oi + fi.size(), oi + capacity, int64_t(-1));
    // Unused slots' values are never read (index -1 contributes nothing):
    // they are left as they are. Zeroing them cost a write of the whole
    // capacity, G times the rows pushed, every step.
    std::copy(fv.begin(), fv.end(), ov);
    comm->traffic.add(names[0], sent, received);
  };
  return launch(args, prepare, job);
}

KernelFn psPush(KernelArgs &args) {
  args.expectDType(args.in(0), DType::I64, "indices");
  switch (args.in(1).dtype) {
  case DType::F32: return psPushTyped<float>(args);
  case DType::F64: return psPushTyped<double>(args);
  default: args.fail("ps_push supports f32 and f64 rows");
  }
}

} // namespace

JobInfo jobInfoOf(const KernelArgs &args) {
  JobInfo info;
  info.kernel = args.index;
  info.name = args.kernel.op;
  std::string where = "kernel #" + std::to_string(args.index);
  const auto &attrs = args.kernel.attrs;
  if (attrs.contains("bucket") && attrs["bucket"].is_number_integer())
    where += ", bucket " + std::to_string(attrs["bucket"].get<int64_t>());
  else if (attrs.contains("variables") && attrs["variables"].is_array() &&
           attrs["variables"].size() == 1 && attrs["variables"][0].is_string())
    where += ", " + attrs["variables"][0].get<std::string>();
  info.description = args.kernel.op + " (" + where + ")";
  return info;
}

void registerCollectiveKernels(KernelRegistry &r) {
  r.add("all_reduce", allReduce);
  r.add("all_gather", allGather);
  r.add("all_slice", allSlice);
  r.add("all_gather_variables", allGatherVariables);
  r.add("reduce_scatter", reduceScatter);
  r.add("all_to_all", allToAll);
  r.add("halo_exchange", halo);
  r.add("halo_reduce", halo);
  r.add("all_gatherv", allGatherV);
  r.add("ps_pull", psPull);
  r.add("ps_push", psPush);
  r.add("wait", wait);
}

} // namespace parallax::rt
