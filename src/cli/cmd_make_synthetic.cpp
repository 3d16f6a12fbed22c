// tokamak make-synthetic: a random-weight llama model written by our own GGUF writer
// (model/synthetic_model.h), for speed and memory measurements where the weight values do not
// matter: a named shape (tiny, smol, 1b), any dims overridden, optionally with a real file's
// tokenizer so that prompts tokenize as they do for that model.

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <new>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/default_model.h"
#include "core/error.h"
#include "format/gguf.h"
#include "format/gguf_summary.h"
#include "kernels/cpu/quantize.h"
#include "model/synthetic_model.h"

namespace tokamak::cli {
namespace {

namespace fs = std::filesystem;

struct MakeSyntheticOptions {
  std::string out;
  std::string shape = "tiny";
  std::string type = "q4_0";
  std::string embedding_type = "q8_0";
  // Each overrides the shape's value when given.
  std::optional<int32_t> n_layer, n_embd, n_head, n_head_kv, n_ff, n_ctx, n_vocab;
  std::optional<bool> tied_output;
  // Given with no path: the default model's tokenizer.
  std::optional<std::string> tokenizer_from;
  uint64_t seed = 1;
  std::string name;
  bool force = false;
};

DType weight_type(const std::string& flag, const std::string& name) {
  const auto d = dtype_from_name(name);
  if (!d || !cpu::can_quantize(*d) || *d == DType::Q8_1) {
    throw Error(flag + ": unknown or unsupported tensor type '" + name +
                "' (f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|q4_k|q5_k|q6_k)");
  }
  return *d;
}

SyntheticModelSpec spec_of(const MakeSyntheticOptions& o) {
  auto shape = synthetic_shape(o.shape);
  if (!shape) throw Error("--shape: unknown shape '" + o.shape + "' (tiny|smol|1b)");
  SyntheticModelSpec s = *shape;
  const auto over = [](int32_t& field, const std::optional<int32_t>& v) {
    if (v) field = *v;
  };
  over(s.n_layer, o.n_layer);
  over(s.n_embd, o.n_embd);
  over(s.n_head, o.n_head);
  over(s.n_head_kv, o.n_head_kv);
  over(s.n_ff, o.n_ff);
  over(s.n_ctx, o.n_ctx);
  over(s.n_vocab, o.n_vocab);
  if (o.tied_output) s.tied_output = *o.tied_output;
  s.weight_dtype = weight_type("--type", o.type);
  s.embedding_dtype = weight_type("--embedding-type", o.embedding_type);
  s.seed = o.seed;
  s.name = o.name.empty() ? "synthetic " + o.shape + " " + o.type : o.name;
  return s;
}

void refuse_to_clobber(const std::string& path, bool force) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (!fs::exists(st)) return;
  if (!fs::is_regular_file(st)) throw Error(path + ": exists and is not a regular file");
  if (!force) throw Error(path + ": exists (pass --force to overwrite it)");
}

void make_synthetic(const MakeSyntheticOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  refuse_to_clobber(o.out, o.force);
  SyntheticModelSpec spec = spec_of(o);

  // The tokenizer's size is the vocabulary's, so it is read before any weight is made.
  std::optional<TokenizerMetadata> tok;
  std::string tok_path;
  if (o.tokenizer_from) {
    tok_path = o.tokenizer_from->empty() ? default_model_path() : *o.tokenizer_from;
    tok = tokenizer_metadata(gguf::File::open(tok_path));
    if (o.n_vocab && *o.n_vocab != tok->n_tokens) {
      throw Error("--n-vocab " + std::to_string(*o.n_vocab) + " differs from the " +
                  std::to_string(tok->n_tokens) + " tokens of --tokenizer-from " + tok_path);
    }
    spec.n_vocab = tok->n_tokens;
  }

  SyntheticModel model;
  try {
    model = make_synthetic_model(spec);  // throws Error for bad dims, before allocating
  } catch (const std::bad_alloc&) {
    throw Error("out of memory making the model's weights (dims too large?)");
  }
  if (tok) model.set_tokenizer(*tok);
  int64_t params = 0;
  for (const auto& t : model.tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    params += n;
  }
  refuse_to_clobber(o.out, o.force);  // again: making a large model takes a while
  std::move(model).write(o.out);

  std::error_code ec;
  const auto bytes = fs::file_size(o.out, ec);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int32_t hd = spec.n_embd / spec.n_head;
  const std::string vocab =
      tok ? "tokenizer of " + tok_path : std::string("synthetic SentencePiece vocabulary");
  const std::string wtype(dtype_name(spec.weight_dtype));
  const std::string etype(dtype_name(spec.embedding_dtype));
  const std::string size = gguf::format_bytes(bytes);
  const std::string count = gguf::format_count(static_cast<uint64_t>(params));
  std::fprintf(stderr,
               "[tokamak] wrote %s: %s (%llu bytes) in %.1f s\n"
               "  shape      %s: %d layers of %d, %d heads of %d, %d KV heads, FFN %d, "
               "context %d, %s output\n"
               "  vocabulary %d tokens, %s\n"
               "  tensors    %s matrices, %s token_embd, F32 norms; %s parameters (%lld)\n",
               o.out.c_str(), size.c_str(), static_cast<unsigned long long>(bytes), secs,
               o.shape.c_str(), spec.n_layer, spec.n_embd, spec.n_head, hd, spec.n_head_kv,
               spec.n_ff, spec.n_ctx, spec.tied_output ? "tied" : "separate", spec.n_vocab,
               vocab.c_str(), wtype.c_str(), etype.c_str(), count.c_str(),
               static_cast<long long>(params));
}

}  // namespace

