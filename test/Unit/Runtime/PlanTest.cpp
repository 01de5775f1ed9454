// The plan format: a round trip keeps everything, and the reader refuses
// every kind of damage with a message naming the file and the problem.

#include "parallax/Runtime/Plan.h"

#include <gtest/gtest.h>

using namespace parallax::rt;

namespace {

Plan smallPlan() {
  Plan p;
  p.sourcePath = "/models/m.onnx";
  p.sourceBytes = 1234;
  p.sourceCrc32 = 0xdeadbeef;
  p.options = {{"optimizer", "sgd"}};
  PlanVariable w;
  w.name = "w";
  w.shape = {2, 3};
  w.init.kind = InitialValue::Kind::Onnx;
  w.init.onnxName = "w";
  p.variables.push_back(w);
  PlanConstant c;
  c.dtype = DType::I64;
  c.shape = {2};
  c.value.kind = InitialValue::Kind::Blob;
  c.value.blobOffset = 0;
  c.value.blobBytes = 16;
  p.blobs = std::string(16, '\x01');
  p.constants.push_back(c);
  PlanInput x;
  x.name = "x";
  x.shape = {4, 2};
  p.inputs.push_back(x);
  p.tensors.push_back({"x", DType::F32, {4, 2}, PlanTensor::Kind::Input, 0, 0});
  p.tensors.push_back({"w", DType::F32, {2, 3}, PlanTensor::Kind::Variable, 0, 0});
  p.tensors.push_back({"c", DType::I64, {2}, PlanTensor::Kind::Constant, 0, 0});
  p.tensors.push_back({"y", DType::F32, {4, 3}, PlanTensor::Kind::Arena, 64, -1});
  p.tensors.push_back({"r", DType::F32, {12}, PlanTensor::Kind::Alias, 0, 3});
  p.tensors.push_back({"l", DType::F32, {}, PlanTensor::Kind::Arena, 0, -1});
  p.arenaBytes = 128;
  PlanKernel mm;
  mm.op = "matmul";
  mm.inputs = {0, 1};
  mm.outputs = {3};
  mm.loc = "MatMul_0";
  p.kernels.push_back(mm);
  PlanKernel sum;
  sum.op = "reduce_sum";
  sum.inputs = {4};
  sum.outputs = {5};
  sum.attrs = {{"axes", {0}}, {"keepdims", false}};
  p.kernels.push_back(sum);
  p.outputs.push_back({"loss", 5});
  p.lossOutput = 0;
  p.memory.parameters = 24;
  return p;
}

std::string errorOf(const std::string &bytes) {
  try {
    parsePlan(bytes, "p.pxplan");
  } catch (const PlanError &e) {
    return e.what();
  }
  return "";
}

/// Re-serialises with one program field replaced, keeping a valid checksum.
std::string withProgram(const Plan &plan,
                        const std::function<void(Plan &)> &edit) {
  Plan copy = plan;
  edit(copy);
  return serializePlan(copy);
}

TEST(Plan, RoundTripKeepsEverything) {
  Plan p = smallPlan();
  Plan q = parsePlan(serializePlan(p), "p.pxplan");
  EXPECT_EQ(planToJson(q), planToJson(p));
  EXPECT_EQ(q.blobs, p.blobs);
  EXPECT_EQ(q.kernels[1].attrs["axes"], nlohmann::json({0}));
  EXPECT_EQ(q.memory.parameters, 24);
  EXPECT_EQ(q.sourceCrc32, 0xdeadbeefu);
  // A plan read from bytes knows their checksum (what checkpoints record).
  std::string bytes = serializePlan(p);
  EXPECT_EQ(q.checksum, crc32Of(bytes.data(), bytes.size() - 4));
  EXPECT_EQ(p.checksum, 0u);
}

TEST(Plan, KeepsAndChecksAPaddedInitializer) {
  // A vocabulary padded to a multiple of the model ranks: the initializer
  // has fewer rows than the variable.
  Plan p = smallPlan();
  p.variables[0].init.paddedFrom = {1, 3};
  Plan q = parsePlan(serializePlan(p), "p.pxplan");
  EXPECT_EQ(q.variables[0].init.paddedFrom, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(planToJson(q)["variables"][0]["init"]["padded_from"], nlohmann::json({1, 3}));
  EXPECT_NE(errorOf(withProgram(p, [](Plan &r) { r.variables[0].init.paddedFrom = {3, 3}; }))
                .find("variable 'w': its initial value cannot be padded from [3, 3] to [2, 3]"),
            std::string::npos);
  EXPECT_NE(errorOf(withProgram(p, [](Plan &r) { r.variables[0].init.paddedFrom = {2}; }))
                .find("cannot be padded from [2] to [2, 3]"),
            std::string::npos);
  EXPECT_NE(errorOf(withProgram(p, [](Plan &r) {
              r.constants[0].value = r.variables[0].init;
              r.constants[0].value.paddedFrom = {1};
            }))
                .find("constant 0: a padded or block initial value is a variable's"),
            std::string::npos);
}

TEST(Plan, KeepsAndChecksABlockOfAnInitializer) {
  // One third of a fused projection's [2, 9] weight: columns 3 to 5.
  Plan p = smallPlan();
  p.variables[0].init.blockOf = {2, 9};
  p.variables[0].init.blockOrigin = {0, 3};
  Plan q = parsePlan(serializePlan(p), "p.pxplan");
  EXPECT_EQ(q.variables[0].init.blockOf, (std::vector<int64_t>{2, 9}));
  EXPECT_EQ(q.variables[0].init.blockOrigin, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(planToJson(q)["variables"][0]["init"]["block_origin"], nlohmann::json({0, 3}));
  EXPECT_NE(errorOf(withProgram(p, [](Plan &r) { r.variables[0].init.blockOrigin = {0, 7}; }))
                .find("variable 'w': its initial value is no block of [2, 9] at [0, 7]"),
            std::string::npos);
  EXPECT_NE(errorOf(withProgram(p, [](Plan &r) { r.variables[0].init.blockOrigin = {0}; }))
                .find("is no block of [2, 9] at [0]"),
            std::string::npos);
  EXPECT_NE(errorOf(withProgram(p, [](Plan &r) {
              PlanVariable whole = r.variables[0];
              whole.name = "w.whole";
              whole.init.blockOf.clear();
              whole.init.blockOrigin.clear();
              r.variables.push_back(whole);
            }))
                .find("initializer 'w' is both a variable and blocks that are variables"),
            std::string::npos);
}

/// smallPlan with a second variable, both in one variable block.
Plan blockedPlan() {
  Plan p = smallPlan();
  PlanVariable b = p.variables[0];
  b.name = "b";
  b.shape = {3};
  p.variables.push_back(b);
  p.variables[0].block = 0;
  p.variables[1].block = 0;
  p.variables[1].blockOffset = 64;
  p.variableBlocks = {128};
  return p;
}

TEST(Plan, RoundTripKeepsVariableBlocks) {
  Plan q = parsePlan(serializePlan(blockedPlan()), "p.pxplan");
  ASSERT_EQ(q.variables.size(), 2u);
  EXPECT_EQ(q.variableBlocks, std::vector<int64_t>{128});
  EXPECT_EQ(q.variables[0].block, 0);
  EXPECT_EQ(q.variables[0].blockOffset, 0);
  EXPECT_EQ(q.variables[1].block, 0);
  EXPECT_EQ(q.variables[1].blockOffset, 64);
  EXPECT_EQ(q.variables[1].name, "b");
}

TEST(Plan, RefusesBadVariableBlocks) {
  Plan p = blockedPlan();
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) { q.variables[1].block = 3; }))
                .find("variable 'b' names variable block 3, which does not exist"),
            std::string::npos);
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) { q.variables[1].blockOffset = 120; }))
                .find("variable 'b': range [120, +12) is outside variable block 0 or misaligned"),
            std::string::npos);
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) { q.variables[1].blockOffset = 32; }))
                .find("misaligned"),
            std::string::npos);
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) {
              q.variables[0].shape = {2, 12};
              q.tensors[1].shape = {2, 12};
            })).find("variable block 0: two variables overlap at byte 64"),
            std::string::npos);
}

