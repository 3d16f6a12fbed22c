// Tokenizer behaviour on edge cases, the default model, special tokens, threads and speed.

#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <thread>

#include "core/error.h"
#include "test_util.h"
#include "tiny_vocab.h"
#include "tokenizer/utf8.h"

namespace tokamak {
namespace {

using Ids = std::vector<int32_t>;

// --- edge cases, on both kinds -------------------------------------------------------------

TEST(Tokenizer, EmptyText) {
  const Tokenizer* gpt2 = test::load_tokenizer(test::gpt2_vocab_path());
  const Tokenizer* spm = test::load_tokenizer(test::spm_vocab_path());
  ASSERT_NE(gpt2, nullptr);
  ASSERT_NE(spm, nullptr);
  EXPECT_EQ(gpt2->encode("", false, false), Ids{});
  EXPECT_EQ(gpt2->encode("", true, true), Ids{});  // gpt-2 adds no BOS
  EXPECT_EQ(spm->encode("", false, false), Ids{});
  EXPECT_EQ(spm->encode("", true, false), Ids{1});  // just BOS, no space prefix
  EXPECT_EQ(gpt2->decode(Ids{}), "");
  EXPECT_EQ(spm->decode(Ids{}), "");
}

TEST(Tokenizer, OnlySpaces) {
  const Tokenizer* gpt2 = test::load_tokenizer(test::gpt2_vocab_path());
  const Tokenizer* spm = test::load_tokenizer(test::spm_vocab_path());
  for (const size_t n : {1, 2, 3, 7, 64, 1000}) {
    const std::string s(n, ' ');
    EXPECT_EQ(gpt2->decode(gpt2->encode(s, false, false)), s) << n;
    EXPECT_EQ(spm->decode(spm->encode(s, false, false)), s) << n;
  }
  EXPECT_EQ(gpt2->encode(" ", false, false), Ids{220});
  EXPECT_EQ(spm->encode(" ", false, false), Ids{259});  // "▁▁": the prefix and the space
}

// Invalid UTF-8 never throws. Byte-level BPE reads it as llama.cpp does (utf8.h): each byte
// that starts no sequence becomes U+FFFD, overlong forms their shortest form, surrogates are
// kept, beyond-U+10FFFF bytes become U+FFFD each. SentencePiece falls back to byte tokens.
TEST(Tokenizer, InvalidUtf8) {
  const Tokenizer* gpt2 = test::load_tokenizer(test::gpt2_vocab_path());
  const Tokenizer* spm = test::load_tokenizer(test::spm_vocab_path());
  const std::string fffd(utf8::kReplacement);
  EXPECT_EQ(gpt2->encode("\xFF", false, false), gpt2->encode(fffd, false, false));
  EXPECT_EQ(gpt2->encode("a\xE2\x82z", false, false),
            gpt2->encode("a" + fffd + fffd + "z", false, false));
  EXPECT_EQ(gpt2->encode("\xC0\x80", false, false),
            gpt2->encode(std::string(1, '\0'), false, false));
  EXPECT_EQ(gpt2->decode(gpt2->encode("x\xED\xA0\x80y", false, false)), "x\xED\xA0\x80y");
  EXPECT_EQ(gpt2->decode(gpt2->encode("\xF4\x90\x80\x80", false, false)),
            fffd + fffd + fffd + fffd);

  std::mt19937 rng(42);
  for (int i = 0; i < 300; ++i) {
    std::string s(static_cast<size_t>(rng() % 40), '\0');
    for (char& c : s) c = static_cast<char>(rng());
    const Ids a = gpt2->encode(s, false, true);
    EXPECT_EQ(a, gpt2->encode(s, false, true));
    // SentencePiece keeps every byte, except that a space swallowed into a broken sequence
    // (escaped to U+2581 first, as llama.cpp does) comes back as U+2581's bytes.
    const Ids b = spm->encode(s, false, false);
    if (s.find(' ') == std::string::npos) {
      EXPECT_EQ(spm->decode(b), s);
    }
    std::string repaired;
    utf8::append_repaired(repaired, gpt2->decode(a), true);
    EXPECT_TRUE(utf8::is_valid(repaired));
  }
}

TEST(Tokenizer, VeryLongSingleWord) {
  const Tokenizer* gpt2 = test::load_tokenizer(test::gpt2_vocab_path());
  const Tokenizer* spm = test::load_tokenizer(test::spm_vocab_path());
  std::mt19937 rng(7);
  std::string word(200000, 'a');
  for (char& c : word) c = static_cast<char>('a' + rng() % 26);
  for (const std::string& s : {std::string(500000, 'a'), word}) {
    const Ids ids = gpt2->encode(s, false, false);
    EXPECT_LT(ids.size(), s.size());
    EXPECT_EQ(gpt2->decode(ids), s);
    EXPECT_EQ(spm->decode(spm->encode(s, false, false)), s);
  }
}

TEST(Tokenizer, IdsOutOfRangeThrow) {
  const Tokenizer* gpt2 = test::load_tokenizer(test::gpt2_vocab_path());
  EXPECT_THROW(gpt2->decode(Ids{15496, 50257}), Error);
  EXPECT_THROW(gpt2->token_to_piece(-1), Error);
  EXPECT_THROW(gpt2->token_text(1 << 30), Error);
  EXPECT_FALSE(gpt2->is_control(-3));
  EXPECT_FALSE(gpt2->is_end_of_generation(50257));
}

TEST(Tokenizer, Pieces) {
  const Tokenizer* gpt2 = test::load_tokenizer(test::gpt2_vocab_path());
  const Tokenizer* spm = test::load_tokenizer(test::spm_vocab_path());
  EXPECT_EQ(gpt2->token_text(995), "\xC4\xA0world");  // "Ġworld"
  EXPECT_EQ(gpt2->token_to_piece(995), " world");
  EXPECT_EQ(gpt2->token_to_piece(198), "\n");
  EXPECT_EQ(gpt2->token_to_piece(50256), "<|endoftext|>");
  EXPECT_EQ(spm->token_text(13), "<0x0A>");
  EXPECT_EQ(spm->token_to_piece(13), "\n");
  EXPECT_EQ(spm->token_to_piece(15043), " Hello");
  EXPECT_EQ(spm->token_to_piece(1), "<s>");
  // decode drops only the space that encode added in front of the text.
  EXPECT_EQ(spm->decode(spm->encode("Hello world", false, false)), "Hello world");
  EXPECT_EQ(spm->decode(spm->encode(" Hello", false, false)), " Hello");
  EXPECT_EQ(spm->decode(spm->encode("Hello", true, false)), "<s> Hello");
  EXPECT_EQ(spm->decode(spm->encode("Hello", true, false), true), " Hello");
}

// --- special tokens ------------------------------------------------------------------------

TEST(Tokenizer, SpecialTokensLongestFirstAndUserDefinedAlways) {
  test::TinyBpe v;
  const int32_t he = v.merge("h", "e");
  const int32_t im_start = v.add("<|im_start|>", 3);
  const int32_t im = v.add("<|im", 3);
  const int32_t tool = v.add("<tool>", 4);
  const int32_t unk = v.add("<unk>", 2);
  const test::TempGguf file(v.metadata());
  const auto tok = Tokenizer::from_gguf(file.open());

  EXPECT_EQ(tok->encode("<|im_start|>he", false, true), (Ids{im_start, he}));
  EXPECT_EQ(tok->encode("<|im|>", false, true), (Ids{im, '|', '>'}));
  EXPECT_EQ(tok->encode("<unk>", false, true), Ids{unk});
  // Not parsed: the text is tokenized as text...
  const Ids plain = tok->encode("<|im_start|>", false, false);
  EXPECT_GT(plain.size(), 1u);
  EXPECT_EQ(tok->decode(plain), "<|im_start|>");
  // ...except user-defined tokens, always matched.
  EXPECT_EQ(tok->encode("he<tool>he", false, false), (Ids{he, tool, he}));
  EXPECT_TRUE(tok->is_control(im_start));
  EXPECT_FALSE(tok->is_control(tool));
  EXPECT_TRUE(tok->is_special(unk));
  EXPECT_EQ(tok->decode(Ids{he, im_start, tool}, true), "he<tool>");
}

// --- the default model ---------------------------------------------------------------------

TEST(SmolLM2, Metadata) {
  TOKAMAK_REQUIRE_MODEL(tok, test::smollm2_path());
  EXPECT_EQ(tok->n_vocab(), 49152);
  EXPECT_EQ(tok->kind(), TokenizerKind::BytePairGpt2);
  EXPECT_EQ(tok->pre_tokenizer_name(), "smollm");
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_FALSE(tok->add_bos());
  EXPECT_FALSE(tok->add_eos());
  EXPECT_TRUE(tok->is_end_of_generation(2));   // <|im_end|>
  EXPECT_TRUE(tok->is_end_of_generation(0));   // <|endoftext|>
  EXPECT_FALSE(tok->is_end_of_generation(1));  // <|im_start|>
  EXPECT_FALSE(tok->is_end_of_generation(19556));
  EXPECT_TRUE(tok->is_control(1));
  EXPECT_FALSE(tok->is_control(19556));
  EXPECT_EQ(tok->token_text(1), "<|im_start|>");
}

TEST(SmolLM2, ChatTemplateText) {
  TOKAMAK_REQUIRE_MODEL(tok, test::smollm2_path());
  const std::string prompt = "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n";
  const Ids ids = tok->encode(prompt, true, true);
  ASSERT_GE(ids.size(), 6u);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 1), 2);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 1);
  EXPECT_EQ(tok->decode(ids), prompt);
  EXPECT_EQ(tok->decode(ids, true), "user\nHello!\nassistant\n");
  const Ids unparsed = tok->encode(prompt, true, false);
  EXPECT_EQ(std::count(unparsed.begin(), unparsed.end(), 1), 0);
  EXPECT_EQ(tok->decode(unparsed), prompt);
}

