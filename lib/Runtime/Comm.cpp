//===- Comm.cpp - the communication thread, local and MPI worlds ----------===//

#include "parallax/Runtime/Comm.h"
#include "parallax/Runtime/Trace.h"

#include "MpiWatch.h"

// The C API only: Open MPI's deprecated C++ bindings need another library.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <thread>
#include <utility>

namespace parallax::rt {

Group::~Group() = default;
Comm::~Comm() = default;

void Comm::reduceScatter(Group &g, const void *send, void *recv, int64_t count, DType dtype,
                         ReduceOp op) {
  int64_t block = count * (int64_t)sizeOf(dtype);
  std::vector<char> staging(static_cast<const char *>(send),
                            static_cast<const char *>(send) + block * g.size());
  reduceScatterBlock(g, staging.data(), count, dtype, op);
  std::memcpy(recv, staging.data(), block);
}
Work::~Work() = default;

namespace {

class ThenWork final : public Work {
public:
  ThenWork(std::shared_ptr<Work> first, std::function<void()> after)
      : first(std::move(first)), after(std::move(after)) {}
  void wait() override {
    first->wait();
    if (after)
      std::exchange(after, nullptr)();
  }

private:
  std::shared_ptr<Work> first;
  std::function<void()> after;
};

} // namespace

std::shared_ptr<Work> thenRun(std::shared_ptr<Work> work, std::function<void()> after) {
  return std::make_shared<ThenWork>(std::move(work), std::move(after));
}

/// A job of the communication thread, by its ticket.
class Comm::JobWork final : public Work {
public:
  JobWork(Comm &comm, uint64_t ticket) : comm(comm), ticket(ticket) {}
  void wait() override {
    if (ticket)
      comm.wait(std::exchange(ticket, 0));
  }

private:
  Comm &comm;
  uint64_t ticket;
};

//===----------------------------------------------------------------------===//
// Communication thread
//===----------------------------------------------------------------------===//

int coresPerRank(int localRanks) {
  int machine = (int)std::thread::hardware_concurrency();
  int share = machine / std::max(1, localRanks);
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) == 0)
    share = std::min(share, CPU_COUNT(&mask));
  return std::max(0, share);
}

bool useCommThread(CommThread mode, int cores) {
  switch (mode) {
  case CommThread::On: return true;
  case CommThread::Off: return false;
  case CommThread::Auto: break;
  }
  // One core for the compute thread, one for the communication thread.
  return cores >= 2;
}

void Comm::startThread() {
  thread_ = std::thread([this] {
    // Named, so that top -H and perf tell it from the compute threads.
    pthread_setname_np(pthread_self(), "px-comm");
    loop();
  });
}

void Comm::stopThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

std::shared_ptr<Work> Comm::submit(std::function<void()> job, const JobInfo *info) {
  if (!thread_.joinable()) { // no thread (local world): run inline
    Job j{++submitted_, std::move(job), info, step_};
    if (std::exception_ptr e = execute(j))
      errors_[j.ticket] = e;
    completed_ = j.ticket;
    return std::make_shared<JobWork>(*this, j.ticket);
  }
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ticket = ++submitted_;
    queue_.push_back(Job{ticket, std::move(job), info, step_});
  }
  wake_.notify_one();
  return std::make_shared<JobWork>(*this, ticket);
}

void Comm::wait(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return completed_ >= ticket; });
  auto it = errors_.find(ticket);
  if (it != errors_.end()) {
    std::exception_ptr e = it->second;
    errors_.erase(it);
    std::rethrow_exception(e);
  }
}

std::exception_ptr Comm::execute(Job &job) {
  current_ = job.info;
  currentStep_ = job.step;
  std::exception_ptr error;
  Trace *trace = trace_;
  int64_t begin = trace ? Trace::now() : 0;
  Traffic::Count before = traffic.total;
  try {
    job.fn();
  } catch (...) {
    error = std::current_exception();
  }
  if (trace)
    trace->job(job.info, job.step, begin, Trace::now(),
               traffic.total.sent - before.sent,
               traffic.total.received - before.received, threaded());
  current_ = nullptr;
  return error;
}

