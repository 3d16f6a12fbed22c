#include "cli/engine_flags.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>

#include "core/error.h"
#include "engine/engine_core.h"
#include "format/gguf_identity.h"
#include "kv/paged_kv_cache.h"

namespace tokamak::cli {
namespace {

// Bytes for a size flag (--swap-space, --kv-host-bytes, ...): a size, never a share of
// free memory.
size_t parse_size(const char* flag, const std::string& text) {
  const auto reject = [&] {
    throw Error(
        fmt::format("invalid {} \"{}\": expected a size in bytes such as \"4G\", \"512M\" or "
                    "\"1073741824\"",
                    flag, text));
  };
  KVBudget budget;
  try {
    budget = KVBudget::parse_memory(text);
  } catch (const Error&) {
    reject();
  }
  if (budget.kind != KVBudget::Kind::Bytes) reject();
  return static_cast<size_t>(budget.value);
}

// validate() names options by their field ("block_size must be ..."); users know the flag.
std::string name_flag(const std::string& problem) {
  for (const char* field : {"block_size", "max_batched_tokens", "max_seqs", "max_model_len",
                            "lpm_max_bypass", "kv_window", "kv_sink", "kv_heavy",
                            "kv_hot_window"}) {
    const std::string prefix = std::string(field) + " ";
    if (problem.starts_with(prefix)) {
      std::string flag = "--" + std::string(field);
      std::replace(flag.begin(), flag.end(), '_', '-');
      return flag + problem.substr(prefix.size() - 1);
    }
  }
  return problem;
}

std::string format_bytes(double bytes) {
  if (bytes < 1024) return fmt::format("{:.0f} B", bytes);
  if (bytes < 1024.0 * 1024) return fmt::format("{:.2f} KiB", bytes / 1024);
  if (bytes < 1024.0 * 1024 * 1024) return fmt::format("{:.2f} MiB", bytes / (1024.0 * 1024));
  return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024 * 1024));
}

// "KV tiers: host 2.00 GiB, disk 20.00 GiB in DIR (N blocks reused, M rejected)\n" or "".
std::string tiers_line(const EngineCore& core) {
  const KVTierOptions& t = core.options().kv_tiers;
  if (!t.any()) return "";
  std::string out = "KV tiers: host " +
                    (t.host_bytes > 0 ? format_bytes(double(t.host_bytes)) : std::string("off"));
  if (!t.disk_dir.empty()) {
    const KVTierStats s = core.stats().kv_tiers;
    out += fmt::format(", disk {} in {} ({} blocks found, {} files rejected)",
                       format_bytes(double(t.disk_bytes)), t.disk_dir, s.disk_entries,
                       s.disk_rejected);
  }
  return out + "\n";
}

}  // namespace

void EngineFlags::add_to(CLI::App& cmd) {
  cmd.add_option("--kv-memory", kv_memory,
                 "KV cache memory: bytes with a K/M/G suffix (\"4G\") or a share of free memory "
                 "(\"0.3\", \"30%\"); default 25% of free memory");
  cmd.add_option("--kv-tokens", kv_tokens, "KV cache size in tokens (instead of --kv-memory)");
  cmd.add_option("--kv-dtype", kv_dtype,
                 std::string("element type of the KV cache: ") + std::string(kv_dtype_choices()) +
                     ", or one for keys and one for values: int8,q4 (q4 keys are quantized per "
                     "channel across each block, the block being filled kept in f16)")
      ->capture_default_str();
  cmd.add_option("--kv-hot-window", kv_hot_window,
                 "with a quantized --kv-dtype: keep each sequence's newest N tokens (whole blocks) "
                 "in f16 too, encoding blocks as they leave (hot/cold); 0 = only what the dtype "
                 "needs")
      ->capture_default_str();
  cmd.add_option("--block-size", block_size, "tokens per KV block")->capture_default_str();
  cmd.add_option("--max-batched-tokens", max_batched_tokens,
                 "most tokens computed in one engine step")
      ->capture_default_str();
  cmd.add_option("--max-seqs", max_seqs, "most sequences running at once")->capture_default_str();
  cmd.add_flag("--no-chunked-prefill", no_chunked_prefill,
               "compute each prompt in one step instead of splitting it across steps");
  cmd.add_option("--preemption", preemption,
                 "what happens to a preempted sequence's KV: recompute | swap")
      ->capture_default_str();
  cmd.add_option("--swap-space", swap_space,
                 "host memory for swapped-out KV blocks with --preemption swap (default 4G)");
  cmd.add_option("--max-model-len", max_model_len,
                 "context limit per sequence, prompt + output (0 = the model's)")
      ->capture_default_str();
  cmd.add_flag("--no-prefix-cache", no_prefix_cache,
               "compute every prompt in full instead of reusing the KV of cached prefixes");
  cmd.add_option("--kv-host-bytes", kv_host_bytes,
                 "host memory for cached KV blocks evicted from the pool (\"2G\"; default 0: "
                 "none); with --preemption swap, swapped blocks share it (instead of "
                 "--swap-space)");
  cmd.add_option("--kv-disk-dir", kv_disk_dir,
                 "directory for cached KV blocks pushed out of host memory, reused after a "
                 "restart by the same model (default: none)");
  cmd.add_option("--kv-disk-bytes", kv_disk_bytes,
                 "most bytes of KV block files in --kv-disk-dir (\"20G\")");
  cmd.add_option("--schedule-policy", schedule_policy,
                 "order of admission among waiting requests: fcfs | lpm (longest cached "
                 "prefix first)")
      ->capture_default_str();
  cmd.add_option("--kv-window", kv_window,
                 "keep only the last N tokens of each sequence (plus --kv-sink first ones) in the "
                 "KV cache, sliding as it grows, so generations may run past the context "
                 "(StreamingLLM); 0 = off")
      ->capture_default_str();
  cmd.add_option("--kv-sink", kv_sink,
                 "with --kv-window: leading tokens always kept (attention sinks; whole blocks)")
      ->capture_default_str();
  cmd.add_option("--kv-heavy", kv_heavy,
                 "with --kv-window: this many of the window's tokens (whole blocks) are kept for "
                 "the attention they received, not their age (H2O heavy hitters); 0 = off")
      ->capture_default_str();
  cmd.add_option("--lpm-max-bypass", lpm_max_bypass,
                 "with --schedule-policy lpm: a request overtaken this many times goes first")
      ->capture_default_str();
}

