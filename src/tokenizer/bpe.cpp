#include "tokenizer/bpe.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace tokamak {

namespace {

bool maps_to_itself(uint32_t byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

struct ByteTables {
  std::array<uint32_t, 256> to_codepoint{};
  std::array<int16_t, 0x144> to_byte{};  // code points 0..0x143; -1 where no byte maps

  ByteTables() {
    to_byte.fill(-1);
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      to_codepoint[b] = maps_to_itself(b) ? b : next++;
      to_byte[to_codepoint[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& byte_tables() {
  static const ByteTables kTables;
  return kTables;
}

// Min-heap order: lowest rank first, then leftmost (as llama.cpp).
bool later(const BpeModel::Scratch::Candidate& a, const BpeModel::Scratch::Candidate& b) {
  return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
}

}  // namespace

uint32_t gpt2_byte_to_codepoint(uint8_t byte) {
  return byte_tables().to_codepoint[byte];
}

std::optional<uint8_t> gpt2_codepoint_to_byte(uint32_t cp) {
  const auto& t = byte_tables().to_byte;
  if (cp >= t.size() || t[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(t[cp]);
}

BpeModel::BpeModel(const Vocab& vocab, bool ignore_merges)
    : vocab_(&vocab), ignore_merges_(ignore_merges) {
  std::string encoded;
  for (uint32_t b = 0; b < 256; ++b) {
    encoded.clear();
    utf8::append_codepoint(encoded, gpt2_byte_to_codepoint(static_cast<uint8_t>(b)));
    byte_token_[b] = vocab.find(encoded).value_or(-1);
  }

  const std::vector<std::string>& merges = vocab.merges();
  merges_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& m = merges[rank];
    const size_t space = m.find(' ', 1);  // the vocabulary validated the form "left right"
    const std::string_view left = std::string_view(m).substr(0, space);
    const std::string_view right = std::string_view(m).substr(space + 1);
    joined.assign(left).append(right);
    const std::optional<int32_t> l = vocab.find(left), r = vocab.find(right),
                                 j = vocab.find(joined);
    if (!l || !r || !j) {
      ++skipped_merges_;
      continue;
    }
    // The first (lowest) rank of a repeated pair wins.
    merges_.emplace(pair_key(*l, *r), Merge{static_cast<int32_t>(rank), *j});
  }
}

void BpeModel::push_candidate(Scratch& s, int32_t left, int32_t right) const {
  if (left < 0 || right < 0) return;
  const int32_t l = s.symbols[static_cast<size_t>(left)].id;
  const int32_t r = s.symbols[static_cast<size_t>(right)].id;
  if (l < 0 || r < 0) return;
  const auto it = merges_.find(pair_key(l, r));
  if (it == merges_.end()) return;
  s.heap.push_back({it->second.rank, left, right, l, r, it->second.result});
  std::push_heap(s.heap.begin(), s.heap.end(), later);
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out, Scratch& s) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    s.encoded.clear();
    for (const char c : word)
      utf8::append_codepoint(s.encoded, gpt2_byte_to_codepoint(static_cast<uint8_t>(c)));
    if (const std::optional<int32_t> whole = vocab_->find(s.encoded)) {
      out.push_back(*whole);
      return;
    }
  }

  const auto n = static_cast<int32_t>(word.size());
  s.symbols.clear();
  s.symbols.reserve(word.size());
  for (int32_t i = 0; i < n; ++i) {
    s.symbols.push_back({byte_token_[static_cast<uint8_t>(word[static_cast<size_t>(i)])], i - 1,
                         i + 1 < n ? i + 1 : -1, true});
  }
  s.heap.clear();
  for (int32_t i = 0; i + 1 < n; ++i) push_candidate(s, i, i + 1);

  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), later);
    const Scratch::Candidate c = s.heap.back();
    s.heap.pop_back();
    Scratch::Symbol& left = s.symbols[static_cast<size_t>(c.left)];
    Scratch::Symbol& right = s.symbols[static_cast<size_t>(c.right)];
    if (!left.alive || !right.alive || left.next != c.right || left.id != c.left_id ||
        right.id != c.right_id) {
      continue;  // stale: one side has merged since
    }
    left.id = c.result;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) s.symbols[static_cast<size_t>(right.next)].prev = c.left;
    push_candidate(s, left.prev, c.left);
    push_candidate(s, c.left, left.next);
  }

  for (int32_t i = 0; i >= 0; i = s.symbols[static_cast<size_t>(i)].next) {
    const int32_t id = s.symbols[static_cast<size_t>(i)].id;
    if (id >= 0) out.push_back(id);
  }
}

}  // namespace tokamak
