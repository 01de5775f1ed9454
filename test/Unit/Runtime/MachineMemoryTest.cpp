//===- MachineMemoryTest.cpp - the process's memory, as the runtime reads it -===//
//
// trimHeapAbove on a heap fragmented the way parallax-run's malloc policy
// (no mmap) lets a library's per-call scratch fragment it: a large block
// freed below a small one that lives on stays resident until trimmed, and
// a step that stays below the mark trims nothing.
//
//===----------------------------------------------------------------------===//

#include "parallax/Runtime/MachineMemory.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#ifdef __GLIBC__
#include <malloc.h>
#endif

using namespace parallax::rt;

namespace {

TEST(MachineMemory, TrimHeapAboveHandsBackAHoleOnlyPastTheMark) {
#ifndef __GLIBC__
  GTEST_SKIP() << "malloc_trim is glibc's";
#else
  if (residentBytes() < 0)
    GTEST_SKIP() << "no /proc/self/status";
  // parallax-run's policy: every block from the heap, none handed back.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
  int64_t mark = -1;
  EXPECT_FALSE(trimHeapAbove(mark, 1 << 20)); // the first call sets the mark
  EXPECT_GT(mark, 0);
  const size_t scratch = 32 << 20;
  char *block = static_cast<char *>(std::malloc(scratch));
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, scratch);
  char *livesOn = static_cast<char *>(std::malloc(64)); // above it: no merge with the top
  ASSERT_NE(livesOn, nullptr);
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
  std::free(livesOn);
  mallopt(M_MMAP_MAX, 65536);
#endif
}

} // namespace
