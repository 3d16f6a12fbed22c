// checksum64: the same bytes give the same sum; any single flipped bit, at any position of
// inputs of every length up to a few stripes (the 32-byte rounds, the 8-byte and 1-byte
// tails), gives another; so do a different length and a different seed.

#include "core/checksum64.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace tokamak {
namespace {

TEST(Checksum64Test, EveryFlippedBitChangesTheSum) {
  for (size_t n = 0; n <= 100; ++n) {
    std::vector<uint8_t> bytes(n);
    for (size_t i = 0; i < n; ++i) bytes[i] = uint8_t(i * 37 + n);
    const uint64_t sum = checksum64(bytes.data(), n);
    EXPECT_EQ(sum, checksum64(bytes.data(), n));
    std::set<uint64_t> seen = {sum};
    for (size_t i = 0; i < n; ++i) {
      for (int bit = 0; bit < 8; ++bit) {
        bytes[i] ^= uint8_t(1 << bit);
        EXPECT_TRUE(seen.insert(checksum64(bytes.data(), n)).second)
            << "length " << n << ", byte " << i << ", bit " << bit;
        bytes[i] ^= uint8_t(1 << bit);
      }
    }
  }
}

TEST(Checksum64Test, LengthAndSeedMatter) {
  const std::vector<uint8_t> zeros(64, 0);
  std::set<uint64_t> seen;
  for (size_t n = 0; n <= 64; ++n) EXPECT_TRUE(seen.insert(checksum64(zeros.data(), n)).second);
  EXPECT_NE(checksum64(zeros.data(), 64, 1), checksum64(zeros.data(), 64, 2));
}

}  // namespace
}  // namespace tokamak
