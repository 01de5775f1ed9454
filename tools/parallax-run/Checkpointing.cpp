//===- Checkpointing.cpp - parallax-run's --checkpoint and --resume -------===//

#include "Checkpointing.h"

#include "parallax/Runtime/Checkpoint.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <vector>

namespace parallax::run {

using namespace rt;

namespace {

bool sameDirectory(const std::string &a, const std::string &b) {
  std::error_code ec;
  return std::filesystem::equivalent(a, b, ec) ||
         std::filesystem::weakly_canonical(a, ec) ==
             std::filesystem::weakly_canonical(b, ec);
}

} // namespace

Checkpointing::Checkpointing(CheckpointOptions opts, int rank)
    : options(std::move(opts)), rank(rank) {
  if (options.every < 0)
    throw RuntimeError("--checkpoint-every must be >= 0");
  if (options.every > 0 && options.dir.empty())
    throw RuntimeError("--checkpoint-every needs --checkpoint DIR");
  if (!options.dir.empty())
    prepareCheckpointDir(options.dir, rank,
                         !options.resumeDir.empty() &&
                             sameDirectory(options.dir, options.resumeDir));
}

int64_t Checkpointing::resume(Session &session, Comm &comm,
                              std::optional<uint64_t> seed) {
  if (options.resumeDir.empty())
    return 0;
  int64_t step = agreeOnResumeStep(options.resumeDir, comm);
  std::string path = checkpointPath(options.resumeDir, rank, step);
  Checkpoint c = readCheckpoint(path, session.plan(), rank, comm.size());
  if (seed && *seed != c.seed)
    throw RuntimeError(path + ": the checkpoint continues a run with --seed " +
                       std::to_string(c.seed) + ", not " + std::to_string(*seed) +
                       " (leave --seed out to take the checkpoint's)");
  restoreCheckpoint(c, session);
  lastWritten = sameDirectory(options.dir.empty() ? options.resumeDir : options.dir,
                              options.resumeDir)
                    ? step
                    : -1;
  return step;
}

double Checkpointing::afterStep(const Session &session, int64_t lastStep) {
  int64_t step = session.stepsRun();
  if (options.dir.empty() || step == lastWritten)
    return 0;
  bool due = (options.every > 0 && step % options.every == 0) || step >= lastStep;
  if (!due)
    return 0;
  auto t0 = std::chrono::steady_clock::now();
  writeCheckpoint(options.dir, session);
  lastWritten = step;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void keepMetricsUpTo(const std::string &path, int64_t step) {
  std::ifstream in(path);
  if (!in)
    return;
  std::vector<std::string> kept;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.value("step", int64_t(0)) <= step)
      kept.push_back(line);
  }
  in.close();
  std::ofstream out(path, std::ios::trunc);
  for (const std::string &line : kept)
    out << line << "\n";
  if (!out)
    throw RuntimeError(path + ": cannot rewrite the metrics of the resumed run");
}

} // namespace parallax::run
