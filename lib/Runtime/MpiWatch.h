//===- MpiWatch.h - a collective that waits too long ends the job -*- C++ -*-===//
//
// A rank that stops (SIGSTOP, a kernel that never returns, a machine that
// hangs) leaves every other rank blocked in its next collective, silently
// and forever. The watch is a thread beside the collectives (so MPI runs
// MPI_THREAD_MULTIPLE): every rank counts the collectives it enters on each
// communicator and notes the one it is blocked in. When one has blocked
// longer than the timeout, the watch asks every other member of that
// communicator, over a communicator of its own (a duplicate of the world,
// which no collective's messages can match), how many collectives of that
// communicator it has entered and where it is. Watches look for questions
// ten times a second whatever their rank is doing, so a rank that is
// computing, or blocked in another collective, answers; one that is
// stopped, or whose machine is gone, does not. After a grace period the
// rank names the ranks that did not arrive, and the handler ends the job.
// Of ranks that time out in the same collective the lowest reports: the
// others see its question and stand by.
//
// The collectives themselves stay MPI's blocking ones, with the algorithms
// share/parallax/openmpi-coll-rules.conf picks; the cost per collective is
// two uncontended mutex operations.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_LIB_RUNTIME_MPIWATCH_H
#define PARALLAX_LIB_RUNTIME_MPIWATCH_H

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace parallax::rt {

struct JobInfo;

class MpiWatch {
public:
  using Handler = std::function<void(const std::string &)>;
  using Clock = std::chrono::steady_clock;

  /// Collective over MPI_COMM_WORLD (duplicates it). `handler` must end the
  /// job; it is called on the watch thread.
  MpiWatch(double timeoutSeconds, Handler handler);
  ~MpiWatch();

  /// A communicator over `members` (world ranks): its id for enter(). The
  /// world is id 0. Every member must add its communicators in the same
  /// order (they are created collectively, so they are).
  int add(const std::vector<int> &members);

  /// Around each blocking collective on communicator `id`: `call` names
  /// the MPI function, `job` (may be null) and `step` what it is for.
  void enter(int id, const char *call, const JobInfo *job, int64_t step);
  void leave();

  /// enter() ... leave(), exception-safe.
  class Scope {
  public:
    Scope(MpiWatch *w, int id, const char *call, const JobInfo *job, int64_t step)
        : w(w) {
      if (w)
        w->enter(id, call, job, step);
    }
    ~Scope() {
      if (w)
        w->leave();
    }
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    MpiWatch *w;
  };

private:
  /// A question (kind 1) or an answer (kind 2), 256 bytes on the wire.
  struct Message {
    int32_t kind = 0;
    int32_t from = -1;
    int32_t comm = 0;
    int32_t there = 0; ///< answer: blocked in that collective now
    uint64_t seq = 0;  ///< question: the collective; answer: collectives entered
    char where[232] = {};
  };
  struct Waiting {
    bool active = false;
    int comm = 0;
    uint64_t seq = 0; ///< 1 for the first collective on `comm`
    Clock::time_point since;
    const char *call = nullptr;
    const JobInfo *job = nullptr;
    int64_t step = 0;
  };

  void loop();
  void answerQuestions();
  void send(int to, const Message &m);
  void startAsking(const Waiting &w);
  void conclude();
  /// "all_reduce (kernel #17, bucket 0) in step 5", or the MPI call.
  static std::string describe(const Waiting &w);

  double timeout_;
  Handler handler_;
  int rank_ = 0;
  MPI_Comm control_ = MPI_COMM_NULL;

  std::mutex mutex_; ///< guards the three below (the collectives' thread writes them)
  std::vector<std::vector<int>> members_;
  std::vector<uint64_t> entered_;
  Waiting waiting_;

  // The watch thread's own.
  struct Asking {
    bool active = false;
    Waiting what;
    Clock::time_point until;
    std::map<int, Message> answers;
  } asking_;
  Clock::time_point standBy_;
  std::list<std::pair<MPI_Request, Message>> outgoing_;
  bool reported_ = false;

  std::thread thread_;
  std::mutex stopMutex_;
  std::condition_variable stopCv_;
  bool stop_ = false;
};

} // namespace parallax::rt

#endif // PARALLAX_LIB_RUNTIME_MPIWATCH_H