/// blockedPlan on 2 ranks with an all_gather_variables kernel over the
/// block (2 blocks of 64 bytes) and a sharded all-reduce whose bucket is
/// tensor 3 (48 bytes: 2 blocks of 16 bytes fit, 2 of 32 do not).
Plan shardedPlan() {
  Plan p = blockedPlan();
  p.worldSize = 2;
  p.tensors.push_back({"b", DType::F32, {3}, PlanTensor::Kind::Variable, 0, 1});
  PlanKernel gather;
  gather.op = "all_gather_variables";
  gather.inputs = {1, 6};
  gather.attrs = {{"offsets", {0, 64}}, {"shard_bytes", 64}};
  p.kernels.push_back(gather);
  PlanKernel reduce;
  reduce.op = "all_reduce";
  reduce.inputs = {4};
  reduce.outputs = {4};
  reduce.attrs = {{"in_place", true}, {"shard_update", true}, {"shard_bytes", 16}};
  p.kernels.push_back(reduce);
  // w's sharded update, its gradient 24 bytes into the bucket.
  p.tensors.push_back({"gw", DType::F32, {2, 3}, PlanTensor::Kind::Alias, 24, 3});
  PlanKernel sgd;
  sgd.op = "sgd";
  sgd.inputs = {1, 7};
  sgd.attrs = {{"lr", 0.1}, {"shard_offset", 24}, {"shard_bytes", 16}};
  p.kernels.push_back(sgd);
  return p;
}

