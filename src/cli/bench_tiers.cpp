#include "cli/bench_tiers.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "cli/bench_prompts.h"
#include "cli/bench_report.h"
#include "cli/default_model.h"
#include "cli/loaded_model.h"
#include "core/error.h"

namespace tokamak::cli {
namespace {

namespace fs = std::filesystem;

enum Case { kRecomputed, kPool, kHost, kDisk, kCases };
constexpr const char* kCaseNames[kCases] = {"recomputed", "pool", "host", "disk"};

// TTFT of one request run alone on `core` (idle), in ms; throws if it fails.
double ttft_ms(EngineCore& core, const std::vector<int32_t>& prompt, uint64_t id) {
  Request r;
  r.prompt = prompt;
  r.params.temperature = 0;
  r.params.max_tokens = 1;
  r.params.ignore_eos = true;
  const Clock::time_point start = Clock::now();
  core.add_request(id, std::move(r), start);
  std::vector<RequestOutput> out;
  std::optional<double> ttft;
  while (core.step(out)) {
    for (const RequestOutput& o : out) {
      if (!o.error.empty()) throw Error("bench tiers: request failed: " + o.error);
      if (!ttft && !o.token_ids.empty()) ttft = to_ms(o.time - start);
    }
    out.clear();
  }
  if (!ttft) throw Error("bench tiers: the request made no token");
  return *ttft;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

void run_tiers_bench(const TiersBenchConfig& c) {
  if (c.input_len < 2) throw Error("--input-len must be at least 2");
  if (c.repeats < 1) throw Error("--repeats must be at least 1");
  EngineFlags flags = c.engine;
  if (flags.kv_host_bytes.empty()) flags.kv_host_bytes = "1G";
  std::optional<fs::path> temp_dir;
  if (flags.kv_disk_dir.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "tokamak_bench_tiers_XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw Error("bench tiers: cannot make a temporary dir");
    temp_dir = tmpl;
    flags.kv_disk_dir = tmpl;
    if (flags.kv_disk_bytes.empty()) flags.kv_disk_bytes = "4G";
  }
  EngineOptions opts = flags.engine_options();
  opts.max_batched_tokens = std::max(opts.max_batched_tokens, c.input_len);

  const std::string model_path = c.model.empty() ? default_model_path() : c.model;
  LoadedModel loaded = load_model(model_path, c.threads, c.affinity, 0, opts.max_batched_tokens);
  tag_model(opts, *loaded.file);
  const Tokenizer& tok = *loaded.tokenizer;
  EngineCore core(*loaded.model, tok, opts);
  std::fprintf(stderr, "%s", engine_summary(core, loaded.threads).c_str());

  const auto vocabulary = prompt_vocabulary(tok);
  Rng rng(c.seed);
  const int64_t full_blocks = c.input_len / core.kv_cache().block_size();
  std::vector<double> ms[kCases];
  uint64_t id = 1;
  // One warm-up request so that first-touch page faults of weights and pool are not timed.
  ttft_ms(core, random_prompt(tok, vocabulary, c.input_len, rng), id++);
  core.clear_prefix_cache();
  core.flush_host_tier();
  for (int32_t r = 0; r < c.repeats; ++r) {
    const std::vector<int32_t> prompt = random_prompt(tok, vocabulary, c.input_len, rng);
    ms[kRecomputed].push_back(ttft_ms(core, prompt, id++));
    ms[kPool].push_back(ttft_ms(core, prompt, id++));
    core.clear_prefix_cache();  // pool -> host
    const int64_t host_hits = core.stats().kv_tiers.host_hits;
    ms[kHost].push_back(ttft_ms(core, prompt, id++));
    if (core.stats().kv_tiers.host_hits - host_hits != full_blocks) {
      throw Error("bench tiers: the host case did not take every block from host memory");
    }
    core.clear_prefix_cache();  // pool -> host
    core.flush_host_tier();     // host -> disk
    const int64_t disk_hits = core.stats().kv_tiers.disk_hits;
    ms[kDisk].push_back(ttft_ms(core, prompt, id++));
    if (core.stats().kv_tiers.disk_hits - disk_hits != full_blocks) {
      throw Error("bench tiers: the disk case did not take every block from disk");
    }
    core.clear_prefix_cache();
    core.flush_host_tier();
    std::fprintf(stderr, "[bench] repeat %d of %d done\n", r + 1, c.repeats);
  }

  const size_t block_bytes = core.kv_cache().shape().bytes_per_block();
  std::vector<TableRow> rows = {{"prefix", "TTFT median (ms)", "min", "max", "runs"}};
  nlohmann::json cases = nlohmann::json::object();
  for (int k = 0; k < kCases; ++k) {
    std::string runs;
    for (double v : ms[k]) runs += fmt::format("{}{:.1f}", runs.empty() ? "" : " ", v);
    rows.push_back({kCaseNames[k], fmt::format("{:.1f}", median(ms[k])),
                    fmt::format("{:.1f}", *std::min_element(ms[k].begin(), ms[k].end())),
                    fmt::format("{:.1f}", *std::max_element(ms[k].begin(), ms[k].end())), runs});
    cases[kCaseNames[k]] = {{"ttft_ms", ms[k]}, {"median_ms", median(ms[k])}};
  }
  std::printf(
      "\n== tokamak bench tiers ==\n"
      "%d-token prompt (%lld full blocks of %d tokens, %.1f MiB of KV), 1 output token, %d "
      "repeats\n\n%s",
      c.input_len, (long long)full_blocks, core.kv_cache().block_size(),
      double(full_blocks) * double(block_bytes) / (1024.0 * 1024.0), c.repeats,
      format_table(rows).c_str());
  std::fflush(stdout);
  if (temp_dir) fs::remove_all(*temp_dir);
  if (c.json_path.empty()) return;
  nlohmann::json doc = {{"bench", "tiers"},
                        {"model", model_path},
                        {"threads", loaded.threads},
                        {"input_len", c.input_len},
                        {"repeats", c.repeats},
                        {"engine", engine_json(core)},
                        {"cases", cases}};
  write_json(c.json_path, doc);
}

}  // namespace tokamak::cli
