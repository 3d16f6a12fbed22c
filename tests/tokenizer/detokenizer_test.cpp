#include "tokenizer/detokenizer.h"

#include <gtest/gtest.h>

#include <random>

#include "test_util.h"
#include "tokenizer/utf8.h"

namespace tokamak {
namespace {

using Ids = std::vector<int32_t>;
const std::string kFffd(utf8::kReplacement);

std::vector<std::string> stream(const Tokenizer& tok, const Ids& ids, bool skip_special = true,
                                bool at_start = false) {
  Detokenizer d(tok, skip_special, at_start);
  std::vector<std::string> out;
  for (const int32_t id : ids) out.push_back(d.push(id));
  out.push_back(d.flush());
  return out;
}

std::string join(const std::vector<std::string>& parts) {
  std::string s;
  for (const auto& p : parts) s += p;
  return s;
}

// SentencePiece byte fallback: an emoji becomes four byte tokens; nothing comes out until the
// fourth completes it.
TEST(Detokenizer, EmojiSplitAcrossByteTokens) {
  const Tokenizer* spm = test::load_tokenizer(test::stories_path());
  ASSERT_NE(spm, nullptr);
  const Ids ids = spm->encode("\xF0\x9F\x98\x80", false, false);  // 😀 -> ▁ + 4 bytes
  ASSERT_EQ(ids.size(), 5u);
  const std::vector<std::string> parts = stream(*spm, ids);
  EXPECT_EQ(parts, (std::vector<std::string>{" ", "", "", "", "\xF0\x9F\x98\x80", ""}));
  EXPECT_EQ(join(stream(*spm, ids, true, true)), "\xF0\x9F\x98\x80");  // at text start: no space
}

TEST(Detokenizer, ByteLevelBpeSplitsCharactersToo) {
  TOKAMAK_REQUIRE_MODEL(tok, test::smollm2_path());
  const std::string text =
      "family: \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 done";
  const Ids ids = tok->encode(text, false, false);
  const std::vector<std::string> parts = stream(*tok, ids);
  for (const std::string& p : parts) EXPECT_TRUE(utf8::is_valid(p)) << p;
  EXPECT_EQ(join(parts), text);
}

TEST(Detokenizer, InvalidBytesBecomeReplacementCharacters) {
  const Tokenizer* spm = test::load_tokenizer(test::stories_path());
  const auto byte = [&](uint8_t b) {
    return *spm->vocab().find(std::string(1, '<') + "0x" + "0123456789ABCDEF"[b >> 4] +
                              "0123456789ABCDEF"[b & 15] + ">");
  };
  // 0xFF can never start a sequence: out at once.
  EXPECT_EQ(stream(*spm, {byte(0xFF)}), (std::vector<std::string>{kFffd, ""}));
  // E2 waits; 'A' proves it invalid.
  const int32_t a = spm->encode("A", false, false).back();
  Detokenizer d(*spm);
  EXPECT_EQ(d.push(byte(0xE2)), "");
  EXPECT_EQ(d.pending_bytes(), 1u);
  EXPECT_EQ(d.push(byte(0x82)), "");
  EXPECT_EQ(d.push(a), kFffd + "A");
  // A truncated sequence at the end comes out as one U+FFFD.
  Detokenizer e(*spm);
  EXPECT_EQ(e.push(byte(0xF0)), "");
  EXPECT_EQ(e.push(byte(0x9F)), "");
  EXPECT_EQ(e.flush(), kFffd);
  EXPECT_EQ(e.flush(), "");
}

TEST(Detokenizer, SkipSpecial) {
  TOKAMAK_REQUIRE_MODEL(tok, test::smollm2_path());
  const Ids ids = tok->encode("<|im_start|>assistant\nHi<|im_end|>", false, true);
  EXPECT_EQ(join(stream(*tok, ids, true)), "assistant\nHi");
  EXPECT_EQ(join(stream(*tok, ids, false)), "<|im_start|>assistant\nHi<|im_end|>");
}

// Random token streams: every piece returned is valid UTF-8, and all of them together are the
// repaired concatenation of the tokens' bytes.
TEST(Detokenizer, RandomStreamsNeverEmitInvalidUtf8) {
  for (const std::string& path :
       {test::stories_path(), test::smollm2_path(), test::spm_vocab_path()}) {
    const Tokenizer* tok = test::load_tokenizer(path);
    if (tok == nullptr) continue;
    std::mt19937 rng(123);
    // Favour byte tokens and multi-byte pieces: they are what splits characters.
    std::vector<int32_t> interesting;
    for (int32_t id = 0; id < tok->n_vocab(); ++id) {
      const std::string_view p = tok->piece(id);
      if (!utf8::is_valid(p) || p.size() == 1) interesting.push_back(id);
    }
    for (int round = 0; round < 300; ++round) {
      Ids ids(static_cast<size_t>(rng() % 30));
      for (int32_t& id : ids) {
        id = rng() % 2 && !interesting.empty()
                 ? interesting[rng() % interesting.size()]
                 : static_cast<int32_t>(rng() % static_cast<uint32_t>(tok->n_vocab()));
      }
      const std::vector<std::string> parts = stream(*tok, ids, true);
      std::string raw;
      for (const int32_t id : ids) {
        if (!tok->is_special(id)) raw += tok->piece(id);
      }
      std::string expected;
      utf8::append_repaired(expected, raw, true);
      for (const std::string& p : parts) ASSERT_TRUE(utf8::is_valid(p)) << path;
      ASSERT_EQ(join(parts), expected) << path;
    }
  }
}

TEST(Detokenizer, AgreesWithDecode) {
  const Tokenizer* spm = test::load_tokenizer(test::spm_vocab_path());
  const std::string text = "Hello world, this is llama's tokenizer: café ☕ 你好";
  const Ids ids = spm->encode(text, false, false);
  EXPECT_EQ(join(stream(*spm, ids, true, true)), spm->decode(ids));
  EXPECT_EQ(spm->decode(ids), text);
}

}  // namespace
}  // namespace tokamak
