#pragma once
// `tokamak bench throughput`: many requests of exact lengths through the engine, offline (no
// HTTP), measuring request and token throughput, TTFT, TPOT, ITL, E2E latency, KV usage and
// peak memory.

#include <cstdint>
#include <optional>
#include <string>

#include "cli/engine_flags.h"

namespace tokamak::cli {

struct ThroughputConfig {
  std::string model;  // empty = the default model
  int threads = 0;
  std::string affinity = "none";  // --affinity (core/cpu_affinity.h)
  // Requests; nullopt = 32, or one per line of prompts_file.
  std::optional<int32_t> num_prompts;
  std::optional<int32_t> input_len;    // random prompts' tokens, BOS included; nullopt = 128
  int32_t output_len = 128;            // every request generates exactly this many
  std::optional<int32_t> concurrency;  // most requests in flight; nullopt = all at once
  uint64_t seed = 0;
  std::string prompts_file;  // one prompt per line, used as given (no input_len)
  double temperature = 0;
  std::string json_path;
  bool profile = false;  // print time per op type of a decode and a prefill step
  EngineFlags engine;
};

// Throws Error for impossible settings, a rejected request, or a request that did not end
// with exactly output_len tokens and finish reason "length".
void run_throughput_bench(const ThroughputConfig& config);

}  // namespace tokamak::cli
