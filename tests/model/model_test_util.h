#pragma once
// Helpers for model tests: temporary GGUF files made by the synthetic-model writer, loading
// them, and a forward that checks the logits look like a model's.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "model/model.h"
#include "model/model_options.h"
#include "model/synthetic_model.h"

namespace tokamak::test {

// A file in the temporary directory, removed when this goes out of scope.
class TempFile {
 public:
  explicit TempFile(const std::string& stem) {
    static std::atomic<int> counter{0};
    path_ = (std::filesystem::temp_directory_path() /
             ("tokamak_" + stem + "_" + std::to_string(::getpid()) + "_" +
              std::to_string(counter++) + ".gguf"))
                .string();
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The default model in the source tree's models/ (scripts/fetch_model.sh puts it there); tests
// that need it skip when it is missing.
inline std::string default_model_path() {
  return std::string(TOKAMAK_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

// n consecutive token ids or positions from `from` on.
inline std::vector<int32_t> iota(int32_t from, int32_t n) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), from);
  return v;
}

inline std::shared_ptr<const gguf::File> open_shared(const std::string& path) {
  return std::make_shared<const gguf::File>(gguf::File::open(path));
}

inline ModelOptions options(int threads, int32_t max_batch_tokens = 512) {
  ModelOptions o;
  o.n_threads = threads;
  o.max_batch_tokens = max_batch_tokens;
  return o;
}

// Writes `model` to `file` and opens it.
inline std::shared_ptr<const gguf::File> write_and_open(const SyntheticModel& model,
                                                        const TempFile& file) {
  model.write(file.path());
  return open_shared(file.path());
}

// Prefills `tokens` into a fresh KV cache of `model` and checks the last row's logits are
// finite and of a sensible size (largest magnitude in (0.1, 100)).
inline void expect_sensible_logits(Model& model, const std::vector<int32_t>& tokens) {
  auto kv = model.new_kv_cache(0);
  std::vector<int32_t> pos;
  for (size_t i = 0; i < tokens.size(); ++i) pos.push_back(static_cast<int32_t>(i));
  const std::vector<int32_t> rows = {static_cast<int32_t>(tokens.size()) - 1};
  std::vector<float> logits(static_cast<size_t>(model.hparams().n_vocab));
  model.forward({tokens, pos, rows}, *kv, logits);
  float max = 0.0f;
  for (float v : logits) {
    ASSERT_TRUE(std::isfinite(v));
    max = std::max(max, std::fabs(v));
  }
  EXPECT_GT(max, 0.1f);
  EXPECT_LT(max, 100.0f);
}

}  // namespace tokamak::test
