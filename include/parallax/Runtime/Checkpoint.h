//===- Checkpoint.h - a rank's training state on disk, and back -*- C++ -*-===//
//
// A checkpoint holds what one rank needs to continue a run exactly where it
// stopped: the bytes of every variable as this rank holds them (parameters,
// BatchNorm statistics, optimizer state; weight-update shards as this rank
// has them, and of a parameter-server table and its optimizer state the
// rows this rank serves: Session::currentRows), the step counter and the
// seed. Nothing
// else carries over from one step to the next: Adam's bias correction and
// every random stream (dropout masks, synthetic data) are functions of
// (seed, step), and the data position is the step times the global batch
// (Data.h). So 10 steps, a checkpoint and 10 more steps after a resume give
// the losses and weights of 20 steps in one run, bit for bit.
//
// DIR/rank<R>-step<S>.pxckpt, one file per rank and step, each written
// atomically (AtomicFile.h). Each rank keeps its two newest: a crash while
// the ranks write step S can leave some of them at S and the others at the
// previous checkpoint, and a resume takes the newest step every rank has.
//
// On disk (all integers little-endian):
//
//   offset 0   "PXCKPT\r\n"          8-byte magic
//   offset 8   u32 format version    kCheckpointFormatVersion
//   offset 12  u32 reserved (0)
//   offset 16  u64 header bytes H    JSON: the run's identity (the plan's
//                                    checksum, world size, rank), step,
//                                    seed, and the variable table
//   offset 24  u64 data bytes D
//   offset 32  H bytes of JSON, then D bytes: every variable in plan order
//   end - 4    u32 CRC-32 (zlib) of every byte before it
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_CHECKPOINT_H
#define PARALLAX_RUNTIME_CHECKPOINT_H

#include "parallax/Runtime/Plan.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace parallax::rt {

class Comm;
class Session;

constexpr uint32_t kCheckpointFormatVersion = 1;

/// A verified checkpoint file, read into memory.
struct Checkpoint {
  std::string path;
  int64_t step = 0;
  uint64_t seed = 0;
  /// The variables' bytes, in plan order, and where each starts.
  std::string data;
  std::vector<int64_t> offsets;
  /// The rows of each variable the data holds, [begin, end) ranges of its
  /// first dimension (Session::currentRows of the rank that wrote it).
  std::vector<std::vector<std::pair<int64_t, int64_t>>> rows;
};

/// DIR/rank<R>-step<S>.pxckpt
std::string checkpointPath(const std::string &dir, int rank, int64_t step);

/// The steps of `rank`'s complete checkpoints in `dir`, ascending.
std::vector<int64_t> checkpointSteps(const std::string &dir, int rank);

/// Makes `dir` ready to take `rank`'s checkpoints before the first step:
/// creates it, checks that it takes new files, removes temporaries a crash
/// left, and, unless the run resumes from this directory, refuses one that
/// already holds checkpoints of this rank (they belong to another run).
/// Throws RuntimeError naming the directory.
void prepareCheckpointDir(const std::string &dir, int rank, bool resumingFromIt);

/// Writes this rank's checkpoint of `session` at its current step into
/// `dir`, atomically, then removes all but its `keep` newest. Refuses, and
/// writes nothing, when a variable holds a NaN or an infinity: the
/// checkpoints already there stay the last good ones. Returns the path.
std::string writeCheckpoint(const std::string &dir, const Session &session,
                            int keep = 2);

/// The newest step of which every rank has a checkpoint in `dir` (a
/// collective: every rank calls it). Throws RuntimeError when this rank,
/// or another, has none.
int64_t agreeOnResumeStep(const std::string &dir, Comm &comm);

/// Reads `path` and checks that it is whole (size, checksum) and belongs to
/// this run: written with `plan` (its checksum), for `worldSize` ranks, by
/// `rank`. Throws RuntimeError naming the file.
Checkpoint readCheckpoint(const std::string &path, const Plan &plan, int rank,
                          int worldSize);

/// Puts a checkpoint's variables and step into `session` (and its seed
/// into the session's environment).
void restoreCheckpoint(const Checkpoint &checkpoint, Session &session);

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_CHECKPOINT_H
