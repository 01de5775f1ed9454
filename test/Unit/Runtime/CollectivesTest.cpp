//===- CollectivesTest.cpp - Work and the host transports' Collectives ----===//
//
// What a collective returns to wait on (Comm::submit's Work, thenRun) and
// the Collectives seam over the host transports, on the world of one
// (multi-rank exchanges are tested under mpirun by test/Distributed).
// NCCL's Collectives are tested on a GPU (test/Unit/Cuda/CollectiveTest).

#include "parallax/Runtime/Collectives.h"
#include "parallax/Runtime/Device.h"

#include "../../../lib/Runtime/Kernels/CollectiveLayout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
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

TEST(CollectiveLayout, ReduceScatterKeepsTheRanksSlice) {
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

} // namespace