void Comm::loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty())
        return; // stopping, nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    std::exception_ptr error = execute(job);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (error)
        errors_[job.ticket] = error;
      completed_ = job.ticket;
    }
    done_.notify_all();
  }
}

namespace {

/// Where a communicator caches its group over `axes` of a grid of `shape`
/// (membership: placeInGroup, Grid.h).
std::string cacheKey(const std::vector<int64_t> &shape,
                     const std::vector<int64_t> &axes) {
  std::string k;
  for (int64_t d : shape)
    k += std::to_string(d) + "x";
  k += "/";
  for (int64_t a : axes)
    k += std::to_string(a) + ",";
  return k;
}

/// A sendrecv's peers are distinct other members of the group.
void checkPeers(Group &g, const std::vector<PeerTransfer> &transfers) {
  std::vector<int> seen;
  for (const PeerTransfer &t : transfers) {
    if (t.peer < 0 || t.peer >= g.size() || t.peer == g.rank())
      throw CommError("sendrecv: group rank " + std::to_string(t.peer) +
                      " is not another member of a group of " + std::to_string(g.size()) +
                      " (this rank is " + std::to_string(g.rank()) + ")");
    if (std::find(seen.begin(), seen.end(), t.peer) != seen.end())
      throw CommError("sendrecv: group rank " + std::to_string(t.peer) + " named twice");
    if (t.sendBytes < 0 || t.recvBytes < 0)
      throw CommError("sendrecv: a negative size");
    seen.push_back(t.peer);
  }
}

//===----------------------------------------------------------------------===//
// A world of one
//===----------------------------------------------------------------------===//

class LocalGroup : public Group {
public:
  LocalGroup() { members_ = {0}; }
};

class LocalComm : public Comm {
public:
  const char *transport() const override { return "local"; }
  Group &group(const std::vector<int64_t> &shape,
               const std::vector<int64_t> &axes) override {
    placeInGroup(1, 0, shape, axes); // checks the grid
    return self;
  }
  void allreduce(Group &, void *, int64_t, DType, ReduceOp) override {}
  void allgatherv(Group &, const void *send, int64_t sendBytes, void *recv,
                  const std::vector<int64_t> &) override {
    if (send != recv)
      std::memmove(recv, send, sendBytes);
  }
  void alltoallv(Group &, const void *send, const std::vector<int64_t> &sendBytes,
                 void *recv, const std::vector<int64_t> &) override {
    if (send != recv)
      std::memmove(recv, send, sendBytes.at(0));
  }
  // A group of one: its only block is already reduced and gathered.
  void reduceScatterBlock(Group &, void *, int64_t, DType, ReduceOp) override {}
  void allgatherBlock(Group &, void *, int64_t) override {}
  // No other member to exchange with: only an empty list is valid.
  void sendrecv(Group &g, const std::vector<PeerTransfer> &transfers) override {
    checkPeers(g, transfers);
  }
  void barrier(Group &) override {}
  void abort(int code) override { std::exit(code); }

private:
  LocalGroup self;
};

//===----------------------------------------------------------------------===//
// MPI
//===----------------------------------------------------------------------===//

void check(int code, const char *what) {
  if (code == MPI_SUCCESS)
    return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  throw CommError(std::string(what) + " failed: " + std::string(text, len));
}

MPI_Datatype mpiType(DType t) {
  switch (t) {
  case DType::F32: return MPI_FLOAT;
  case DType::F64: return MPI_DOUBLE;
  case DType::I64: return MPI_INT64_T;
  case DType::I32: return MPI_INT32_T;
  case DType::I16: return MPI_INT16_T;
  case DType::I8: return MPI_INT8_T;
  case DType::U8:
  case DType::Bool: return MPI_UINT8_T;
  default:
    throw CommError(std::string("cannot reduce ") + nameOf(t) + " tensors");
  }
}

/// Average is a sum divided afterwards.
MPI_Op mpiOp(ReduceOp op) {
  return op == ReduceOp::Max ? MPI_MAX : op == ReduceOp::Min ? MPI_MIN : MPI_SUM;
}

int toInt(int64_t n, const char *what) {
  if (n < 0 || n > INT_MAX)
    throw CommError(std::string(what) + " of " + std::to_string(n) +
                    " exceeds MPI's 2^31 limit");
  return (int)n;
}

class MpiGroup : public Group {
public:
  MpiGroup(MPI_Comm comm, std::vector<int> members, int rank) : comm(comm) {
    members_ = std::move(members);
    rank_ = rank;
  }
  MPI_Comm comm;
  /// The communicator's id for the watch (0: the world).
  int watchId = 0;
};

/// Open MPI's fixed decision rules pick, for 4 ranks and multi-megabyte
/// buffers over TCP, an all-reduce that reached half the link rate in
/// bench/distributed.py's rate-limited runs (318 MB/rank: 4.9 s at 1 Gbit/s
/// against 3.3 s for gloo's ring; Open MPI's ring: 2.9 s). Parallax ships a
/// rules file (share/parallax/openmpi-coll-rules.conf: recursive doubling
/// below 64 KiB, the ring above; for the sharded weight update, butterfly
/// reduce-scatter and Bruck or ring all-gather) and points the tuned
/// component at it before MPI_Init, unless the user already enabled
/// dynamic rules, named a rules file or forced an all-reduce algorithm.
/// Other MPIs ignore the variables.
void useShippedCollectiveRules() {
#ifdef OPEN_MPI
  if (std::getenv("OMPI_MCA_coll_tuned_use_dynamic_rules") ||
      std::getenv("OMPI_MCA_coll_tuned_dynamic_rules_filename") ||
      std::getenv("OMPI_MCA_coll_tuned_allreduce_algorithm"))
    return;
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec)
    return;
  auto rules = exe.parent_path().parent_path() / "share" / "parallax" /
               "openmpi-coll-rules.conf";
  if (!std::filesystem::is_regular_file(rules, ec))
    return;
  setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 0);
  setenv("OMPI_MCA_coll_tuned_dynamic_rules_filename", rules.c_str(), 0);
