//===- MpiWatch.cpp - a collective that waits too long ends the job -------===//

#include "MpiWatch.h"

#include "parallax/Runtime/Comm.h"

#include <pthread.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace parallax::rt {

namespace {

constexpr int kTag = 7;
constexpr int32_t kQuestion = 1, kAnswer = 2;
/// How often a watch looks for questions and at its rank's collective.
constexpr std::chrono::milliseconds kPoll(100);

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

/// "rank 2", "ranks 2 and 5", "ranks 1, 2 and 5".
std::string rankList(const std::vector<int> &ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0)
      s += i + 1 == ranks.size() ? " and " : ", ";
    s += std::to_string(ranks[i]);
  }
  return s;
}

} // namespace

MpiWatch::MpiWatch(double timeoutSeconds, Handler handler)
    : timeout_(timeoutSeconds), handler_(std::move(handler)) {
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (MPI_Comm_dup(MPI_COMM_WORLD, &control_) != MPI_SUCCESS)
    throw CommError("MPI_Comm_dup failed (the collective timeout's communicator)");
  MPI_Comm_set_errhandler(control_, MPI_ERRORS_RETURN);
  std::vector<int> world(size);
  for (int r = 0; r < size; ++r)
    world[r] = r;
  add(world);
  standBy_ = Clock::now();
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "px-watch");
    loop();
  });
}

MpiWatch::~MpiWatch() {
  {
    std::lock_guard<std::mutex> lock(stopMutex_);
    stop_ = true;
  }
  stopCv_.notify_all();
  if (thread_.joinable())
    thread_.join();
  // Answers to ranks that have finished complete; a question to a rank
  // that already left never will.
  for (auto &[request, message] : outgoing_)
    if (request != MPI_REQUEST_NULL)
      MPI_Request_free(&request);
}

int MpiWatch::add(const std::vector<int> &members) {
  std::lock_guard<std::mutex> lock(mutex_);
  members_.push_back(members);
  entered_.push_back(0);
  return (int)members_.size() - 1;
}

void MpiWatch::enter(int id, const char *call, const JobInfo *job, int64_t step) {
  std::lock_guard<std::mutex> lock(mutex_);
  waiting_.active = true;
  waiting_.comm = id;
  waiting_.seq = ++entered_[id];
  waiting_.since = Clock::now();
  waiting_.call = call;
  waiting_.job = job;
  waiting_.step = step;
}

void MpiWatch::leave() {
  std::lock_guard<std::mutex> lock(mutex_);
  waiting_.active = false;
}

std::string MpiWatch::describe(const Waiting &w) {
  std::string s = w.job && !w.job->description.empty() ? w.job->description
                                                       : std::string(w.call);
  if (w.step > 0)
    s += " in step " + std::to_string(w.step);
  return s;
}

void MpiWatch::send(int to, const Message &m) {
  outgoing_.emplace_back(MPI_REQUEST_NULL, m);
  auto &[request, message] = outgoing_.back();
  MPI_Isend(&message, sizeof message, MPI_BYTE, to, kTag, control_, &request);
}

void MpiWatch::answerQuestions() {
  for (;;) {
    int flag = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kTag, control_, &flag, &status) != MPI_SUCCESS || !flag)
      break;
    Message m;
    MPI_Recv(&m, sizeof m, MPI_BYTE, status.MPI_SOURCE, kTag, control_, MPI_STATUS_IGNORE);
    if (m.kind == kAnswer) {
      if (asking_.active && m.comm == asking_.what.comm)
        asking_.answers[m.from] = m;
      continue;
    }
    if (m.kind != kQuestion)
      continue;
    Message a;
    a.kind = kAnswer;
    a.from = rank_;
    a.comm = m.comm;
    std::string where;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      a.seq = m.comm >= 0 && m.comm < (int)entered_.size() ? entered_[m.comm] : 0;
      if (waiting_.active) {
        a.there = waiting_.comm == m.comm && waiting_.seq == m.seq;
        where = "it is waiting in " + describe(waiting_);
        // A lower rank asks about the collective this one waits in: it
        // reports, this one stands by.
        if (a.there && m.from < rank_) {
          standBy_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(std::max(10.0, timeout_)));
          asking_.active = false;
        }
      } else {
        where = "it is busy outside collectives (computing, or loading data)";
      }
    }
    std::strncpy(a.where, where.c_str(), sizeof a.where - 1);
    send(m.from, a);
  }
  // Forget sends that completed.
  for (auto it = outgoing_.begin(); it != outgoing_.end();) {
    int done = 0;
    if (it->first != MPI_REQUEST_NULL)
      MPI_Test(&it->first, &done, MPI_STATUS_IGNORE);
    it = done || it->first == MPI_REQUEST_NULL ? outgoing_.erase(it) : std::next(it);
  }
}

