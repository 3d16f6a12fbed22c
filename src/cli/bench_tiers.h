#pragma once
// `tokamak bench tiers`: time to first token of one repeated long prompt when its prefix is
//
//   recomputed   a prompt never seen (nothing cached)
//   pool         the same prompt again: its blocks are in the pool's prefix cache
//   host         after the pool's cached blocks were pushed into the host tier
//   disk         after those were pushed on into the disk tier
//
// on one EngineCore driven directly (no HTTP, no engine thread), each case once per repeat
// with a new random prompt per repeat; medians reported. Every request makes one output
// token, so TTFT is the prefill (and the copies back from the tier).

#include <cstdint>
#include <string>

#include "cli/engine_flags.h"

namespace tokamak::cli {

struct TiersBenchConfig {
  std::string model;  // empty = the default model
  int threads = 0;
  std::string affinity = "none";  // --affinity (core/cpu_affinity.h)
  int32_t input_len = 2000;
  int32_t repeats = 3;
  uint64_t seed = 0;
  std::string json_path;
  EngineFlags engine;  // default host tier 1G and a temporary disk tier when not given
};

// Throws Error for impossible settings, or when a case did not hit the tier it measures.
void run_tiers_bench(const TiersBenchConfig& config);

}  // namespace tokamak::cli
