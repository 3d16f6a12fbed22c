// tokamak bench: offline benchmarks of the serving engine (no HTTP).
//   throughput    many requests of exact lengths: throughput, TTFT, TPOT, ITL, KV usage
//   interference  running requests' inter-token latency while a long prompt is admitted,
//                 chunked prefill on vs off

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/bench_interference.h"
#include "cli/bench_throughput.h"
#include "cli/commands.h"

namespace tokamak::cli {
namespace {

void add_model_flags(CLI::App& cmd, std::string& model, int& threads) {
  cmd.add_option("-m,--model", model,
                 "GGUF model file (default: the SmolLM2-135M-Instruct Q4_1 model in models/)");
  cmd.add_option("-t,--threads", threads, "kernel threads (0 = all cores)")
      ->check(CLI::Range(0, 1024));
}

void add_throughput(CLI::App& bench) {
  auto c = std::make_shared<ThroughputConfig>();
  auto* cmd = bench.add_subcommand(
      "throughput", "requests of exact lengths through the engine: throughput and latencies");
  add_model_flags(*cmd, c->model, c->threads);
  cmd->add_option("--num-prompts", c->num_prompts,
                  "requests to run (default 32, or one per line of --prompts-file)");
  cmd->add_option("--input-len", c->input_len,
                  "prompt tokens of each random prompt, BOS included (default 128)");
  cmd->add_option("--output-len", c->output_len, "tokens every request generates")
      ->capture_default_str();
  cmd->add_option("--concurrency", c->concurrency,
                  "most requests in flight; the next is submitted when one finishes (default: "
                  "all at once)");
  cmd->add_option("--seed", c->seed, "seed of the random prompts (and of sampling)")
      ->capture_default_str();
  cmd->add_option("--prompts-file", c->prompts_file,
                  "prompts, one per line, used as given instead of random ones");
  cmd->add_option("--temperature", c->temperature, "sampling temperature (0 = greedy)")
      ->capture_default_str();
  cmd->add_option("--json", c->json_path, "also write the results as JSON to this file");
  c->engine.add_to(*cmd);
  cmd->callback([c] { run_throughput_bench(*c); });
}

void add_interference(CLI::App& bench) {
  auto c = std::make_shared<InterferenceConfig>();
  auto* cmd = bench.add_subcommand(
      "interference",
      "decoding requests' inter-token latency while a long prompt is admitted, chunked prefill "
      "on vs off");
  add_model_flags(*cmd, c->model, c->threads);
  cmd->add_option("--background", c->background, "requests decoding when the long prompt comes")
      ->capture_default_str();
  cmd->add_option("--background-input-len", c->background_input_len,
                  "prompt tokens of each background request")
      ->capture_default_str();
  cmd->add_option("--background-output-len", c->background_output_len,
                  "tokens each background request generates")
      ->capture_default_str();
  cmd->add_option("--long-input-len", c->long_input_len, "prompt tokens of the long request")
      ->capture_default_str();
  cmd->add_option("--seed", c->seed, "seed of the random prompts")->capture_default_str();
  cmd->add_option("--json", c->json_path, "also write the results as JSON to this file");
  c->engine.add_to(*cmd);
  cmd->callback([c] { run_interference_bench(*c); });
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "offline benchmarks of the serving engine");
  bench->require_subcommand(1);
  add_throughput(*bench);
  add_interference(*bench);
}

}  // namespace tokamak::cli
