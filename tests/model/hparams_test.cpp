// Loading validates the file: each corruption of a tiny model gives an Error that names the
// file, the key or tensor, and the problem.

#include "model/hparams.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "model/llama_weights.h"
#include "model/model.h"
#include "model_test_util.h"

namespace tokamak {
namespace {

using gguf::Value;

SyntheticModel tiny() {
  SyntheticModelSpec s;
  s.n_vocab = 300;
  s.n_embd = 64;
  s.n_layer = 2;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 96;
  s.weight_dtype = DType::Q8_0;
  return make_synthetic_model(s);
}

// Loads `m` and returns the Error message ("" if it loaded).
std::string load_error(const SyntheticModel& m) {
  test::TempFile tmp("bad");
  try {
    const auto file = test::write_and_open(m, tmp);
    Model::load(file, test::options(1, 8));
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(tmp.path()), std::string::npos) << "message should name the file: " << msg;
    return msg;
  }
  return "";
}

TEST(HParamsTest, ReadsTinyModel) {
  test::TempFile tmp("ok");
  const auto file = test::write_and_open(tiny(), tmp);
  const HParams hp = HParams::from_gguf(*file);
  EXPECT_EQ(hp.arch, "llama");
  EXPECT_EQ(hp.n_vocab, 300);
  EXPECT_EQ(hp.n_embd, 64);
  EXPECT_EQ(hp.n_layer, 2);
  EXPECT_EQ(hp.n_head, 4);
  EXPECT_EQ(hp.n_head_kv, 2);
  EXPECT_EQ(hp.n_ff, 96);
  EXPECT_EQ(hp.head_dim_k, 16);
  EXPECT_EQ(hp.head_dim_v, 16);
  EXPECT_EQ(hp.n_rot, 16);
  EXPECT_EQ(hp.n_ctx_train, 256);
  EXPECT_FLOAT_EQ(hp.rms_eps, 1e-5f);
  EXPECT_FLOAT_EQ(hp.rope_freq_base, 10000.0f);
  EXPECT_EQ(hp.rope_scaling, RopeScaling::None);
  EXPECT_EQ(load_error(tiny()), "");
}

TEST(HParamsTest, Defaults) {
  SyntheticModel m = tiny();
  m.erase("llama.attention.head_count_kv");
  m.erase("llama.rope.freq_base");
  m.erase("llama.rope.dimension_count");
  m.erase("llama.vocab_size");
  // head_count_kv now defaults to head_count (4): the K/V tensors must have 4 heads.
  for (int l = 0; l < 2; ++l) {
    for (const char* t : {"attn_k.weight", "attn_v.weight"}) {
      const std::string name = "blk." + std::to_string(l) + "." + t;
      const auto* q = m.find("blk." + std::to_string(l) + ".attn_q.weight");
      *m.find(name) = {name, q->shape, q->dtype, q->data};
    }
  }
  test::TempFile tmp("defaults");
  const auto file = test::write_and_open(m, tmp);
  const HParams hp = HParams::from_gguf(*file);
  EXPECT_EQ(hp.n_head_kv, 4);
  EXPECT_FLOAT_EQ(hp.rope_freq_base, 10000.0f);
  EXPECT_EQ(hp.n_rot, 16);
  EXPECT_NO_THROW(Model::load(file, test::options(1, 4)));
}

TEST(HParamsTest, LinearRopeScaling) {
  SyntheticModel m = tiny();
  m.set("llama.rope.scaling.type", Value::string("linear"));
  m.set("llama.rope.scaling.factor", Value::f32(4.0f));
  test::TempFile tmp("linear");
  const auto file = test::write_and_open(m, tmp);
  const HParams hp = HParams::from_gguf(*file);
  EXPECT_EQ(hp.rope_scaling, RopeScaling::Linear);
  EXPECT_FLOAT_EQ(hp.rope_freq_scale(), 0.25f);
}

TEST(HParamsTest, Errors) {
  struct Corruption {
    const char* what;
    std::string expect;  // part of the message
    void (*apply)(SyntheticModel&);
  };
  const Corruption cases[] = {
      {"missing tensor", "missing tensor blk.1.ffn_up.weight",
       [](SyntheticModel& m) {
         std::erase_if(m.tensors, [](const auto& t) { return t.name == "blk.1.ffn_up.weight"; });
       }},
      {"wrong shape", "tensor blk.0.attn_k.weight: shape [64, 64]",
       [](SyntheticModel& m) {
         auto* k = m.find("blk.0.attn_k.weight");
         *k = {k->name, m.find("blk.0.attn_q.weight")->shape, k->dtype,
               m.find("blk.0.attn_q.weight")->data};
       }},
      {"heads not dividing", "not a multiple of attention.head_count_kv",
       [](SyntheticModel& m) { m.set("llama.attention.head_count_kv", Value::u32(3)); }},
      {"unsupported dtype", "tensor blk.0.ffn_gate.weight: unsupported dtype Q8_1",
       [](SyntheticModel& m) {
         auto* t = m.find("blk.0.ffn_gate.weight");
         t->dtype = DType::Q8_1;
         t->data.assign(row_bytes(DType::Q8_1, 64) * 96, 0);
       }},
      {"norm not F32", "norm weights must be F32",
       [](SyntheticModel& m) {
         auto* t = m.find("output_norm.weight");
         t->dtype = DType::F16;
         t->data.resize(t->data.size() / 2);
       }},
      {"missing key", "missing metadata key llama.block_count",
       [](SyntheticModel& m) { m.erase("llama.block_count"); }},
      {"zero heads", "llama.attention.head_count = 0 is out of range",
       [](SyntheticModel& m) { m.set("llama.attention.head_count", Value::u32(0)); }},
      {"string for int", "llama.embedding_length",
       [](SyntheticModel& m) { m.set("llama.embedding_length", Value::string("64")); }},
      {"unknown architecture", "unsupported architecture 'mamba'",
       [](SyntheticModel& m) { m.set("general.architecture", Value::string("mamba")); }},
      {"vocab size mismatch", "llama.vocab_size = 301 does not match",
       [](SyntheticModel& m) { m.set("llama.vocab_size", Value::u32(301)); }},
      {"unsupported rope scaling", "unsupported RoPE scaling type 'yarn'",
       [](SyntheticModel& m) { m.set("llama.rope.scaling.type", Value::string("yarn")); }},
      {"odd rope dims", "rope.dimension_count (7) must be even",
       [](SyntheticModel& m) { m.set("llama.rope.dimension_count", Value::u32(7)); }},
      {"negative eps", "layer_norm_rms_epsilon",
       [](SyntheticModel& m) {
         m.set("llama.attention.layer_norm_rms_epsilon", Value::f32(-1.0f));
       }},
      {"rope_freqs present", "rope_freqs.weight",
       [](SyntheticModel& m) {
         m.tensors.push_back({"rope_freqs.weight", {8}, DType::F32, std::vector<uint8_t>(32, 0)});
       }},
      {"bias present", "blk.1.attn_q.bias: is not supported",
       [](SyntheticModel& m) {
         m.tensors.push_back({"blk.1.attn_q.bias", {64}, DType::F32, std::vector<uint8_t>(256, 0)});
       }},
  };
  for (const Corruption& c : cases) {
    SyntheticModel m = tiny();
    c.apply(m);
    const std::string msg = load_error(m);
    EXPECT_NE(msg.find(c.expect), std::string::npos)
        << c.what << ": got \"" << msg << "\", expected it to contain \"" << c.expect << "\"";
  }
}

TEST(HParamsTest, SyntheticSpecErrors) {
  SyntheticModelSpec s;
  s.n_head_kv = 3;
  EXPECT_THROW(make_synthetic_model(s), Error);
  s = {};
  s.weight_dtype = DType::Q4_0;
  s.n_ff = 100;  // not a multiple of 32
  EXPECT_THROW(make_synthetic_model(s), Error);
  s = {};
  s.weight_dtype = DType::Q4_K;  // n_embd 64: not whole 256-element super-blocks
  EXPECT_THROW(make_synthetic_model(s), Error);
  s = {};
  s.weight_dtype = DType::Q3_K;  // not supported
  s.n_embd = 256;
  s.n_ff = 512;
  EXPECT_THROW(make_synthetic_model(s), Error);
}

}  // namespace
}  // namespace tokamak
