//===- MemoryPlanner.cpp - arena offsets from buffer lifetimes ------------===//

#include "parallax/Target/PlanEmitter.h"

#include <algorithm>
#include <numeric>

namespace parallax {

int64_t planArena(std::vector<BufferLifetime> &buffers) {
  auto align = rt::alignToPlan;
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  // Largest first; ties by first use, so the result is deterministic.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes)
      return buffers[a].bytes > buffers[b].bytes;
    return buffers[a].first < buffers[b].first;
  });
  std::vector<size_t> placed;
  int64_t arena = 0;
  for (size_t i : order) {
    BufferLifetime &buf = buffers[i];
    int64_t size = align(std::max<int64_t>(buf.bytes, 1)),
            alignment = rt::alignmentOf(buf.bytes);
    // The placed buffers whose lifetimes overlap this one, by offset.
    std::vector<size_t> conflicts;
    for (size_t j : placed)
      if (buffers[j].first <= buf.last && buf.first <= buffers[j].last)
        conflicts.push_back(j);
    std::sort(conflicts.begin(), conflicts.end(), [&](size_t a, size_t b) {
      return buffers[a].offset < buffers[b].offset;
    });
    int64_t offset = 0;
    for (size_t j : conflicts) {
      if (offset + size <= buffers[j].offset)
        break; // fits in the gap before j
      int64_t end = buffers[j].offset + align(std::max<int64_t>(buffers[j].bytes, 1));
      offset = std::max(offset, rt::alignUp(end, alignment));
    }
    buf.offset = offset;
    arena = std::max(arena, offset + size);
    placed.push_back(i);
  }
  return arena;
}

} // namespace parallax
