//===- Checkpoint.cpp - a rank's training state on disk, and back ---------===//

#include "parallax/Runtime/Checkpoint.h"
#include "parallax/Runtime/AtomicFile.h"
#include "parallax/Runtime/Comm.h"
#include "parallax/Runtime/Finite.h"
#include "parallax/Runtime/FramedFile.h"
#include "parallax/Runtime/Session.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>

namespace parallax::rt {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const FramedFormat kCheckpointFormat = {"PXCKPT\r\n", kCheckpointFormatVersion,
                                        "checkpoint", "state", "", ""};

std::string hex(uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "%08x", v);
  return text;
}

/// "rank<R>-step<S>.pxckpt" -> S for `rank`; -1 for anything else
/// (temporaries, other ranks' files).
int64_t stepOfName(const std::string &name, int rank) {
  static const std::regex pattern("rank([0-9]+)-step([0-9]+)\\.pxckpt");
  std::smatch m;
  if (!std::regex_match(name, m, pattern) || std::stoll(m[1]) != rank)
    return -1;
  return std::stoll(m[2]);
}

std::string stepsText(const std::vector<int64_t> &steps) {
  std::string s;
  for (size_t i = 0; i < steps.size(); ++i)
    s += (i ? ", " : "") + std::to_string(steps[i]);
  return s;
}

} // namespace

std::string checkpointPath(const std::string &dir, int rank, int64_t step) {
  return (fs::path(dir) / ("rank" + std::to_string(rank) + "-step" +
                           std::to_string(step) + ".pxckpt"))
      .string();
}

std::vector<int64_t> checkpointSteps(const std::string &dir, int rank) {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (const auto &entry : fs::directory_iterator(dir, ec)) {
    int64_t step = stepOfName(entry.path().filename().string(), rank);
    if (step >= 0)
      steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

void prepareCheckpointDir(const std::string &dir, int rank, bool resumingFromIt) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw RuntimeError(dir + ": --checkpoint needs a directory, and this is a file");
  fs::create_directories(dir, ec);
  // Several ranks of a machine create it at once: one of them wins.
  if (ec && !fs::is_directory(dir))
    throw RuntimeError(dir + ": cannot create the checkpoint directory: " +
                       ec.message());
  // Temporaries of this rank that a crash left behind.
  std::string prefix = "rank" + std::to_string(rank) + "-step";
  for (const auto &entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && name.size() > 11 &&
        name.compare(name.size() - 11, 11, ".pxckpt.tmp") == 0)
      fs::remove(entry.path(), ec);
  }
  std::vector<int64_t> steps = checkpointSteps(dir, rank);
  if (!steps.empty() && !resumingFromIt)
    throw RuntimeError(checkpointPath(dir, rank, steps.back()) +
                       ": the checkpoint directory holds checkpoints of an "
                       "earlier run; pass --resume " + dir +
                       " to continue it, or choose an empty directory");
  checkWritableFile((fs::path(dir) / (prefix + "-probe.pxckpt")).string(),
                    "--checkpoint");
}