void add_make_synthetic_command(CLI::App& app) {
  auto o = std::make_shared<MakeSyntheticOptions>();
  auto* cmd = app.add_subcommand(
      "make-synthetic",
      "write a random-weight llama GGUF of a real model's shape (for speed and memory tests)");
  cmd->add_option("-o,--output", o->out, "output GGUF file")->required();
  cmd->add_option("--shape", o->shape,
                  "tiny (a test fixture) | smol (SmolLM2-135M) | 1b (Llama 3.2 1B)")
      ->capture_default_str();
  cmd->add_option("--type", o->type,
                  "matrices: q4_0|q4_1|q8_0|q5_0|q5_1|q4_k|q5_k|q6_k|f16|bf16|f32 (the K-quants "
                  "need n_embd and n_ff multiples of 256: the 1b shape)")
      ->capture_default_str();
  cmd->add_option("--embedding-type", o->embedding_type, "token_embd (also the tied head)")
      ->capture_default_str();
  cmd->add_option("--n-layer", o->n_layer, "layers (overrides the shape's)");
  cmd->add_option("--n-embd", o->n_embd, "width");
  cmd->add_option("--n-head", o->n_head, "attention heads");
  cmd->add_option("--n-head-kv", o->n_head_kv, "KV heads");
  cmd->add_option("--n-ff", o->n_ff, "FFN width");
  cmd->add_option("--n-ctx", o->n_ctx, "context length");
  cmd->add_option("--n-vocab", o->n_vocab, "vocabulary size (not with --tokenizer-from)");
  // Two flag callbacks, not one negatable flag: on an optional<bool>, CLI11 2.1 gave false
  // when neither flag was given, where the shape's value must stay.
  auto* tied = cmd->add_flag_callback(
      "--tied-output", [o] { o->tied_output = true; },
      "the output head reuses token_embd (default: as the shape; tiny: no, smol and 1b: yes)");
  cmd->add_flag_callback(
         "--no-tied-output", [o] { o->tied_output = false; }, "a separate output.weight")
      ->excludes(tied);
  cmd->add_option("--tokenizer-from", o->tokenizer_from,
                  "copy the tokenizer of this GGUF (no path: the default model's); the "
                  "vocabulary takes its size")
      ->expected(0, 1);
  cmd->add_option("--seed", o->seed, "random seed (same seed, same file)")->capture_default_str();
  cmd->add_option("--name", o->name, "general.name (default: synthetic SHAPE TYPE)");
  cmd->add_flag("--force", o->force, "overwrite OUTPUT if it exists");
  cmd->callback([o] { make_synthetic(*o); });
}

}  // namespace tokamak::cli