void MpiWatch::startAsking(const Waiting &w) {
  asking_ = Asking{};
  asking_.active = true;
  asking_.what = w;
  // Watches answer within kPoll; give them 20 times that, and no more than
  // the timeout itself.
  double grace = std::max(0.5, std::min(2.0, timeout_));
  asking_.until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(grace));
  Message q;
  q.kind = kQuestion;
  q.from = rank_;
  q.comm = w.comm;
  q.seq = w.seq;
  std::vector<int> members;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    members = members_[w.comm];
  }
  for (int m : members)
    if (m != rank_)
      send(m, q);
}

void MpiWatch::conclude() {
  const Waiting &w = asking_.what;
  std::vector<int> members;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    members = members_[w.comm];
  }
  std::vector<int> silent, elsewhere;
  std::vector<std::string> where;
  for (int m : members) {
    if (m == rank_)
      continue;
    auto it = asking_.answers.find(m);
    if (it == asking_.answers.end()) {
      silent.push_back(m);
    } else if (it->second.seq < w.seq) {
      elsewhere.push_back(m);
      where.push_back(it->second.where);
    }
  }
  std::string what = describe(w), within = " within " + seconds(timeout_) + " s";
  std::string message;
  if (silent.empty() && elsewhere.empty()) {
    message = "every rank reached " + what + ", but it did not complete" + within;
  } else {
    std::vector<int> missing = silent;
    missing.insert(missing.end(), elsewhere.begin(), elsewhere.end());
    std::sort(missing.begin(), missing.end());
    message = rankList(missing) + " did not reach " + what + within + " (";
    std::string details;
    if (!silent.empty())
      details = rankList(silent) + (silent.size() == 1 ? " does" : " do") +
                " not answer: stopped, hung or unreachable";
    for (size_t i = 0; i < elsewhere.size(); ++i) {
      if (!details.empty())
        details += "; ";
      std::string w2 = where[i];
      if (w2.rfind("it ", 0) == 0)
        w2 = w2.substr(3);
      details += "rank " + std::to_string(elsewhere[i]) + " " + w2;
    }
    message += details + "; --timeout sets the limit)";
  }
  reported_ = true;
  if (handler_)
    handler_(message);
  std::fprintf(stderr, "%s\n", message.c_str());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

void MpiWatch::loop() {
  auto timeout = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(timeout_));
  std::unique_lock<std::mutex> stopLock(stopMutex_);
  while (!stop_) {
    stopCv_.wait_for(stopLock, kPoll, [&] { return stop_; });
    if (stop_ || reported_)
      continue;
    answerQuestions();
    Waiting now;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      now = waiting_;
    }
    auto t = Clock::now();
    if (asking_.active) {
      bool stillThere = now.active && now.comm == asking_.what.comm &&
                        now.seq == asking_.what.seq;
      if (!stillThere)
        asking_.active = false; // it completed after all
      else if (t >= asking_.until)
        conclude();
    } else if (now.active && t - now.since >= timeout && t >= standBy_) {
      startAsking(now);
    }
  }
}

} // namespace parallax::rt
