// Loading vocabularies: every inconsistency in the metadata is an Error naming the file.

#include "tokenizer/vocab.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "test_util.h"
#include "tiny_vocab.h"

namespace tokamak {
namespace {

using test::Metadata;
using test::TempGguf;
using test::with;
using test::without;

// Expects from_gguf to throw an Error that names the file and contains `needle`.
void expect_rejected(const Metadata& m, const std::string& needle) {
  const TempGguf file(m);
  try {
    Tokenizer::from_gguf(file.open());
    ADD_FAILURE() << "accepted; expected an error about '" << needle << "'";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(file.path()), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << "one line: " << what;
  }
}

Metadata valid() {
  test::TinyBpe v;
  v.merge("h", "e");
  v.add("<|endoftext|>", 3);
  return v.metadata();
}

TEST(Vocab, ValidTinyVocabularyLoads) {
  const TempGguf file(valid());
  const auto tok = Tokenizer::from_gguf(file.open());
  EXPECT_EQ(tok->n_vocab(), 258);
  EXPECT_EQ(tok->kind(), TokenizerKind::BytePairGpt2);
  EXPECT_FALSE(tok->bos_id().has_value());
  EXPECT_FALSE(tok->add_bos());
  EXPECT_TRUE(tok->is_end_of_generation(257));  // <|endoftext|> by its text
}

TEST(Vocab, ModelKey) {
  expect_rejected(without(valid(), "tokenizer.ggml.model"), "tokenizer.ggml.model");
  expect_rejected(with(valid(), "tokenizer.ggml.model", gguf::Value::string("bert")),
                  "unsupported tokenizer.ggml.model 'bert'");
  expect_rejected(with(valid(), "tokenizer.ggml.model", gguf::Value::u32(3)),
                  "tokenizer.ggml.model");
}

TEST(Vocab, TokenList) {
  expect_rejected(without(valid(), "tokenizer.ggml.tokens"), "tokenizer.ggml.tokens");
  expect_rejected(with(valid(), "tokenizer.ggml.tokens", test::strings({})), "empty");
  expect_rejected(with(valid(), "tokenizer.ggml.tokens", test::ints({1, 2})), "not a string");
  test::TinyBpe dup;
  dup.add("a");  // same text as byte 'a'
  expect_rejected(dup.metadata(), "same text");
}

TEST(Vocab, ArraysMustMatchTheTokenCount) {
  expect_rejected(with(valid(), "tokenizer.ggml.token_type", test::ints({1, 1, 1})),
                  "tokenizer.ggml.token_type has 3 entries for 258 tokens");
  expect_rejected(with(valid(), "tokenizer.ggml.scores", test::floats({0.5f})),
                  "tokenizer.ggml.scores has 1 entries for 258 tokens");
  std::vector<int32_t> types(258, 1);
  types[7] = 9;
  expect_rejected(with(valid(), "tokenizer.ggml.token_type", test::ints(types)), "token_type[7]");
}

TEST(Vocab, Merges) {
  expect_rejected(without(valid(), "tokenizer.ggml.merges"), "tokenizer.ggml.merges");
  expect_rejected(with(valid(), "tokenizer.ggml.merges", test::strings({"h e", "he"})),
                  "merges[1] 'he'");
  expect_rejected(with(valid(), "tokenizer.ggml.merges", test::strings({"h "})), "merges[0]");
  expect_rejected(with(valid(), "tokenizer.ggml.merges", test::ints({1})), "not a string");
}

TEST(Vocab, SpecialIdsInRange) {
  expect_rejected(with(valid(), "tokenizer.ggml.bos_token_id", gguf::Value::u32(258)),
                  "tokenizer.ggml.bos_token_id' = 258 is out of range");
  expect_rejected(with(valid(), "tokenizer.ggml.eos_token_id", gguf::Value::u32(100000)),
                  "eos_token_id");
  expect_rejected(with(valid(), "tokenizer.ggml.eot_token_id", gguf::Value::i32(-7)),
                  "eot_token_id");
  expect_rejected(with(valid(), "tokenizer.ggml.padding_token_id", gguf::Value::u32(999)),
                  "padding_token_id");
  expect_rejected(with(valid(), "tokenizer.ggml.bos_token_id", gguf::Value::string("1")),
                  "bos_token_id");

  // 0xFFFFFFFF means none.
  const TempGguf none(with(valid(), "tokenizer.ggml.bos_token_id", gguf::Value::u32(0xFFFFFFFFu)));
  EXPECT_FALSE(Tokenizer::from_gguf(none.open())->bos_id().has_value());
}

TEST(Vocab, AddBosNeedsABosToken) {
  expect_rejected(with(valid(), "tokenizer.ggml.add_bos_token", gguf::Value::boolean(true)),
                  "no BOS token");
  Metadata m = with(valid(), "tokenizer.ggml.add_bos_token", gguf::Value::boolean(true));
  m = with(m, "tokenizer.ggml.bos_token_id", gguf::Value::u32(257));
  const TempGguf file(m);
  const auto tok = Tokenizer::from_gguf(file.open());
  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->encode("he", true, false), (std::vector<int32_t>{257, 256}));
}

TEST(Vocab, UnknownPreTokenizerFallsBackToGpt2) {
  const TempGguf file(with(valid(), "tokenizer.ggml.pre", gguf::Value::string("brand-new")));
  const auto tok = Tokenizer::from_gguf(file.open());
  EXPECT_EQ(tok->pre_tokenizer_name(), "brand-new");
  EXPECT_EQ(tok->encode("he he", false, false).size(), 3u);  // "he", "Ġ", "he"
}

TEST(Vocab, Llama3PreTokenizerAddsBosByDefault) {
  Metadata m = with(valid(), "tokenizer.ggml.pre", gguf::Value::string("llama-bpe"));
  m = with(m, "tokenizer.ggml.bos_token_id", gguf::Value::u32(257));
  {
    const TempGguf file(m);
    EXPECT_TRUE(Tokenizer::from_gguf(file.open())->add_bos());
  }
  const TempGguf file(with(m, "tokenizer.ggml.add_bos_token", gguf::Value::boolean(false)));
  EXPECT_FALSE(Tokenizer::from_gguf(file.open())->add_bos());
}

TEST(Vocab, SentencePieceDefaults) {
  const Metadata m = {{"tokenizer.ggml.model", gguf::Value::string("llama")},
                      {"tokenizer.ggml.tokens", test::strings({"<unk>", "<s>", "</s>",
                                                               "\xE2\x96\x81"
                                                               "a",
                                                               "a"})},
                      {"tokenizer.ggml.scores", test::floats({0, 0, 0, -1, -2})},
                      {"tokenizer.ggml.token_type", test::ints({2, 3, 3, 1, 1})}};
  const TempGguf file(m);
  const auto tok = Tokenizer::from_gguf(file.open());
  EXPECT_EQ(tok->kind(), TokenizerKind::SentencePiece);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_FALSE(tok->add_eos());
  EXPECT_TRUE(tok->add_space_prefix());
  EXPECT_EQ(tok->encode("a", true, false), (std::vector<int32_t>{1, 3}));
  // No byte tokens: an unknown character becomes <unk>.
  EXPECT_EQ(tok->encode("a\xC3\xA9", false, false), (std::vector<int32_t>{3, 0}));
  EXPECT_EQ(tok->token_to_piece(3), " a");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{1, 3}), "<s> a");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{1, 3}, true), " a");
  EXPECT_EQ(tok->decode(std::vector<int32_t>{3, 3}), "a a");
}

}  // namespace
}  // namespace tokamak