TEST(SmolLM2, ConcurrentEncodeIsDeterministic) {
  TOKAMAK_REQUIRE_MODEL(tok, test::smollm2_path());
  std::string text;
  for (int i = 0; i < 300; ++i)
    text += "Thread " + std::to_string(i) + " says: héllo wörld 🙂\n";
  const Ids expected = tok->encode(text, true, true);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 10; ++k)
        ok[static_cast<size_t>(t)] += tok->encode(text, true, true) == expected;
    });
  }
  for (auto& th : threads) th.join();
  for (const int n : ok) EXPECT_EQ(n, 10);
}

// --- speed ---------------------------------------------------------------------------------

std::string english_text(size_t bytes) {
  static const char* kWords[] = {"the",   "quick",  "brown",    "fox",     "jumps",     "over",
                                 "lazy",  "dog",    "and",      "runs",    "into",      "forest",
                                 "where", "it",     "finds",    "a",       "small",     "river",
                                 "full",  "of",     "fish",     "while",   "birds",     "sing",
                                 "in",    "trees",  "Language", "models",  "predict",   "next",
                                 "token", "given",  "context",  "they're", "don't",     "1984",
                                 "3.14",  "e-mail", "(see",     "below)",  "well-known"};
  std::mt19937 rng(1);
  std::string s;
  s.reserve(bytes + 32);
  int in_sentence = 0;
  while (s.size() < bytes) {
    s += kWords[rng() % std::size(kWords)];
    if (++in_sentence > 12 && rng() % 5 == 0) {
      s += rng() % 7 == 0 ? ".\n\n" : ". ";
      in_sentence = 0;
    } else {
      s += rng() % 11 == 0 ? ", " : " ";
    }
  }
  return s;
}

TEST(SmolLM2, EncodesAMegabyteQuickly) {
  TOKAMAK_REQUIRE_MODEL(tok, test::smollm2_path());
  const std::string text = english_text(1 << 20);
  const auto start = std::chrono::steady_clock::now();
  const Ids ids = tok->encode(text, false, false);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ speed    ] encoded %zu bytes into %zu tokens in %.3f s (%.1f MB/s)\n", text.size(),
              ids.size(), seconds, text.size() / seconds / 1e6);
  EXPECT_EQ(tok->decode(ids), text);
#if defined(__SANITIZE_ADDRESS__) || !defined(NDEBUG)
  EXPECT_LT(seconds, 30.0);  // instrumented or unoptimised build: only a sanity bound
#else
  EXPECT_LT(seconds, 1.0);
#endif
}

}  // namespace
}  // namespace tokamak
