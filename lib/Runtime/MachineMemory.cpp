//===- MachineMemory.cpp - how much memory a plan may use here ------------===//

#include "parallax/Runtime/MachineMemory.h"

#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>

namespace parallax::rt {

namespace {

/// A "Key:   N kB" line of /proc/meminfo (or another such file), in
/// bytes; -1 if absent.
int64_t meminfo(const std::string &key, const char *path = "/proc/meminfo") {
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line))
    if (line.compare(0, key.size() + 1, key + ":") == 0) {
      std::istringstream in(line.substr(key.size() + 1));
      int64_t kb = -1;
      in >> kb;
      return kb < 0 ? -1 : kb * 1024;
    }
  return -1;
}

/// The cgroup limit of this process (its cgroup's memory.max, as a
/// container or a batch scheduler sets it); -1 if none.
int64_t cgroupLimit() {
  std::string group;
  std::ifstream self("/proc/self/cgroup");
  for (std::string line; std::getline(self, line);)
    if (line.rfind("0::", 0) == 0)
      group = line.substr(3);
  // cgroup v2, then v1's memory controller.
  for (const std::string &file :
       {"/sys/fs/cgroup" + group + "/memory.max", std::string("/sys/fs/cgroup/memory.max"),
        std::string("/sys/fs/cgroup/memory/memory.limit_in_bytes")}) {
    std::ifstream f(file);
    std::string value;
    if (!(f >> value))
      continue;
    if (value == "max")
      return -1;
    try {
      return std::stoll(value);
    } catch (const std::exception &) {
      return -1;
    }
  }
  return -1;
}

} // namespace

int64_t usableMemoryBytes() {
  int64_t ram = meminfo("MemTotal");
  if (ram < 0) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    ram = pages > 0 && page > 0 ? (int64_t)pages * page : 0;
  }
  int64_t limit = cgroupLimit();
  if (limit >= 0 && (ram == 0 || limit < ram))
    ram = limit;
  if (ram == 0)
    return 0;
  int64_t swap = meminfo("SwapTotal");
  return ram + (swap > 0 ? swap : 0);
}

int64_t residentBytes() { return meminfo("VmRSS", "/proc/self/status"); }

int64_t peakResidentBytes() { return meminfo("VmHWM", "/proc/self/status"); }

int64_t sharedResidentBytes() {
  int64_t files = meminfo("RssFile", "/proc/self/status");
  int64_t shared = meminfo("RssShmem", "/proc/self/status");
  return std::max<int64_t>(0, files) + std::max<int64_t>(0, shared);
}

int64_t heapInUseBytes() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  struct mallinfo2 info = mallinfo2();
  return (int64_t)(info.uordblks + info.hblkhd);
#else
  return -1;
#endif
}

bool trimHeapAbove(int64_t &highMark, int64_t threshold) {
  int64_t now = residentBytes();
  if (now < 0)
    return false;
  bool above = highMark >= 0 && now > highMark + threshold;
  highMark = std::max(highMark, now);
#ifdef __GLIBC__
  if (above)
    malloc_trim(0);
  return above;
#else
  return false;
#endif
}

bool resetPeakResident() {
  std::ofstream f("/proc/self/clear_refs");
  return static_cast<bool>(f << "5" << std::flush);
}

std::optional<int64_t> parseBytes(const std::string &text) {
  size_t end = 0;
  double value = 0;
  try {
    value = std::stod(text, &end);
  } catch (const std::exception &) {
    return std::nullopt;
  }
  std::string unit = text.substr(end);
  while (!unit.empty() && unit.front() == ' ')
    unit.erase(0, 1);
  const std::pair<const char *, double> units[] = {
      {"", 1},       {"B", 1},          {"KiB", 1024.0},   {"MiB", 1048576.0},
      {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}, {"KB", 1e3}, {"MB", 1e6},
      {"GB", 1e9},   {"TB", 1e12}};
  for (auto [name, scale] : units)
    if (unit == name) {
      double bytes = value * scale;
      if (!(bytes >= 0) || bytes > 9.2e18)
        return std::nullopt;
      return (int64_t)bytes;
    }
  return std::nullopt;
}

std::string bytesText(int64_t bytes) {
  const char *units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024)
    return std::to_string(bytes) + " B";
  double b = (double)bytes;
  int u = -1;
  while (b >= 1024.0 && u < 5) {
    b /= 1024.0;
    ++u;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", b, units[u]);
  return text;
}

} // namespace parallax::rt
