#pragma once
// What run and chat load: the GGUF file, the model over it, and its tokenizer.

#include <memory>
#include <string>

#include "format/gguf.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::cli {

struct LoadedModel {
  std::shared_ptr<const gguf::File> file;
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  double load_ms = 0;
};

// path empty = the default model. n_threads 0 = all cores. n_ctx 0 = the model's default.
LoadedModel load_model(const std::string& path, int n_threads, int n_ctx);

}  // namespace tokamak::cli
