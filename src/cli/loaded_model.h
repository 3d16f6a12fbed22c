#pragma once
// What run and chat load: the GGUF file, the model over it, and its tokenizer.

#include <cstdint>
#include <memory>
#include <string>

#include "format/gguf.h"
#include "model/model.h"
#include "ops/op_profile.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::cli {

struct LoadedModel {
  std::shared_ptr<const gguf::File> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  double load_ms = 0;
  int threads = 0;  // the kernel threads the model runs with (-t 0 resolved)
};

// path empty = the default model. n_threads 0 = one per CPU this process may run on (or per
// CPU of the affinity list). affinity: --affinity's spec (core/cpu_affinity.h; "none": the OS
// places the threads); a bad one throws Error. n_ctx 0 = the model's default.
// max_batch_tokens: most tokens in one forward, at least the engine's max_batched_tokens
// (0 = ModelOptions' default).
// profile: built-in profiling into it (ModelOptions::profile), null for none.
LoadedModel load_model(const std::string& path, int n_threads, const std::string& affinity,
                       int n_ctx, int32_t max_batch_tokens = 0, OpProfile* profile = nullptr);

}  // namespace tokamak::cli
