// Checkpoints: a round trip of variables, step and seed; the two newest kept
// per rank; what a resume refuses (damaged files, another plan, world size
// or rank, a directory of an earlier run); no checkpoint of a broken state.

#include "TempDirTest.h"
#include "parallax/Runtime/Checkpoint.h"
#include "parallax/Runtime/Comm.h"
#include "parallax/Runtime/Session.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace parallax::rt;
using namespace parallax::rt::testing;
namespace fs = std::filesystem;

namespace {

class CheckpointTest : public TempDirTest {
protected:
  /// Two variables and no kernels: w f32 [2,3] (a parameter, zeros) and its
  /// optimizer state m f32 [2,3] (ones).
  static Plan statePlan(uint32_t checksum = 0x1234abcd) {
    Plan p;
    p.checksum = checksum;
    auto variable = [&](const char *name, PlanVariable::Role role, double init) {
      PlanVariable v;
      v.name = name;
      v.shape = {2, 3};
      v.role = role;
      v.init.kind = InitialValue::Kind::Splat;
      v.init.splat = init;
      p.tensors.push_back({name, DType::F32, v.shape, PlanTensor::Kind::Variable, 0,
                           (int32_t)p.variables.size()});
      p.variables.push_back(v);
    };
    variable("w", PlanVariable::Role::Parameter, 0);
    variable("m", PlanVariable::Role::OptimizerState, 1);
    return p;
  }

  /// A session at step `step` whose w holds 0.5, 1.5, ...
  static std::unique_ptr<Session> trained(int64_t step, uint64_t seed = 7) {
    SessionOptions o;
    o.seed = seed;
    auto s = std::make_unique<Session>(statePlan(), o);
    for (int i = 0; i < 6; ++i)
      s->variable("w").as<float>()[i] = 0.5f + (float)i;
    s->env().step = step;
    return s;
  }
};

TEST_F(CheckpointTest, RestoresVariablesStepAndSeed) {
  std::string path = writeCheckpoint(dir.string(), *trained(10));
  EXPECT_EQ(path, checkpointPath(dir.string(), 0, 10));
  EXPECT_EQ(fs::path(path).filename(), "rank0-step10.pxckpt");
  Session fresh(statePlan(), SessionOptions{});
  Checkpoint c = readCheckpoint(path, fresh.plan(), 0, 1);
  restoreCheckpoint(c, fresh);
  EXPECT_EQ(fresh.stepsRun(), 10);
  EXPECT_EQ(fresh.env().seed, 7u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(fresh.variable("w").as<float>()[i], 0.5f + (float)i);
    EXPECT_EQ(fresh.variable("m").as<float>()[i], 1.0f);
  }
}

TEST_F(CheckpointTest, KeepsTheTwoNewestOfEachRank) {
  for (int64_t step : {5, 10, 15, 20})
    writeCheckpoint(dir.string(), *trained(step));
  EXPECT_EQ(checkpointSteps(dir.string(), 0), (std::vector<int64_t>{15, 20}));
  EXPECT_TRUE(checkpointSteps(dir.string(), 1).empty());
  auto comm = makeLocalComm();
  EXPECT_EQ(agreeOnResumeStep(dir.string(), *comm), 20);
}

TEST_F(CheckpointTest, RefusesDamagedAndForeignCheckpointsNamingTheFile) {
  std::string path = writeCheckpoint(dir.string(), *trained(10));
  std::string bytes = contents(path);
  Plan plan = statePlan();
  auto readAs = [&](const std::string &b, const Plan &p, int rank, int world) {
    std::string copy = (dir / "copy.pxckpt").string();
    std::ofstream(copy, std::ios::binary | std::ios::trunc) << b;
    return errorOf([&] { readCheckpoint(copy, p, rank, world); });
  };
  std::string copy = (dir / "copy.pxckpt").string();
  EXPECT_EQ(readAs(bytes.substr(0, bytes.size() - 10), plan, 0, 1),
            copy + ": truncated or corrupt checkpoint: the header announces " +
                std::to_string(bytes.size() - 36) + " bytes of state, the file holds " +
                std::to_string(bytes.size() - 46));
  std::string flipped = bytes;
  flipped[bytes.size() - 20] ^= 1;
  EXPECT_EQ(readAs(flipped, plan, 0, 1), copy + ": corrupt checkpoint: checksum mismatch");
  EXPECT_EQ(readAs("PXPLAN\r\n....", plan, 0, 1),
            copy + ": not a Parallax checkpoint (bad magic)");
  EXPECT_EQ(readAs(bytes, statePlan(0x99), 0, 1),
            copy + ": the checkpoint is of another plan (plan checksum 1234abcd, "
                   "this plan's is 00000099); resume with the plan that wrote it");
  EXPECT_EQ(readAs(bytes, plan, 0, 4),
            copy + ": the checkpoint is of a run on 1 rank(s), and this one has 4");
  EXPECT_EQ(readAs(bytes, plan, 0, 1), "");
}

TEST_F(CheckpointTest, AFreshRunRefusesADirectoryWithCheckpoints) {
  prepareCheckpointDir((dir / "new").string(), 0, false); // created
  EXPECT_TRUE(fs::is_directory(dir / "new"));
  writeCheckpoint(dir.string(), *trained(10));
  EXPECT_EQ(errorOf([&] { prepareCheckpointDir(dir.string(), 0, false); }),
            checkpointPath(dir.string(), 0, 10) +
                ": the checkpoint directory holds checkpoints of an earlier run; "
                "pass --resume " + dir.string() +
                " to continue it, or choose an empty directory");
  // Resuming from it is fine, and a crash's temporary is cleared.
  std::ofstream((dir / "rank0-step20.pxckpt.tmp").string()) << "partial";
  EXPECT_EQ(errorOf([&] { prepareCheckpointDir(dir.string(), 0, true); }), "");
  EXPECT_FALSE(fs::exists(dir / "rank0-step20.pxckpt.tmp"));
  auto comm = makeLocalComm();
  EXPECT_NE(errorOf([&] { agreeOnResumeStep((dir / "new").string(), *comm); })
                .find("no checkpoint of rank 0 to resume from"),
            std::string::npos);
}

TEST_F(CheckpointTest, ABrokenStateIsNotWrittenOverTheLastGoodOne) {
  writeCheckpoint(dir.string(), *trained(10));
  auto s = trained(15);
  s->variable("w").as<float>()[4] = std::nanf("");
  EXPECT_EQ(errorOf([&] { writeCheckpoint(dir.string(), *s); }),
            checkpointPath(dir.string(), 0, 15) +
                ": not written: variable 'w' holds NaN at index [1, 1] (element 4) "
                "after step 15 (the checkpoints in " + dir.string() +
                " are left as they were)");
  EXPECT_EQ(checkpointSteps(dir.string(), 0), (std::vector<int64_t>{10}));
}

} // namespace
