// tokamak perplexity: a model's perplexity on a text file, by sliding windows through the
// serving engine's paged KV cache (so --kv-dtype is what is judged). The computation lives
// in engine/perplexity; this file reads the flags and the text and prints the result.

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
#include "engine/perplexity.h"

namespace tokamak::cli {
namespace {

struct PerplexityFlags {
  std::string model;  // empty = the default model
  std::string text_file;
  int32_t ctx = 512;
  int32_t stride = 0;  // 0 = ctx / 2
  int64_t max_tokens = 0;
  std::string kv_dtype = "f16";
  int threads = 0;
  std::string json_path;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open text file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Checks the flags that need no model, so that a bad command line fails before a load.
PerplexityOptions perplexity_options(const PerplexityFlags& f) {
  if (f.text_file.empty()) throw Error("give the text to score with -f FILE");
  const std::optional<KVDTypes> dtype = kv_dtypes_from_name(f.kv_dtype);
  if (!dtype) {
    throw Error(
        fmt::format("invalid --kv-dtype \"{}\": expected one of {}, or KEYS,VALUES such as int8,q4",
                    f.kv_dtype, kv_dtype_choices()));
  }
  if (f.ctx < 2) throw Error(fmt::format("--ctx must be at least 2, got {}", f.ctx));
  if (f.stride < 0 || f.stride > f.ctx) {
    throw Error(
        fmt::format("--stride must be in [1, --ctx {}] (0 = ctx / 2), got {}", f.ctx, f.stride));
  }
  if (f.max_tokens < 0) throw Error("--max-tokens must not be negative (0 = all)");
  return {.ctx = f.ctx, .stride = f.stride, .kv_dtype = *dtype};
}

void run(const PerplexityFlags& f) {
  const PerplexityOptions opts = perplexity_options(f);
  const std::string text = read_text(f.text_file);
  const std::string model_path = f.model.empty() ? default_model_path() : f.model;
  const LoadedModel loaded = load_model(model_path, f.threads, 0);

  std::vector<int32_t> tokens =
      loaded.tokenizer->encode(text, /*add_special=*/true, /*parse_special=*/false);
  const auto text_tokens = static_cast<int64_t>(tokens.size());
  if (f.max_tokens > 0 && text_tokens > f.max_tokens) {
    tokens.resize(static_cast<size_t>(f.max_tokens));
  }
  std::fprintf(stderr, "[perplexity] %s: %lld tokens, scoring %zu (ctx %d, stride %d, kv %s)\n",
               f.text_file.c_str(), static_cast<long long>(text_tokens), tokens.size(), opts.ctx,
               opts.resolved_stride(), f.kv_dtype.c_str());

  // On a terminal, one line rewritten after every window; in a log, nothing until the end.
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  const auto progress = [tty](int64_t done, const PerplexityResult& r) {
    if (!tty) return;
    std::fprintf(stderr, "\r[perplexity] window %lld/%lld: perplexity %.4f, %.1f tokens/s",
                 static_cast<long long>(done), static_cast<long long>(r.n_windows), r.perplexity(),
                 r.tokens_per_s());
    if (done == r.n_windows) std::fputc('\n', stderr);
  };
  const PerplexityResult r = compute_perplexity(*loaded.model, tokens, opts, progress);

  const std::string dtype = kv_dtypes_name(opts.kv_dtype);
  const std::vector<TableRow> rows = {
      {"model", model_path},
      {"file", f.text_file},
      {"tokens used", fmt::format("{} (of {} in the file)", r.n_tokens, text_tokens)},
      {"windows",
       fmt::format("{} (ctx {}, stride {})", r.n_windows, opts.ctx, opts.resolved_stride())},
      {"scored tokens", fmt::format("{}", r.n_scored)},
      {"mean NLL", fmt::format("{:.6f} nats", r.mean_nll())},
      {"perplexity", fmt::format("{:.4f}", r.perplexity())},
      {"tokens/s", fmt::format("{:.1f} ({} tokens through the model in {:.2f} s)", r.tokens_per_s(),
                               r.n_evaluated, r.seconds)},
      {"KV dtype", dtype},
      {"threads", fmt::format("{}", resolved_threads(f.threads))},
  };
  std::printf("== tokamak perplexity ==\n%s", format_table(rows, Align::Left).c_str());
  std::fflush(stdout);

  if (f.json_path.empty()) return;
  const nlohmann::json doc = {
      {"model", model_path},
      {"file", f.text_file},
      {"text_tokens", text_tokens},
      {"tokens", r.n_tokens},
      {"ctx", opts.ctx},
      {"stride", opts.resolved_stride()},
      {"windows", r.n_windows},
      {"scored_tokens", r.n_scored},
      {"evaluated_tokens", r.n_evaluated},
      {"mean_nll", r.mean_nll()},
      {"perplexity", r.perplexity()},
      {"seconds", r.seconds},
      {"tokens_per_s", r.tokens_per_s()},
      {"kv_dtype", dtype},
      {"threads", resolved_threads(f.threads)},
  };
  write_json(f.json_path, doc);
  std::fprintf(stderr, "[perplexity] wrote %s\n", f.json_path.c_str());
}

}  // namespace

void add_perplexity_command(CLI::App& app) {
  auto f = std::make_shared<PerplexityFlags>();
  auto* cmd = app.add_subcommand(
      "perplexity",
      "perplexity of a model on a text file, by sliding windows over the paged KV cache");
  cmd->add_option("-m,--model", f->model,
                  "GGUF model file (default: the SmolLM2-135M-Instruct Q4_1 model in models/)");
  cmd->add_option("-f,--file", f->text_file,
                  "text file to score (e.g. from "
                  "scripts/perplexity_text.py)");
  cmd->add_option("--ctx", f->ctx, "tokens per window")->capture_default_str();
  cmd->add_option("--stride", f->stride,
                  "tokens between window starts; each window scores the tokens the previous "
                  "one did not reach (default ctx / 2)");
  cmd->add_option("--max-tokens", f->max_tokens,
                  "use only the first N tokens of the text (0 = all)")
      ->capture_default_str();
  cmd->add_option("--kv-dtype", f->kv_dtype,
                  std::string("element type of the KV cache: ") + std::string(kv_dtype_choices()) +
                      ", or one for keys and one for values: int8,q4")
      ->capture_default_str();
  cmd->add_option("-t,--threads", f->threads, "kernel threads (0 = all cores)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--json", f->json_path, "also write the results as JSON to this file");
  cmd->callback([f] { run(*f); });
}

}  // namespace tokamak::cli
