#include "cli/loaded_model.h"

#include <chrono>

#include "cli/default_model.h"
#include "core/cpu_affinity.h"

namespace tokamak::cli {

LoadedModel load_model(const std::string& path, int n_threads, const std::string& affinity,
                       int n_ctx, int32_t max_batch_tokens, OpProfile* profile) {
  const auto t0 = std::chrono::steady_clock::now();
  LoadedModel loaded;
  const std::string resolved = path.empty() ? default_model_path() : path;
  loaded.file = std::make_shared<const gguf::File>(gguf::File::open(resolved));
  ModelOptions opts;
  opts.n_threads = n_threads;
  opts.cpus = parse_cpu_affinity(affinity);
  loaded.threads = kernel_thread_count(n_threads, opts.cpus);
  opts.n_ctx = n_ctx;
  if (max_batch_tokens > 0) opts.max_batch_tokens = max_batch_tokens;
  opts.profile = profile;
  loaded.model = Model::load(loaded.file, opts);
  loaded.tokenizer = Tokenizer::from_gguf(*loaded.file);
  loaded.load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return loaded;
}

}  // namespace tokamak::cli
