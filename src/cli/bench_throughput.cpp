#include "cli/bench_throughput.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "cli/bench_client.h"
#include "cli/bench_prompts.h"
#include "cli/bench_report.h"
#include "cli/default_model.h"
#include "cli/loaded_model.h"
#include "core/error.h"
#include "ops/op_profile.h"

namespace tokamak::cli {
namespace {

constexpr int32_t kDefaultNumPrompts = 32;
constexpr int32_t kDefaultInputLen = 128;

struct Latencies {
  std::optional<Summary> ttft, tpot, itl, e2e, queue;  // milliseconds
};

void check_config(const ThroughputConfig& c) {
  if (c.num_prompts && *c.num_prompts < 1) throw Error("--num-prompts must be at least 1");
  if (c.input_len && *c.input_len < 1) throw Error("--input-len must be at least 1");
  if (c.input_len && !c.prompts_file.empty()) {
    throw Error(
        "--input-len sets the length of random prompts; --prompts-file prompts are used "
        "as given");
  }
  if (c.output_len < 1) throw Error("--output-len must be at least 1");
  if (c.concurrency && *c.concurrency < 1) throw Error("--concurrency must be at least 1");
  if (!(c.temperature >= 0)) throw Error("--temperature must not be negative");
}

std::vector<std::vector<int32_t>> make_prompts(const ThroughputConfig& c, const Tokenizer& tok) {
  std::vector<std::vector<int32_t>> prompts;
  if (!c.prompts_file.empty()) {
    auto lines = read_prompts_file(c.prompts_file, tok);
    const size_t n = c.num_prompts ? static_cast<size_t>(*c.num_prompts) : lines.size();
    for (size_t i = 0; i < n; ++i) prompts.push_back(lines[i % lines.size()]);
    return prompts;
  }
  const auto vocabulary = prompt_vocabulary(tok);
  Rng rng(c.seed);
  for (int32_t i = 0; i < c.num_prompts.value_or(kDefaultNumPrompts); ++i) {
    prompts.push_back(random_prompt(tok, vocabulary, c.input_len.value_or(kDefaultInputLen), rng));
  }
  return prompts;
}

// Every request must have produced exactly `output_len` tokens and stopped on the length.
void check_outputs(const std::vector<TrackedRequest>& requests, int32_t output_len) {
  for (size_t i = 0; i < requests.size(); ++i) {
    const TrackedRequest& r = requests[i];
    const bool ok = r.finish == FinishReason::Length && r.metrics && r.tokens == output_len &&
                    r.metrics->output_tokens == output_len &&
                    r.metrics->token_times.size() == static_cast<size_t>(output_len) &&
                    r.metrics->prompt_tokens == r.prompt_tokens;
    if (ok) continue;
    throw Error(fmt::format(
        "benchmark request {} (engine id {}) ended with finish reason \"{}\"{} after {} streamed "
        "tokens ({} in its metrics, {} token times, prompt {} of {}); expected exactly {} and "
        "\"length\"",
        i, r.id, r.finish ? finish_reason_name(*r.finish) : "none",
        r.error.empty() ? "" : " (" + r.error + ")", r.tokens,
        r.metrics ? r.metrics->output_tokens : -1, r.metrics ? r.metrics->token_times.size() : 0,
        r.metrics ? r.metrics->prompt_tokens : -1, r.prompt_tokens, output_len));
  }
}

Latencies latencies(const std::vector<TrackedRequest>& requests) {
  std::vector<double> ttft, tpot, itl, e2e, queue;
  for (const TrackedRequest& r : requests) {
    const SampleMetrics& m = *r.metrics;
    ttft.push_back(to_ms(m.first_token - m.arrival));
    e2e.push_back(to_ms(m.finished - m.arrival));
    queue.push_back(to_ms(m.first_scheduled - m.arrival));
    if (m.output_tokens > 1) {
      tpot.push_back(to_ms(m.finished - m.first_token) / (m.output_tokens - 1));
    }
    for (size_t k = 1; k < m.token_times.size(); ++k) {
      itl.push_back(to_ms(m.token_times[k] - m.token_times[k - 1]));
    }
  }
  return {summarize(ttft), summarize(tpot), summarize(itl), summarize(e2e), summarize(queue)};
}

std::string percent(double part, double whole) {
  return whole > 0 ? fmt::format("{:.1f}%", 100 * part / whole) : "-";
}

}  // namespace

void run_throughput_bench(const ThroughputConfig& c) {
  check_config(c);
  EngineOptions opts = c.engine.engine_options();
  const std::string model_path = c.model.empty() ? default_model_path() : c.model;
  OpProfile profile;
  LoadedModel loaded = load_model(model_path, c.threads, c.affinity, 0, opts.max_batched_tokens,
                                  c.profile ? &profile : nullptr);
  tag_model(opts, *loaded.file);
  const Tokenizer& tok = *loaded.tokenizer;

  const auto prompts = make_prompts(c, tok);
  const size_t n = prompts.size();
  const size_t concurrency = std::min(n, static_cast<size_t>(c.concurrency.value_or(INT32_MAX)));
  opts.max_waiting = std::max(opts.max_waiting, concurrency);
  SamplingParams params;
  params.temperature = static_cast<float>(c.temperature);
  params.max_tokens = c.output_len;
  params.ignore_eos = true;

  Engine engine(*loaded.model, tok, opts);
  std::fprintf(stderr, "%s", engine_summary(engine.core(), loaded.threads).c_str());
  std::fprintf(stderr, "[bench] %zu requests, concurrency %zu, output %d tokens each\n", n,
               concurrency, c.output_len);

  BenchClient client(engine);
  size_t next = 0;
  const Clock::time_point start = Clock::now();
  while (true) {
    while (next < n && client.n_in_flight() < concurrency) {
      Request request{.prompt = prompts[next], .params = params};
      if (!params.greedy()) request.params.seed = c.seed + next;
      client.submit(std::move(request));
      ++next;
    }
    if (client.n_in_flight() == 0) break;
    const size_t before = client.n_in_flight();
    client.wait_until([&] { return client.n_in_flight() < before; });
  }
  const auto& requests = client.requests();
  check_outputs(requests, c.output_len);

  Clock::time_point end = start;
  int64_t prompt_tokens = 0;
  for (const TrackedRequest& r : requests) {
    end = std::max(end, r.metrics->finished);
    prompt_tokens += r.prompt_tokens;
  }
  const int64_t output_tokens = static_cast<int64_t>(n) * c.output_len;
  const double wall_s = to_ms(end - start) / 1000;
  const Latencies lat = latencies(requests);
  const EngineStats stats = idle_stats(engine);
  if (stats.output_tokens != output_tokens) {
    std::fprintf(
        stderr, "[bench] warning: the engine counts %lld output tokens, the requests %lld\n",
        static_cast<long long>(stats.output_tokens), static_cast<long long>(output_tokens));
  }
  const auto peak_rss = peak_resident_bytes();
  const int64_t slots_at_peak = stats.kv_slots_unused_at_peak + stats.kv_slots_used_at_peak;

  std::vector<TableRow> summary = {
      {"model", model_path},
      {"requests", fmt::format("{} (concurrency {})", n, concurrency)},
      {"prompt tokens", fmt::format("{} ({:.1f} per request)", prompt_tokens,
                                    static_cast<double>(prompt_tokens) / n)},
      {"output tokens", fmt::format("{} ({} per request)", output_tokens, c.output_len)},
      {"wall time", fmt::format("{:.3f} s", wall_s)},
      {"requests/s", fmt::format("{:.2f}", n / wall_s)},
      {"output tokens/s", fmt::format("{:.1f}", output_tokens / wall_s)},
      {"total tokens/s", fmt::format("{:.1f}", (prompt_tokens + output_tokens) / wall_s)},
  };
  std::vector<TableRow> latency = {
      latency_header(),
      latency_row("TTFT (ms)", lat.ttft),
      latency_row("TPOT (ms)", lat.tpot),
      latency_row("ITL (ms)", lat.itl),
      latency_row("E2E latency (ms)", lat.e2e),
      latency_row("queue time (ms)", lat.queue),
  };
  std::vector<TableRow> engine_rows = {
      {"KV blocks peak / total",
       fmt::format("{} / {} ({})", stats.kv_blocks_peak, stats.kv_blocks_total,
                   percent(stats.kv_blocks_peak, stats.kv_blocks_total))},
      {"KV slots unused at peak",
       fmt::format("{} ({} unused, {} used)", percent(stats.kv_slots_unused_at_peak, slots_at_peak),
                   stats.kv_slots_unused_at_peak, stats.kv_slots_used_at_peak)},
      {"preemptions", fmt::format("{}", stats.preemptions)},
      {"swaps out / in (tokens recomputed)",
       fmt::format("{} / {} ({})", stats.swaps_out, stats.swaps_in, stats.swap_lost_tokens)},
      {"prompt tokens computed (recomputation included)",
       fmt::format("{}", stats.prompt_tokens_computed)},
      {"KV tier blocks stored / hit (host, disk)",
       fmt::format("{} / {}, {} / {}", stats.kv_tiers.host_stores, stats.kv_tiers.host_hits,
                   stats.kv_tiers.disk_stores, stats.kv_tiers.disk_hits)},
      {"prefix cache hits / queries (tokens)",
       fmt::format("{} / {} ({})", stats.prefix_cache_hits, stats.prefix_cache_queries,
                   percent(stats.prefix_cache_hits, stats.prefix_cache_queries))},
      {"engine steps", fmt::format("{}", stats.steps)},
      {"peak resident memory", format_mib(peak_rss)},
      // What a decode floor is computed from (docs/BENCHMARKS.md): bytes read per token.
      {"decode reads per token",
       fmt::format("{:.1f} MB of weights + {:.0f} B of KV per token of context",
                   static_cast<double>(loaded.model->decode_weight_bytes()) / 1e6,
                   engine.core().kv_cache().bytes_per_token())},
      // And a prefill floor, from its arithmetic.
      {"prefill FLOPs",
       fmt::format("{:.1f} MFLOP per token of matmuls + {:.0f} FLOP per (query, key) pair",
                   static_cast<double>(loaded.model->matmul_flops_per_token()) / 1e6,
                   static_cast<double>(loaded.model->attention_flops_per_pair()))},
  };
  std::printf("\n== tokamak bench throughput ==\n%s\n%s\n%s",
              format_table(summary, Align::Left).c_str(), format_table(latency).c_str(),
              format_table(engine_rows, Align::Left).c_str());
  if (c.profile)
    std::printf("\nprofile (wall time of each op, threads included)\n%s", profile.report().c_str());
  std::fflush(stdout);

  if (c.json_path.empty()) return;
  nlohmann::json doc = {
      {"bench", "throughput"},
      {"model", model_path},
      {"threads", loaded.threads},
      {"config",
       {{"num_prompts", n},
        {"input_len",
         c.prompts_file.empty() ? nlohmann::json(c.input_len.value_or(kDefaultInputLen)) : nullptr},
        {"prompts_file", c.prompts_file.empty() ? nullptr : nlohmann::json(c.prompts_file)},
        {"output_len", c.output_len},
        {"concurrency", concurrency},
        {"seed", c.seed},
        {"temperature", c.temperature}}},
      {"engine", engine_json(engine.core())},
      {"wall_s", wall_s},
      {"prompt_tokens", prompt_tokens},
      {"output_tokens", output_tokens},
      {"requests_per_s", n / wall_s},
      {"output_tokens_per_s", output_tokens / wall_s},
      {"total_tokens_per_s", (prompt_tokens + output_tokens) / wall_s},
      {"ttft_ms", to_json(lat.ttft)},
      {"tpot_ms", to_json(lat.tpot)},
      {"itl_ms", to_json(lat.itl)},
      {"e2e_ms", to_json(lat.e2e)},
      {"queue_ms", to_json(lat.queue)},
      {"kv_blocks_total", stats.kv_blocks_total},
      {"kv_blocks_peak", stats.kv_blocks_peak},
      {"kv_slots_unused_at_peak", stats.kv_slots_unused_at_peak},
      {"kv_slots_used_at_peak", stats.kv_slots_used_at_peak},
      {"preemptions", stats.preemptions},
      {"swaps_out", stats.swaps_out},
      {"swaps_in", stats.swaps_in},
      {"swap_lost_tokens", stats.swap_lost_tokens},
      {"prompt_tokens_computed", stats.prompt_tokens_computed},
      {"kv_tier_host_stores", stats.kv_tiers.host_stores},
      {"kv_tier_host_hits", stats.kv_tiers.host_hits},
      {"kv_tier_disk_stores", stats.kv_tiers.disk_stores},
      {"kv_tier_disk_hits", stats.kv_tiers.disk_hits},
      {"prefix_cache_queries", stats.prefix_cache_queries},
      {"prefix_cache_hits", stats.prefix_cache_hits},
      {"engine_steps", stats.steps},
      {"peak_resident_bytes", peak_rss ? nlohmann::json(*peak_rss) : nullptr},
      {"decode_weight_bytes", loaded.model->decode_weight_bytes()},
      {"matmul_flops_per_token", loaded.model->matmul_flops_per_token()},
      {"attention_flops_per_pair", loaded.model->attention_flops_per_pair()},
  };
  write_json(c.json_path, doc);
  std::fprintf(stderr, "[bench] wrote %s\n", c.json_path.c_str());
}

}  // namespace tokamak::cli
