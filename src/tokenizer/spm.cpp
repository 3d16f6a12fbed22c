#include "tokenizer/spm.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "tokenizer/utf8.h"

namespace tokamak {

namespace {

struct Symbol {
  size_t offset;  // into the text
  size_t length;  // 0 once merged into its left neighbour
  int32_t prev;
  int32_t next;
};

struct Candidate {
  float score;
  int32_t left;
  int32_t right;
  size_t length;  // of the merged text: a changed symbol makes the candidate stale
};

// Max-heap order: highest score first, then leftmost (as llama.cpp).
bool before(const Candidate& a, const Candidate& b) {
  return a.score < b.score || (a.score == b.score && a.left > b.left);
}

}  // namespace

std::string spm_escape_spaces(std::string_view text, bool prefix_space) {
  static constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581
  std::string out;
  out.reserve(text.size() + text.size() / 4 + kSpace.size());
  if (prefix_space) out.append(kSpace);
  for (const char c : text) {
    if (c == ' ') {
      out.append(kSpace);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

SpmModel::SpmModel(const Vocab& vocab) : vocab_(&vocab) {
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    std::optional<int32_t> id = vocab.find(name);
    if (!id) id = vocab.find(std::string(1, static_cast<char>(b)));
    byte_token_[static_cast<size_t>(b)] = id;
  }
}

void SpmModel::encode(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t offset = 0; offset < text.size();) {
    const size_t length =
        std::min(utf8::claimed_length(static_cast<uint8_t>(text[offset])), text.size() - offset);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({offset, length, index - 1, offset + length < text.size() ? index + 1 : -1});
    offset += length;
  }

  std::vector<Candidate> heap;
  const auto push = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[static_cast<size_t>(left)];
    const Symbol& r = symbols[static_cast<size_t>(right)];
    const std::string_view merged = text.substr(l.offset, l.length + r.length);
    const std::optional<int32_t> id = vocab_->find(merged);
    if (!id) return;
    heap.push_back({vocab_->score(*id), left, right, merged.size()});
    std::push_heap(heap.begin(), heap.end(), before);
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) push(i, i + 1);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), before);
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& left = symbols[static_cast<size_t>(c.left)];
    Symbol& right = symbols[static_cast<size_t>(c.right)];
    if (left.length == 0 || right.length == 0 || left.next != c.right ||
        left.length + right.length != c.length) {
      continue;  // stale
    }
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = c.left;
    push(left.prev, c.left);
    push(c.left, left.next);
  }

  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    const Symbol& s = symbols[static_cast<size_t>(i)];
    const std::string_view piece = text.substr(s.offset, s.length);
    if (const std::optional<int32_t> id = vocab_->find(piece)) {
      out.push_back(*id);
      continue;
    }
    const bool bytes_known = std::all_of(piece.begin(), piece.end(), [&](char c) {
      return byte_token_[static_cast<uint8_t>(c)].has_value();
    });
    if (bytes_known) {
      for (const char c : piece) out.push_back(*byte_token_[static_cast<uint8_t>(c)]);
    } else if (vocab_->special().unk) {
      out.push_back(*vocab_->special().unk);  // one unknown token per unknown character
    }
  }
}

}  // namespace tokamak
