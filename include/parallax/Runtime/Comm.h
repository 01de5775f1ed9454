//===- Comm.h - collectives between ranks (MPI) ----------------*- C++ -*-===//
//
// The runtime's view of the other ranks. Groups follow the upstream shard
// dialect (Grid.h: placeInGroup says which ranks a group holds).
//
// Every MPI call happens on one communication thread, in submission order
// (the same order on every rank, because every rank runs the same plan), so
// collectives overlap the compute kernels that do not depend on them and MPI
// only needs MPI_THREAD_SERIALIZED. Kernels submit a job and wait for it
// later, or at once. When the ranks leave no core for that thread (more
// ranks than cores on a machine) there is nothing to overlap with, and jobs
// run inline on the submitting thread instead (CommThread).
//
// Traffic is counted per variable as the bytes this rank puts on and takes
// off the wire: exact for the exchanges we size ourselves (all-gather,
// all-to-all, halo exchanges, parameter-server pulls and pushes; messages
// to oneself are not traffic), and the bandwidth-optimal ring volume
// 2(G-1)/G * bytes for all-reduce, whose algorithm MPI chooses.
//
// A rank that stops (SIGSTOP, a hung kernel, a machine gone quiet) must not
// hang the others: a watch thread beside MPI's collectives ends the job when
// one waits longer than the timeout, naming the ranks that did not come
// (lib/Runtime/MpiWatch.h).
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_RUNTIME_COMM_H
#define PARALLAX_RUNTIME_COMM_H

#include "parallax/Runtime/DType.h"
#include "parallax/Runtime/Grid.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace parallax::rt {

class Trace;

/// What a job is: the plan kernel that submitted it and the collective,
/// for the message of a timeout and for traces. Kernels make theirs when
/// they are bound; the communicator keeps only a pointer.
struct JobInfo {
  int64_t kernel = -1;
  /// The collective, as traces name it ("all_reduce").
  std::string name;
  /// For messages: "all_reduce (kernel #17, bucket 0)".
  std::string description;
};

enum class ReduceOp { Sum, Average, Max, Min };

/// A collective that was started and can be waited for (c10d's Work, IREE's
/// semaphore): a job on a host transport's communication thread, or NCCL's
/// work on a GPU's communication stream. Waiting rethrows the collective's
/// error.
class Work {
public:
  virtual ~Work();
  /// Host transports block until the collective completed; a device
  /// transport orders the device's later kernels after it instead (the
  /// host does not wait).
  virtual void wait() = 0;
};

/// `work`, then `after` (on the waiting thread, once work completed): how
/// a GPU uploads the results of a collective staged through host memory.
std::shared_ptr<Work> thenRun(std::shared_ptr<Work> work, std::function<void()> after);

/// Where a rank runs its collectives. A thread of their own lets them
/// overlap the kernels, but only if it gets a core: Open MPI's shared-memory
/// transport waits by polling (with sched_yield when ranks outnumber cores),
/// so a communication thread that shares its core with the compute thread
/// only takes turns with it: with 4 ranks on 2 cores the extra threads
/// cost the lm example 2 to 4 ms per step in context switches
/// (docs/user-guide.md, --comm-thread). Auto: a thread when this rank has at least two
/// cores (coresPerRank), inline otherwise.
enum class CommThread { Auto, On, Off };

/// Cores this rank can count on: the CPUs it may run on (its affinity,
/// which mpirun --bind-to narrows), or its even share of the machine's
/// among `localRanks` ranks if that is fewer. At least 0.
int coresPerRank(int localRanks);

/// Whether `mode` runs collectives on their own thread for a rank with
/// `cores` cores.
bool useCommThread(CommThread mode, int cores);

/// A set of ranks that communicate together, in group-rank order.
class Group {
public:
  virtual ~Group();
  int rank() const { return rank_; }
  int size() const { return (int)members_.size(); }
  /// World rank of each group rank.
  const std::vector<int> &members() const { return members_; }

protected:
  int rank_ = 0;
  std::vector<int> members_;
};

/// Bytes sent and received per variable since the last reset.
struct Traffic {
  struct Count {
    int64_t sent = 0, received = 0;
  };
  std::map<std::string, Count> byVariable;
  /// Over all variables (a trace's bytes per job).
  Count total;
  void add(const std::string &variable, int64_t sent, int64_t received) {
    auto &c = byVariable[variable];
    c.sent += sent;
    c.received += received;
    total.sent += sent;
    total.received += received;
  }
};

/// One peer of a point-to-point exchange (Comm::sendrecv): `sendBytes`
/// at `send` go to group rank `peer`, and `recvBytes` from it arrive at
/// `recv`. A side of zero bytes is no message (the peer expects none).
struct PeerTransfer {
  int peer = -1;
  const void *send = nullptr;
  int64_t sendBytes = 0;
  void *recv = nullptr;
  int64_t recvBytes = 0;
};

class Comm {
public:
  virtual ~Comm();

  int rank() const { return rank_; }
  int size() const { return size_; }
  /// "local" or "mpi", for reports.
  virtual const char *transport() const = 0;
  /// Ranks per machine (ranks are numbered machine by machine).
  int ranksPerMachine() const { return ranksPerMachine_; }
  void setRanksPerMachine(int r) { ranksPerMachine_ = r; }

  /// This rank's group over `axes` of a grid of `shape` whose product is the
  /// world size. Created once (a collective call over the world: every rank
  /// must ask for the same groups in the same order) and cached.
  virtual Group &group(const std::vector<int64_t> &shape,
                       const std::vector<int64_t> &axes) = 0;

