#include "tokenizer/special_tokens.h"

#include <algorithm>

namespace tokamak {

namespace {

bool is_special_type(TokenType t) {
  return t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown;
}

}  // namespace

SpecialTokenSplitter::SpecialTokenSplitter(const Vocab& vocab)
    : vocab_(&vocab),
      rank_of_(static_cast<size_t>(vocab.size()), -1),
      nodes_(1),
      root_children_(256, -1) {
  for (int32_t id = 0; id < vocab.size(); ++id) {
    if (is_special_type(vocab.type(id)) && !vocab.text(id).empty()) {
      order_.push_back(id);
      has_user_defined_ = has_user_defined_ || vocab.type(id) == TokenType::UserDefined;
    }
  }
  std::stable_sort(order_.begin(), order_.end(), [&](int32_t a, int32_t b) {
    return vocab.text(a).size() > vocab.text(b).size();
  });
  for (size_t i = 0; i < order_.size(); ++i) {
    rank_of_[static_cast<size_t>(order_[i])] = static_cast<int32_t>(i);
    insert(vocab.text(order_[i]), order_[i]);
  }
}

int32_t SpecialTokenSplitter::child(int32_t node, uint8_t byte) const {
  if (node == 0) return root_children_[byte];
  const auto& children = nodes_[static_cast<size_t>(node)].children;
  const auto it = std::lower_bound(children.begin(), children.end(), byte,
                                   [](const auto& c, uint8_t b) { return c.first < b; });
  return it != children.end() && it->first == byte ? it->second : -1;
}

void SpecialTokenSplitter::insert(std::string_view text, int32_t token) {
  int32_t node = 0;
  for (const char ch : text) {
    const auto byte = static_cast<uint8_t>(ch);
    int32_t next = child(node, byte);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_.emplace_back();
      if (node == 0) {
        root_children_[byte] = next;
      } else {
        auto& children = nodes_[static_cast<size_t>(node)].children;
        const auto it = std::lower_bound(children.begin(), children.end(), byte,
                                         [](const auto& c, uint8_t b) { return c.first < b; });
        children.insert(it, {byte, next});
      }
    }
    node = next;
  }
  nodes_[static_cast<size_t>(node)].token = token;
}

std::vector<SpecialTokenSplitter::Fragment> SpecialTokenSplitter::split(std::string_view text,
                                                                        bool parse_special) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({-1, 0, text.size()});
  if (order_.empty() || (!parse_special && !has_user_defined_)) return fragments;

  // Which special texts occur anywhere (in llama.cpp's order)?
  std::vector<char> occurs(order_.size(), 0);
  bool any = false;
  for (size_t start = 0; start < text.size(); ++start) {
    int32_t node = 0;
    for (size_t i = start; i < text.size(); ++i) {
      node = child(node, static_cast<uint8_t>(text[i]));
      if (node < 0) break;
      const int32_t token = nodes_[static_cast<size_t>(node)].token;
      if (token < 0) continue;
      const TokenType type = vocab_->type(token);
      if (!parse_special && type != TokenType::UserDefined) continue;
      occurs[static_cast<size_t>(rank_of_[static_cast<size_t>(token)])] = 1;
      any = true;
    }
  }
  if (!any) return fragments;

  std::vector<Fragment> next;
  for (size_t rank = 0; rank < order_.size(); ++rank) {
    if (!occurs[rank]) continue;
    const int32_t token = order_[rank];
    const std::string_view needle = vocab_->text(token);
    next.clear();
    for (const Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t pos = f.offset;
      const size_t end = f.offset + f.length;
      for (;;) {
        const size_t found = text.substr(0, end).find(needle, pos);
        if (found == std::string_view::npos) break;
        if (found > pos) next.push_back({-1, pos, found - pos});
        next.push_back({token, found, needle.size()});
        pos = found + needle.size();
      }
      if (pos < end) next.push_back({-1, pos, end - pos});
    }
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace tokamak