EngineOptions EngineFlags::engine_options() const {
  EngineOptions opts;
  if (!kv_memory.empty() && kv_tokens) {
    throw Error("give the KV cache size with --kv-memory or --kv-tokens, not both");
  }
  if (!kv_memory.empty()) opts.kv_budget = KVBudget::parse_memory(kv_memory);
  if (kv_tokens) opts.kv_budget = KVBudget::tokens(*kv_tokens);

  const std::optional<KVDTypes> dtype = kv_dtypes_from_name(kv_dtype);
  if (!dtype) {
    throw Error(fmt::format(
        "invalid --kv-dtype \"{}\": expected one of {}, or KEYS,VALUES such as int8,q4",
        kv_dtype, kv_dtype_choices()));
  }
  opts.kv_dtype = *dtype;
  opts.block_size = block_size;
  opts.max_batched_tokens = max_batched_tokens;
  opts.max_seqs = max_seqs;
  opts.chunked_prefill = !no_chunked_prefill;
  opts.max_model_len = max_model_len;

  if (preemption == "recompute") {
    opts.preemption = PreemptionMode::Recompute;
  } else if (preemption == "swap") {
    opts.preemption = PreemptionMode::Swap;
  } else {
    throw Error(fmt::format("invalid --preemption \"{}\": expected recompute or swap", preemption));
  }
  opts.prefix_caching = !no_prefix_cache;
  if (schedule_policy == "fcfs") {
    opts.schedule_policy = SchedulePolicy::Fcfs;
  } else if (schedule_policy == "lpm") {
    opts.schedule_policy = SchedulePolicy::Lpm;
  } else {
    throw Error(
        fmt::format("invalid --schedule-policy \"{}\": expected fcfs or lpm", schedule_policy));
  }
  if (opts.schedule_policy == SchedulePolicy::Lpm && !opts.prefix_caching) {
    throw Error("--schedule-policy lpm needs the prefix cache (drop --no-prefix-cache)");
  }
  opts.lpm_max_bypass = lpm_max_bypass;
  opts.kv_window = kv_window;
  opts.kv_sink = kv_sink;
  opts.kv_heavy = kv_heavy;
  opts.kv_hot_window = kv_hot_window;
  if (!swap_space.empty()) {
    if (opts.preemption != PreemptionMode::Swap) {
      throw Error("--swap-space is used only with --preemption swap");
    }
    opts.swap_space_bytes = parse_size("--swap-space", swap_space);
  }
  if (!kv_host_bytes.empty()) {
    opts.kv_tiers.host_bytes = parse_size("--kv-host-bytes", kv_host_bytes);
    if (opts.kv_tiers.host_bytes > 0 && !swap_space.empty()) {
      throw Error(
          "--swap-space and --kv-host-bytes both bound host memory for KV: with a host tier, "
          "swapped blocks share --kv-host-bytes; drop --swap-space");
    }
  }
  if (!kv_disk_dir.empty() && kv_disk_bytes.empty()) {
    throw Error("--kv-disk-dir needs --kv-disk-bytes (the most bytes the directory may hold)");
  }
  if (kv_disk_dir.empty() && !kv_disk_bytes.empty()) {
    throw Error("--kv-disk-bytes is used only with --kv-disk-dir");
  }
  opts.kv_tiers.disk_dir = kv_disk_dir;
  if (!kv_disk_bytes.empty()) {
    opts.kv_tiers.disk_bytes = parse_size("--kv-disk-bytes", kv_disk_bytes);
    if (opts.kv_tiers.disk_bytes == 0) throw Error("--kv-disk-bytes must be positive");
  }
  if (opts.kv_tiers.any() && !opts.prefix_caching) {
    throw Error(
        "--kv-host-bytes and --kv-disk-dir hold the prefix cache's evicted blocks: "
        "drop --no-prefix-cache");
  }
  if (auto problem = validate(opts)) throw Error(name_flag(*problem));
  return opts;
}

