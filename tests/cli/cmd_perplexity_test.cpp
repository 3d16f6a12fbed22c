// tokamak perplexity, run through its CLI11 subcommand as main() runs it: flag errors (one
// Error line each, before any model is loaded) and a run on a tiny synthetic model.

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../model/model_test_util.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/kv_dtype.h"
#include "model/synthetic_model.h"

namespace tokamak::cli::cmd_perplexity_test {
namespace {

using test::TempFile;

// Runs `tokamak perplexity ARGS...`; throws what the command throws.
void perplexity(const std::vector<std::string>& args) {
  CLI::App app;
  app.require_subcommand(1);
  add_perplexity_command(app);
  std::vector<const char*> argv = {"tokamak", "perplexity"};
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
}

// The message of the Error that the command throws for `args` ("" when none).
std::string error_of(const std::vector<std::string>& args) {
  try {
    perplexity(args);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A text file in the temporary directory.
void write_text(const TempFile& file, const std::string& text) {
  std::ofstream out(file.path(), std::ios::binary);
  out << text;
}

TEST(CmdPerplexity, UnknownKvDtypeNamesTheChoices) {
  TempFile text("perplexity_text");
  write_text(text, "some text");
  // The model does not exist either: the flag is checked first.
  const std::string e =
      error_of({"-m", "/nonexistent/model.gguf", "-f", text.path(), "--kv-dtype", "int9"});
  EXPECT_TRUE(contains(e, "invalid --kv-dtype \"int9\"")) << e;
  EXPECT_TRUE(contains(e, std::string(kv_dtype_choices()))) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

TEST(CmdPerplexity, MissingTextFile) {
  const std::string e = error_of({"-m", "/nonexistent/model.gguf", "-f", "/nonexistent/text.txt"});
  EXPECT_EQ(e, "/nonexistent/text.txt: cannot open text file");
  EXPECT_TRUE(contains(error_of({"-m", "/nonexistent/model.gguf"}), "-f FILE"));
}

TEST(CmdPerplexity, BadWindowFlags) {
  TempFile text("perplexity_text");
  write_text(text, "some text");
  const std::string m = "/nonexistent/model.gguf";
  EXPECT_TRUE(contains(error_of({"-m", m, "-f", text.path(), "--ctx", "1"}), "--ctx"));
  EXPECT_TRUE(
      contains(error_of({"-m", m, "-f", text.path(), "--ctx", "8", "--stride", "9"}), "--stride"));
  EXPECT_TRUE(
      contains(error_of({"-m", m, "-f", text.path(), "--max-tokens", "-1"}), "--max-tokens"));
}

TEST(CmdPerplexity, BadStreamFlags) {
  TempFile text("perplexity_text");
  write_text(text, "some text");
  // The model does not exist: every one of these fails before a load.
  const auto e = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"-m", "/nonexistent/model.gguf", "-f", text.path()});
    return error_of(args);
  };
  EXPECT_TRUE(contains(e({"--kv-window", "64", "--stride", "32"}), "--stride applies to fixed"));
  EXPECT_TRUE(contains(e({"--stream", "--stride", "32"}), "--stride applies to fixed"));
  EXPECT_TRUE(contains(e({"--kv-window", "64", "--ctx", "512"}), "--ctx applies to fixed"));
  EXPECT_TRUE(contains(e({"--stream", "--ctx", "128"}), "--ctx applies to fixed"));
  EXPECT_TRUE(contains(e({"--kv-window", "8"}), "smaller than one KV block (16 tokens)"));
  EXPECT_TRUE(contains(e({"--kv-window", "-1"}), "--kv-window must be in [0,"));
  EXPECT_TRUE(contains(e({"--kv-sink", "4"}), "--kv-sink needs --kv-window"));
  EXPECT_TRUE(contains(e({"--kv-window", "64", "--kv-sink", "-1"}), "--kv-sink must be in"));
  EXPECT_TRUE(contains(e({"--chunk", "8"}), "--chunk applies to the streaming mode"));
  EXPECT_TRUE(contains(e({"--kv-window", "64", "--chunk", "0"}), "--chunk must be at least 1"));
  EXPECT_TRUE(contains(e({"--kv-heavy", "32"}), "--kv-heavy needs --kv-window"));
  EXPECT_TRUE(contains(e({"--kv-window", "64", "--kv-heavy", "64"}), "--kv-heavy must be in"));
  EXPECT_TRUE(contains(e({"--kv-hot-window", "32"}), "needs a quantized --kv-dtype"));
  EXPECT_TRUE(contains(e({"--kv-dtype", "q4", "--kv-window", "64", "--kv-heavy", "48",
                          "--kv-hot-window", "32"}),
                       "--kv-hot-window must fit in the window's recent tokens"));
  // What is allowed gets as far as the model.
  EXPECT_TRUE(contains(e({"--kv-window", "64", "--kv-sink", "0", "--chunk", "1"}),
                       "/nonexistent/model.gguf"));
  EXPECT_TRUE(contains(e({"--kv-window", "0", "--stream"}), "/nonexistent/model.gguf"));
  EXPECT_TRUE(contains(e({"--kv-window", "64", "--kv-heavy", "32", "--kv-dtype", "int8",
                          "--kv-hot-window", "32"}),
                       "/nonexistent/model.gguf"));
}

TEST(CmdPerplexity, ScoresATextOnATinyModel) {
  SyntheticModelSpec spec;  // SentencePiece-style vocabulary of letters and pairs
  spec.n_ctx = 256;
  TempFile model("perplexity_model");
  spec.seed = 3;
  make_synthetic_model(spec).write(model.path());
  TempFile text("perplexity_text");
  std::string words;
  for (int i = 0; i < 40; ++i) words += "the quick brown fox jumps over the lazy dog ";
  write_text(text, words);
  TempFile json("perplexity_json");

  perplexity({"-m", model.path(), "-f", text.path(), "--ctx", "32", "--max-tokens", "100",
              "--threads", "1", "--json", json.path()});
  std::ifstream in(json.path());
  const nlohmann::json doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc["tokens"], 100);
  EXPECT_GT(doc["text_tokens"].get<int64_t>(), 100);
  EXPECT_EQ(doc["ctx"], 32);
  EXPECT_EQ(doc["stride"], 16);
  EXPECT_EQ(doc["scored_tokens"], 99);
  EXPECT_EQ(doc["windows"], 6);  // starts 0, 16, ..., 80; the last ends at 100
  EXPECT_EQ(doc["kv_dtype"], "f16");
  const double ppl = doc["perplexity"];
  EXPECT_TRUE(std::isfinite(ppl));
  EXPECT_GT(ppl, 1.0);
  EXPECT_NEAR(std::log(ppl), doc["mean_nll"].get<double>(), 1e-9);
}

// The streaming mode: past the model's context with a window (--max-tokens 300 > n_ctx
// 256), and with a full cache exactly one fixed window over the same text.
TEST(CmdPerplexity, StreamsATextOnATinyModel) {
  SyntheticModelSpec spec;
  spec.n_ctx = 256;
  spec.seed = 3;
  TempFile model("perplexity_model");
  make_synthetic_model(spec).write(model.path());
  TempFile text("perplexity_text");
  std::string words;
  for (int i = 0; i < 80; ++i) words += "the quick brown fox jumps over the lazy dog ";
  write_text(text, words);
  TempFile json("perplexity_json");
  const auto run_json = [&](std::vector<std::string> args) {
    args.insert(args.begin(),
                {"-m", model.path(), "-f", text.path(), "--threads", "1", "--json", json.path()});
    perplexity(args);
    std::ifstream in(json.path());
    return nlohmann::json::parse(in);
  };

  const nlohmann::json w =
      run_json({"--kv-window", "32", "--kv-sink", "4", "--chunk", "8", "--max-tokens", "300"});
  EXPECT_EQ(w["mode"], "stream");
  EXPECT_EQ(w["tokens"], 300);
  EXPECT_EQ(w["kv_window"], 32);
  EXPECT_EQ(w["kv_sink"], 4);
  EXPECT_EQ(w["kv_sink_tokens"], 16);
  EXPECT_EQ(w["chunk"], 8);
  EXPECT_EQ(w["chunks"], 38);  // ceil(300 / 8)
  EXPECT_EQ(w["scored_tokens"], 299);
  EXPECT_EQ(w["evaluated_tokens"], 300);
  EXPECT_GT(w["evicted_tokens"].get<int64_t>(), 0);
  EXPECT_LE(w["peak_kv_blocks"].get<int32_t>(), 5);  // 16 + 32 + 16 + 8 = 72 tokens
  EXPECT_FALSE(w.contains("ctx"));
  EXPECT_FALSE(w.contains("stride"));
  EXPECT_TRUE(std::isfinite(w["perplexity"].get<double>()));

  const nlohmann::json full = run_json({"--stream", "--max-tokens", "200"});
  EXPECT_EQ(full["mode"], "stream");
  EXPECT_EQ(full["kv_window"], 0);
  EXPECT_EQ(full["chunk"], 16);
  EXPECT_EQ(full["evicted_tokens"], 0);
  const nlohmann::json fixed = run_json({"--ctx", "200", "--stride", "200", "--max-tokens", "200"});
  EXPECT_EQ(fixed["mode"], "fixed_windows");
  EXPECT_EQ(fixed["windows"], 1);
  EXPECT_EQ(full["mean_nll"].get<double>(), fixed["mean_nll"].get<double>());

  const std::string e = error_of(
      {"-m", model.path(), "-f", text.path(), "--threads", "1", "--stream", "--max-tokens", "300"});
  EXPECT_TRUE(contains(e, "300 tokens with a full cache")) << e;
  EXPECT_TRUE(contains(e, "training context of 256")) << e;
}

}  // namespace
}  // namespace tokamak::cli::cmd_perplexity_test
