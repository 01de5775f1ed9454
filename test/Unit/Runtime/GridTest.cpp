// Process groups of a grid (Grid.h): which ranks a group over some axes
// holds, whether groups cross machines, a kernel's grid from its attributes;
// and that the kernels that form groups (collectives, synchronized batch
// norm) take the group their grid_axes name.

#include "KernelTestUtil.h"

#include "parallax/Runtime/Comm.h"
#include "parallax/Runtime/Grid.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

using namespace parallax::rt;
using namespace parallax::rt::test;

namespace {

using Ints = std::vector<int64_t>;

/// Row-major coordinates of `rank` on a grid of `shape`.
Ints coordinates(int rank, const Ints &shape) {
  Ints c(shape.size());
  for (int i = (int)shape.size() - 1; i >= 0; --i) {
    c[i] = rank % shape[i];
    rank /= (int)shape[i];
  }
  return c;
}

std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const CommError &e) {
    return e.what();
  }
  return "";
}

TEST(Grid, GroupAxesAndSizesOfA2x3Grid) {
  const Ints shape{2, 3};
  EXPECT_EQ(groupAxes(shape, {}), (Ints{0, 1}));
  EXPECT_EQ(groupAxes(shape, {1}), (Ints{1}));
  EXPECT_EQ(groupAxes(shape, {1, 0}), (Ints{1, 0}));
  EXPECT_EQ(groupSize(shape, {}), 6);
  EXPECT_EQ(groupSize(shape, {0}), 2);
  EXPECT_EQ(groupSize(shape, {1}), 3);
  EXPECT_EQ(groupSize(shape, {0, 1}), 6);
  EXPECT_EQ(groupSize({}, {}), 1);
}

TEST(Grid, GroupSizeRefusesBadGrids) {
  EXPECT_EQ(errorOf([] { groupSize({2, 3}, {2}); }), "grid axis 2 is not an axis of grid [2, 3]");
  EXPECT_EQ(errorOf([] { groupSize({2, 3}, {-1}); }),
            "grid axis -1 is not an axis of grid [2, 3]");
  EXPECT_EQ(errorOf([] { groupSize({2, 3}, {1, 1}); }), "grid axis 1 is named twice");
  EXPECT_EQ(errorOf([] { groupSize({2, 0}, {0}); }), "grid [2, 0] has a dimension below 1");
  EXPECT_EQ(errorOf([] { groupSize({INT64_MAX, 2}, {}); }),
            "grid [9223372036854775807, 2] has too many ranks");
  // Only the group's axes count: the grid need not hold a world here.
  EXPECT_EQ(groupSize({INT64_MAX, 2}, {1}), 2);
}

/// Every rank of a 2x3 grid: its group over `axes` is the ranks that share
/// its coordinates off `axes`, ordered by their coordinates on `axes`.
void checkPlaces(const Ints &axes, int expectedSize) {
  SCOPED_TRACE(::testing::PrintToString(axes));
  const Ints shape{2, 3};
  std::map<int, Ints> membersOfColor;
  for (int r = 0; r < 6; ++r) {
    GroupPlace place = placeInGroup(6, r, shape, axes);
    ASSERT_EQ((int)place.members.size(), expectedSize) << r;
    EXPECT_EQ(place.members.at(place.rank), r);
    Ints mine = coordinates(r, shape);
    for (size_t i = 0; i < place.members.size(); ++i) {
      Ints theirs = coordinates(place.members[i], shape);
      int64_t key = 0;
      for (size_t a = 0; a < shape.size(); ++a) {
        bool inGroup = std::find(axes.begin(), axes.end(), (int64_t)a) != axes.end();
        if (inGroup) {
          key = key * shape[a] + theirs[a];
        } else {
          EXPECT_EQ(theirs[a], mine[a]) << "rank " << r << ", member " << i;
        }
      }
      EXPECT_EQ(key, (int64_t)i) << "rank " << r << ": members in group-rank order";
    }
    // One color per group, the same for all its members.
    auto [it, fresh] = membersOfColor.emplace(
        place.color, Ints(place.members.begin(), place.members.end()));
    if (!fresh) {
      EXPECT_EQ(it->second, Ints(place.members.begin(), place.members.end())) << r;
    }
  }
  EXPECT_EQ((int)membersOfColor.size(), 6 / expectedSize);
}

