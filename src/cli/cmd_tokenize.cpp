// `tokamak tokenize -m MODEL [--ids-only] [--add-special] [--parse-special] (TEXT | -f FILE)`:
// the tokens of an exact text. Tokenization and the listing format live in tokenizer/
// (unit-tested); this file only wires flags to them. Works on vocabulary-only GGUF files.

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "cli/default_model.h"
#include "core/error.h"
#include "format/gguf.h"
#include "tokenizer/token_dump.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::cli {
namespace {

struct TokenizeOptions {
  std::string model;  // empty: the default model
  std::string text;
  std::string file;
  bool has_text = false;
  bool has_file = false;
  bool ids_only = false;
  bool add_special = false;
  bool parse_special = false;
};

std::string read_exact(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("tokenize: cannot read '" + path + "': " + std::strerror(errno));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) throw Error("tokenize: error reading '" + path + "'");
  return bytes.str();
}

void run_tokenize(const TokenizeOptions& o) {
  if (o.has_text && o.has_file) throw Error("tokenize: give either TEXT or -f FILE, not both");
  if (!o.has_text && !o.has_file) throw Error("tokenize: give the TEXT to tokenize, or -f FILE");
  const std::string text = o.has_file ? read_exact(o.file) : o.text;
  const std::string path = o.model.empty() ? default_model_path() : o.model;
  const gguf::File file = gguf::File::open(path);  // throws Error("<path>: ...")
  const std::unique_ptr<Tokenizer> tok = Tokenizer::from_gguf(file);
  const std::vector<int32_t> ids = tok->encode(text, o.add_special, o.parse_special);
  const std::string out = format_tokens(*tok, ids, o.ids_only);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Print the tokens of a text: ids and pieces");
  cmd->add_option(
      "-m,--model", options->model,
      "GGUF model or vocabulary file (default: models/SmolLM2-135M-Instruct.Q4_1.gguf)");
  cmd->add_flag("--ids-only", options->ids_only, "Print only the ids, on one line");
  cmd->add_flag("--add-special", options->add_special, "Add BOS/EOS where the model asks for them");
  cmd->add_flag("--parse-special", options->parse_special,
                "Turn special-token text such as <|im_start|> into that token");
  cmd->add_option("-f,--file", options->file, "Read the text from FILE, byte for byte");
  cmd->add_option("text", options->text,
                  "The text to tokenize (exact; use -- before text starting with -)");
  cmd->callback([options, cmd] {
    options->has_text = cmd->count("text") > 0;
    options->has_file = cmd->count("--file") > 0;
    run_tokenize(*options);
  });
}

}  // namespace tokamak::cli