#endif
}

class MpiComm : public Comm {
  static constexpr int kPeerTag = 7;

public:
  MpiComm(CommThread thread, double timeout) {
    // The watch asks the other ranks while a collective blocks: a second
    // thread in MPI.
    int wanted = timeout > 0 ? MPI_THREAD_MULTIPLE : MPI_THREAD_SERIALIZED;
    int provided = 0;
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      useShippedCollectiveRules();
      check(MPI_Init_thread(nullptr, nullptr, wanted, &provided), "MPI_Init_thread");
      ownsMpi = true;
    } else {
      MPI_Query_thread(&provided);
    }
    if (provided < MPI_THREAD_SERIALIZED)
      throw CommError("this MPI cannot be called from a communication "
                      "thread (MPI_THREAD_SERIALIZED not provided)");
    // Errors come back as codes (and become CommErrors naming the call)
    // instead of aborting every rank without a word.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    ranksPerMachine_ = localSize();
    if (timeout > 0 && size_ > 1) {
      if (provided < MPI_THREAD_MULTIPLE)
        throw CommError("this MPI does not provide MPI_THREAD_MULTIPLE, which the "
                        "collective timeout needs (--timeout 0 turns it off)");
      timeout_ = timeout;
      watch = std::make_unique<MpiWatch>(timeout, [this](const std::string &message) {
        if (timeoutHandler_)
          timeoutHandler_(message);
      });
    }
    if (useCommThread(thread, coresPerRank(ranksPerMachine_)))
      startThread();
  }

  const char *transport() const override { return "mpi"; }

  ~MpiComm() override {
    stopThread();
    watch.reset();
    for (auto &[key, g] : groups)
      if (g->comm != MPI_COMM_WORLD)
        MPI_Comm_free(&g->comm);
    if (ownsMpi) {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized)
        MPI_Finalize();
    }
  }

  Group &group(const std::vector<int64_t> &shape,
               const std::vector<int64_t> &axes) override {
    std::string key = cacheKey(shape, axes);
    auto it = groups.find(key);
    if (it != groups.end())
      return *it->second;
    GroupPlace place = placeInGroup(size_, rank_, shape, axes);
    MPI_Comm comm = MPI_COMM_WORLD;
    if ((int)place.members.size() != size_) {
      // MPI_Comm_split is collective over the world: run it on the
      // communication thread like every other call.
      static const JobInfo split{-1, "comm_split", "MPI_Comm_split (making the groups)"};
      run(
          [&] {
            MpiWatch::Scope watched(watch.get(), 0, "MPI_Comm_split", currentJob(),
                                    currentStep());
            check(MPI_Comm_split(MPI_COMM_WORLD, place.color, place.rank, &comm), "MPI_Comm_split");
            MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
          },
          &split);
    }
    auto g = std::make_unique<MpiGroup>(comm, place.members, place.rank);
    if (watch && comm != MPI_COMM_WORLD)
      g->watchId = watch->add(place.members);
    Group &ref = *g;
    groups[key] = std::move(g);
    return ref;
  }

  void allreduce(Group &g, void *buf, int64_t count, DType dtype,
                 ReduceOp op) override {
    MPI_Comm comm = static_cast<MpiGroup &>(g).comm;
    MPI_Op mop = mpiOp(op);
    int64_t chunk = INT_MAX / 2;
    char *p = static_cast<char *>(buf);
    for (int64_t done = 0; done < count; done += chunk) {
      int n = (int)std::min(chunk, count - done);
      auto watched = watchOf(g, "MPI_Allreduce");
      check(MPI_Allreduce(MPI_IN_PLACE, p + done * elementBytes(dtype), n,
                          mpiType(dtype), mop, comm),
            "MPI_Allreduce");
    }
    if (op == ReduceOp::Average && g.size() > 1)
      divide(buf, count, dtype, g.size());
  }

  void reduceScatterBlock(Group &g, void *buf, int64_t count, DType dtype,
                          ReduceOp op) override {
    MPI_Comm comm = static_cast<MpiGroup &>(g).comm;
    MPI_Op mop = mpiOp(op);
    // In place, MPI leaves this rank's block at the start of the buffer,
    // and there it stays (Comm.h).
    auto watched = watchOf(g, "MPI_Reduce_scatter_block");
    check(MPI_Reduce_scatter_block(MPI_IN_PLACE, buf, toInt(count, "a reduce-scatter block"),
                                   mpiType(dtype), mop, comm),
          "MPI_Reduce_scatter_block");
    if (op == ReduceOp::Average && g.size() > 1)
      divide(buf, count, dtype, g.size());
  }

  void reduceScatter(Group &g, const void *send, void *recv, int64_t count, DType dtype,
                     ReduceOp op) override {
    MPI_Comm comm = static_cast<MpiGroup &>(g).comm;
    auto watched = watchOf(g, "MPI_Reduce_scatter_block");
    check(MPI_Reduce_scatter_block(send, recv, toInt(count, "a reduce-scatter block"),
                                   mpiType(dtype), mpiOp(op), comm),
          "MPI_Reduce_scatter_block");
    if (op == ReduceOp::Average && g.size() > 1)
      divide(recv, count, dtype, g.size());
  }

  void allgatherBlock(Group &g, void *buf, int64_t bytes) override {
    MPI_Comm comm = static_cast<MpiGroup &>(g).comm;
    // MPI ignores the send count and type in place, but Open MPI's tuned
    // component sizes the message from them to pick an algorithm.
    int n = toInt(bytes, "an all-gather block");
    auto watched = watchOf(g, "MPI_Allgather");
    check(MPI_Allgather(MPI_IN_PLACE, n, MPI_BYTE, buf, n, MPI_BYTE, comm),
          "MPI_Allgather");
  }

  void allgatherv(Group &g, const void *send, int64_t sendBytes, void *recv,
                  const std::vector<int64_t> &recvBytes) override {
    MPI_Comm comm = static_cast<MpiGroup &>(g).comm;
    std::vector<int> counts(g.size()), displs(g.size());
    int64_t offset = 0;
    for (int i = 0; i < g.size(); ++i) {
      counts[i] = toInt(recvBytes[i], "an all-gather block");
      displs[i] = toInt(offset, "an all-gather buffer");
      offset += recvBytes[i];
    }
    auto watched = watchOf(g, "MPI_Allgatherv");
    check(MPI_Allgatherv(send, toInt(sendBytes, "an all-gather block"), MPI_BYTE,
                         recv, counts.data(), displs.data(), MPI_BYTE, comm),
          "MPI_Allgatherv");
  }

  void alltoallv(Group &g, const void *send, const std::vector<int64_t> &sendBytes,
                 void *recv, const std::vector<int64_t> &recvBytes) override {
    MPI_Comm comm = static_cast<MpiGroup &>(g).comm;
    int n = g.size();
    std::vector<int> sc(n), sd(n), rc(n), rd(n);
    int64_t so = 0, ro = 0;
    for (int i = 0; i < n; ++i) {
      sc[i] = toInt(sendBytes[i], "an all-to-all block");
      sd[i] = toInt(so, "an all-to-all buffer");
      rc[i] = toInt(recvBytes[i], "an all-to-all block");
      rd[i] = toInt(ro, "an all-to-all buffer");
      so += sendBytes[i];
      ro += recvBytes[i];
    }
    auto watched = watchOf(g, "MPI_Alltoallv");
    check(MPI_Alltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(),
                        rd.data(), MPI_BYTE, comm),
          "MPI_Alltoallv");
  }

  void sendrecv(Group &g, const std::vector<PeerTransfer> &transfers) override {
    checkPeers(g, transfers);
    MPI_Comm comm = static_cast<MpiGroup &>(g).comm;
    // Every receive is posted before any send, and all of them complete
    // together: no order between the peers to deadlock on. One tag: a
    // peer sends at most one message per call, and calls on g complete
    // one after another.
    std::vector<MPI_Request> requests;
    requests.reserve(2 * transfers.size());
    auto watched = watchOf(g, "MPI_Sendrecv");
    for (const PeerTransfer &t : transfers)
      if (t.recvBytes > 0) {
        requests.push_back(MPI_REQUEST_NULL);
        check(MPI_Irecv(t.recv, toInt(t.recvBytes, "a point-to-point message"), MPI_BYTE,
                        t.peer, kPeerTag, comm, &requests.back()),
              "MPI_Irecv");
      }
    for (const PeerTransfer &t : transfers)
      if (t.sendBytes > 0) {
        requests.push_back(MPI_REQUEST_NULL);
        check(MPI_Isend(t.send, toInt(t.sendBytes, "a point-to-point message"), MPI_BYTE,
                        t.peer, kPeerTag, comm, &requests.back()),
              "MPI_Isend");
      }
    check(MPI_Waitall((int)requests.size(), requests.data(), MPI_STATUSES_IGNORE),
          "MPI_Waitall");
  }

  void barrier(Group &g) override {
    auto watched = watchOf(g, "MPI_Barrier");
    check(MPI_Barrier(static_cast<MpiGroup &>(g).comm), "MPI_Barrier");
  }

  void abort(int code) override { MPI_Abort(MPI_COMM_WORLD, code); }

