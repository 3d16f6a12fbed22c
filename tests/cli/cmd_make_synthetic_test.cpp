// tokamak make-synthetic, run through its CLI11 subcommand as main() runs it.

#include <gtest/gtest.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "format/gguf.h"
#include "format/gguf_writer.h"
#include "model/hparams.h"
#include "model/model.h"
#include "model/synthetic_model.h"
#include "tokenizer/bpe.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "../model/model_test_util.h"

namespace tokamak::cli {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the temporary directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() / ("tokamak_make_synthetic_" + std::to_string(::getpid()) +
                                         "_" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // The names of the files in it, sorted.
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path_)) out.push_back(e.path().filename());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  fs::path path_;
};

// Runs `tokamak make-synthetic ARGS...`; throws what the command throws.
void make_synthetic(const std::vector<std::string>& args) {
  CLI::App app;
  app.require_subcommand(1);
  add_make_synthetic_command(app);
  std::vector<const char*> argv = {"tokamak", "make-synthetic"};
  for (const auto& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
}

// The message of the Error that make-synthetic throws for `args` ("" when none).
std::string error_of(const std::vector<std::string>& args) {
  try {
    make_synthetic(args);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Prefills `tokens` and checks the last row's logits are finite and of a sensible size.
void expect_runs(const std::shared_ptr<const gguf::File>& file, std::vector<int32_t> tokens) {
  ThreadPool pool(2);
  ModelOptions opts;
  opts.pool = &pool;
  auto model = Model::load(file, opts);
  test::expect_sensible_logits(*model, tokens);
}

// `v` as GGUF encodes it (its type and contents): equal values, equal bytes.
std::vector<uint8_t> encoded(const gguf::Value& v) {
  gguf::Writer w;
  w.set("k", v);
  return w.to_bytes();
}

// A tiny byte-level BPE tokenizer (the 256 byte characters, a few merges, two special
// tokens) in a GGUF file with no tensors.
void write_tiny_bpe(const std::string& path) {
  std::vector<std::string> tokens;
  std::vector<gguf::Value> token_values, types, merges;
  const auto add = [&](const std::string& text, int32_t type) {
    token_values.push_back(gguf::Value::string(text));
    types.push_back(gguf::Value::i32(type));
  };
  const auto byte_char = [](char c) {
    std::string s;
    utf8::append_codepoint(s, gpt2_byte_to_codepoint(static_cast<uint8_t>(c)));
    return s;
  };
  for (int b = 0; b < 256; ++b) add(byte_char(static_cast<char>(b)), 1);
  const std::string sp = byte_char(' ');
  for (const auto& [l, r] : std::vector<std::pair<std::string, std::string>>{
           {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {sp, "w"}, {"o", "r"}}) {
    merges.push_back(gguf::Value::string(l + " " + r));
    add(l + r, 1);
  }
  add("<|bos|>", 3);
  add("<|eos|>", 3);
  const auto n = static_cast<uint32_t>(token_values.size());
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::string("llama"));
  w.set("tokenizer.ggml.model", gguf::Value::string("gpt2"));
  w.set("tokenizer.ggml.pre", gguf::Value::string("gpt-2"));
  w.set("tokenizer.ggml.tokens",
        gguf::Value::array(gguf::ValueType::STRING, std::move(token_values)));
  w.set("tokenizer.ggml.token_type", gguf::Value::array(gguf::ValueType::INT32, std::move(types)));
  w.set("tokenizer.ggml.merges", gguf::Value::array(gguf::ValueType::STRING, std::move(merges)));
  w.set("tokenizer.ggml.bos_token_id", gguf::Value::u32(n - 2));
  w.set("tokenizer.ggml.eos_token_id", gguf::Value::u32(n - 1));
  w.set("tokenizer.ggml.add_bos_token", gguf::Value::boolean(true));
  w.write(path);
}

TEST(MakeSyntheticTest, WritesATinyModelThatLoadsAndRuns) {
  TempDir dir;
  const std::string out = dir.file("tiny.gguf");
  make_synthetic({"-o", out, "--shape", "tiny", "--type", "q4_1", "--n-layer", "3", "--seed", "7"});
  const auto file = std::make_shared<const gguf::File>(gguf::File::open(out));
  const HParams hp = HParams::from_gguf(*file);
  EXPECT_EQ(hp.n_layer, 3);
  EXPECT_EQ(hp.n_embd, 64);
  EXPECT_EQ(hp.n_vocab, 512);
  EXPECT_EQ(file->get_string("general.name"), "synthetic tiny q4_1");
  EXPECT_EQ(file->get_int("general.file_type"), 3);  // mostly Q4_1
  EXPECT_EQ(file->get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(file->find_tensor("blk.2.ffn_up.weight")->dtype, DType::Q4_1);
  EXPECT_EQ(file->find_tensor("token_embd.weight")->dtype, DType::Q8_0);
  EXPECT_EQ(file->find_tensor("blk.0.attn_norm.weight")->dtype, DType::F32);
  EXPECT_NE(file->find_tensor("output.weight"), nullptr);  // tiny: a separate head
  expect_runs(file, {1, 300, 5, 42});
  EXPECT_EQ(dir.names(), std::vector<std::string>{"tiny.gguf"});  // no .part left behind

  // The same flags and seed make the same bytes; another seed, others.
  make_synthetic({"-o", dir.file("again.gguf"), "--shape", "tiny", "--type", "q4_1", "--n-layer",
                  "3", "--seed", "7"});
  EXPECT_EQ(read_all(out), read_all(dir.file("again.gguf")));
  make_synthetic({"-o", dir.file("other.gguf"), "--type", "q4_1", "--n-layer", "3"});
  EXPECT_NE(read_all(out), read_all(dir.file("other.gguf")));
}

TEST(MakeSyntheticTest, ExplicitDimsOverrideTheNamedShape) {
  TempDir dir;
  const std::string out = dir.file("small-1b.gguf");
  make_synthetic({"-o",       out,    "--shape",          "1b",  "--n-layer",   "1",
                  "--n-embd", "128",  "--n-head",         "4",   "--n-head-kv", "2",
                  "--n-ff",   "256",  "--n-vocab",        "320", "--n-ctx",     "512",
                  "--type",   "q8_0", "--embedding-type", "f16", "--name",      "mini"});
  const auto file = std::make_shared<const gguf::File>(gguf::File::open(out));
  const HParams hp = HParams::from_gguf(*file);
  EXPECT_EQ(hp.n_layer, 1);
  EXPECT_EQ(hp.n_embd, 128);
  EXPECT_EQ(hp.n_head, 4);
  EXPECT_EQ(hp.n_head_kv, 2);
  EXPECT_EQ(hp.n_ff, 256);
  EXPECT_EQ(hp.n_vocab, 320);
  EXPECT_EQ(file->get_int("llama.context_length"), 512);
  EXPECT_EQ(file->get_float("llama.rope.freq_base"), 500000.0);  // kept from the 1b shape
  EXPECT_EQ(file->find_tensor("output.weight"), nullptr);        // tied, as the 1b shape
  EXPECT_EQ(file->find_tensor("token_embd.weight")->dtype, DType::F16);
  EXPECT_EQ(file->find_tensor("blk.0.attn_q.weight")->dtype, DType::Q8_0);
  EXPECT_EQ(file->get_string("general.name"), "mini");
  expect_runs(file, {1, 2, 3});

  make_synthetic({"-o", dir.file("untied.gguf"), "--shape", "1b", "--n-layer", "1", "--n-embd",
                  "64", "--n-head", "2", "--n-head-kv", "1", "--n-ff", "64", "--n-vocab", "300",
                  "--no-tied-output"});
  EXPECT_NE(gguf::File::open(dir.file("untied.gguf")).find_tensor("output.weight"), nullptr);
}

TEST(MakeSyntheticTest, NamedShapesAreThoseOfTheRealModels) {
  const auto b1 = synthetic_shape("1b");
  ASSERT_TRUE(b1);
  EXPECT_EQ(b1->n_layer, 16);
  EXPECT_EQ(b1->n_embd, 2048);
  EXPECT_EQ(b1->n_head, 32);
  EXPECT_EQ(b1->n_head_kv, 8);
  EXPECT_EQ(b1->n_ff, 8192);
  EXPECT_GE(b1->n_ctx, 2048);
  EXPECT_TRUE(b1->tied_output);
  const auto smol = synthetic_shape("smol");
  ASSERT_TRUE(smol);
  EXPECT_EQ(smol->n_layer, 30);
  EXPECT_EQ(smol->n_embd, 576);
  EXPECT_EQ(smol->n_head, 9);
  EXPECT_EQ(smol->n_head_kv, 3);
  EXPECT_EQ(smol->n_vocab, 49152);
  for (std::string_view name : kSyntheticShapes) EXPECT_TRUE(synthetic_shape(name)) << name;
  EXPECT_FALSE(synthetic_shape("7b"));
}

// The tokenizer of a tiny BPE file, then of a real SentencePiece model when the shared test
// data is there: every tokenizer.* key carried over, the vocabulary sized to it, and the same
// tokens for a prompt as the source gives.
TEST(MakeSyntheticTest, TokenizerFromCarriesTheSourcesTokenizer) {
  TempDir dir;
  const std::string bpe = dir.file("tiny-bpe.gguf");
  write_tiny_bpe(bpe);
  std::vector<std::string> sources = {bpe};
  const std::string stories = std::string(TOKAMAK_SHARED_DIR) + "/testdata/stories260K.gguf";
  if (fs::exists(stories)) sources.push_back(stories);

  for (const auto& src_path : sources) {
    SCOPED_TRACE(src_path);
    const std::string out = dir.file("with-tokenizer.gguf");
    make_synthetic({"-o", out, "--force", "--tokenizer-from", src_path, "--n-layer", "1"});
    const auto src = gguf::File::open(src_path);
    const auto file = std::make_shared<const gguf::File>(gguf::File::open(out));
    const size_t n_tokens = src.get_array("tokenizer.ggml.tokens")->size();
    EXPECT_EQ(file->get_array("tokenizer.ggml.tokens")->size(), n_tokens);
    EXPECT_EQ(file->get_int("llama.vocab_size"), static_cast<int64_t>(n_tokens));
    EXPECT_EQ(file->find_tensor("token_embd.weight")->shape[1], static_cast<int64_t>(n_tokens));
    size_t n_keys = 0;
    for (const auto& [key, value] : src.metadata()) {
      if (!key.starts_with("tokenizer.")) continue;
      ++n_keys;
      const gguf::Value* copied = file->find(key);
      ASSERT_NE(copied, nullptr) << key;
      EXPECT_EQ(encoded(*copied), encoded(value)) << key;
    }
    size_t n_out_keys = 0;
    for (const auto& kv : file->metadata()) n_out_keys += kv.first.starts_with("tokenizer.");
    EXPECT_EQ(n_out_keys, n_keys);  // none of the synthetic vocabulary's keys left over

    const auto src_tok = Tokenizer::from_gguf(src);
    const auto out_tok = Tokenizer::from_gguf(*file);
    const std::string text = "hello world, Hello World! once upon a time";
    const auto ids = src_tok->encode(text, /*add_special=*/true, /*parse_special=*/false);
    EXPECT_GT(ids.size(), 3u);
    EXPECT_EQ(out_tok->encode(text, true, false), ids);
    expect_runs(file, ids);
  }

  // A vocabulary size that contradicts the tokenizer's is refused.
  const std::string e =
      error_of({"-o", dir.file("conflict.gguf"), "--tokenizer-from", bpe, "--n-vocab", "1000"});
  EXPECT_NE(e.find("--n-vocab"), std::string::npos) << e;
  // A file with no tokenizer cannot give one.
  const std::string no_tok = dir.file("no-tokenizer.gguf");
  gguf::Writer().write(no_tok);
  EXPECT_NE(error_of({"-o", dir.file("x.gguf"), "--tokenizer-from", no_tok}).find("no tokenizer"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(dir.file("conflict.gguf")));
  EXPECT_FALSE(fs::exists(dir.file("x.gguf")));
}

TEST(MakeSyntheticTest, RefusesToOverwriteWithoutForce) {
  TempDir dir;
  const std::string out = dir.file("exists.gguf");
  { std::ofstream(out) << "keep me"; }
  const std::string e = error_of({"-o", out});
  EXPECT_NE(e.find("--force"), std::string::npos) << e;
  EXPECT_EQ(read_all(out), "keep me");
  make_synthetic({"-o", out, "--force"});
  EXPECT_EQ(gguf::File::open(out).get_string("general.architecture"), "llama");
  EXPECT_EQ(dir.names(), std::vector<std::string>{"exists.gguf"});
}

TEST(MakeSyntheticTest, BadDimsGiveAClearErrorAndNoFile) {
  TempDir dir;
  const std::string out = dir.file("bad.gguf");
  struct Case {
    std::vector<std::string> flags;
    std::string message;  // a part of the error
  };
  const std::vector<Case> cases = {
      {{"--n-layer", "0"}, "must be positive"},
      {{"--n-embd", "-64"}, "must be positive"},
      {{"--n-head", "3"}, "n_head"},  // 3 heads over 2 KV heads
      {{"--n-head", "6", "--n-head-kv", "3"}, "n_embd must be a multiple of n_head"},
      {{"--n-embd", "80", "--n-head", "4"}, "block size 32"},  // Q4_0 rows of 80
      {{"--n-ff", "100"}, "block size 32"},
      {{"--type", "q3_k"}, "--type"},
      {{"--type", "q4_k"}, "block size 256"},  // the tiny shape is 64 wide
      {{"--embedding-type", "int8"}, "--embedding-type"},
      {{"--shape", "7b"}, "--shape"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"-o", out};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    const std::string e = error_of(args);
    EXPECT_NE(e.find(c.message), std::string::npos) << c.flags[0] << ": " << e;
    EXPECT_TRUE(dir.names().empty()) << c.flags[0];
  }
}

}  // namespace
}  // namespace tokamak::cli
