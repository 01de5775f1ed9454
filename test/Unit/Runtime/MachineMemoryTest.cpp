//===- MachineMemoryTest.cpp - the process's memory, as the runtime reads it -===//
//
// trimHeapAbove on a heap fragmented the way parallax-run's malloc policy
// (no mmap) lets a library's per-call scratch fragment it: a large block
// freed below one that lives on stays resident until trimmed, and a step
// that stays below the mark trims nothing.
//
//===----------------------------------------------------------------------===//

#include "parallax/Runtime/MachineMemory.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>
#ifdef __GLIBC__
#include <malloc.h>
#endif

using namespace parallax::rt;

namespace {

#ifdef __GLIBC__
/// parallax-run's policy for the test's length: every block from the heap,
/// none handed back; glibc's defaults again after.
struct KeepFreedMemory {
  KeepFreedMemory() {
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
  }
  ~KeepFreedMemory() {
    mallopt(M_MMAP_MAX, 65536);
    mallopt(M_TRIM_THRESHOLD, 128 << 10);
  }
};
#endif

TEST(MachineMemory, TrimHeapAboveHandsBackAHoleOnlyPastTheMark) {
#ifndef __GLIBC__
  GTEST_SKIP() << "malloc_trim is glibc's";
#else
  if (residentBytes() < 0)
    GTEST_SKIP() << "no /proc/self/status";
  KeepFreedMemory policy;
  malloc_trim(0); // what earlier tests freed is not resident
  int64_t mark = -1;
  EXPECT_FALSE(trimHeapAbove(mark, 1 << 20)); // the first call sets the mark
  EXPECT_GT(mark, 0);
  const size_t scratch = 32 << 20;
  char *block = static_cast<char *>(std::malloc(scratch));
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, scratch);
  // A block that lives on above it, so that freeing it leaves a hole
  // rather than a larger top (blocks of 256 KiB until one lands above).
  std::vector<void *> barriers;
  while (barriers.size() < 64 &&
         (barriers.empty() || static_cast<char *>(barriers.back()) < block + scratch))
    barriers.push_back(std::malloc(256 << 10));
  ASSERT_GT(static_cast<char *>(barriers.back()), block);
  std::free(block);
  int64_t holding = residentBytes();
  EXPECT_GT(holding, mark + (int64_t)scratch / 2); // freed, still resident
  EXPECT_TRUE(trimHeapAbove(mark, 1 << 20));
  EXPECT_LT(residentBytes(), holding - (int64_t)scratch / 2);
  EXPECT_GE(mark, holding);
  // The hole refaulted (the next step's scratch in the same place) stays
  // below the mark: no trim.
  block = static_cast<char *>(std::malloc(scratch));
  ASSERT_NE(block, nullptr);
  std::memset(block, 2, scratch);
  EXPECT_FALSE(trimHeapAbove(mark, 1 << 20));
  std::free(block);
  for (void *b : barriers)
    std::free(b);
#endif
}

} // namespace
