// Golden data from llama.cpp (scripts/golden_tokenizer.py): every string must tokenize to the
// same ids, with and without special-token parsing, and decode back to itself where lossless.

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace tokamak {
namespace {

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

struct Golden {
  const char* fixture;
  std::string (*model)();
};

class GoldenTest : public ::testing::TestWithParam<Golden> {};

TEST_P(GoldenTest, MatchesLlamaCpp) {
  const std::string model = GetParam().model();
  TOKAMAK_REQUIRE_MODEL(tok, model);
  const std::string fixture =
      test::source_path(std::string("tests/golden/tokenizer/") + GetParam().fixture);
  std::ifstream in(fixture);
  ASSERT_TRUE(in.good()) << fixture;
  const nlohmann::json golden = nlohmann::json::parse(in);

  // Every token's piece, as llama_token_to_piece(special = true) gives it.
  ASSERT_EQ(tok->n_vocab(), golden.at("n_vocab").get<int32_t>());
  uint64_t hash = 0xCBF29CE484222325ull;
  const auto fnv = [&](const void* data, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      hash = (hash ^ static_cast<const uint8_t*>(data)[i]) * 0x100000001B3ull;
    }
  };
  for (int32_t id = 0; id < tok->n_vocab(); ++id) {
    const std::string_view p = tok->piece(id);
    const uint32_t n = static_cast<uint32_t>(p.size());
    const uint8_t le[4] = {static_cast<uint8_t>(n), static_cast<uint8_t>(n >> 8),
                           static_cast<uint8_t>(n >> 16), static_cast<uint8_t>(n >> 24)};
    fnv(le, 4);
    fnv(p.data(), p.size());
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
  EXPECT_EQ(std::string(hex), golden.at("pieces_fnv1a64").get<std::string>())
      << "token pieces differ from llama_token_to_piece";

  size_t compared = 0, matched = 0, lossless = 0, failures = 0;
  for (const auto& c : golden.at("cases")) {
    const std::string text = c.contains("hex") ? from_hex(c.at("hex").get<std::string>())
                                               : c.at("text").get<std::string>();
    const auto check = [&](const char* field, bool add_special, bool parse_special) {
      if (!c.contains(field)) return;
      const std::vector<int32_t> want = c.at(field).get<std::vector<int32_t>>();
      const std::vector<int32_t> got = tok->encode(text, add_special, parse_special);
      ++compared;
      if (got == want) {
        ++matched;
      } else if (++failures <= 20) {
        ADD_FAILURE() << field << " differ for " << c.dump()
                      << "\n  got:  " << test::ids_to_string(got)
                      << "\n  want: " << test::ids_to_string(want);
      }
    };
    check("ids", false, false);
    check("ids_special", false, true);
    check("ids_add_special", true, false);
    if (c.at("lossless").get<bool>()) {
      EXPECT_EQ(tok->decode(tok->encode(text, false, false)), text) << c.dump();
      ++lossless;
    }
  }
  EXPECT_EQ(failures, 0u);
  EXPECT_GE(golden.at("cases").size(), 1000u);
  std::printf(
      "[ golden   ] %s: %zu of %zu encodings match llama.cpp (%zu strings, %zu round trips)\n",
      GetParam().fixture, matched, compared, golden.at("cases").size(), lossless);
}

INSTANTIATE_TEST_SUITE_P(
    Models, GoldenTest,
    ::testing::Values(Golden{"smollm2.json", &test::smollm2_path},
                      Golden{"stories260k.json", &test::stories_path}),
    [](const auto& info) {
      return std::string(info.param.fixture).substr(0, std::string(info.param.fixture).find('.'));
    });

}  // namespace
}  // namespace tokamak
