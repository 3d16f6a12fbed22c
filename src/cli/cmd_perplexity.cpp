// tokamak perplexity: a model's perplexity on a text file through the serving engine's paged
// KV cache (so --kv-dtype is what is judged), in one of two modes:
//   fixed windows (--ctx, --stride), each from an empty cache: engine/perplexity;
//   one stream whose cache a sliding KV window bounds (--kv-window, --kv-sink, --chunk), or
//   a full cache (--stream): engine/perplexity_stream, so --kv-window is what is judged.
// This file reads the flags and the text and prints the result.

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/bench_report.h"
#include "cli/commands.h"
#include "cli/default_model.h"
#include "cli/engine_flags.h"
#include "cli/loaded_model.h"
#include "core/error.h"
#include "engine/kv_window.h"
#include "engine/kv_layout.h"
#include "engine/perplexity.h"
#include "engine/perplexity_stream.h"
#include "model/model_options.h"

namespace tokamak::cli {
namespace {

struct PerplexityFlags {
  std::string model;  // empty = the default model
  std::string text_file;
  int32_t ctx = 512;
  int32_t stride = 0;     // 0 = ctx / 2
  int32_t kv_window = 0;  // > 0: the streaming mode, through a sliding KV window
  int32_t kv_sink = 4;    // the serving engine's default
  int32_t kv_heavy = 0;   // with a window: tokens kept by attention received (H2O)
  bool stream = false;    // the streaming mode (with a full cache unless --kv-window)
  int32_t chunk = 0;      // when --chunk is not given: the block size
  int64_t max_tokens = 0;
  std::string kv_dtype = "f16";
  int32_t kv_hot_window = 0;
  int threads = 0;
  std::string affinity = "none";  // --affinity (core/cpu_affinity.h)
  std::string json_path;
  // Flags of one mode only, when given on the command line.
  bool ctx_given = false;
  bool stride_given = false;
  bool sink_given = false;
  bool chunk_given = false;
};

// Tokens per KV block in both modes.
const int32_t kBlockSize = PerplexityOptions{}.block_size;
// Largest --kv-window and --kv-sink taken (as `tokamak serve` takes them: engine_options).
constexpr int32_t kMaxWindow = 1 << 24;
constexpr int32_t kMaxSink = 1 << 20;

// What the flags ask for.
struct PerplexityPlan {
  bool stream = false;
  PerplexityOptions windows;     // the fixed-window mode
  StreamPerplexityOptions opts;  // the streaming mode
  int32_t kv_window = 0;         // streaming: 0 = a full cache
  int32_t kv_sink = 0;           // streaming with a window: tokens asked for
  int32_t kv_heavy = 0;          // streaming with a window: heavy-hitter tokens
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open text file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The streaming mode's flags, checked; --ctx and --stride belong to the other mode.
void check_stream_flags(const PerplexityFlags& f, bool stream) {
  if (f.kv_window < 0 || f.kv_window > kMaxWindow) {
    throw Error(
        fmt::format("--kv-window must be in [0, {}] (0 = off), got {}", kMaxWindow, f.kv_window));
  }
  if (f.kv_window > 0 && f.kv_window < kBlockSize) {
    throw Error(fmt::format(
        "--kv-window {} is smaller than one KV block ({} tokens): the window drops whole blocks",
        f.kv_window, kBlockSize));
  }
  if (f.sink_given && f.kv_window == 0) {
    throw Error("--kv-sink needs --kv-window N (the sink is what the window always keeps)");
  }
  if (f.kv_sink < 0 || f.kv_sink > kMaxSink) {
    throw Error(fmt::format("--kv-sink must be in [0, {}], got {}", kMaxSink, f.kv_sink));
  }
  if (f.kv_heavy != 0 && f.kv_window == 0) {
    throw Error("--kv-heavy needs --kv-window N (heavy hitters are part of the window)");
  }
  if (f.kv_heavy < 0 || (f.kv_window > 0 && f.kv_heavy > f.kv_window - kBlockSize)) {
    throw Error(fmt::format(
        "--kv-heavy must be in [0, --kv-window - {}] (a recent block stays), got {}", kBlockSize,
        f.kv_heavy));
  }
  if (f.chunk_given && !stream) {
    throw Error("--chunk applies to the streaming mode only (--kv-window N or --stream)");
  }
  if (f.chunk_given && f.chunk < 1) {
    throw Error(fmt::format("--chunk must be at least 1, got {}", f.chunk));
  }
  if (stream && f.stride_given) {
    throw Error(
        "--stride applies to fixed windows only: the streaming mode (--kv-window or --stream) "
        "runs the text as one stream, every token scored once");
  }
  if (stream && f.ctx_given) {
    throw Error(
        "--ctx applies to fixed windows only: in the streaming mode the context is what the "
        "cache holds (--kv-sink + --kv-window, or the whole text with --stream)");
  }
}

// Checks the flags that need no model, so that a bad command line fails before a load.
PerplexityPlan perplexity_plan(const PerplexityFlags& f) {
  if (f.text_file.empty()) throw Error("give the text to score with -f FILE");
  const std::optional<KVDTypes> dtype = kv_dtypes_from_name(f.kv_dtype);
  if (!dtype) {
    throw Error(
        fmt::format("invalid --kv-dtype \"{}\": expected one of {}, or KEYS,VALUES such as int8,q4",
                    f.kv_dtype, kv_dtype_choices()));
  }
  const bool stream = f.stream || f.kv_window > 0;
  check_stream_flags(f, stream);
  if (f.ctx < 2) throw Error(fmt::format("--ctx must be at least 2, got {}", f.ctx));
  if (f.stride < 0 || f.stride > f.ctx) {
    throw Error(
        fmt::format("--stride must be in [1, --ctx {}] (0 = ctx / 2), got {}", f.ctx, f.stride));
  }
  if (f.max_tokens < 0) throw Error("--max-tokens must not be negative (0 = all)");
  if (f.kv_hot_window < 0 || f.kv_hot_window > kMaxWindow) {
    throw Error(fmt::format("--kv-hot-window must be in [0, {}], got {}", kMaxWindow,
                            f.kv_hot_window));
  }
  if (f.kv_hot_window > 0 && !kv_dtype_is_quantized(dtype->k) && !kv_dtype_is_quantized(dtype->v)) {
    throw Error("--kv-hot-window needs a quantized --kv-dtype (int8, fp8 or q4)");
  }
  if (f.kv_window > 0 &&
      int64_t{hot_window_blocks(kBlockSize, *dtype, f.kv_hot_window)} * kBlockSize >
          f.kv_window - f.kv_heavy) {
    throw Error(
        "--kv-hot-window must fit in the window's recent tokens (--kv-window - --kv-heavy)");
  }
  return {
      .stream = stream,
      .windows = {.ctx = f.ctx,
                  .stride = f.stride,
                  .block_size = kBlockSize,
                  .kv_dtype = *dtype,
                  .kv_hot_window = f.kv_hot_window},
      .opts = {.chunk = f.chunk_given ? f.chunk : kBlockSize,
               .block_size = kBlockSize,
               .kv_dtype = *dtype,
               .kv_hot_window = f.kv_hot_window},
      .kv_window = f.kv_window,
      .kv_sink = f.kv_sink,
      .kv_heavy = f.kv_heavy,
  };
}

// "fixed windows, ctx 512, stride 256", "stream, KV window 512 + sink 16 tokens, chunk 16",
// "stream, full cache, chunk 16".
std::string mode_line(const PerplexityPlan& p, const KVWindow* window) {
  if (!p.stream) {
    return fmt::format("fixed windows, ctx {}, stride {}", p.windows.ctx,
                       p.windows.resolved_stride());
  }
  if (window == nullptr) return fmt::format("stream, full cache, chunk {}", p.opts.chunk);
  const std::string heavy =
      window->heavy_tokens() > 0
          ? fmt::format(" ({} of them heavy hitters)", window->heavy_tokens())
          : std::string();
  return fmt::format("stream, KV window {}{} + sink {} tokens, chunk {}", window->window(), heavy,
                     window->sink_tokens(), p.opts.chunk);
}

void run(const PerplexityFlags& f) {
  const PerplexityPlan plan = perplexity_plan(f);
  const PerplexityOptions& opts = plan.windows;
  std::optional<KVWindow> window;
  if (plan.kv_window > 0) window.emplace(plan.kv_window, plan.kv_sink, kBlockSize, plan.kv_heavy);
  const std::string mode = mode_line(plan, window ? &*window : nullptr);
  const std::string text = read_text(f.text_file);
  const std::string model_path = f.model.empty() ? default_model_path() : f.model;
  // A chunk is one forward: the model's buffers must hold it.
  const int32_t max_batch_tokens =
      plan.stream ? std::max(plan.opts.chunk, ModelOptions{}.max_batch_tokens) : 0;
  const LoadedModel loaded = load_model(model_path, f.threads, f.affinity, 0, max_batch_tokens);

  std::vector<int32_t> tokens =
      loaded.tokenizer->encode(text, /*add_special=*/true, /*parse_special=*/false);
  const auto text_tokens = static_cast<int64_t>(tokens.size());
  if (f.max_tokens > 0 && text_tokens > f.max_tokens) {
    tokens.resize(static_cast<size_t>(f.max_tokens));
  }
  std::fprintf(stderr, "[perplexity] %s: %lld tokens, scoring %zu (%s, kv %s)\n",
               f.text_file.c_str(), static_cast<long long>(text_tokens), tokens.size(),
               mode.c_str(), f.kv_dtype.c_str());

  // On a terminal, one line rewritten after every window (chunk); in a log, nothing until
  // the end.
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  const char* unit = plan.stream ? "chunk" : "window";
  const auto progress = [tty, unit](int64_t done, const PerplexityResult& r) {
    if (!tty) return;
    const int64_t total = r.n_chunks > 0 ? r.n_chunks : r.n_windows;
    std::fprintf(stderr, "\r[perplexity] %s %lld/%lld: perplexity %.4f, %.1f tokens/s", unit,
                 static_cast<long long>(done), static_cast<long long>(total), r.perplexity(),
                 r.tokens_per_s());
    if (done == total) std::fputc('\n', stderr);
  };
  const PerplexityResult r = plan.stream
                                 ? compute_stream_perplexity(*loaded.model, tokens, plan.opts,
                                                             window ? &*window : nullptr, progress)
                                 : compute_perplexity(*loaded.model, tokens, opts, progress);

  // As stored (q4 keys are q4c, engine/kv_layout.h).
  const std::string dtype = kv_dtypes_name(stored_kv_dtypes(opts.kv_dtype));
  const int32_t hot_blocks = hot_window_blocks(kBlockSize, opts.kv_dtype, opts.kv_hot_window);
  std::vector<TableRow> rows = {
      {"model", model_path},
      {"file", f.text_file},
      {"mode", mode},
      {"tokens used", fmt::format("{} (of {} in the file)", r.n_tokens, text_tokens)},
  };
  if (plan.stream) {
    rows.push_back({"chunks", fmt::format("{} of {} tokens", r.n_chunks, plan.opts.chunk)});
    rows.push_back({"evicted tokens", fmt::format("{}", r.n_evicted)});
    rows.push_back({"peak KV cache", fmt::format("{} blocks ({} token slots)", r.peak_cache_blocks,
                                                 r.peak_cache_blocks * kBlockSize)});
  } else {
    rows.push_back({"windows", fmt::format("{} (ctx {}, stride {})", r.n_windows, opts.ctx,
                                           opts.resolved_stride())});
  }
  const std::vector<TableRow> results = {
      {"scored tokens", fmt::format("{}", r.n_scored)},
      {"mean NLL", fmt::format("{:.6f} nats", r.mean_nll())},
      {"perplexity", fmt::format("{:.4f}", r.perplexity())},
      {"tokens/s", fmt::format("{:.1f} ({} tokens through the model in {:.2f} s)", r.tokens_per_s(),
                               r.n_evaluated, r.seconds)},
      {"KV dtype", hot_blocks > 0 ? fmt::format("{}, the newest {} tokens also f16 (hot window)",
                                                dtype, hot_blocks * kBlockSize)
                                  : dtype},
      {"threads", fmt::format("{}", loaded.threads)},
  };
  rows.insert(rows.end(), results.begin(), results.end());
  std::printf("== tokamak perplexity ==\n%s", format_table(rows, Align::Left).c_str());
  std::fflush(stdout);

  if (f.json_path.empty()) return;
  nlohmann::json doc = {
      {"model", model_path},
      {"file", f.text_file},
      {"mode", plan.stream ? "stream" : "fixed_windows"},
      {"text_tokens", text_tokens},
      {"tokens", r.n_tokens},
      {"scored_tokens", r.n_scored},
      {"evaluated_tokens", r.n_evaluated},
      {"mean_nll", r.mean_nll()},
      {"perplexity", r.perplexity()},
      {"seconds", r.seconds},
      {"tokens_per_s", r.tokens_per_s()},
      {"kv_dtype", dtype},
      {"kv_hot_window_tokens", hot_blocks * kBlockSize},
      {"threads", loaded.threads},
  };
  if (plan.stream) {
    // kv_window 0: a full cache.
    doc["kv_window"] = plan.kv_window;
    doc["kv_sink"] = window ? plan.kv_sink : 0;
    doc["kv_sink_tokens"] = window ? window->sink_tokens() : 0;  // in whole blocks
    doc["kv_heavy_tokens"] = window ? window->heavy_tokens() : 0;  // in whole blocks
    doc["chunk"] = plan.opts.chunk;
    doc["chunks"] = r.n_chunks;
    doc["block_size"] = kBlockSize;
    doc["evicted_tokens"] = r.n_evicted;
    doc["peak_kv_blocks"] = r.peak_cache_blocks;
  } else {
    doc["ctx"] = opts.ctx;
    doc["stride"] = opts.resolved_stride();
    doc["windows"] = r.n_windows;
  }
  write_json(f.json_path, doc);
  std::fprintf(stderr, "[perplexity] wrote %s\n", f.json_path.c_str());
}

}  // namespace

void add_perplexity_command(CLI::App& app) {
  auto f = std::make_shared<PerplexityFlags>();
  auto* cmd = app.add_subcommand(
      "perplexity",
      "perplexity of a model on a text file, by fixed windows or as one stream through a "
      "sliding KV window, over the paged KV cache");
  cmd->add_option("-m,--model", f->model,
                  "GGUF model file (default: the SmolLM2-135M-Instruct Q4_1 model in models/)");
  cmd->add_option("-f,--file", f->text_file,
                  "text file to score (e.g. from "
                  "scripts/perplexity_text.py)");
  CLI::Option* ctx =
      cmd->add_option("--ctx", f->ctx, "fixed windows: tokens per window")->capture_default_str();
  CLI::Option* stride =
      cmd->add_option("--stride", f->stride,
                      "fixed windows: tokens between window starts; each window scores the "
                      "tokens the previous one did not reach (default ctx / 2)");
  cmd->add_option("--kv-window", f->kv_window,
                  "streaming mode: run the text as one stream whose KV cache keeps only the "
                  "last N tokens (plus --kv-sink first ones), sliding as `serve --kv-window` "
                  "does; 0 = fixed windows")
      ->capture_default_str();
  CLI::Option* sink =
      cmd->add_option("--kv-sink", f->kv_sink,
                      "with --kv-window: leading tokens always kept (attention sinks; whole "
                      "blocks)")
          ->capture_default_str();
  cmd->add_option("--kv-heavy", f->kv_heavy,
                  "with --kv-window: this many of the window's tokens (whole blocks) are kept for "
                  "the attention they received, not their age (H2O heavy hitters)")
      ->capture_default_str();
  cmd->add_flag("--stream", f->stream,
                "streaming mode with a full cache (no eviction; the text must fit the "
                "model's context): the baseline of --kv-window");
  CLI::Option* chunk =
      cmd->add_option("--chunk", f->chunk,
                      "streaming mode: tokens per forward, evictions between them (default: "
                      "the block size, 16)");
  cmd->add_option("--max-tokens", f->max_tokens,
                  "use only the first N tokens of the text (0 = all)")
      ->capture_default_str();
  cmd->add_option("--kv-dtype", f->kv_dtype,
                  std::string("element type of the KV cache: ") + std::string(kv_dtype_choices()) +
                      ", or one for keys and one for values: int8,q4")
      ->capture_default_str();
  cmd->add_option("--kv-hot-window", f->kv_hot_window,
                  "with a quantized --kv-dtype: keep the newest N tokens (whole blocks) in f16 "
                  "too, as `serve --kv-hot-window` does")
      ->capture_default_str();
  add_thread_flags(*cmd, f->threads, f->affinity);
  cmd->add_option("--json", f->json_path, "also write the results as JSON to this file");
  cmd->callback([f, ctx, stride, sink, chunk] {
    f->ctx_given = ctx->count() > 0;
    f->stride_given = stride->count() > 0;
    f->sink_given = sink->count() > 0;
    f->chunk_given = chunk->count() > 0;
    run(*f);
  });
}

}  // namespace tokamak::cli
