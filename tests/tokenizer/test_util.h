#pragma once
// Shared helpers for the tokenizer tests: fixture paths and tokenizers loaded once per binary.

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::test {

inline std::string shared_path(const std::string& rel) {
  return std::string(TOKAMAK_SHARED_DIR) + "/" + rel;
}
inline std::string source_path(const std::string& rel) {
  return std::string(TOKAMAK_SOURCE_DIR) + "/" + rel;
}
inline std::string gpt2_vocab_path() {
  return shared_path("testdata/tokenizer/ggml-vocab-gpt-2.gguf");
}
inline std::string spm_vocab_path() {
  return shared_path("testdata/tokenizer/ggml-vocab-llama-spm.gguf");
}
inline std::string stories_path() {
  return shared_path("testdata/stories260K.gguf");
}
inline std::string smollm2_path() {
  return source_path("models/SmolLM2-135M-Instruct.Q4_1.gguf");
}

// The tokenizer of `path`, loaded once; nullptr when the file does not exist.
inline const Tokenizer* load_tokenizer(const std::string& path) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(path);
  if (it == cache.end()) {
    std::unique_ptr<Tokenizer> tok;
    if (std::filesystem::exists(path)) tok = Tokenizer::from_gguf(gguf::File::open(path));
    it = cache.emplace(path, std::move(tok)).first;
  }
  return it->second.get();
}

#define TOKAMAK_REQUIRE_MODEL(var, path)                                   \
  const ::tokamak::Tokenizer* var = ::tokamak::test::load_tokenizer(path); \
  if (var == nullptr)                                                      \
  GTEST_SKIP() << "model file " << (path) << " is missing (run scripts/fetch_model.sh)"

inline std::string ids_to_string(const std::vector<int32_t>& ids) {
  std::string s;
  for (const int32_t id : ids) {
    if (!s.empty()) s += ' ';
    s += std::to_string(id);
  }
  return s;
}

}  // namespace tokamak::test