private:
  /// Watches the blocking collective `call` on `g` for as long as the
  /// result lives.
  MpiWatch::Scope watchOf(Group &g, const char *call) {
    return MpiWatch::Scope(watch.get(), static_cast<MpiGroup &>(g).watchId, call,
                           currentJob(), currentStep());
  }

  static void divide(void *buf, int64_t count, DType dtype, int by) {
    auto div = [&](auto *p) {
      for (int64_t i = 0; i < count; ++i)
        p[i] /= by;
    };
    switch (dtype) {
    case DType::F32: div(static_cast<float *>(buf)); break;
    case DType::F64: div(static_cast<double *>(buf)); break;
    case DType::I64: div(static_cast<int64_t *>(buf)); break;
    case DType::I32: div(static_cast<int32_t *>(buf)); break;
    default:
      throw CommError(std::string("cannot average ") + nameOf(dtype) + " tensors");
    }
  }

  /// Ranks on this machine: from Open MPI's environment when mpirun set it,
  /// else by comparing host names (a collective, at start-up).
  int localSize() {
    if (const char *s = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
      return std::max(1, std::atoi(s));
    return 1;
  }

  bool ownsMpi = false;
  std::map<std::string, std::unique_ptr<MpiGroup>> groups;
  std::unique_ptr<MpiWatch> watch;
};

} // namespace

std::unique_ptr<Comm> makeLocalComm() { return std::make_unique<LocalComm>(); }

bool launchedUnderMpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

std::unique_ptr<Comm> makeMpiComm(CommThread thread, double timeoutSeconds) {
  return std::make_unique<MpiComm>(thread, timeoutSeconds);
}

} // namespace parallax::rt
