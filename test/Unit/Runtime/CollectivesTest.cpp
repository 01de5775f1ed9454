//===- CollectivesTest.cpp - Work and the host transports' Collectives ----===//
//
// What a collective returns to wait on (Comm::submit's Work, thenRun) and
// the Collectives seam over the host transports, on the world of one
// (multi-rank exchanges are tested under mpirun by test/Distributed).
// NCCL's Collectives are tested on a GPU (test/Unit/Cuda/CollectiveTest).

#include "parallax/Runtime/Collectives.h"
#include "parallax/Runtime/Device.h"

#include <gtest/gtest.h>

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

} // namespace
