#include "tokenizer/token_dump.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace tokamak {
namespace {

TEST(TokenDump, EscapesWhatIsNotPrintable) {
  EXPECT_EQ(escape_piece("Hello"), "Hello");
  EXPECT_EQ(escape_piece(" caf\xC3\xA9 \xF0\x9F\x98\x80"), " caf\xC3\xA9 \xF0\x9F\x98\x80");
  EXPECT_EQ(escape_piece("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(escape_piece("it's a \\ path"), "it\\'s a \\\\ path");
  EXPECT_EQ(escape_piece(std::string("\0\x1B\x7F", 3)), "\\x00\\x1B\\x7F");
  EXPECT_EQ(escape_piece("\xF0\x9F"), "\\xF0\\x9F");        // half an emoji
  EXPECT_EQ(escape_piece("\xC2\x85"), "\\xC2\\x85");        // U+0085, a C1 control
  EXPECT_EQ(escape_piece("\xE2\x80\x8B"), "\xE2\x80\x8B");  // U+200B stays as it is
}

TEST(TokenDump, Listing) {
  const Tokenizer* tok = test::load_tokenizer(test::gpt2_vocab_path());
  ASSERT_NE(tok, nullptr);
  const std::vector<int32_t> ids = tok->encode("Hello world\n", false, false);
  EXPECT_EQ(format_tokens(*tok, ids, false), "15496\t'Hello'\n995\t' world'\n198\t'\\n'\n");
  EXPECT_EQ(format_tokens(*tok, ids, true), "15496 995 198\n");
  EXPECT_EQ(format_tokens(*tok, std::vector<int32_t>{}, true), "\n");
}

}  // namespace
}  // namespace tokamak
