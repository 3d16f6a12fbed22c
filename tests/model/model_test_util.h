#pragma once
// Helpers for model tests: temporary GGUF files made by the synthetic-model writer, and
// loading them.

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>

#include "format/gguf.h"
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

}  // namespace tokamak::test