void tag_model(EngineOptions& opts, const gguf::File& file) {
  if (!opts.kv_tiers.disk_dir.empty()) opts.kv_tiers.model_identity = gguf::content_identity(file);
}

std::string engine_summary(const EngineCore& core, int n_threads) {
  const PagedKVCache& kv = core.kv_cache();
  const KVCacheShape& shape = kv.shape();
  const EngineOptions& opts = core.options();
  const int64_t tokens = int64_t{kv.n_blocks()} * kv.block_size();
  std::string out =
      fmt::format("KV pool: {} blocks x {} tokens = {} tokens, {} (budget: {})\n", kv.n_blocks(),
                  kv.block_size(), tokens, format_bytes(static_cast<double>(kv.total_bytes())),
                  opts.kv_budget.describe());

  // The formula, with the element sizes of the dtypes and their scales, from the cache's own
  // figures so that the line cannot drift from what was allocated.
  const size_t element_bytes = shape.element_bytes_per_token();
  const size_t scale_bytes = shape.scale_bytes_per_block();
  const std::string dtype = kv_dtypes_name(shape.dtype);
  const auto bytes_of = [](KVDType d) {
    const double b = static_cast<double>(kv_row_bytes(d, 64)) / 64;
    return fmt::format("{:g} {}", b, b == 1.0 ? "byte" : "bytes");
  };
  std::string elements;
  if (shape.dtype.k == shape.dtype.v && shape.head_dim_k == shape.head_dim_v) {
    elements =
        fmt::format("2 (K and V) x {} layers x {} kv-heads x {} head-dim x {} ({})", shape.n_layer,
                    shape.n_head_kv, shape.head_dim_k, bytes_of(shape.dtype.k), dtype);
  } else {
    elements =
        fmt::format("{} layers x {} kv-heads x ({} K head-dim x {} ({}) + {} V head-dim x {} ({}))",
                    shape.n_layer, shape.n_head_kv, shape.head_dim_k, bytes_of(shape.dtype.k),
                    kv_dtype_name(shape.dtype.k), shape.head_dim_v, bytes_of(shape.dtype.v),
                    kv_dtype_name(shape.dtype.v));
  }
  if (scale_bytes == 0) {
    out += fmt::format("KV bytes per token = {} = {} B\n", elements, element_bytes);
  } else {
    out += fmt::format(
        "KV bytes per token = {} = {} B, + {} B of scales per {}-token block = {:.2f} B\n",
        elements, element_bytes, scale_bytes, shape.block_size, kv.bytes_per_token());
  }
  if (const PagedKVCache* hot = kv.hot()) {
    out += fmt::format(
        "KV hot window: each sequence's newest {} blocks ({} tokens) also in f16: {} hot blocks "
        "= {} for {} sequences\n",
        kv.hot_window_blocks(), kv.hot_window_blocks() * shape.block_size, hot->n_blocks(),
        format_bytes(static_cast<double>(hot->total_bytes())), opts.max_seqs);
  }
  out += fmt::format(
      "max model len {} tokens, max batched tokens {}, max seqs {}, chunked prefill {}, "
      "preemption {}, prefix cache {}, schedule {}, {} threads\n{}",
      core.max_model_len(), opts.max_batched_tokens, opts.max_seqs,
      opts.chunked_prefill ? "on" : "off", preemption_mode_name(opts.preemption),
      opts.prefix_caching ? "on" : "off", schedule_policy_name(opts.schedule_policy), n_threads,
      tiers_line(core));
  if (opts.kv_window > 0) {
    out += fmt::format(
        "KV window: {} sink tokens + the last {} tokens per sequence (positions in the cache); "
        "sequences may grow past max model len\n",
        (opts.kv_sink + kv.block_size() - 1) / kv.block_size() * kv.block_size(), opts.kv_window);
    if (opts.kv_heavy > 0) {
      out += fmt::format("KV heavy hitters: {} of the window's tokens kept by attention received\n",
                         opts.kv_heavy / kv.block_size() * kv.block_size());
    }
  }
  return out;
}

void add_thread_flags(CLI::App& cmd, int& threads, std::string& affinity) {
  cmd.add_option("-t,--threads", threads, "kernel threads (0 = one per CPU this process may use)")
      ->check(CLI::Range(0, 1024));
  cmd.add_option("--affinity", affinity,
                 "pin kernel threads to CPUs: none, auto (the CPUs this process may use, in "
                 "order) or a list such as 0-3,8 (thread i on the i-th)")
      ->capture_default_str();
}

}  // namespace tokamak::cli
