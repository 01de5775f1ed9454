//===- MemoryPlannerTest.cpp - planArena's offsets ------------------------===//

#include "parallax/Runtime/PlanAlignment.h"
#include "parallax/Target/PlanEmitter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace parallax {
namespace {

std::vector<BufferLifetime> plan(std::vector<BufferLifetime> buffers, int64_t &arena) {
  arena = planArena(buffers);
  return buffers;
}

// Every buffer at a multiple of its alignment (a page from a page up, else
// 64 bytes), no two that live at once overlapping, the arena their end.
void expectSound(const std::vector<BufferLifetime> &b, int64_t arena) {
  int64_t end = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    EXPECT_EQ(b[i].offset % rt::alignmentOf(b[i].bytes), 0) << "buffer " << i;
    end = std::max(end, b[i].offset + b[i].bytes);
    for (size_t j = 0; j < i; ++j) {
      bool live = b[i].first <= b[j].last && b[j].first <= b[i].last;
      bool apart = b[i].offset + b[i].bytes <= b[j].offset ||
                   b[j].offset + b[j].bytes <= b[i].offset;
      EXPECT_TRUE(!live || apart) << "buffers " << j << " and " << i << " overlap";
    }
  }
  EXPECT_GE(arena, end);
  EXPECT_LE(arena, end + rt::kPageAlignment);
}

TEST(MemoryPlanner, PageSizedBuffersStartOnAPage) {
  int64_t arena = 0;
  // All live at once, placed largest first, each at the lowest offset of
  // its alignment that fits.
  auto b = plan({{100, 0, 3}, {4095, 0, 3}, {4096, 0, 3}, {5000, 0, 3}, {12288, 0, 3}}, arena);
  expectSound(b, arena);
  EXPECT_EQ(b[4].offset, 0);     // 12288
  EXPECT_EQ(b[3].offset, 12288); // 5000, taking 5056 (64-byte) bytes
  EXPECT_EQ(b[2].offset, 20480); // 4096: 17344 rounded up to a page
  EXPECT_EQ(b[1].offset, 24576); // 4095 is under a page: on 64 bytes after it
  EXPECT_EQ(b[0].offset, 17344); // 100, in the padding before the 4096
}

TEST(MemoryPlanner, ASmallBufferFillsThePaddingBeforeAPage) {
  int64_t arena = 0;
  // 5000 at 0; 4096 live with it lands on 8192, which leaves 5056..8191
  // free: the later 100-byte buffer, live with both, fits there.
  auto b = plan({{5000, 0, 2}, {4096, 1, 2}, {100, 2, 2}}, arena);
  expectSound(b, arena);
  EXPECT_EQ(b[1].offset, 8192);
  EXPECT_EQ(b[2].offset, 5056);
  EXPECT_EQ(arena, 8192 + 4096);
}

TEST(MemoryPlanner, BuffersThatLiveApartShareOffsets) {
  int64_t arena = 0;
  auto b = plan({{8192, 0, 1}, {6000, 2, 3}, {4100, 2, 3}, {64, 1, 2}}, arena);
  expectSound(b, arena);
  EXPECT_EQ(b[1].offset, 0); // after the first one's last use
  EXPECT_EQ(b[2].offset, 8192);
}

} // namespace
} // namespace parallax
