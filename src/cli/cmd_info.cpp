// `tokamak info [MODEL]`: what a GGUF file holds. The facts and their formatting live in
// format/gguf_summary (unit-tested); this file only wires flags to them.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/default_model.h"
#include "format/gguf.h"
#include "format/gguf_summary.h"

namespace tokamak::cli {
namespace {

struct InfoOptions {
  std::string model;  // empty: the default model
  bool metadata = false;
  bool tensors = false;
};

void run_info(const InfoOptions& options) {
  const std::string path = options.model.empty() ? default_model_path() : options.model;
  const gguf::File file = gguf::File::open(path);  // throws Error("<path>: ...")
  std::string out = gguf::describe(file);
  if (options.metadata) {
    out += "\nmetadata (" + std::to_string(file.metadata().size()) + " keys):\n";
    out += gguf::format_metadata(file);
  }
  if (options.tensors) {
    out += "\ntensors (" + std::to_string(file.tensors().size()) + "):\n";
    out += gguf::format_tensors(file);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

void add_info_command(CLI::App& app) {
  auto options = std::make_shared<InfoOptions>();
  CLI::App* cmd = app.add_subcommand(
      "info", "Describe a GGUF model: architecture, hyper-parameters, tensors, tokenizer");
  cmd->add_option("model,-m,--model", options->model,
                  "GGUF file (default: models/SmolLM2-135M-Instruct.Q4_1.gguf)");
  cmd->add_flag("--metadata", options->metadata,
                "Also list every metadata key with its type and value (arrays abbreviated)");
  cmd->add_flag("--tensors", options->tensors,
                "Also list every tensor: name, type, shape, bytes, offset");
  cmd->callback([options] { run_info(*options); });
}

}  // namespace tokamak::cli
