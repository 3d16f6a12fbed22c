#pragma once
// Flags shared by `run` and `chat`: model, threads, context and sampling parameters, and the
// timing line both print after a generation.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/generator.h"
#include "engine/sampling_params.h"

namespace CLI {
class App;
}

namespace tokamak::cli {

struct GenerationFlags {
  std::string model;  // empty = default model
  int threads = 0;
  std::string affinity = "none";  // --affinity (core/cpu_affinity.h)
  int ctx_size = 0;
  int n_predict = 256;
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  bool ignore_eos = false;

  void add_to(CLI::App& cmd);
  // Throws Error naming the flag when a value is out of range.
  SamplingParams sampling_params(int32_t n_vocab) const;
};

// One line to stderr: prompt and generated tokens, load time, TTFT, prefill and decode speed.
void print_timing_line(const GenerationStats& stats, double load_ms);

}  // namespace tokamak::cli
