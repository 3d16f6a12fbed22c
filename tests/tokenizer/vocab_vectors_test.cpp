// llama.cpp's tokenizer test vectors (test-tokenizer-0): every string must give exactly the
// listed ids (no BOS, special tokens not parsed).

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "test_util.h"

namespace tokamak {
namespace {

struct Vector {
  std::string text;
  std::vector<int32_t> ids;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// .inp: each string is followed by "\n__ggml_vocab_test__\n"; .out: one line of ids each.
std::vector<Vector> read_vectors(const std::string& gguf_path) {
  const std::string inp = read_file(gguf_path + ".inp");
  const std::string out = read_file(gguf_path + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<Vector> vectors;
  for (size_t pos = 0; pos < inp.size();) {
    const size_t end = inp.find(sep, pos);
    if (end == std::string::npos) break;
    vectors.push_back({inp.substr(pos, end - pos), {}});
    pos = end + sep.size();
  }
  std::istringstream lines(out);
  std::string line;
  size_t i = 0;
  while (std::getline(lines, line)) {
    if (i >= vectors.size()) {
      ADD_FAILURE() << "more output lines than input strings";
      break;
    }
    std::istringstream ids(line);
    int32_t id = 0;
    while (ids >> id) vectors[i].ids.push_back(id);
    ++i;
  }
  EXPECT_EQ(i, vectors.size()) << "input strings and output lines differ in number";
  return vectors;
}

class VocabVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabVectors, MatchLlamaCpp) {
  const std::string path = test::shared_path("testdata/tokenizer/" + GetParam());
  const Tokenizer* tok = test::load_tokenizer(path);
  ASSERT_NE(tok, nullptr) << path;
  const std::vector<Vector> vectors = read_vectors(path);
  ASSERT_GT(vectors.size(), 40u);
  int passed = 0;
  for (const Vector& v : vectors) {
    const std::vector<int32_t> ids = tok->encode(v.text, false, false);
    EXPECT_EQ(test::ids_to_string(ids), test::ids_to_string(v.ids)) << "text: '" << v.text << "'";
    if (ids == v.ids) ++passed;
    // Round trip: exact for byte-level BPE; SentencePiece drops the space it added.
    EXPECT_EQ(tok->decode(ids), v.text) << "text: '" << v.text << "'";
  }
  std::printf("[ vectors  ] %s: %d of %zu match llama.cpp\n", GetParam().c_str(), passed,
              vectors.size());
}

INSTANTIATE_TEST_SUITE_P(Files, VocabVectors,
                         ::testing::Values("ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf"),
                         [](const auto& info) {
                           std::string name = info.param.substr(11, info.param.size() - 16);
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace tokamak