  // Collectives: only inside a submitted job (on the communication thread,
  // or inline when there is none).
  virtual void allreduce(Group &g, void *buf, int64_t count, DType dtype,
                         ReduceOp op) = 0;
  /// recv holds every member's block, in group order; counts in bytes.
  virtual void allgatherv(Group &g, const void *send, int64_t sendBytes,
                          void *recv, const std::vector<int64_t> &recvBytes) = 0;
  /// Block i of send goes to group rank i; block j of recv came from j.
  virtual void alltoallv(Group &g, const void *send,
                         const std::vector<int64_t> &sendBytes, void *recv,
                         const std::vector<int64_t> &recvBytes) = 0;
  /// In place on G blocks of `count` elements (G = g.size()): afterwards
  /// the first block holds the reduction of every member's copy of block
  /// g.rank() (where MPI_IN_PLACE leaves it: moving it to block g.rank()
  /// would be one more pass over it, and its only readers, the sharded
  /// updates, can read it there); the other blocks hold unspecified values.
  virtual void reduceScatterBlock(Group &g, void *buf, int64_t count, DType dtype,
                                  ReduceOp op) = 0;
  /// Out of place: `recv` (`count` elements) gets the reduction of every
  /// member's block g.rank() of `send` (G blocks of `count`), which is
  /// left as it was; the two must not overlap. Average divides by G. The
  /// default copies send into a fresh buffer for reduceScatterBlock on
  /// every call (fine for a group of one); MPI's takes at most 2^31 - 1
  /// elements per block and says so otherwise.
  virtual void reduceScatter(Group &g, const void *send, void *recv, int64_t count,
                             DType dtype, ReduceOp op);
  /// In place on G blocks of `bytes`: afterwards block i holds what member i
  /// had in its block i.
  virtual void allgatherBlock(Group &g, void *buf, int64_t bytes) = 0;
  /// Point-to-point with some members of g (a halo exchange's two
  /// neighbours), every message at once: distinct peers, none of them this
  /// rank. Every member of g makes the call, in the same order as its other
  /// calls on g (those with no peers too), as with the collectives: the
  /// timeout watch counts it as one of g's.
  virtual void sendrecv(Group &g, const std::vector<PeerTransfer> &transfers) = 0;
  virtual void barrier(Group &g) = 0;
  /// Ends every rank of the job at once (after a fatal error on this one,
  /// so the others do not wait forever in a collective).
  virtual void abort(int code) = 0;

  /// Runs `job` on the communication thread after every job submitted
  /// before it; the Work's wait() blocks until it has run and rethrows its
  /// exception. `info` (which must outlive the job) says what it is, for
  /// timeouts and traces.
  std::shared_ptr<Work> submit(std::function<void()> job, const JobInfo *info = nullptr);
  /// submit + wait.
  void run(std::function<void()> job, const JobInfo *info = nullptr) {
    submit(std::move(job), info)->wait();
  }
  /// Whether jobs run on a communication thread (else inline, in submit).
  bool threaded() const { return thread_.joinable(); }

  /// Seconds a collective may wait for the other ranks of its group (0:
  /// forever; makeMpiComm sets it). When one waits longer, `handler` gets
  /// a line naming the ranks that did not come and must end the job (the
  /// collective never returns); the default prints it and aborts.
  double timeout() const { return timeout_; }
  void onTimeout(std::function<void(const std::string &)> handler) {
    timeoutHandler_ = std::move(handler);
  }
  /// The step whose jobs are being submitted (messages, traces).
  void setStep(int64_t step) { step_ = step; }
  /// Records every job's thread, time and bytes into `trace` (null: off).
  /// Only between jobs (no job queued or running).
  void setTrace(Trace *trace) { trace_ = trace; }

  Traffic traffic;

protected:
  Comm() = default;
  void startThread();
  void stopThread();
  /// The job running now and the step it was submitted in (on the thread
  /// running it; null between jobs).
  const JobInfo *currentJob() const { return current_; }
  int64_t currentStep() const { return currentStep_; }

  int rank_ = 0, size_ = 1, ranksPerMachine_ = 1;
  double timeout_ = 0;
  std::function<void(const std::string &)> timeoutHandler_;

private:
  struct Job {
    uint64_t ticket = 0;
    std::function<void()> fn;
    const JobInfo *info = nullptr;
    int64_t step = 0;
  };
  class JobWork;
  /// Blocks until ticket's job has run; rethrows its exception.
  void wait(uint64_t ticket);
  void loop();
  /// Runs one job on this thread (traced when tracing).
  std::exception_ptr execute(Job &job);

  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::deque<Job> queue_;
  uint64_t submitted_ = 0, completed_ = 0;
  std::map<uint64_t, std::exception_ptr> errors_;
  bool stopping_ = false;
  int64_t step_ = 0, currentStep_ = 0;
  const JobInfo *current_ = nullptr;
  Trace *trace_ = nullptr;
};

/// A world of one rank: collectives are copies, no MPI.
std::unique_ptr<Comm> makeLocalComm();

/// Whether this process was started by mpirun (Open MPI's environment).
bool launchedUnderMpi();

/// Initialises MPI and returns the world, its collectives on a thread or
/// inline as `thread` says; throws CommError if MPI cannot give what is
/// needed. With a timeout (seconds, > 0) a collective that waits longer
/// ends the job (Comm::onTimeout); that needs MPI_THREAD_MULTIPLE (the
/// watch thread asks the other ranks while a collective blocks), else
/// MPI_THREAD_SERIALIZED is enough.
std::unique_ptr<Comm> makeMpiComm(CommThread thread = CommThread::Auto,
                                  double timeoutSeconds = 0);

/// Bytes of one element of `dtype` in collectives.
inline int64_t elementBytes(DType dtype) { return (int64_t)sizeOf(dtype); }

} // namespace parallax::rt

#endif // PARALLAX_RUNTIME_COMM_H
