//===- Trace.h - a timeline of kernels and collectives ---------*- C++ -*-===//
//
// parallax-run --trace FILE: every step, every kernel on the compute thread
// and every communication job on the thread that ran it (the communication
// thread, or inline inside its kernel), with the bytes it sent and
// received, in Chrome's Trace Event Format (the JSON that chrome://tracing,
// Perfetto, Horovod's timeline and PyTorch's profiler use): one process per
// rank, one thread per lane. Recording appends a fixed-size event to a
// vector owned by the recording thread; nothing is formatted until the end.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_TRACE_H
#define PARALLAX_RUNTIME_TRACE_H

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace parallax::rt {

class Comm;
struct JobInfo;
struct Plan;

class Trace {
public:
  enum class Kind : uint8_t { Step, Kernel, Job };
  struct Event {
    int64_t begin = 0, end = 0; ///< steady clock, nanoseconds
    int64_t sent = 0, received = 0; ///< bytes (jobs)
    const JobInfo *job = nullptr;   ///< jobs: what it was
    int32_t kernel = -1;            ///< plan index; -1: none
    int32_t step = 0;
    Kind kind = Kind::Kernel;
    bool commThread = false; ///< ran on the communication thread
  };

  Trace();

  static int64_t now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  /// Time 0 of the file (ranks set it right after a barrier, so that their
  /// timelines line up within the barrier's skew, on one machine or many).
  void setOrigin(int64_t t) { origin_ = t; }

  // On the compute thread.
  void step(int64_t step, int64_t begin, int64_t end) {
    compute_.push_back({begin, end, 0, 0, nullptr, -1, (int32_t)step, Kind::Step, false});
  }
  void kernel(int32_t index, int64_t step, int64_t begin, int64_t end) {
    compute_.push_back({begin, end, 0, 0, nullptr, index, (int32_t)step, Kind::Kernel, false});
  }
  /// On the thread that ran the job (Comm).
  void job(const JobInfo *info, int64_t step, int64_t begin, int64_t end,
           int64_t sent, int64_t received, bool commThread);

  /// This rank's lanes as Trace Event Format objects (metadata naming the
  /// rank and its threads first, then each lane in time order), separated
  /// by ",\n"; kernels named after `plan`.
  std::string eventsJson(const Plan &plan, int rank, bool commThread) const;

  const std::vector<Event> &computeEvents() const { return compute_; }
  const std::vector<Event> &jobEvents() const { return jobs_; }

private:
  int64_t origin_;
  std::vector<Event> compute_, jobs_; ///< one writer each
};

/// Writes the trace of every rank of `comm` to `path` (rank 0 writes; a
/// collective: call it on every rank, with no job in flight). Throws
/// std::runtime_error naming the file when it cannot be written.
void writeTrace(Comm &comm, const Trace &trace, const Plan &plan,
                const std::string &path);

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_TRACE_H
