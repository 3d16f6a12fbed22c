#pragma once
// Tiny vocabularies written to temporary GGUF files, for tests of loading and of rules that
// the real vocabularies do not isolate well.

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "tokenizer/bpe.h"
#include "tokenizer/utf8.h"

namespace tokamak::test {

using Metadata = std::vector<std::pair<std::string, gguf::Value>>;

inline gguf::Value strings(const std::vector<std::string>& items) {
  gguf::Value::Array a;
  for (const std::string& s : items) a.push_back(gguf::Value::string(s));
  return gguf::Value::array(gguf::ValueType::STRING, std::move(a));
}

inline gguf::Value ints(const std::vector<int32_t>& items) {
  gguf::Value::Array a;
  for (const int32_t v : items) a.push_back(gguf::Value::i32(v));
  return gguf::Value::array(gguf::ValueType::INT32, std::move(a));
}

inline gguf::Value floats(const std::vector<float>& items) {
  gguf::Value::Array a;
  for (const float v : items) a.push_back(gguf::Value::f32(v));
  return gguf::Value::array(gguf::ValueType::FLOAT32, std::move(a));
}

// A temporary GGUF file holding `metadata`, removed when this goes out of scope.
class TempGguf {
 public:
  explicit TempGguf(const Metadata& metadata) {
    static std::atomic<int> counter{0};
    path_ = (std::filesystem::temp_directory_path() / ("tokamak_tok_" + std::to_string(::getpid()) +
                                                       "_" + std::to_string(counter++) + ".gguf"))
                .string();
    gguf::Writer writer;
    for (const auto& [key, value] : metadata) writer.set(key, value);
    writer.write(path_);
  }
  ~TempGguf() { std::filesystem::remove(path_); }
  TempGguf(const TempGguf&) = delete;
  TempGguf& operator=(const TempGguf&) = delete;
  const std::string& path() const { return path_; }
  gguf::File open() const { return gguf::File::open(path_); }

 private:
  std::string path_;
};

// Byte-level BPE vocabulary: the 256 byte characters (ids 0..255), then the merges' results,
// then the special tokens, types as given.
struct TinyBpe {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges;

  static std::string byte_char(uint8_t b) {
    std::string s;
    utf8::append_codepoint(s, gpt2_byte_to_codepoint(b));
    return s;
  }

  TinyBpe() {
    for (int b = 0; b < 256; ++b) {
      tokens.push_back(byte_char(static_cast<uint8_t>(b)));
      types.push_back(1);
    }
  }
  int32_t add(const std::string& text, int32_t type = 1) {
    tokens.push_back(text);
    types.push_back(type);
    return static_cast<int32_t>(tokens.size() - 1);
  }
  int32_t merge(const std::string& left, const std::string& right) {
    merges.push_back(left + " " + right);
    return add(left + right);
  }
  Metadata metadata(const std::string& pre = "gpt-2") const {
    return {{"tokenizer.ggml.model", gguf::Value::string("gpt2")},
            {"tokenizer.ggml.pre", gguf::Value::string(pre)},
            {"tokenizer.ggml.tokens", strings(tokens)},
            {"tokenizer.ggml.token_type", ints(types)},
            {"tokenizer.ggml.merges", strings(merges)}};
  }
};

// Replaces (or adds) `key` in `m`.
inline Metadata with(Metadata m, const std::string& key, gguf::Value value) {
  for (auto& [k, v] : m) {
    if (k == key) {
      v = std::move(value);
      return m;
    }
  }
  m.emplace_back(key, std::move(value));
  return m;
}

inline Metadata without(Metadata m, const std::string& key) {
  std::erase_if(m, [&](const auto& kv) { return kv.first == key; });
  return m;
}

}  // namespace tokamak::test
