//===- CollectivesTest.cpp - Work and the host transports' Collectives ----===//
//
// What a collective returns to wait on (Comm::submit's Work, thenRun) and
// the Collectives seam over the host transports, on the world of one
// (multi-rank exchanges are tested under mpirun by test/Distributed).
// NCCL's Collectives are tested on a GPU (test/Unit/Cuda/CollectiveTest).

#include "parallax/Runtime/CollectiveVolume.h"
#include "parallax/Runtime/Collectives.h"
#include "parallax/Runtime/Device.h"

#include "../../../lib/Runtime/Kernels/CollectiveLayout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

using namespace parallax::rt;

namespace {

TEST(Work, WaitRethrowsTheJobsError) {
  auto comm = makeLocalComm();
  std::shared_ptr<Work> w = comm->submit([] { throw CommError("rank 3 is gone"); });
  try {
    w->wait();
    FAIL() << "no error";
  } catch (const CommError &e) {
    EXPECT_STREQ(e.what(), "rank 3 is gone");
  }
  // Once: a second wait has nothing left to report.
  EXPECT_NO_THROW(w->wait());
}

TEST(Work, ThenRunFollowsTheWorkOnce) {
  auto comm = makeLocalComm();
  std::vector<int> order;
  auto w = thenRun(comm->submit([&] { order.push_back(1); }), [&] { order.push_back(2); });
  w->wait();
  w->wait();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(Work, ThenRunDoesNotRunAfterAFailure) {
  auto comm = makeLocalComm();
  bool ran = false;
  auto w = thenRun(comm->submit([] { throw CommError("boom"); }), [&] { ran = true; });
  EXPECT_THROW(w->wait(), CommError);
  EXPECT_FALSE(ran);
}

TEST(HostCollectives, CpuDeviceKeepsOnePerGroup) {
  auto comm = makeLocalComm();
  auto cpu = makeCpuDevice();
  Group &g = comm->group({1}, {0});
  Collectives *a = cpu->collectives(*comm, g);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a, cpu->collectives(*comm, g));
  EXPECT_STREQ(a->transport(), "local");
  EXPECT_EQ(&a->group(), &g);
}

TEST(HostCollectives, OneRankOperationsKeepOrCopyItsBlock) {
  auto comm = makeLocalComm();
  Group &g = comm->group({1}, {0});
  auto c = makeHostCollectives(*comm, g);
  std::vector<float> x(10);
  std::iota(x.begin(), x.end(), 1.0f);
  std::vector<float> keep = x;
  c->allReduce(x.data(), 10, DType::F32, ReduceOp::Average)->wait();
  EXPECT_EQ(x, keep);
  c->reduceScatterBlock(x.data(), 10, DType::F32, ReduceOp::Sum)->wait();
  EXPECT_EQ(x, keep);
  c->allGatherBlock(x.data(), 40)->wait();
  EXPECT_EQ(x, keep);
  std::vector<float> y(10, 0.f), z(10, 0.f);
  c->allGather(x.data(), y.data(), 40)->wait();
  EXPECT_EQ(y, keep);
  c->allToAll(x.data(), z.data(), 40)->wait();
  EXPECT_EQ(z, keep);
  // No other member to send to: nothing to do, and a peer is an error.
  EXPECT_NO_THROW(c->sendRecv({})->wait());
  try {
    c->sendRecv({PeerTransfer{1, x.data(), 4, y.data(), 4}})->wait();
    FAIL() << "sent to a rank that is not there";
  } catch (const CommError &e) {
    EXPECT_STREQ(e.what(), "sendrecv: group rank 1 is not another member of a group of 1 "
                           "(this rank is 0)");
  }
}

TEST(HostCollectives, TransportNames) {
  EXPECT_EQ(parseTransport("auto"), DeviceOptions::Transport::Auto);
  EXPECT_EQ(parseTransport("nccl"), DeviceOptions::Transport::Nccl);
  EXPECT_EQ(parseTransport("mpi"), DeviceOptions::Transport::Mpi);
  try {
    parseTransport("gloo");
    FAIL() << "accepted gloo";
  } catch (const std::invalid_argument &e) {
    EXPECT_NE(std::string(e.what()).find("unknown collectives transport 'gloo'"),
              std::string::npos);
  }
}

// The layouts of the collectives along an axis (CollectiveLayout.h), for
// groups of three members: what a GPU (NCCL) and the CPU (MPI) do with
// what G ranks exchanged, checked here against coordinates, since one GPU
// can only run a group of one.

/// Member m's tensor: distinct values per member and element.
std::vector<float> memberTensor(int m, int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = (float)(1000 * m + i);
  return v;
}

int64_t numelOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int64_t flat(const std::vector<int64_t> &shape, const std::vector<int64_t> &at) {
  int64_t f = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    f = f * shape[d] + at[d];
  return f;
}

/// Every coordinate of `shape`, in row-major order.
template <typename F> void forEachCoordinate(const std::vector<int64_t> &shape, F f) {
  std::vector<int64_t> at(shape.size(), 0);
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  for (int64_t k = 0; k < n; ++k) {
    f(at);
    for (int d = (int)shape.size() - 1; d >= 0 && ++at[d] == shape[d]; --d)
      at[d] = 0;
  }
}

struct LayoutArgs {
  char present = 0;
  PlanKernel kernel;
  ExecEnv env;
  std::vector<TensorView> ins, outs;
  LayoutArgs(const char *op, nlohmann::json attrs, std::vector<int64_t> in,
             std::vector<int64_t> out) {
    kernel.op = op;
    kernel.attrs = std::move(attrs);
    // Only shapes are read: any non-null address marks the tensors present.
    ins.push_back(TensorView{&present, DType::F32, std::move(in)});
    outs.push_back(TensorView{&present, DType::F32, std::move(out)});
  }
  KernelArgs args() { return KernelArgs(kernel, ins, outs, env); }
};

constexpr int G = 3;

TEST(CollectiveLayout, AllGatherConcatenatesAlongTheAxis) {
  std::vector<int64_t> xs{2, 3, 4};
  for (int axis = 0; axis < 3; ++axis) {
    std::vector<int64_t> ys = xs;
    ys[axis] *= G;
    LayoutArgs la("all_gather", {{"gather_axis", axis}}, xs, ys);
    KernelArgs args = la.args();
    int64_t bytes = 24 * 4;
    std::vector<float> gathered; // what the members sent, in group order
    for (int m = 0; m < G; ++m) {
      auto v = memberTensor(m, 24);
      gathered.insert(gathered.end(), v.begin(), v.end());
    }
    std::vector<float> y(24 * G, -1.f);
    for (const PitchedCopy &c : allGatherPlacement(allGatherSlicesOf(args), G, bytes))
      copyOnHost(c, reinterpret_cast<char *>(y.data()),
                 reinterpret_cast<const char *>(gathered.data()));
    forEachCoordinate(ys, [&](const std::vector<int64_t> &at) {
      int m = (int)(at[axis] / xs[axis]);
      std::vector<int64_t> from = at;
      from[axis] %= xs[axis];
      ASSERT_EQ(y[flat(ys, at)], memberTensor(m, 24)[flat(xs, from)]) << "axis " << axis;
    });
  }
}

TEST(CollectiveLayout, ReduceScatterKeepsTheRanksSliceAndPacksThemInGroupOrder) {
  std::vector<int64_t> xs{3, 6, 3};
  for (int axis = 0; axis < 3; ++axis) {
    std::vector<int64_t> ys = xs;
    ys[axis] /= G;
    LayoutArgs la("reduce_scatter", {{"scatter_axis", axis}}, xs, ys);
    KernelArgs args = la.args();
    std::vector<float> reduced = memberTensor(7, 54);
    for (int r = 0; r < G; ++r) {
      std::vector<float> y(18, -1.f);
      copyOnHost(reduceScatterSlice(reduceScatterSlicesOf(args, G), G, r),
                 reinterpret_cast<char *>(y.data()),
                 reinterpret_cast<const char *>(reduced.data()));
      forEachCoordinate(ys, [&](const std::vector<int64_t> &at) {
        std::vector<int64_t> from = at;
        from[axis] += r * ys[axis];
        ASSERT_EQ(y[flat(ys, at)], reduced[flat(xs, from)]) << "axis " << axis << " rank " << r;
      });
    }
    // MPI_Reduce_scatter_block hands rank r the r-th contiguous block: the
    // packing puts each rank's slice there.
    std::vector<float> packed(54, -1.f);
    for (const PitchedCopy &c : reduceScatterPacking(reduceScatterSlicesOf(args, G), G))
      copyOnHost(c, reinterpret_cast<char *>(packed.data()),
                 reinterpret_cast<const char *>(reduced.data()));
    for (int r = 0; r < G; ++r)
      forEachCoordinate(ys, [&](const std::vector<int64_t> &at) {
        std::vector<int64_t> from = at;
        from[axis] += r * ys[axis];
        ASSERT_EQ(packed[r * 18 + flat(ys, at)], reduced[flat(xs, from)])
            << "packed, axis " << axis << " rank " << r;
      });
  }
}

TEST(CollectiveLayout, AllToAllSplitsSendsAndConcatenates) {
  std::vector<int64_t> xs{3, 6, 9};
  const int64_t n = 3 * 6 * 9;
  for (int split = 0; split < 3; ++split)
    for (int concat = 0; concat < 3; ++concat) {
      std::vector<int64_t> piece = xs;
      piece[split] /= G;
      std::vector<int64_t> ys = piece;
      ys[concat] *= G;
      LayoutArgs la("all_to_all", {{"split_axis", split}, {"concat_axis", concat}}, xs, ys);
      KernelArgs args = la.args();
      AllToAllLayout l = allToAllLayoutOf(args, G);
      ASSERT_EQ(l.pieceBytes, n * 4 / G);
      // Pack every member's x; member j receives block j of each.
      std::vector<std::vector<float>> sent(G, std::vector<float>(n));
      for (int m = 0; m < G; ++m) {
        auto x = memberTensor(m, n);
        for (const PitchedCopy &c : l.pack)
          copyOnHost(c, reinterpret_cast<char *>(sent[m].data()),
                     reinterpret_cast<const char *>(x.data()));
      }
      int64_t perPiece = n / G;
      for (int j = 0; j < G; ++j) {
        std::vector<float> got(n), y(n, -1.f);
        for (int i = 0; i < G; ++i)
          std::copy(sent[i].begin() + j * perPiece, sent[i].begin() + (j + 1) * perPiece,
                    got.begin() + i * perPiece);
        for (const PitchedCopy &c : l.unpack)
          copyOnHost(c, reinterpret_cast<char *>(y.data()),
                     reinterpret_cast<const char *>(got.data()));
        // y_j = the pieces j of every member's x, concatenated along concat.
        forEachCoordinate(ys, [&](const std::vector<int64_t> &at) {
          int i = (int)(at[concat] / piece[concat]);
          std::vector<int64_t> from = at;
          from[concat] %= piece[concat];
          from[split] += j * piece[split];
          ASSERT_EQ(y[flat(ys, at)], memberTensor(i, n)[flat(xs, from)])
              << "split " << split << " concat " << concat << " member " << j;
        });
      }
    }
}

TEST(CollectiveLayout, AllGatherVSeparatesIndicesAndRows) {
  // Three blocks of [2 indices (16 bytes) | 2 rows of 3 floats (24 bytes)].
  std::vector<char> blocks(G * 40);
  for (int m = 0; m < G; ++m) {
    int64_t idx[2] = {10 * m, 10 * m + 1};
    float rows[6];
    for (int k = 0; k < 6; ++k)
      rows[k] = (float)(100 * m + k);
    std::memcpy(blocks.data() + m * 40, idx, 16);
    std::memcpy(blocks.data() + m * 40 + 16, rows, 24);
  }
  std::vector<int64_t> indices(2 * G, -7);
  std::vector<float> rows(6 * G, -7.f);
  auto [ci, cr] = allGatherVSplit(16, 24, G);
  copyOnHost(ci, reinterpret_cast<char *>(indices.data()), blocks.data());
  copyOnHost(cr, reinterpret_cast<char *>(rows.data()), blocks.data());
  for (int m = 0; m < G; ++m) {
    EXPECT_EQ(indices[2 * m], 10 * m);
    EXPECT_EQ(indices[2 * m + 1], 10 * m + 1);
    for (int k = 0; k < 6; ++k)
      EXPECT_EQ(rows[6 * m + k], (float)(100 * m + k));
  }
}

// Domain parallelism's halos (HaloLayout): an NCHW tensor split along H
// over three members. Each member's layout packs, sends and unpacks on its
// own buffers; the messages are delivered as its neighbours' layouts say,
// and every member's result is checked against the global tensor.

struct HaloCase {
  int64_t lo, hi;
};
const HaloCase kHaloCases[] = {{1, 1}, {1, 0}, {0, 2}};
// N, C, rows per member, W.
constexpr int64_t kN = 2, kC = 3, kRows = 4, kW = 5;

std::vector<int64_t> nchw(int64_t h) { return {kN, kC, h, kW}; }

/// Runs the three members' layouts of `op` on their inputs `ins` (member
/// m's input, its shape `in`): packs, delivers each message to the peer that
/// expects it (the sizes must agree), unpacks. Member m's output.
std::vector<std::vector<float>> runHalo(const char *op, const HaloCase &h,
                                        const std::vector<std::vector<float>> &ins,
                                        const std::vector<int64_t> &in,
                                        const std::vector<int64_t> &out, double edge = 0) {
  std::vector<HaloLayout> layouts;
  std::vector<std::vector<char>> send(G), recv(G);
  std::vector<std::vector<float>> outs(G, std::vector<float>(numelOf(out), -7.f));
  for (int m = 0; m < G; ++m) {
    nlohmann::json attrs = {{"axis", 2}, {"lo", h.lo}, {"hi", h.hi}};
    if (edge != 0)
      attrs["edge"] = planDouble(edge);
    LayoutArgs la(op, attrs, in, out);
    KernelArgs args = la.args();
    layouts.push_back(haloLayoutOf(args, G, m));
    const HaloLayout &l = layouts.back();
    EXPECT_EQ(l.reduce, std::string(op) == "halo_reduce");
    send[m].assign(l.sendBytes, 0);
    recv[m].assign(l.recvBytes, 0);
    const char *x = reinterpret_cast<const char *>(ins[m].data());
    char *y = reinterpret_cast<char *>(outs[m].data());
    for (const PitchedCopy &c : l.pack)
      copyOnHost(c, send[m].data(), x);
    copyOnHost(l.body, y, x);
    for (const PitchedCopy &c : l.fill)
      fillOnHost(c, y, l.edge, DType::F32);
  }
  for (int m = 0; m < G; ++m)
    for (const PeerTransfer &t : layouts[m].transfers(send[m].data(), recv[m].data())) {
      EXPECT_TRUE(t.peer == m - 1 || t.peer == m + 1) << "member " << m;
      // What the peer expects from m.
      bool found = false;
      for (const PeerTransfer &u :
           layouts[t.peer].transfers(send[t.peer].data(), recv[t.peer].data()))
        if (u.peer == m) {
          found = true;
          EXPECT_EQ(u.recvBytes, t.sendBytes) << m << " -> " << t.peer;
          if (u.recvBytes == t.sendBytes && t.sendBytes > 0)
            std::memcpy(u.recv, t.send, t.sendBytes);
        }
      EXPECT_TRUE(found) << "member " << t.peer << " expects nothing from " << m;
    }
  for (int m = 0; m < G; ++m)
    for (const PitchedCopy &c : layouts[m].unpack) {
      char *y = reinterpret_cast<char *>(outs[m].data());
      if (layouts[m].reduce)
        addOnHost(c, y, recv[m].data(), DType::F32);
      else
        copyOnHost(c, y, recv[m].data());
    }
  return outs;
}

TEST(CollectiveLayout, HaloExchangeExtendsEachBlockWithItsNeighboursRows) {
  const int64_t H = G * kRows;
  const std::vector<int64_t> global = nchw(H);
  std::vector<float> X = memberTensor(1, numelOf(global));
  // Past the group's ends: a convolution's zeros, a max pool's -inf.
  for (double edge : {0.0, -std::numeric_limits<double>::infinity()})
  for (const HaloCase &h : kHaloCases) {
    SCOPED_TRACE(::testing::Message() << "lo " << h.lo << " hi " << h.hi << " edge " << edge);
    const std::vector<int64_t> block = nchw(kRows), ext = nchw(h.lo + kRows + h.hi);
    std::vector<std::vector<float>> xs(G, std::vector<float>(numelOf(block)));
    for (int m = 0; m < G; ++m)
      forEachCoordinate(block, [&](const std::vector<int64_t> &at) {
        std::vector<int64_t> g = at;
        g[2] += m * kRows;
        xs[m][flat(block, at)] = X[flat(global, g)];
      });
    auto ys = runHalo("halo_exchange", h, xs, block, ext, edge);
    for (int m = 0; m < G; ++m)
      forEachCoordinate(ext, [&](const std::vector<int64_t> &at) {
        // Row r of the extended block is global row m * rows - lo + r;
        // outside the tensor, the edge value (the padding).
        std::vector<int64_t> g = at;
        g[2] += m * kRows - h.lo;
        float want = g[2] >= 0 && g[2] < H ? X[flat(global, g)] : (float)edge;
        ASSERT_EQ(ys[m][flat(ext, at)], want) << "member " << m << " row " << at[2];
      });
  }
}

TEST(CollectiveLayout, HaloReduceSumsEveryRowsCopies) {
  const int64_t H = G * kRows;
  const std::vector<int64_t> global = nchw(H);
  for (const HaloCase &h : kHaloCases) {
    SCOPED_TRACE(::testing::Message() << "lo " << h.lo << " hi " << h.hi);
    const std::vector<int64_t> block = nchw(kRows), ext = nchw(h.lo + kRows + h.hi);
    // Member m's extended block (integers: every sum is exact), and the
    // adjoint computed directly: each of its rows added into the global row
    // it is a copy of, rows outside the tensor dropped.
    std::vector<std::vector<float>> es;
    std::vector<float> sum(numelOf(global), 0.f);
    for (int m = 0; m < G; ++m) {
      es.push_back(memberTensor(m + 1, numelOf(ext)));
      forEachCoordinate(ext, [&](const std::vector<int64_t> &at) {
        std::vector<int64_t> g = at;
        g[2] += m * kRows - h.lo;
        if (g[2] >= 0 && g[2] < H)
          sum[flat(global, g)] += es[m][flat(ext, at)];
      });
    }
    auto outs = runHalo("halo_reduce", h, es, ext, block);
    for (int m = 0; m < G; ++m)
      forEachCoordinate(block, [&](const std::vector<int64_t> &at) {
        std::vector<int64_t> g = at;
        g[2] += m * kRows;
        ASSERT_EQ(outs[m][flat(block, at)], sum[flat(global, g)])
            << "member " << m << " row " << at[2];
      });
  }
}

TEST(CollectiveLayout, HaloBuffersHoldWhatCollectiveVolumeCounts) {
  const int64_t row = kN * kC * kW * 4; // one row of every outer slice
  for (const HaloCase &h : kHaloCases)
    for (const char *op : {"halo_exchange", "halo_reduce"}) {
      bool reduce = std::string(op) == "halo_reduce";
      std::vector<int64_t> block = nchw(kRows), ext = nchw(h.lo + kRows + h.hi);
      for (int m = 0; m < G; ++m) {
        LayoutArgs la(op, {{"axis", 2}, {"lo", h.lo}, {"hi", h.hi}}, reduce ? ext : block,
                      reduce ? block : ext);
        KernelArgs args = la.args();
        HaloLayout l = haloLayoutOf(args, G, m);
        EXPECT_EQ(l.loBytes, h.lo * row);
        EXPECT_EQ(l.hiBytes, h.hi * row);
        auto bytes = haloBytes(!reduce, l.loBytes, l.hiBytes, m, G);
        EXPECT_EQ(bytes.first, l.sendBytes) << op << " member " << m;
        EXPECT_EQ(bytes.second, l.recvBytes) << op << " member " << m;
      }
    }
}

TEST(CollectiveLayout, HaloShapesAreChecked) {
  auto error = [](const char *op, nlohmann::json attrs, std::vector<int64_t> in,
                  std::vector<int64_t> out) {
    LayoutArgs la(op, std::move(attrs), std::move(in), std::move(out));
    KernelArgs args = la.args();
    try {
      haloLayoutOf(args, G, 1);
    } catch (const KernelError &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error("halo_exchange", {{"axis", 1}, {"lo", 1}, {"hi", 1}}, {2, 8}, {2, 9}),
            "the extended block must be [2, 10] (1 + 8 + 1 rows along axis 1), got [2, 9]");
  EXPECT_EQ(error("halo_reduce", {{"axis", 1}, {"lo", 1}, {"hi", 2}}, {2, 8}, {2, 4}),
            "the extended block must be [2, 7] (1 + 4 + 2 rows along axis 1), got [2, 8]");
  EXPECT_EQ(error("halo_reduce", {{"axis", 1}, {"lo", 3}, {"hi", 3}}, {2, 8}, {2, 2}),
            "halos of 3 and 3 rows exceed the block's 2 rows along axis 1");
  EXPECT_EQ(error("halo_exchange", {{"axis", 2}, {"lo", 0}, {"hi", 0}}, {2, 8}, {2, 8}),
            "axis 2 is out of range for rank 2");
  EXPECT_EQ(error("halo_exchange", {{"axis", 0}, {"lo", 0}}, {2, 8}, {2, 8}),
            "missing attribute 'hi'");
}

TEST(CollectiveVolume, HaloBytesPerMember) {
  // lo halo 100 bytes, hi halo 30: the exchange sends hi rows down and lo
  // rows up; the ends have one neighbour; a group of one moves nothing.
  using P = std::pair<int64_t, int64_t>;
  EXPECT_EQ(haloBytes(true, 100, 30, 0, 3), P(100, 30));
  EXPECT_EQ(haloBytes(true, 100, 30, 1, 3), P(130, 130));
  EXPECT_EQ(haloBytes(true, 100, 30, 2, 3), P(30, 100));
  EXPECT_EQ(haloBytes(true, 100, 30, 0, 1), P(0, 0));
  EXPECT_EQ(haloBytes(false, 100, 30, 0, 3), P(30, 100));
  EXPECT_EQ(haloBytes(false, 100, 30, 2, 3), P(100, 30));
  EXPECT_EQ(haloBytes(false, 100, 0, 1, 2), P(100, 0));
}

} // namespace
