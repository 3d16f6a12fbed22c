// BufferArena: pieces aligned, zeroed, disjoint and usable end to end; a piece larger than a
// chunk gets a chunk of its own; small pieces share chunks.

#include "core/buffer_arena.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace tokamak {
namespace {

TEST(BufferArenaTest, PiecesAreAlignedZeroedAndDisjoint) {
  for (Pages pages : {Pages::Normal, Pages::Huge}) {
    BufferArena arena(size_t{1} << 20, pages);
    const size_t sizes[] = {1, 63, 64, 1000, 300000, 700000, 3u << 20, 5, 200000};
    std::vector<std::pair<uint8_t*, size_t>> pieces;
    for (size_t n : sizes) {
      uint8_t* p = arena.allocate(n);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kBufferAlignment, 0u) << n;
      EXPECT_TRUE(std::all_of(p, p + n, [](uint8_t b) { return b == 0; })) << n;
      std::fill(p, p + n, static_cast<uint8_t>(pieces.size() + 1));
      pieces.emplace_back(p, n);
    }
    // Every piece still holds what was written into it: none overlaps another.
    for (size_t i = 0; i < pieces.size(); ++i) {
      const auto [p, n] = pieces[i];
      EXPECT_TRUE(std::all_of(p, p + n, [&](uint8_t b) { return b == i + 1; })) << i;
    }
    // 1 + 63 + 64 + 1000 + 300000 + 700000 fill most of the first MiB; the 3 MiB piece takes
    // a chunk of its own, and the last two a third.
    EXPECT_EQ(arena.n_chunks(), 3u);
  }
}

}  // namespace
}  // namespace tokamak
