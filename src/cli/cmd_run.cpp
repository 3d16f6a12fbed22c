// tokamak run: generate a continuation of one prompt, streamed to stdout.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "cli/conversation.h"
#include "cli/generation_flags.h"
#include "cli/loaded_model.h"
#include "core/error.h"
#include "engine/generator.h"

namespace tokamak::cli {
namespace {

struct RunOptions {
  GenerationFlags gen;
  std::string prompt;
  std::string prompt_file;
  bool chat = false;
  std::string system;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open prompt file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void run(const RunOptions& o) {
  if (o.prompt.empty() == o.prompt_file.empty()) {
    throw Error("give the prompt with exactly one of -p TEXT or -f FILE");
  }
  const std::string text = o.prompt_file.empty() ? o.prompt : read_file(o.prompt_file);
  auto loaded = load_model(o.gen.model, o.gen.threads, o.gen.affinity, o.gen.ctx_size);
  const auto& tok = *loaded.tokenizer;
  const SamplingParams params = o.gen.sampling_params(loaded.model->hparams().n_vocab);

  std::vector<int32_t> prompt;
  if (o.chat) {
    Conversation conv(*loaded.file, tok);
    if (!o.system.empty()) conv.add("system", o.system);
    conv.add("user", text);
    prompt = conv.prompt_tokens();
  } else {
    prompt = tok.encode(text, /*add_special=*/true, /*parse_special=*/false);
  }
  if (prompt.empty()) throw Error("the prompt has no tokens");

  Generator generator(*loaded.model, tok, o.gen.ctx_size);
  const auto result = generator.generate(prompt, params, [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    return true;
  });
  std::fputc('\n', stdout);
  std::fflush(stdout);
  print_timing_line(result.stats, loaded.load_ms);
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto opts = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run", "generate text from a prompt, streamed to stdout");
  opts->gen.add_to(*cmd);
  cmd->add_option("-p,--prompt", opts->prompt, "prompt text");
  cmd->add_option("-f,--file", opts->prompt_file, "read the prompt from a file");
  cmd->add_flag("--chat", opts->chat,
                "wrap the prompt as a user message in the model's chat template");
  cmd->add_option("--system", opts->system, "system message (with --chat)");
  cmd->callback([opts] { run(*opts); });
}

}  // namespace tokamak::cli