TEST(Plan, ChecksShardedUpdatesFitTheirBuffers) {
  Plan p = shardedPlan();
  EXPECT_EQ(errorOf(serializePlan(p)), "");
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) { q.kernels[2].attrs["shard_bytes"] = 128; }))
                .find("kernel 2 (all_gather_variables): 2 blocks of 128 bytes do not fit "
                      "its variable block of 128 bytes"),
            std::string::npos);
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) { q.kernels[3].attrs["shard_bytes"] = 32; }))
                .find("kernel 3 (all_reduce): 2 blocks of 32 bytes do not fit its bucket "
                      "of 48 bytes"),
            std::string::npos);
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) { q.kernels[2].inputs = {3, 6}; }))
                .find("input 0 is not a variable of the kernel's variable block at offset 0"),
            std::string::npos);
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) {
              q.kernels[2].attrs["offsets"] = {0, 0};
            })).find("input 1 is not a variable of the kernel's variable block at offset 0"),
            std::string::npos);
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) { q.kernels[3].attrs.erase("shard_bytes"); }))
                .find("kernel 3 (all_reduce): bad sharding attributes"),
            std::string::npos);
  // The group is the one grid_axes names: 1 rank of a [1, 2] grid's axis 0.
  EXPECT_EQ(errorOf(withProgram(p, [](Plan &q) {
              q.kernels[3].attrs["shard_bytes"] = 32;
              q.kernels[3].attrs["grid_shape"] = {1, 2};
              q.kernels[3].attrs["grid_axes"] = {0};
            })),
            "");
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) { q.kernels[3].attrs["grid_axes"] = {5}; }))
                .find("kernel 3 (all_reduce): grid axis 5 is not an axis of grid [2]"),
            std::string::npos);
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) { q.kernels[3].attrs["grid_shape"] = "2"; }))
                .find("kernel 3 (all_reduce): attribute 'grid_shape' has the wrong type"),
            std::string::npos);
  // The update reads block r at the bucket's start, relative to where its
  // gradient lies: that place must be right, and the block in the bucket.
  const char *misplaced = "kernel 4 (sgd): its gradient is not at byte shard_offset";
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) { q.kernels[4].attrs["shard_offset"] = 0; }))
                .find(misplaced),
            std::string::npos);
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) { q.kernels[4].attrs["shard_bytes"] = 64; }))
                .find(misplaced),
            std::string::npos);
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) { q.kernels[4].inputs = {1, 5}; }))
                .find(misplaced),
            std::string::npos);
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) { q.kernels[4].attrs.erase("shard_bytes"); }))
                .find("kernel 4 (sgd): bad sharding attributes"),
            std::string::npos);
}

