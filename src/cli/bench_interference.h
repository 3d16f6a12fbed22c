#pragma once
// `tokamak bench interference`: how much a long prompt, admitted while other requests are
// decoding, slows those requests down, with chunked prefill on and then off.
//
//   background requests:  ──prefill──┬─decode─┬─decode─┬── ... ──┬─decode─┬── ...
//   long prompt:                              submit ══ prefill ══ first token
//                                             └──────── window ──────┘
//
// Measured: the background requests' inter-token gaps that overlap the window (p50 / p99 /
// max), the gaps outside it for comparison, and the long prompt's TTFT. Chunked prefill off
// needs max_batched_tokens >= long prompt + background decodes; that run raises it.

#include <cstdint>
#include <string>

#include "cli/engine_flags.h"

namespace tokamak::cli {

struct InterferenceConfig {
  std::string model;  // empty = the default model
  int threads = 0;
  std::string affinity = "none";  // --affinity (core/cpu_affinity.h)
  int32_t background = 8;
  int32_t background_input_len = 128;
  int32_t background_output_len = 256;
  int32_t long_input_len = 2000;
  uint64_t seed = 0;
  std::string json_path;
  EngineFlags engine;  // --no-chunked-prefill is refused: both modes run
};

// Throws Error for impossible settings, a rejected request, or a request that did not end
// with its exact token count and finish reason "length".
void run_interference_bench(const InterferenceConfig& config);

}  // namespace tokamak::cli
