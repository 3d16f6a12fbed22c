// tokamak bench: offline benchmarks of the serving engine (no HTTP), and a client for
// serving benchmarks against any OpenAI-compatible server.
//   throughput    many requests of exact lengths: throughput, TTFT, TPOT, ITL, KV usage
//   interference  running requests' inter-token latency while a long prompt is admitted,
//                 chunked prefill on vs off
//   tiers         TTFT of a repeated long prompt cached in the pool, host memory, on disk,
//                 and recomputed
//   serve         streamed requests over HTTP: throughput, TTFT, TPOT, ITL, E2E, goodput
//   report        saved `bench serve` runs side by side (table, HTML)

#include <CLI/CLI.hpp>
#include <memory>

#include "cli/bench_interference.h"
#include "cli/bench_serve.h"
#include "cli/bench_throughput.h"
#include "cli/bench_tiers.h"
#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "core/error.h"

namespace tokamak::cli {
namespace {

void add_model_flags(CLI::App& cmd, std::string& model, int& threads, std::string& affinity) {
  cmd.add_option("-m,--model", model,
                 "GGUF model file (default: the SmolLM2-135M-Instruct Q4_1 model in models/)");
  add_thread_flags(cmd, threads, affinity);
}

void add_throughput(CLI::App& bench) {
  auto c = std::make_shared<ThroughputConfig>();
  auto* cmd = bench.add_subcommand(
      "throughput", "requests of exact lengths through the engine: throughput and latencies");
  add_model_flags(*cmd, c->model, c->threads, c->affinity);
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
  cmd->add_flag("--profile", c->profile,
                "time every op; print the time of each op type per decode step and per "
                "prefill step");
  c->engine.add_to(*cmd);
  cmd->callback([c] { run_throughput_bench(*c); });
}

void add_interference(CLI::App& bench) {
  auto c = std::make_shared<InterferenceConfig>();
  auto* cmd = bench.add_subcommand(
      "interference",
      "decoding requests' inter-token latency while a long prompt is admitted, chunked prefill "
      "on vs off");
  add_model_flags(*cmd, c->model, c->threads, c->affinity);
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

void add_tiers(CLI::App& bench) {
  auto c = std::make_shared<TiersBenchConfig>();
  auto* cmd = bench.add_subcommand(
      "tiers",
      "TTFT of a repeated long prompt: prefix cached in the pool, in host memory, on disk, "
      "and recomputed");
  add_model_flags(*cmd, c->model, c->threads, c->affinity);
  cmd->add_option("--input-len", c->input_len, "prompt tokens, BOS included")
      ->capture_default_str();
  cmd->add_option("--repeats", c->repeats, "runs of each case (a new prompt each)")
      ->capture_default_str();
  cmd->add_option("--seed", c->seed, "seed of the random prompts")->capture_default_str();
  cmd->add_option("--json", c->json_path, "also write the results as JSON to this file");
  c->engine.add_to(*cmd);
  cmd->callback([c] { run_tiers_bench(*c); });
}

// Every `bench serve` flag takes text, checked by serve_config_from_flags, so that a bad
// value is one error line and exit status 1 (CLI11 would answer its own exit codes).
struct FlagHelp {
  const char* name;
  const char* type;
  const char* help;
};
constexpr FlagHelp kServeFlags[] = {
    {"url", "URL", "server base URL, http://HOST[:PORT][/PREFIX] (default http://127.0.0.1:8080)"},
    {"endpoint", "NAME", "completions (/v1/completions, default) or chat (/v1/chat/completions)"},
    {"model", "NAME", "model name sent in requests (default: the first id of GET /v1/models)"},
    {"dataset", "KIND|FILE",
     "random (default): random tokens of exact lengths; prefix-shared: groups sharing a long "
     "prefix; multiturn: chat conversations, each turn sent with the whole history after the "
     "previous reply (chat endpoint; per-turn TTFT and prefix-cache hit rate); FILE.jsonl: "
     "{\"prompt\"} or {\"messages\"} per line, optional \"output_len\""},
    {"num-prompts", "N", "requests per run (default 64, or every line of a dataset file)"},
    {"input-len", "N",
     "prompt tokens, BOS included (prefix-shared: question tokens; multiturn: tokens of each "
     "user message) (default 256)"},
    {"output-len", "N", "max_tokens of every request, EOS ignored (default 128)"},
    {"range-ratio", "R", "lengths uniform in [L*(1-R), L*(1+R)], R in [0, 1) (default 0)"},
    {"request-rate", "RPS|inf",
     "requests/s (multiturn: conversation starts/s), Poisson arrivals, or inf: all at once "
     "(default inf)"},
    {"max-concurrency", "N",
     "most requests in flight (multiturn: conversations in flight) (default: no cap)"},
    {"sweep-concurrency", "N,N,...", "one run per max concurrency, e.g. 1,4,16,32; one table"},
    {"seed", "N", "seed of prompts, lengths and arrivals (default 0)"},
    {"slo-ttft-ms", "MS", "SLO on TTFT for goodput (ms)"},
    {"slo-tpot-ms", "MS", "SLO on TPOT for goodput (ms)"},
    {"prefix-groups", "N", "prefix-shared: groups, each with its own prefix (default 4)"},
    {"prefix-len", "N", "prefix-shared: tokens of each shared prefix (default 1000)"},
    {"conversations", "N", "multiturn: conversations per run (default 16)"},
    {"turns", "N", "multiturn: turns (requests) per conversation (default 10)"},
    {"system-len", "N",
     "multiturn: tokens of a system prompt all conversations share (default 0: none)"},
    {"tokenizer-model", "GGUF",
     "GGUF file whose tokenizer makes prompts and counts tokens (default: "
     "the default model)"},
    {"label", "NAME", "name of this server in tables, JSON and charts (default: the model name)"},
    {"api-key", "KEY", "sent as Authorization: Bearer KEY"},
    {"warmup", "N", "unmeasured requests sent before the runs (default 0)"},
    {"timeout", "S", "seconds without data before a request counts as failed (default 600)"},
    {"json", "FILE", "write every run (with per-request latencies) as JSON to this file"},
    {"html", "FILE", "write a self-contained HTML report (CDFs, charts against concurrency)"},
};

void add_serve(CLI::App& bench) {
  auto flags = std::make_shared<FlagValues>();
  auto* cmd = bench.add_subcommand(
      "serve",
      "streamed requests against an OpenAI-compatible server (tokamak, llama.cpp, vLLM): "
      "throughput, TTFT, TPOT, ITL, E2E latency, goodput");
  for (const FlagHelp& f : kServeFlags) {
    const std::string name = f.name;
    cmd->add_option_function<std::string>(
           "--" + name, [flags, name](const std::string& v) { (*flags)[name] = v; }, f.help)
        ->type_name(f.type);
  }
  cmd->allow_extras();  // reported below as one error line
  cmd->callback([cmd, flags] {
    if (!cmd->remaining().empty()) {
      throw Error("bench serve: unknown argument \"" + cmd->remaining().front() +
                  "\" (see --help)");
    }
    if (!run_serve_bench(serve_config_from_flags(*flags))) exit_status() = 2;
  });
}

void add_report(CLI::App& bench) {
  auto inputs = std::make_shared<std::vector<std::string>>();
  auto html = std::make_shared<std::string>();
  auto* cmd = bench.add_subcommand(
      "report",
      "saved `bench serve --json` runs in one table and one HTML page (e.g. tokamak "
      "beside llama.cpp)");
  cmd->add_option("inputs", *inputs, "JSON files written by bench serve --json");
  cmd->add_option("--html", *html, "write the HTML report (every run on the same charts)");
  cmd->callback([inputs, html] { run_bench_report(*inputs, *html); });
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* bench =
      app.add_subcommand("bench", "benchmarks: the serving engine offline, or a server over HTTP");
  bench->require_subcommand(1);
  add_throughput(*bench);
  add_interference(*bench);
  add_tiers(*bench);
  add_serve(*bench);
  add_report(*bench);
}

}  // namespace tokamak::cli