TEST(Plan, RefusesBadMagic) {
  EXPECT_EQ(errorOf("not a plan at all, really"),
            "p.pxplan: not a Parallax plan (bad magic); make one with "
            "parallax-opt MODEL.onnx --emit=plan -o FILE");
}

TEST(Plan, RefusesEveryTruncation) {
  std::string bytes = serializePlan(smallPlan());
  for (size_t n : {size_t(8), size_t(20), size_t(40), bytes.size() / 2, bytes.size() - 1}) {
    std::string message = errorOf(bytes.substr(0, n));
    EXPECT_NE(message.find("truncated"), std::string::npos) << n << ": " << message;
  }
}

TEST(Plan, RefusesFlippedBytes) {
  std::string bytes = serializePlan(smallPlan());
  for (size_t at : {size_t(40), size_t(100), bytes.size() - 20, bytes.size() - 2}) {
    std::string damaged = bytes;
    damaged[at] ^= 0x20;
    EXPECT_EQ(errorOf(damaged), "p.pxplan: corrupt plan: checksum mismatch") << at;
  }
}

TEST(Plan, RefusesOtherVersions) {
  std::string bytes = serializePlan(smallPlan());
  bytes[8] = 7; // the version field; the checksum catches it too, but the
                // version is checked first so the message says why
  EXPECT_EQ(errorOf(bytes),
            "p.pxplan: plan format version 7, but this parallax-run reads "
            "version 5; recompile the model with this parallax-opt");
}

TEST(Plan, RefusesInconsistentPrograms) {
  Plan p = smallPlan();
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) { q.kernels[0].inputs = {0, 9}; }))
                .find("kernel 0 (matmul) names tensor 9, which does not exist"),
            std::string::npos);
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) { q.tensors[3].offset = 96; }))
                .find("is outside the arena of 128 bytes or misaligned"),
            std::string::npos);
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) { q.tensors[4].ref = 6; }))
                .find("aliases tensor 6, which is neither an earlier tensor nor an arena buffer"),
            std::string::npos);
  // A later tensor only when it is an arena buffer, so alias chains end:
  // here 4 -> 5 -> 4 would be a cycle.
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) {
              q.tensors[4].ref = 5;
              q.tensors[5].kind = PlanTensor::Kind::Alias;
              q.tensors[5].ref = 4;
            })).find("aliases tensor 5, which is neither an earlier tensor nor an arena buffer"),
            std::string::npos);
  // A later arena buffer is checked for size like any other.
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) { q.tensors[4].ref = 5; }))
                .find("alias range is outside tensor 5"),
            std::string::npos);
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) { q.tensors[4].shape = {13}; }))
                .find("alias range is outside tensor 3"),
            std::string::npos);
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) { q.tensors[1].shape = {3, 2}; }))
                .find("does not match the variable it names"),
            std::string::npos);
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) { q.constants[0].value.blobBytes = 8; }))
                .find("constant 0: blob has 8 bytes for a value of 16"),
            std::string::npos);
  EXPECT_NE(errorOf(withProgram(p, [](Plan &q) { q.lossOutput = 3; }))
                .find("a training plan needs a loss output"),
            std::string::npos);
}

TEST(Plan, ReadPlanNamesAMissingFile) {
  try {
    readPlan("/nonexistent/dir/m.pxplan");
    FAIL() << "no error";
  } catch (const PlanError &e) {
    EXPECT_EQ(std::string(e.what()),
              "/nonexistent/dir/m.pxplan: cannot open plan: No such file or directory");
  }
}

} // namespace
