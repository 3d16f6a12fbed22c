#pragma once
// Flags of the serving engine (KV memory, block size, batch limits, chunked prefill,
// preemption, prefix cache, scheduling policy), shared by `tokamak bench` and
// `tokamak serve`, and the start-up lines that describe the engine they built.

#include <cstdint>
#include <optional>
#include <string>

#include "engine/engine_options.h"

namespace CLI {
class App;
}

namespace tokamak {
class EngineCore;
namespace gguf {
class File;
}
}  // namespace tokamak

namespace tokamak::cli {

struct EngineFlags {
  std::string kv_memory;             // --kv-memory; empty = the engine's default budget
  std::optional<int64_t> kv_tokens;  // --kv-tokens; excludes --kv-memory
  int32_t block_size = 16;
  std::string kv_dtype = "f16";
  int32_t max_batched_tokens = 512;
  int32_t max_seqs = 64;
  bool no_chunked_prefill = false;
  std::string preemption = "recompute";
  std::string swap_space;  // --swap-space; empty = the engine's default
  int32_t max_model_len = 0;
  bool no_prefix_cache = false;
  std::string schedule_policy = "fcfs";
  int32_t lpm_max_bypass = 16;
  int32_t kv_window = 0;
  int32_t kv_sink = 4;
  int32_t kv_heavy = 0;
  int32_t kv_hot_window = 0;
  std::string kv_host_bytes;  // --kv-host-bytes; empty = 0 (no host tier)
  std::string kv_disk_dir;    // --kv-disk-dir; empty = no disk tier
  std::string kv_disk_bytes;  // --kv-disk-bytes; required with --kv-disk-dir

  void add_to(CLI::App& cmd);
  // The options these flags ask for, validated (validate(EngineOptions) included). Throws
  // Error with a one-line message naming the flag. With --kv-disk-dir, the model's identity
  // is still to be set: tag_model() once the model is loaded.
  EngineOptions engine_options() const;
};

// Sets what identifies the loaded model's weights in opts (read by the KV disk tier); only
// hashes the file when a disk tier is configured.
void tag_model(EngineOptions& opts, const gguf::File& file);

// The engine's start-up lines, one per '\n':
//   KV pool: 1234 blocks x 16 tokens = 19744 tokens, 433.83 MiB (budget: 25% of free memory)
//   KV bytes per token = 2 (K and V) x 30 layers x 3 kv-heads x 64 head-dim x 2 bytes (f16)
//     = 23040 B
//   (quantized dtypes add "+ 720 B of scales per 16-token block = 11565.00 B")
//   max model len 8192 tokens, max batched tokens 512, max seqs 64, chunked prefill on,
//     preemption recompute, prefix cache on, schedule fcfs, 2 threads
// n_threads: the kernel threads the model runs with (LoadedModel::threads).
std::string engine_summary(const EngineCore& core, int n_threads);

// -t,--threads and --affinity (core/cpu_affinity.h) for a command that runs the model.
void add_thread_flags(CLI::App& cmd, int& threads, std::string& affinity);

}  // namespace tokamak::cli