std::string writeCheckpoint(const std::string &dir, const Session &session,
                            int keep) {
  const Plan &plan = session.plan();
  const ExecEnv &env = session.env();
  int64_t step = env.step;
  std::string path = checkpointPath(dir, env.rank, step);
  json vars = json::array();
  uint64_t dataBytes = 0;
  // What this rank writes of each variable: (start, bytes) pieces.
  std::vector<std::vector<std::pair<const char *, int64_t>>> pieces;
  for (size_t i = 0; i < plan.variables.size(); ++i) {
    const PlanVariable &v = plan.variables[i];
    TensorView t = session.variable(i);
    // The last good checkpoint must not be replaced by a broken state.
    std::string bad = describeNonFinite(t.data, t.dtype, t.shape);
    if (!bad.empty())
      throw RuntimeError(path + ": not written: variable '" + v.name +
                         "' holds " + bad + " after step " +
                         std::to_string(step) + " (the checkpoints in " + dir +
                         " are left as they were)");
    auto rows = session.currentRows(i);
    int64_t rowBytes = t.bytes() / std::max<int64_t>(t.shape.empty() ? 1 : t.shape[0], 1);
    json ranges = json::array();
    int64_t bytes = 0;
    pieces.emplace_back();
    for (auto [a, b] : rows) {
      ranges.push_back({a, b});
      pieces.back().push_back({static_cast<const char *>(t.data) + a * rowBytes,
                               (b - a) * rowBytes});
      bytes += (b - a) * rowBytes;
    }
    vars.push_back({{"name", v.name}, {"dtype", nameOf(v.dtype)},
                    {"shape", v.shape}, {"rows", ranges}, {"bytes", bytes}});
    dataBytes += (uint64_t)bytes;
  }
  json header = {{"plan_crc32", plan.checksum},
                 {"world_size", env.worldSize},
                 {"rank", env.rank},
                 {"step", step},
                 {"seed", env.seed},
                 {"samples_per_step", env.globalBatch},
                 {"variables", vars}};
  std::string text = header.dump();
  std::string head = frameHeader(kCheckpointFormat, text.size(), dataBytes) + text;

  AtomicFile file(path);
  uint32_t crc = crc32Of(head.data(), head.size());
  file.write(head.data(), head.size());
  for (const auto &variable : pieces)
    for (auto [data, bytes] : variable) {
      crc = crc32Of(data, (size_t)bytes, crc);
      file.write(data, (size_t)bytes);
    }
  std::string trailer = frameTrailer(crc);
  file.write(trailer.data(), trailer.size());
  file.commit();

  std::vector<int64_t> steps = checkpointSteps(dir, env.rank);
  for (size_t i = 0; i + keep < steps.size(); ++i) {
    std::error_code ec;
    fs::remove(checkpointPath(dir, env.rank, steps[i]), ec);
  }
  return path;
}

int64_t agreeOnResumeStep(const std::string &dir, Comm &comm) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw RuntimeError(dir + ": --resume needs the directory --checkpoint "
                             "wrote, and there is none");
  std::vector<int64_t> steps = checkpointSteps(dir, comm.rank());
  int64_t newest = steps.empty() ? -1 : steps.back();
  int64_t common = newest;
  if (comm.size() > 1) {
    Group &world = comm.group({comm.size()}, {0});
    comm.run([&] { comm.allreduce(world, &common, 1, DType::I64, ReduceOp::Min); });
  }
  if (newest < 0)
    throw RuntimeError(dir + ": no checkpoint of rank " +
                       std::to_string(comm.rank()) + " to resume from (" +
                       checkpointPath(dir, comm.rank(), 0).substr(dir.size() + 1) +
                       " and the like)" +
                       (comm.rank() > 0 ? "; was it written by a run on fewer ranks?" : ""));
  if (common < 0)
    throw RuntimeError(dir + ": another rank has no checkpoint to resume from");
  if (!std::binary_search(steps.begin(), steps.end(), common))
    throw RuntimeError(checkpointPath(dir, comm.rank(), common) +
                       ": missing: another rank's newest checkpoint is of step " +
                       std::to_string(common) + ", and this rank has steps " +
                       stepsText(steps));
  return common;
}

