// AlignedBuffer: zeroed, aligned storage, small (heap) and large (mapped), on normal or
// huge pages; a buffer on huge pages starts on a 2 MiB boundary and is usable end to end.

#include "core/aligned_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

namespace tokamak {
namespace {

bool all_zero(const AlignedBuffer<uint8_t>& b) {
  for (size_t i = 0; i < b.size(); ++i) {
    if (b[i] != 0) return false;
  }
  return true;
}

TEST(AlignedBufferTest, ZeroedAlignedAndWritableEndToEnd) {
  // Heap sizes, mapped sizes, and sizes that are not whole pages or whole huge pages.
  for (size_t n : {size_t{1}, size_t{100}, size_t{4096}, kLazyBytes, kLazyBytes + 7, kHugePageBytes,
                   3 * kHugePageBytes + 4096 + 9}) {
    for (Pages pages : {Pages::Normal, Pages::Huge}) {
      AlignedBuffer<uint8_t> b(n, pages);
      ASSERT_EQ(b.size(), n);
      const auto addr = reinterpret_cast<uintptr_t>(b.data());
      EXPECT_EQ(addr % kBufferAlignment, 0u) << n;
      if (pages == Pages::Huge && n >= kLazyBytes) {
        EXPECT_EQ(addr % kHugePageBytes, 0u) << n;
      }
      EXPECT_TRUE(all_zero(b)) << n;
      for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(i * 31 + 7);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(b[i], static_cast<uint8_t>(i * 31 + 7)) << n;
      // Moving hands the storage over.
      AlignedBuffer<uint8_t> moved(std::move(b));
      EXPECT_EQ(moved.size(), n);
      EXPECT_EQ(moved[n - 1], static_cast<uint8_t>((n - 1) * 31 + 7));
    }
  }
}

}  // namespace
}  // namespace tokamak
