// Collective kernels on a world of one (the multi-rank behaviour is tested
// end to end under mpirun by test/Distributed): the parameter-server pull is
// a gather, the push a coalescing, all-reduce and all-gather are copies.
// Also where a rank runs its collectives (CommThread).

#include "KernelTestUtil.h"

#include "parallax/Runtime/Comm.h"

#include <sched.h>

#include <limits>
#include <thread>

using namespace parallax::rt;
using namespace parallax::rt::test;

namespace {

ExecEnv envWith(Comm &comm, int tokens = 0) {
  ExecEnv env;
  env.comm = &comm;
  env.pending.assign(tokens, nullptr);
  return env;
}

TEST(Collective, PsPullIsAGatherOfRows) {
  auto comm = makeLocalComm();
  const int64_t rows = 1000, width = 16, n = 300;
  TestTensor table(DType::F32, {rows, width}, randomValues(rows * width, 1));
  std::vector<double> ids;
  std::mt19937_64 gen(2);
  for (int64_t i = 0; i < n; ++i)
    ids.push_back((double)(gen() % 120) - (i % 7 == 0 ? rows : 0)); // repeats, negatives
  TestTensor idx(DType::I64, {n / 3, 3}, ids);
  TestTensor out(DType::F32, {n / 3, 3, width});
  runKernel("ps_pull", {&table, &idx}, {&out},
            {{"partitions", 3}, {"placement", {0, 0, 0}}}, envWith(*comm));
  for (int64_t i = 0; i < n; ++i) {
    int64_t r = (int64_t)ids[i];
    if (r < 0)
      r += rows;
    for (int64_t c = 0; c < width; ++c)
      ASSERT_EQ(out.get(i * width + c), table.get(r * width + c)) << i << "," << c;
  }
}

TEST(Collective, PsPullAsyncWithWait) {
  auto comm = makeLocalComm();
  TestTensor table(DType::F32, {50, 4}, randomValues(200, 3));
  TestTensor idx(DType::I32, {5}, {4, 4, 49, 0, 7});
  TestTensor out(DType::F32, {5, 4});
  ExecEnv env = envWith(*comm, 1);
  runKernel("ps_pull", {&table, &idx}, {&out},
            {{"partitions", 1}, {"placement", {0}}, {"token", 0}}, env);
  for (int64_t c = 0; c < 4; ++c)
    EXPECT_EQ(out.get(2 * 4 + c), table.get(49 * 4 + c));
}

TEST(Collective, PsPullRejectsOutOfRangeIds) {
  auto comm = makeLocalComm();
  TestTensor table(DType::F32, {10, 2});
  TestTensor idx(DType::I64, {2}, {3, 10});
  TestTensor out(DType::F32, {2, 2});
  try {
    runKernel("ps_pull", {&table, &idx}, {&out},
              {{"partitions", 1}, {"placement", {0}}}, envWith(*comm));
    FAIL() << "no error";
  } catch (const KernelError &e) {
    EXPECT_EQ(std::string(e.what()),
              "id 10 at position 1 is out of range for a table of 10 rows");
  }
}

TEST(Collective, PsPullOfAnEmbeddingRefusesNegativeIds) {
  auto comm = makeLocalComm();
  TestTensor table(DType::F32, {10, 2});
  TestTensor idx(DType::I64, {3}, {3, -2, 1});
  TestTensor out(DType::F32, {3, 2});
  try {
    runKernel("ps_pull", {&table, &idx}, {&out},
              {{"partitions", 1}, {"placement", {0}}, {"nonnegative_ids", true}},
              envWith(*comm));
    FAIL() << "no error";
  } catch (const KernelError &e) {
    EXPECT_EQ(std::string(e.what()),
              "ps_pull: id -2 at position 1 of the ids is negative: PyTorch's "
              "nn.Embedding refuses it, ONNX's Gather would read row 8 of 10 "
              "(compile with parallax-opt --allow-negative-ids for that)");
  }
}

TEST(Collective, PsPushCoalescesRowsAndPads) {
  auto comm = makeLocalComm();
  TestTensor idx(DType::I64, {5}, {7, 2, 7, -1, 2});
  TestTensor vals(DType::F32, {5, 2}, {1, 2, 3, 4, 5, 6, 100, 100, 7, 8});
  TestTensor outIdx(DType::I64, {5}), outVals(DType::F32, {5, 2});
  runKernel("ps_push", {&idx, &vals}, {&outIdx, &outVals},
            {{"partitions", 2}, {"placement", {0, 0}}, {"table_rows", 10},
             {"local_aggregation", true}},
            envWith(*comm));
  EXPECT_EQ(outIdx.values(), (std::vector<double>{2, 7, -1, -1, -1}));
  // The used slots' values (unused slots' values are unspecified).
  std::vector<double> used = outVals.values();
  used.resize(4);
  EXPECT_EQ(used, (std::vector<double>{10, 12, 6, 8}));
}

TEST(Collective, AllReduceOfOneRankCopiesEveryMember) {
  auto comm = makeLocalComm();
  TestTensor a(DType::F32, {3}, {1, 2, 3}), b(DType::F32, {2}, {4, 5});
  TestTensor ya(DType::F32, {3}), yb(DType::F32, {2});
  runKernel("all_reduce", {&a, &b}, {&ya, &yb},
            {{"reduction", "average"}, {"variables", {"a", "b"}}}, envWith(*comm));
  EXPECT_EQ(ya.values(), a.values());
  EXPECT_EQ(yb.values(), b.values());
  EXPECT_EQ(comm->traffic.byVariable["a"].sent, 0); // nothing crosses a wire
}

/// Binds an all_reduce over views into one buffer (as the plan lays out an
/// in-place bucket) and runs it: the error message, or "".
std::string allReduceInPlace(Comm &comm, std::vector<float> &buffer,
                             const std::vector<int64_t> &offsets,
                             const std::vector<int64_t> &sizes) {
  PlanKernel kernel;
  kernel.op = "all_reduce";
  kernel.attrs = {{"in_place", true}, {"reduction", "average"}};
  std::vector<TensorView> views;
  for (size_t i = 0; i < offsets.size(); ++i)
    views.push_back(TensorView{buffer.data() + offsets[i], DType::F32, {sizes[i]}});
  ExecEnv env = envWith(comm);
  env.step = 1;
  try {
    KernelArgs args(kernel, views, views, env);
    (*KernelRegistry::global().find("all_reduce"))(args)();
  } catch (const KernelError &e) {
    return e.what();
  }
  return "";
}

TEST(Collective, AllReduceInPlaceUsesTheBucketItself) {
  auto comm = makeLocalComm();
  // Two tensors, 3 and 2 floats, at the 64-byte offsets 0 and 16 floats.
  std::vector<float> buffer(32, 0.f);
  buffer[0] = 1, buffer[1] = 2, buffer[2] = 3, buffer[16] = 4, buffer[17] = 5;
  EXPECT_EQ(allReduceInPlace(*comm, buffer, {0, 16}, {3, 2}), "");
  EXPECT_EQ(buffer[2], 3.f); // one rank: the average is the value
  EXPECT_EQ(buffer[17], 5.f);
  // Not the plan's layout (the second tensor right after the first): refused.
  EXPECT_EQ(allReduceInPlace(*comm, buffer, {0, 3}, {3, 2}),
            "an in_place all_reduce needs its tensors back to back in "
            "one buffer, each output the memory of its input (tensor 1 is not)");
}

TEST(Collective, AllGatherVOfOneRankCopies) {
  auto comm = makeLocalComm();
  TestTensor idx(DType::I64, {2}, {3, 1}), vals(DType::F32, {2, 2}, {1, 2, 3, 4});
  TestTensor oi(DType::I64, {2}), ov(DType::F32, {2, 2});
  runKernel("all_gatherv", {&idx, &vals}, {&oi, &ov}, {}, envWith(*comm));
  EXPECT_EQ(oi.values(), idx.values());
  EXPECT_EQ(ov.values(), vals.values());
}

// A group of one has no neighbours: the exchange is the padding along the
// axis (a convolution's zeros, a max pool's -inf: the "edge" attribute),
// its adjoint keeps the middle rows.
TEST(Collective, HaloExchangeOfOneRankPadsWithZeros) {
  auto comm = makeLocalComm();
  for (DType dt : {DType::F32, DType::F64}) {
    TestTensor x(dt, {2, 3, 4, 5}, randomValues(120, 21));
    TestTensor y(dt, {2, 3, 7, 5}, std::vector<double>(210, -9.0));
    // Started with a token; the wait kernel finishes it.
    ExecEnv env = envWith(*comm, 1);
    PlanKernel exchange, wait;
    exchange.op = "halo_exchange";
    exchange.attrs = {{"axis", 2}, {"lo", 1}, {"hi", 2}, {"token", 0}, {"variables", {"conv.x"}}};
    wait.op = "wait";
    wait.attrs = {{"token", 0}};
    KernelArgs ea(exchange, {x.view()}, {y.view()}, env), wa(wait, {}, {}, env);
    (*KernelRegistry::global().find("halo_exchange"))(ea)();
    ASSERT_NE(env.pending[0], nullptr);
    (*KernelRegistry::global().find("wait"))(wa)();
    EXPECT_EQ(env.pending[0], nullptr);
    for (int64_t o = 0; o < 6; ++o)
      for (int64_t r = 0; r < 7; ++r)
        for (int64_t w = 0; w < 5; ++w) {
          double want = r >= 1 && r < 5 ? x.get((o * 4 + r - 1) * 5 + w) : 0.0;
          ASSERT_EQ(y.get((o * 7 + r) * 5 + w), want) << o << "," << r << "," << w;
        }
    EXPECT_EQ(comm->traffic.byVariable["conv.x"].sent, 0);
    EXPECT_EQ(comm->traffic.byVariable["conv.x"].received, 0);
    // A max pool's padding, "-inf" as the plan writes it.
    TestTensor small(dt, {2, 2}, {1, 2, 3, 4}), padded(dt, {2, 4});
    runKernel("halo_exchange", {&small}, {&padded},
              {{"axis", 1}, {"lo", 1}, {"hi", 1}, {"edge", "-inf"}}, envWith(*comm));
    double inf = std::numeric_limits<double>::infinity();
    EXPECT_EQ(padded.values(), (std::vector<double>{-inf, 1, 2, -inf, -inf, 3, 4, -inf}));
  }
}

TEST(Collective, HaloReduceOfOneRankKeepsTheMiddleRows) {
  auto comm = makeLocalComm();
  for (DType dt : {DType::F32, DType::F64}) {
    // Along the last axis: every row is one element.
    TestTensor e(dt, {3, 6}, randomValues(18, 22)), x(dt, {3, 4});
    runKernel("halo_reduce", {&e}, {&x}, {{"axis", 1}, {"lo", 0}, {"hi", 2}}, envWith(*comm));
    for (int64_t o = 0; o < 3; ++o)
      for (int64_t r = 0; r < 4; ++r)
        ASSERT_EQ(x.get(o * 4 + r), e.get(o * 6 + r)) << o << "," << r;
    // Along the first: one contiguous block.
    TestTensor e0(dt, {5, 2}, randomValues(10, 23)), x0(dt, {3, 2});
    runKernel("halo_reduce", {&e0}, {&x0}, {{"axis", 0}, {"lo", 1}, {"hi", 1}}, envWith(*comm));
    for (int64_t i = 0; i < 6; ++i)
      ASSERT_EQ(x0.get(i), e0.get(2 + i)) << i;
  }
}

TEST(Collective, HaloKernelsRefuseWhatTheyCannotRun) {
  auto comm = makeLocalComm();
  auto error = [&](const char *op, TestTensor in, TestTensor out, nlohmann::json attrs) {
    try {
      runKernel(op, {&in}, {&out}, std::move(attrs), envWith(*comm));
    } catch (const KernelError &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error("halo_exchange", TestTensor(DType::I64, {4}), TestTensor(DType::I64, {6}),
                  {{"axis", 0}, {"lo", 1}, {"hi", 1}}),
            "halo_exchange supports f32 and f64 tensors, its output of its input's type");
  EXPECT_EQ(error("halo_reduce", TestTensor(DType::F32, {2, 6}), TestTensor(DType::F32, {2, 3}),
                  {{"axis", 1}, {"lo", 1}, {"hi", 1}}),
            "the extended block must be [2, 5] (1 + 3 + 1 rows along axis 1), got [2, 6]");
  EXPECT_EQ(error("halo_exchange", TestTensor(DType::F32, {2, 1}), TestTensor(DType::F32, {2, 3}),
                  {{"axis", 1}, {"lo", 2}, {"hi", 0}}),
            "halos of 2 and 0 rows exceed the block's 1 rows along axis 1");
}

TEST(Collective, BadPlacementIsRefused) {
  auto comm = makeLocalComm();
  TestTensor table(DType::F32, {10, 2}), idx(DType::I64, {1}, {0});
  TestTensor out(DType::F32, {1, 2});
  try {
    runKernel("ps_pull", {&table, &idx}, {&out},
              {{"partitions", 2}, {"placement", {0, 3}}}, envWith(*comm));
    FAIL() << "no error";
  } catch (const KernelError &e) {
    EXPECT_EQ(std::string(e.what()), "placement names rank 3 of a group of 1");
  }
}

} // namespace

// --comm-thread auto: collectives get a thread only when the rank has a core
// for it besides the one its kernels run on.
TEST(CommThread, AutoWantsASecondCore) {
  EXPECT_FALSE(useCommThread(CommThread::Auto, 0)); // ranks outnumber cores
  EXPECT_FALSE(useCommThread(CommThread::Auto, 1));
  EXPECT_TRUE(useCommThread(CommThread::Auto, 2));
  EXPECT_TRUE(useCommThread(CommThread::On, 0));
  EXPECT_FALSE(useCommThread(CommThread::Off, 64));
}

TEST(CommThread, CoresPerRankIsAShareOfTheAffinity) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  ASSERT_EQ(sched_getaffinity(0, sizeof mask, &mask), 0);
  int allowed = CPU_COUNT(&mask);
  int machine = (int)std::thread::hardware_concurrency();
  EXPECT_EQ(coresPerRank(1), std::min(allowed, machine));
  EXPECT_EQ(coresPerRank(machine), std::min(allowed, 1));
  EXPECT_EQ(coresPerRank(machine + 1), 0);
  EXPECT_EQ(coresPerRank(0), coresPerRank(1)); // no count: one rank
}

TEST(CommThread, LocalWorldRunsJobsInline) {
  auto comm = makeLocalComm();
  EXPECT_FALSE(comm->threaded());
  int ran = 0;
  std::shared_ptr<Work> work = comm->submit([&] { ++ran; });
  EXPECT_EQ(ran, 1); // already run, before wait
  work->wait();
  EXPECT_EQ(ran, 1);
}
