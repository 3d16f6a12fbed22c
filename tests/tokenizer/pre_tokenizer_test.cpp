// Pre-tokenizers: every known name compiles and splits long inputs; each regex family matches
// llama.cpp on the GPT-2 vocabulary (tests/golden/tokenizer/pre_tokenizers.json).

#include "tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "format/gguf_writer.h"
#include "test_util.h"

namespace tokamak {
namespace {

std::vector<std::string> split(const PreTokenizer& pre, std::string_view text) {
  std::vector<PreTokenizer::Word> words;
  pre.split(text, words);
  std::vector<std::string> out;
  size_t covered = 0;
  bool contiguous = true;
  for (const auto& w : words) {
    contiguous = contiguous && w.offset == covered && w.length > 0;
    covered = w.offset + w.length;
    out.emplace_back(text.substr(w.offset, w.length));
  }
  EXPECT_TRUE(contiguous) << "words must be non-empty and follow each other";
  EXPECT_EQ(covered, text.size());
  return out;
}

PreTokenizer make(std::string_view name) {
  const std::optional<PreTokenizerSpec> spec = find_pre_tokenizer(name);
  EXPECT_TRUE(spec.has_value()) << name;
  return PreTokenizer(spec->patterns);
}

using Words = std::vector<std::string>;

TEST(PreTokenizer, Gpt2Splits) {
  const PreTokenizer pre = make("gpt-2");
  EXPECT_EQ(split(pre, "Hello world"), (Words{"Hello", " world"}));
  EXPECT_EQ(split(pre, "I'm here, they've 123 ok!!"),
            (Words{"I", "'m", " here", ",", " they", "'ve", " 123", " ok", "!!"}));
  EXPECT_EQ(split(pre, "a   b"), (Words{"a", "  ", " b"}));
  EXPECT_EQ(split(pre, "a\n\nb  "), (Words{"a", "\n", "\n", "b", "  "}));
  EXPECT_EQ(split(pre, ""), Words{});
}

TEST(PreTokenizer, SequenceOfPatterns) {
  // smollm: single digits first, then GPT-2 within each piece.
  const PreTokenizer pre = make("smollm");
  EXPECT_EQ(split(pre, "a 123"), (Words{"a", " ", "1", "2", "3"}));
  const PreTokenizer llama3 = make("llama3");
  EXPECT_EQ(split(llama3, "12345 HELLO's\r\n\n x"),
            (Words{"123", "45", " HELLO", "'s", "\r\n\n", " x"}));
}

TEST(PreTokenizer, UnknownNameIsNotFound) {
  EXPECT_FALSE(find_pre_tokenizer("no-such-thing").has_value());
  EXPECT_TRUE(find_pre_tokenizer("jina-v2-code").has_value());
  EXPECT_TRUE(find_pre_tokenizer("").has_value());  // key absent: llama.cpp's default
}

TEST(PreTokenizer, BadPatternThrows) {
  EXPECT_THROW(PreTokenizer({"(unclosed"}), Error);
}

// Every family compiles and copes with inputs that stress backtracking and JIT stacks.
TEST(PreTokenizer, AllKnownNamesHandleLongInputs) {
  const std::vector<std::string> inputs = {
      std::string(100000, 'a'), std::string(100000, 'A'), std::string(100000, ' ') + "x",
      std::string(100000, ' '), std::string(50000, '\n'), std::string(100000, '7'),
      std::string(50000, '!'),
  };
  std::string mixed;
  for (int i = 0; i < 4000; ++i)
    mixed += "Ab\xC3\xA9\xCC\x81 12\t\xE4\xB8\xAD!\r\n";  // Abé́ 12	中!
  for (const std::string& name : known_pre_tokenizers()) {
    if (name == "jina-*") continue;
    SCOPED_TRACE(name);
    const PreTokenizer pre = make(name);
    for (const std::string& input : inputs) split(pre, input);
    split(pre, mixed);
  }
}

// The GPT-2 vocabulary under each pre-tokenizer, against llama.cpp.
TEST(PreTokenizer, FamiliesMatchLlamaCpp) {
  const std::string fixture = test::source_path("tests/golden/tokenizer/pre_tokenizers.json");
  std::ifstream in(fixture);
  ASSERT_TRUE(in.good()) << fixture;
  const nlohmann::json golden = nlohmann::json::parse(in);
  const std::vector<std::string> strings = golden.at("strings").get<std::vector<std::string>>();

  const gguf::File base = gguf::File::open(test::gpt2_vocab_path());
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tokamak_pre_" + std::to_string(::getpid()) + ".gguf"))
                               .string();
  size_t compared = 0, matched = 0;
  for (const auto& [name, expected] : golden.at("variants").items()) {
    SCOPED_TRACE(name);
    gguf::Writer writer;
    for (const auto& [key, value] : base.metadata()) writer.set(key, value);
    writer.set("tokenizer.ggml.pre", gguf::Value::string(name));
    writer.write(path);
    const std::unique_ptr<Tokenizer> tok = Tokenizer::from_gguf(gguf::File::open(path));
    ASSERT_EQ(tok->pre_tokenizer_name(), name);
    int failures = 0;
    for (size_t i = 0; i < strings.size(); ++i) {
      const std::vector<int32_t> want = expected.at(i).get<std::vector<int32_t>>();
      const std::vector<int32_t> got = tok->encode(strings[i], false, false);
      ++compared;
      if (got == want) {
        ++matched;
      } else if (++failures <= 5) {
        ADD_FAILURE() << name << ": '" << strings[i] << "'\n  got:  " << test::ids_to_string(got)
                      << "\n  want: " << test::ids_to_string(want);
      }
      EXPECT_EQ(tok->decode(got), strings[i]);
    }
  }
  std::filesystem::remove(path);
  std::printf("[ pre-tok  ] %zu of %zu encodings match llama.cpp over %zu pre-tokenizers\n",
              matched, compared, golden.at("variants").size());
}

}  // namespace
}  // namespace tokamak
