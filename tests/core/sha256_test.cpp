#include "core/sha256.h"

#include <gtest/gtest.h>

#include <string>

namespace tokamak {
namespace {

std::string digest(const std::string& s) {
  Sha256 h;
  h.update(s.data(), s.size());
  return to_hex(h.finish());
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(digest(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(digest("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(digest("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(digest(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, SplitUpdatesMatchOneShot) {
  std::string s;
  for (int i = 0; i < 300; ++i) s += static_cast<char>(i * 7);
  for (size_t split = 0; split <= s.size(); split += 13) {
    Sha256 h;
    h.update(s.data(), split);
    h.update(s.data() + split, s.size() - split);
    EXPECT_EQ(to_hex(h.finish()), digest(s));
  }
}

TEST(Sha256, SharedFixtureMatchesItsReadme) {
  EXPECT_EQ(sha256_file(std::string(TOKAMAK_SHARED_DIR) + "/testdata/stories260K.gguf"),
            "270cba1bd5109f42d03350f60406024560464db173c0e387d91f0426d3bd256d");
}

}  // namespace
}  // namespace tokamak
