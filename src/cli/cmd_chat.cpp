// tokamak chat: an interactive multi-turn conversation on stdin/stdout using the model's chat
// template. The KV cache of earlier turns is reused; only the new turn is prefilled.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/conversation.h"
#include "cli/generation_flags.h"
#include "cli/loaded_model.h"
#include "core/error.h"
#include "engine/generator.h"

namespace tokamak::cli {
namespace {

struct ChatOptions {
  GenerationFlags gen;
  std::string system;
};

void chat(const ChatOptions& o) {
  auto loaded = load_model(o.gen.model, o.gen.threads, o.gen.affinity, o.gen.ctx_size);
  const SamplingParams params = o.gen.sampling_params(loaded.model->hparams().n_vocab);
  Conversation conv(*loaded.file, *loaded.tokenizer);
  if (!o.system.empty()) conv.add("system", o.system);
  Generator generator(*loaded.model, *loaded.tokenizer, o.gen.ctx_size);

  std::fprintf(stderr,
               "[tokamak] chat with %s (context %d). /reset clears, /exit or Ctrl-D ends.\n",
               loaded.file->path().c_str(), generator.n_ctx());
  std::string line;
  while (true) {
    std::fputs("> ", stdout);
    std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      conv.clear();
      if (!o.system.empty()) conv.add("system", o.system);
      generator.reset();
      continue;
    }
    if (line.empty()) continue;
    conv.add("user", line);
    const auto prompt = conv.prompt_tokens();
    if (static_cast<int64_t>(prompt.size()) >= generator.n_ctx()) {
      conv.pop_last();
      std::fprintf(stderr,
                   "[tokamak] the conversation no longer fits the context (%d tokens); /reset to "
                   "start over\n",
                   generator.n_ctx());
      continue;
    }
    const auto result = generator.generate(prompt, params, [](std::string_view piece) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      return true;
    });
    std::fputc('\n', stdout);
    print_timing_line(result.stats, loaded.load_ms);
    conv.add("assistant", result.text);
  }
}

}  // namespace

void add_chat_command(CLI::App& app) {
  auto opts = std::make_shared<ChatOptions>();
  auto* cmd =
      app.add_subcommand("chat", "interactive multi-turn chat with the model's chat template");
  opts->gen.add_to(*cmd);
  cmd->add_option("--system", opts->system, "system message");
  cmd->callback([opts] { chat(*opts); });
}

}  // namespace tokamak::cli
