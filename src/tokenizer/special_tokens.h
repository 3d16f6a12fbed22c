#pragma once
// Finding special-token text in the input before normal tokenization (llama.cpp's
// tokenizer_st_partition). Control and unknown tokens are found only when parse_special is
// set; user-defined tokens always. Tokens are tried longest text first (ties: lower id): each
// cuts every occurrence of its text out of the raw pieces left by the ones before it.
//
//   "a<|im_end|>b" -> [raw "a"] [token <|im_end|>] [raw "b"]

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace tokamak {

class SpecialTokenSplitter {
 public:
  struct Fragment {
    int32_t token;  // the special token, or -1 for raw text [offset, offset + length)
    size_t offset;
    size_t length;
  };

  explicit SpecialTokenSplitter(const Vocab& vocab);

  std::vector<Fragment> split(std::string_view text, bool parse_special) const;

 private:
  // A byte trie over all special texts, used to learn in one pass which ones occur at all.
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // (byte, node), sorted by byte
    int32_t token = -1;
  };
  int32_t child(int32_t node, uint8_t byte) const;
  void insert(std::string_view text, int32_t token);

  const Vocab* vocab_;
  bool has_user_defined_ = false;       // matched even without parse_special
  std::vector<int32_t> order_;          // special tokens, in the order they are tried
  std::vector<int32_t> rank_of_;        // token id -> position in order_, -1 if not special
  std::vector<Node> nodes_;             // nodes_[0] is the root
  std::vector<int32_t> root_children_;  // 256 entries: the root's children by byte
};

}  // namespace tokamak