TEST(Grid, PlaceInGroupOfA2x3Grid) {
  // placeInGroup takes axes as they are: none leaves each rank alone.
  checkPlaces({}, 1);
  checkPlaces({0}, 2);
  checkPlaces({1}, 3);
  checkPlaces({0, 1}, 6);
  checkPlaces(groupAxes({2, 3}, {}), 6);
  EXPECT_EQ(placeInGroup(6, 4, {2, 3}, {0}).members, (std::vector<int>{1, 4}));
  EXPECT_EQ(placeInGroup(6, 4, {2, 3}, {1}).members, (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(placeInGroup(6, 4, {2, 3}, {1}).rank, 1);
}

TEST(Grid, PlaceInGroupRefusesGridsThatDoNotHoldTheWorld) {
  EXPECT_EQ(errorOf([] { placeInGroup(4, 0, {2, 3}, {0}); }),
            "a grid [2, 3] does not hold the 4 ranks running");
  EXPECT_EQ(errorOf([] { placeInGroup(2, 0, {2}, {3}); }),
            "grid axis 3 is not an axis of grid [2]");
  EXPECT_EQ(errorOf([] { placeInGroup(2, 0, {2, -1}, {0}); }),
            "grid [2, -1] has a dimension below 1");
}

TEST(Grid, GroupsSpanMachines) {
  // [machines, ranks of a machine]: a machine's ranks stay on it.
  EXPECT_FALSE(groupsSpanMachines({2, 2}, {1}, 2));
  EXPECT_TRUE(groupsSpanMachines({2, 2}, {0}, 2));
  EXPECT_TRUE(groupsSpanMachines({2, 2}, {}, 2));
  EXPECT_TRUE(groupsSpanMachines({2, 2}, {0, 1}, 2));
  EXPECT_FALSE(groupsSpanMachines({4}, {}, 4));
  EXPECT_TRUE(groupsSpanMachines({4}, {}, 2));
  EXPECT_TRUE(groupsSpanMachines({2, 2}, {0}, 1));
  EXPECT_TRUE(groupsSpanMachines({2, 2}, {1}, 1));
  // Groups of strided ranks ({0, 2} and {1, 3}) on machines of 4: one machine.
  EXPECT_FALSE(groupsSpanMachines({2, 2}, {0}, 4));
  // Machines of 3 on a [2, 3] grid: the rows are the machines.
  EXPECT_FALSE(groupsSpanMachines({2, 3}, {1}, 3));
  EXPECT_TRUE(groupsSpanMachines({3, 2}, {1}, 3)); // {2, 3} straddles
  EXPECT_EQ(errorOf([] { groupsSpanMachines({2}, {}, 0); }), "a machine of 0 ranks");
  EXPECT_EQ(errorOf([] { groupsSpanMachines({2}, {1}, 1); }),
            "grid axis 1 is not an axis of grid [2]");
}

TEST(Grid, KernelGridOfAttributes) {
  KernelGrid g = kernelGridOf(nlohmann::json::object(), 4);
  EXPECT_EQ(g.shape, (Ints{4}));
  EXPECT_EQ(g.axes, (Ints{0}));
  EXPECT_EQ(g.groupSize(), 4);
  g = kernelGridOf({{"grid_shape", {2, 3}}}, 6);
  EXPECT_EQ(g.shape, (Ints{2, 3}));
  EXPECT_EQ(g.axes, (Ints{0, 1}));
  EXPECT_EQ(g.groupSize(), 6);
  g = kernelGridOf({{"grid_shape", {2, 3}}, {"grid_axes", {1}}}, 6);
  EXPECT_EQ(g.axes, (Ints{1}));
  EXPECT_EQ(g.groupSize(), 3);
  g = kernelGridOf({{"grid_shape", {2, 3}}, {"grid_axes", nlohmann::json::array()}}, 6);
  EXPECT_EQ(g.axes, (Ints{0, 1}));
  EXPECT_EQ(kernelGridOf(nlohmann::json(), 2).shape, (Ints{2})); // no attributes
  EXPECT_EQ(errorOf([] { kernelGridOf({{"grid_shape", "2x2"}}, 4); }),
            "attribute 'grid_shape' has the wrong type");
  EXPECT_EQ(errorOf([] { kernelGridOf({{"grid_axes", 1}}, 4); }),
            "attribute 'grid_axes' has the wrong type");
}

//===----------------------------------------------------------------------===//
// Kernels take the group their grid names
//===----------------------------------------------------------------------===//

/// Rank `rank` of a world of `size` whose other ranks hold the same values
/// as this one: a sum over a group is the values times its size. Records
/// the groups asked for.
class MirrorComm : public Comm {
public:
  MirrorComm(int size, int rank) {
    size_ = size;
    rank_ = rank;
  }
  const char *transport() const override { return "mirror"; }
  Group &group(const Ints &shape, const Ints &axes) override {
    GroupPlace place = placeInGroup(size_, rank_, shape, axes);
    asked.push_back(place.members);
    groups.push_back(std::make_unique<PlacedGroup>(place));
    return *groups.back();
  }
  void allreduce(Group &g, void *buf, int64_t count, DType dtype, ReduceOp op) override {
    ASSERT_EQ(dtype, DType::F64);
    ASSERT_EQ(op, ReduceOp::Sum);
    for (int64_t i = 0; i < count; ++i)
      static_cast<double *>(buf)[i] *= g.size();
  }
  void allgatherv(Group &, const void *, int64_t, void *, const std::vector<int64_t> &) override {
    FAIL();
  }
  void alltoallv(Group &, const void *, const std::vector<int64_t> &, void *,
                 const std::vector<int64_t> &) override {
    FAIL();
  }
  void reduceScatterBlock(Group &, void *, int64_t, DType, ReduceOp) override { FAIL(); }
  void allgatherBlock(Group &, void *, int64_t) override { FAIL(); }
  void sendrecv(Group &, const std::vector<PeerTransfer> &) override { FAIL(); }
  void barrier(Group &) override { FAIL(); }
  void abort(int) override { FAIL(); }

  /// Members of each group asked for, in order.
  std::vector<std::vector<int>> asked;

private:
  struct PlacedGroup : Group {
    explicit PlacedGroup(const GroupPlace &place) {
      members_ = place.members;
      rank_ = place.rank;
    }
  };
  std::vector<std::unique_ptr<Group>> groups;
};

/// `v` (samples of `sampleSize` values) repeated `times` along the batch.
std::vector<double> repeated(const std::vector<double> &v, int times) {
  std::vector<double> r;
  for (int t = 0; t < times; ++t)
    r.insert(r.end(), v.begin(), v.end());
  return r;
}

/// A synchronized batch norm (forward and gradient) on rank `rank` of a
/// world of 4 on a 2x2 grid over `axes`, every rank with the same batch:
/// its statistics are those of the batch repeated once per member of its
/// group (the running variance's n/(n-1) tells the count), and it forms
/// exactly `members`.
void checkSyncBatchNorm(int rank, const Ints &axes, const std::vector<int> &members) {
  SCOPED_TRACE(::testing::Message() << "rank " << rank << " axes "
                                    << ::testing::PrintToString(axes));
  const int g = (int)members.size();
  const DType dt = DType::F64;
  const Ints xs{2, 3, 2};
  auto xv = randomValues(12, 5, -1, 3), dyv = randomValues(12, 6);
  TestTensor x(dt, xs, xv), dy(dt, xs, dyv), s(dt, {3}, randomValues(3, 7)),
      b(dt, {3}, randomValues(3, 8)), im(dt, {3}, randomValues(3, 9)),
      iv(dt, {3}, randomValues(3, 10, 0.5, 2));
  TestTensor y(dt, xs), rm(dt, {3}), rv(dt, {3}), dx(dt, xs), ds(dt, {3}), db(dt, {3});
  nlohmann::json attrs = {{"grid", "g"}, {"grid_shape", {2, 2}}, {"training", true},
                          {"unbiased_running_var", true}};
  if (!axes.empty())
    attrs["grid_axes"] = axes;
  MirrorComm comm(4, rank);
  ExecEnv env;
  env.comm = &comm;
  env.rank = rank;
  env.worldSize = 4;
  runKernel("batch_norm", {&x, &s, &b, &im, &iv}, {&y, &rm, &rv}, attrs, env);
  runKernel("batch_norm_grad", {&dy, &x, &s}, {&dx, &ds, &db}, attrs, env);
  ASSERT_FALSE(comm.asked.empty());
  for (const std::vector<int> &asked : comm.asked)
    EXPECT_EQ(asked, members);

  // The group's whole batch on one rank.
  Ints whole{2 * g, 3, 2};
  TestTensor wx(dt, whole, repeated(xv, g)), wdy(dt, whole, repeated(dyv, g));
  TestTensor wy(dt, whole), wrm(dt, {3}), wrv(dt, {3}), wdx(dt, whole), wds(dt, {3}),
      wdb(dt, {3});
  nlohmann::json local = {{"training", true}, {"unbiased_running_var", true}};
  runKernel("batch_norm", {&wx, &s, &b, &im, &iv}, {&wy, &wrm, &wrv}, local);
  runKernel("batch_norm_grad", {&wdy, &wx, &s}, {&wdx, &wds, &wdb}, local);
  auto firstPart = [](std::vector<double> v) {
    v.resize(12);
    return v;
  };
  expectNear(y.values(), firstPart(wy.values()), 1e-12, 1e-12, "y");
  expectNear(rm.values(), wrm.values(), 1e-12, 1e-12, "running_mean");
  expectNear(rv.values(), wrv.values(), 1e-12, 1e-12, "running_var");
  expectNear(dx.values(), firstPart(wdx.values()), 1e-12, 1e-12, "dx");
  // dscale and dbias stay this rank's sums (the gradient all-reduce adds
  // them up): 1/g of the whole batch's.
  std::vector<double> wdsv = wds.values(), wdbv = wdb.values();
  for (int c = 0; c < 3; ++c)
    wdsv[c] /= g, wdbv[c] /= g;
  expectNear(ds.values(), wdsv, 1e-12, 1e-12, "dscale");
  expectNear(db.values(), wdbv, 1e-12, 1e-12, "dbias");
}

TEST(Grid, SyncBatchNormHonoursGridAxes) {
  // Regression: the batch norm's group used to be every axis of its grid
  // whatever its grid_axes said.
  checkSyncBatchNorm(0, {1}, {0, 1});
  checkSyncBatchNorm(3, {1}, {2, 3});
  checkSyncBatchNorm(1, {0}, {1, 3});
  checkSyncBatchNorm(2, {}, {0, 1, 2, 3});
  checkSyncBatchNorm(2, {0, 1}, {0, 1, 2, 3});
}

TEST(Grid, CollectiveGroupHonoursGridAxes) {
  MirrorComm comm(4, 3);
  PlanKernel kernel;
  kernel.op = "all_reduce";
  kernel.attrs = {{"grid_shape", {2, 2}}, {"grid_axes", {0}}};
  ExecEnv env;
  env.comm = &comm;
  env.worldSize = 4;
  KernelArgs args(kernel, {}, {}, env);
  Group &g = collectiveGroup(args);
  EXPECT_EQ(g.members(), (std::vector<int>{1, 3}));
  EXPECT_EQ(g.rank(), 1);
  kernel.attrs = {{"grid_shape", {2, 2}}, {"grid_axes", {2}}};
  try {
    collectiveGroup(args);
    FAIL() << "no error";
  } catch (const KernelError &e) {
    EXPECT_EQ(std::string(e.what()), "grid axis 2 is not an axis of grid [2, 2]");
  }
  kernel.attrs = nlohmann::json::object();
  env.comm = nullptr;
  KernelArgs alone(kernel, {}, {}, env);
  try {
    collectiveGroup(alone);
    FAIL() << "no error";
  } catch (const KernelError &e) {
    EXPECT_EQ(std::string(e.what()), "no communicator");
  }
}

TEST(Grid, BlockOriginFollowsTheRanksCoordinates) {
  // A 2 x 2 grid (batch axis 0, model axis 1); rank = 2 * batch + model.
  // A weight of 128 x 64 split by rows over the model axis: blocks of 64.
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_EQ(blockOrigin({2, 2}, {{1}}, {64, 64}, rank),
              (std::vector<int64_t>{64 * (rank % 2), 0}))
        << rank;
  // Split by columns over the model axis.
  EXPECT_EQ(blockOrigin({2, 2}, {{}, {1}}, {10, 64}, 3), (std::vector<int64_t>{0, 64}));
  // Over both axes in order: block index = 2 * c0 + c1.
  EXPECT_EQ(blockOrigin({2, 2}, {{0, 1}}, {8}, 2), (std::vector<int64_t>{16}));
  EXPECT_EQ(blockOrigin({2, 2}, {{1, 0}}, {8}, 2), (std::vector<int64_t>{8}));
  // Unsplit dimensions start at 0.
  EXPECT_EQ(blockOrigin({4}, {}, {3, 5}, 3), (std::vector<int64_t>{0, 0}));
}

} // namespace
