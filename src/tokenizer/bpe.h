#pragma once
// Byte-level BPE (GPT-2 style). Every byte of a word maps to one printable code point
// (bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes to
// U+0100..U+0143 in order), so vocabulary strings are text; a word starts as one symbol per
// byte and the adjacent pair with the lowest merge rank is merged until no pair has a rank.
//
//   "Ġhello" bytes -> [Ġ h e l l o] -> ... -> [Ġhello]
//
// Merging is O(n log n) per word: a doubly linked list of symbols and a min-heap of candidate
// pairs keyed (rank, left position), stale candidates being skipped when popped.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/vocab.h"

namespace tokamak {

// GPT-2's byte <-> code point mapping.
uint32_t gpt2_byte_to_codepoint(uint8_t byte);
std::optional<uint8_t> gpt2_codepoint_to_byte(uint32_t cp);

class BpeModel {
 public:
  // Reusable buffers for encode_word(); one per thread.
  struct Scratch {
    struct Symbol {
      int32_t id;    // token of the symbol's bytes; -1 when the vocabulary lacks that byte
      int32_t prev;  // -1 at the start
      int32_t next;  // -1 at the end
      bool alive;
    };
    struct Candidate {
      int32_t rank;
      int32_t left;  // symbol positions
      int32_t right;
      int32_t left_id;  // ids when queued: a changed symbol makes the candidate stale
      int32_t right_id;
      int32_t result;
    };
    std::vector<Symbol> symbols;
    std::vector<Candidate> heap;
    std::string encoded;
  };

  // Builds the rank table from vocab.merges(). A merge whose parts or result are not tokens
  // can never apply and is skipped (counted in skipped_merges()).
  BpeModel(const Vocab& vocab, bool ignore_merges);

  // Appends the tokens of one pre-tokenized word (raw bytes, not byte-encoded). Bytes whose
  // byte-level character is missing from the vocabulary are dropped, as llama.cpp does.
  void encode_word(std::string_view word, std::vector<int32_t>& out, Scratch& scratch) const;

  size_t skipped_merges() const { return skipped_merges_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  void push_candidate(Scratch& s, int32_t left, int32_t right) const;

  const Vocab* vocab_;
  bool ignore_merges_;
  std::array<int32_t, 256> byte_token_{};
  std::unordered_map<uint64_t, Merge> merges_;
  size_t skipped_merges_ = 0;
};

}  // namespace tokamak
