//===- Trace.cpp - recording and writing the timeline ---------------------===//

#include "parallax/Runtime/Trace.h"

#include "parallax/Runtime/Comm.h"
#include "parallax/Runtime/Plan.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <numeric>
#include <stdexcept>

namespace parallax::rt {

using json = nlohmann::json;

namespace {

/// Lanes (Trace Event Format thread ids).
constexpr int kComputeLane = 0, kCommLane = 1;

/// Recording reallocates rarely: room for a few thousand kernels' steps.
constexpr size_t kReserve = 1 << 16;

json metadata(const char *name, int pid, int tid, json args) {
  json m{{"name", name}, {"ph", "M"}, {"pid", pid}, {"args", std::move(args)}};
  if (tid >= 0)
    m["tid"] = tid;
  return m;
}

/// Parents before their children: by begin, the longer first.
void timeOrder(std::vector<Trace::Event> &events) {
  std::stable_sort(events.begin(), events.end(), [](const auto &a, const auto &b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
  });
}

} // namespace

Trace::Trace() : origin_(now()) {
  compute_.reserve(kReserve);
  jobs_.reserve(kReserve / 8);
}

void Trace::job(const JobInfo *info, int64_t step, int64_t begin, int64_t end,
                int64_t sent, int64_t received, bool commThread) {
  jobs_.push_back({begin, end, sent, received, info, info ? (int32_t)info->kernel : -1,
                   (int32_t)step, Kind::Job, commThread});
}

std::string Trace::eventsJson(const Plan &plan, int rank, bool commThread) const {
  std::vector<json> out;
  out.push_back(metadata("process_name", rank, -1, {{"name", "rank " + std::to_string(rank)}}));
  out.push_back(metadata("process_sort_index", rank, -1, {{"sort_index", rank}}));
  out.push_back(metadata("thread_name", rank, kComputeLane, {{"name", "compute"}}));
  out.push_back(metadata("thread_sort_index", rank, kComputeLane, {{"sort_index", 0}}));
  if (commThread) {
    out.push_back(metadata("thread_name", rank, kCommLane, {{"name", "communication"}}));
    out.push_back(metadata("thread_sort_index", rank, kCommLane, {{"sort_index", 1}}));
  }
  // Microseconds since the origin; to the nanosecond.
  auto us = [&](int64_t t) { return (double)(t - origin_) / 1e3; };
  auto complete = [&](const Event &e, std::string name, const char *cat, int tid) {
    return json{{"name", std::move(name)}, {"cat", cat},     {"ph", "X"},
                {"ts", us(e.begin)},       {"dur", (double)std::max<int64_t>(e.end - e.begin, 0) / 1e3},
                {"pid", rank},             {"tid", tid}};
  };
  auto kernelOp = [&](int32_t k) {
    return k >= 0 && k < (int32_t)plan.kernels.size() ? plan.kernels[k].op : std::string("?");
  };

  // Jobs run inline nest inside their kernels on the compute lane.
  std::vector<Event> compute = compute_, comm;
  for (const Event &e : jobs_)
    (e.commThread ? comm : compute).push_back(e);
  timeOrder(compute);
  timeOrder(comm);
  for (const std::vector<Event> *lane : {&compute, &comm})
    for (const Event &e : *lane) {
      switch (e.kind) {
      case Kind::Step: {
        json j = complete(e, "step " + std::to_string(e.step), "step", kComputeLane);
        j["args"] = {{"step", e.step}};
        out.push_back(std::move(j));
        break;
      }
      case Kind::Kernel: {
        json j = complete(e, kernelOp(e.kernel), "kernel", kComputeLane);
        j["args"] = {{"kernel", e.kernel}, {"step", e.step}};
        if (e.kernel >= 0 && e.kernel < (int32_t)plan.kernels.size() &&
            !plan.kernels[e.kernel].loc.empty())
          j["args"]["loc"] = plan.kernels[e.kernel].loc;
        out.push_back(std::move(j));
        break;
      }
      case Kind::Job: {
        std::string name = e.job && !e.job->name.empty() ? e.job->name : "communication";
        json j = complete(e, name, "collective", e.commThread ? kCommLane : kComputeLane);
        j["args"] = {{"kernel", e.kernel},
                     {"step", e.step},
                     {"bytes_sent", e.sent},
                     {"bytes_received", e.received}};
        if (e.job && !e.job->description.empty())
          j["args"]["what"] = e.job->description;
        out.push_back(std::move(j));
        break;
      }
      }
    }
  std::string text;
  for (const json &j : out) {
    if (!text.empty())
      text += ",\n";
    text += j.dump();
  }
  return text;
}

void writeTrace(Comm &comm, const Trace &trace, const Plan &plan,
                const std::string &path) {
  std::string mine = trace.eventsJson(plan, comm.rank(), comm.threaded());
  int n = comm.size();
  std::vector<std::string> ranks{mine};
  if (n > 1) {
    // Every rank's text to every rank (the Comm has no gather; a trace is
    // a few megabytes), sizes first.
    std::vector<int64_t> sizes(n), eight(n, (int64_t)sizeof(int64_t));
    int64_t own = (int64_t)mine.size();
    Group &world = comm.group({n}, {0});
    comm.run([&] { comm.allgatherv(world, &own, sizeof own, sizes.data(), eight); });
    std::string all(std::accumulate(sizes.begin(), sizes.end(), int64_t(0)), '\0');
    comm.run([&] { comm.allgatherv(world, mine.data(), own, all.data(), sizes); });
    ranks.clear();
    int64_t at = 0;
    for (int r = 0; r < n; ++r) {
      ranks.push_back(all.substr(at, sizes[r]));
      at += sizes[r];
    }
  }
  if (comm.rank() != 0)
    return;
  std::ofstream out(path, std::ios::trunc);
  if (!out)
    throw std::runtime_error(path + ": cannot open the trace for writing");
  json other{{"producer", "parallax-run"}, {"ranks", n}, {"kernels", plan.kernels.size()}};
  out << "{\"displayTimeUnit\":\"ms\",\"otherData\":" << other.dump()
      << ",\"traceEvents\":[\n";
  bool first = true;
  for (const std::string &r : ranks) {
    if (r.empty())
      continue;
    out << (first ? "" : ",\n") << r;
    first = false;
  }
  out << "\n]}\n";
  out.flush();
  if (!out)
    throw std::runtime_error(path + ": cannot write the trace");
}

} // namespace parallax::rt