Checkpoint readCheckpoint(const std::string &path, const Plan &plan, int rank,
                          int worldSize) {
  std::optional<std::string> read = readFileBytes(path);
  if (!read)
    throw RuntimeError(path + ": cannot open the checkpoint: " +
                       std::strerror(errno));
  const std::string &bytes = *read;
  auto fail = [&](const std::string &message) -> RuntimeError {
    return RuntimeError(path + ": " + message);
  };
  FramedSections sections = unframe(bytes, kCheckpointFormat, [&](const std::string &why) {
    throw fail(why);
  });

  Checkpoint c;
  c.path = path;
  try {
    json h = json::parse(sections.first);
    int writtenWorld = h.at("world_size").get<int>();
    if (writtenWorld != worldSize)
      throw fail("the checkpoint is of a run on " + std::to_string(writtenWorld) +
                 " rank(s), and this one has " + std::to_string(worldSize));
    int writtenRank = h.at("rank").get<int>();
    if (writtenRank != rank)
      throw fail("the checkpoint is rank " + std::to_string(writtenRank) +
                 "'s, read by rank " + std::to_string(rank));
    uint32_t planCrc = h.at("plan_crc32").get<uint32_t>();
    if (planCrc != plan.checksum)
      throw fail("the checkpoint is of another plan (plan checksum " + hex(planCrc) +
                 ", this plan's is " + hex(plan.checksum) +
                 "); resume with the plan that wrote it");
    c.step = h.at("step").get<int64_t>();
    c.seed = h.at("seed").get<uint64_t>();
    const json &vars = h.at("variables");
    if (vars.size() != plan.variables.size())
      throw fail("the checkpoint has " + std::to_string(vars.size()) +
                 " variables, the plan " + std::to_string(plan.variables.size()));
    int64_t at = 0;
    for (size_t i = 0; i < vars.size(); ++i) {
      const PlanVariable &v = plan.variables[i];
      const json &e = vars[i];
      if (e.at("name").get<std::string>() != v.name ||
          e.at("dtype").get<std::string>() != nameOf(v.dtype) ||
          e.at("shape").get<std::vector<int64_t>>() != v.shape)
        throw fail("variable " + std::to_string(i) + " of the checkpoint ('" +
                   e.value("name", std::string("?")) + "') is not the plan's '" +
                   v.name + "'");
      int64_t rows = v.shape.empty() ? 1 : v.shape[0], n = 1;
      for (int64_t d : v.shape)
        n *= d;
      int64_t rowBytes = n * (int64_t)sizeOf(v.dtype) / std::max<int64_t>(rows, 1);
      int64_t bytes = 0, last = 0;
      std::vector<std::pair<int64_t, int64_t>> ranges;
      for (const json &r : e.at("rows")) {
        int64_t a = r.at(0).get<int64_t>(), b = r.at(1).get<int64_t>();
        if (a < last || b < a || b > rows)
          throw fail("corrupt checkpoint: rows [" + std::to_string(a) + ", " +
                     std::to_string(b) + ") of variable '" + v.name + "'");
        ranges.push_back({a, b});
        bytes += (b - a) * rowBytes;
        last = b;
      }
      if (e.at("bytes").get<int64_t>() != bytes)
        throw fail("corrupt checkpoint: variable '" + v.name + "' announces " +
                   std::to_string(e.at("bytes").get<int64_t>()) +
                   " bytes for its rows, which take " + std::to_string(bytes));
      c.offsets.push_back(at);
      c.rows.push_back(std::move(ranges));
      at += bytes;
    }
    if ((uint64_t)at != sections.second.size())
      throw fail("corrupt checkpoint: its variables take " + std::to_string(at) +
                 " bytes, the file holds " + std::to_string(sections.second.size()));
  } catch (const json::exception &e) {
    throw fail(std::string("corrupt checkpoint header: ") + e.what());
  }
  c.data = std::string(sections.second);
  return c;
}

void restoreCheckpoint(const Checkpoint &checkpoint, Session &session) {
  for (size_t i = 0; i < session.plan().variables.size(); ++i) {
    TensorView t = session.variable(i);
    int64_t rowBytes = t.bytes() / std::max<int64_t>(t.shape.empty() ? 1 : t.shape[0], 1);
    const char *from = checkpoint.data.data() + checkpoint.offsets[i];
    for (auto [a, b] : checkpoint.rows[i]) {
      std::memcpy(static_cast<char *>(t.data) + a * rowBytes, from,
                  (size_t)((b - a) * rowBytes));
      from += (b - a) * rowBytes;
    }
    session.commitVariable(i);
  }
  session.env().step = checkpoint.step;
  session.env().seed = checkpoint.seed;
}

} // namespace parallax::rt
