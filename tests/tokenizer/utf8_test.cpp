#include "tokenizer/utf8.h"

#include <gtest/gtest.h>

namespace tokamak::utf8 {
namespace {

const std::string kFffd(kReplacement);

TEST(Utf8, Validity) {
  EXPECT_TRUE(is_valid(""));
  EXPECT_TRUE(is_valid("plain ascii"));
  EXPECT_TRUE(is_valid("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF"));
  EXPECT_FALSE(is_valid("\x80"));
  EXPECT_FALSE(is_valid("\xC0\x80"));          // overlong
  EXPECT_FALSE(is_valid("\xE0\x80\xAF"));      // overlong
  EXPECT_FALSE(is_valid("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(is_valid("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(is_valid("\xE2\x82"));          // truncated
  EXPECT_FALSE(is_valid("\xFF"));
}

TEST(Utf8, SequenceAt) {
  EXPECT_EQ(sequence_at("a"), 1);
  EXPECT_EQ(sequence_at("\xC3\xA9"), 2);
  EXPECT_EQ(sequence_at("\xF0\x9F\x98\x80"), 4);
  EXPECT_EQ(sequence_at("\xF0\x9F"), -2);  // could still complete
  EXPECT_EQ(sequence_at("\xF0\x8F"), 0);   // never
  EXPECT_EQ(sequence_at("\xBF"), 0);
}

// Unicode's example for "maximal subparts" (chapter 3, U+FFFD substitution).
TEST(Utf8, RepairUsesMaximalSubparts) {
  std::string out;
  append_repaired(out, "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64", true);
  EXPECT_EQ(out, "a" + kFffd + kFffd + kFffd + "b" + kFffd + "c" + kFffd + kFffd + "d");
}

TEST(Utf8, RepairHoldsBackAnIncompleteTail) {
  std::string out;
  EXPECT_EQ(append_repaired(out, "ab\xF0\x9F\x98", false), 2u);
  EXPECT_EQ(out, "ab");
  out.clear();
  EXPECT_EQ(append_repaired(out, "ab\xF0\x9F\x98", true), 5u);
  EXPECT_EQ(out, "ab" + kFffd);
  out.clear();
  EXPECT_EQ(append_repaired(out, "ab\xF0\x41", false), 4u);  // proven invalid: not held
  EXPECT_EQ(out, "ab" + kFffd + "A");
}

TEST(Utf8, LenientCanonicalFormMatchesLlamaCpp) {
  std::string bytes, regex;
  EXPECT_FALSE(canonicalize_lenient("valid \xC3\xA9", bytes, regex));
  EXPECT_TRUE(bytes.empty());

  ASSERT_TRUE(
      canonicalize_lenient("\xE2\x82"
                           "a",
                           bytes, regex));  // one U+FFFD per byte
  EXPECT_EQ(bytes, kFffd + kFffd + "a");
  EXPECT_EQ(regex, bytes);

  ASSERT_TRUE(canonicalize_lenient("\xC0\x80x", bytes, regex));  // overlong read as U+0000
  EXPECT_EQ(bytes, std::string("\0x", 2));

  ASSERT_TRUE(
      canonicalize_lenient("a\xED\xA0\x80"
                           "b",
                           bytes, regex));  // surrogate kept
  EXPECT_EQ(bytes,
            "a\xED\xA0\x80"
            "b");
  EXPECT_EQ(regex,
            "a\xEE\x80\x80"
            "b");  // U+E000 for the regex engine
  EXPECT_TRUE(is_valid(regex));

  ASSERT_TRUE(canonicalize_lenient("\xF4\x90\x80\x80", bytes, regex));  // > U+10FFFF
  EXPECT_EQ(bytes, kFffd + kFffd + kFffd + kFffd);

  ASSERT_TRUE(canonicalize_lenient("\xF8\x88\x80\x80\x80", bytes, regex));
  EXPECT_EQ(bytes, kFffd + kFffd + kFffd + kFffd + kFffd);
}

}  // namespace
}  // namespace tokamak::utf8
