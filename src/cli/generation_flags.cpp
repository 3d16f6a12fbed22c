#include "cli/generation_flags.h"

#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/engine_flags.h"
#include "core/error.h"

namespace tokamak::cli {

void GenerationFlags::add_to(CLI::App& cmd) {
  cmd.add_option("-m,--model", model,
                 "GGUF model file (default: the SmolLM2-135M-Instruct Q4_1 model in models/)");
  add_thread_flags(cmd, threads, affinity);
  cmd.add_option("-c,--ctx-size", ctx_size,
                 "context length in tokens (0 = model default, at most 4096)")
      ->check(CLI::Range(0, 1 << 20));
  cmd.add_option("-n,--n-predict", n_predict, "most tokens to generate")
      ->check(CLI::Range(1, 1 << 20));
  cmd.add_option("--temp", temperature, "sampling temperature (0 = greedy)");
  cmd.add_option("--top-k", top_k, "keep the k most likely tokens (0 = off)");
  cmd.add_option("--top-p", top_p, "nucleus sampling mass (1 = off)");
  cmd.add_option("--min-p", min_p, "drop tokens below min-p times the top probability (0 = off)");
  cmd.add_option("--repeat-penalty", repeat_penalty, "repetition penalty (1 = off)");
  cmd.add_option("--presence-penalty", presence_penalty, "presence penalty in [-2, 2]");
  cmd.add_option("--frequency-penalty", frequency_penalty, "frequency penalty in [-2, 2]");
  cmd.add_option("--seed", seed, "random seed (same seed and inputs give the same output)");
  cmd.add_option("--stop", stop, "stop string (repeatable)");
  cmd.add_flag("--ignore-eos", ignore_eos, "keep generating past end-of-generation tokens");
}

SamplingParams GenerationFlags::sampling_params(int32_t n_vocab) const {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.repetition_penalty = repeat_penalty;
  p.presence_penalty = presence_penalty;
  p.frequency_penalty = frequency_penalty;
  p.seed = seed;
  p.max_tokens = n_predict;
  p.stop = stop;
  p.ignore_eos = ignore_eos;
  if (auto problem = p.validate(n_vocab)) throw Error(*problem);
  return p;
}

void print_timing_line(const GenerationStats& s, double load_ms) {
  std::fprintf(stderr,
               "\n[tokamak] prompt %d tok (%d reused), generated %d tok | load %.0f ms | "
               "TTFT %.1f ms | prefill %.1f tok/s | decode %.1f tok/s, TPOT %.2f ms\n",
               s.prompt_tokens, s.reused_tokens, s.generated_tokens, load_ms, s.ttft_ms,
               s.prefill_tokens_per_s(), s.decode_tokens_per_s(), s.tpot_ms());
}

}  // namespace tokamak::cli
