// The `tokamak info` summary: facts collected from real and writer-made files, and the text.

#include "format/gguf_summary.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "gguf_test_util.h"

namespace tokamak::gguf {
namespace {

using test::pattern_bytes;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Summary, Stories260K) {
  const File f = File::open(test::shared_file("testdata/stories260K.gguf"));
  const ModelSummary s = summarize(f);
  EXPECT_EQ(s.path, f.path());
  EXPECT_EQ(s.file_size, 1185376u);
  EXPECT_EQ(s.version, 3u);
  EXPECT_EQ(s.architecture, "llama");
  EXPECT_EQ(s.context_length, 2048);
  EXPECT_EQ(s.embedding_length, 64);
  EXPECT_EQ(s.block_count, 5);
  EXPECT_EQ(s.feed_forward_length, 172);
  EXPECT_EQ(s.head_count, 8);
  EXPECT_EQ(s.head_count_kv, 4);
  EXPECT_EQ(s.head_dim, 8);
  EXPECT_TRUE(s.head_dim_derived);
  EXPECT_EQ(s.rope_dimension_count, 8);
  EXPECT_FALSE(s.rope_freq_base);
  EXPECT_FLOAT_EQ(static_cast<float>(*s.rms_epsilon), 1e-5f);
  EXPECT_EQ(s.vocab_size, 512);
  EXPECT_EQ(s.tensor_count, 48u);
  ASSERT_EQ(s.tensor_types.size(), 1u);
  EXPECT_EQ(s.tensor_types[0].dtype, DType::F32);
  EXPECT_EQ(s.tensor_types[0].tensors, 48u);
  EXPECT_EQ(s.parameter_count, 292800u);
  EXPECT_EQ(s.weight_bytes, 292800u * 4);
  EXPECT_EQ(s.tokenizer_model, "llama");
  EXPECT_EQ(s.token_count, 512);
  ASSERT_EQ(s.special_tokens.size(), 4u);  // bos, eos, unk, pad (no eot key)
  EXPECT_EQ(s.special_tokens[0].role, "bos");
  EXPECT_EQ(s.special_tokens[0].text, "<s>");
  EXPECT_EQ(s.special_tokens[3].role, "pad");
  EXPECT_EQ(s.special_tokens[3].id, 4294967295);
  EXPECT_FALSE(s.special_tokens[3].text);  // "no token" in llama.cpp's convention
  EXPECT_FALSE(s.add_bos);
  EXPECT_FALSE(s.chat_template_bytes);

  const std::string text = format_summary(s);
  EXPECT_TRUE(contains(text, "architecture:   llama\n")) << text;
  EXPECT_TRUE(contains(text, "GGUF v3, alignment 32, 19 metadata keys")) << text;
  EXPECT_TRUE(contains(text, "  head dim              8 (embedding / heads)\n")) << text;
  EXPECT_TRUE(contains(text, "  RMS norm epsilon      1e-05\n")) << text;
  EXPECT_TRUE(contains(text, "tensors:        48 (48 F32)\n")) << text;
  EXPECT_TRUE(contains(text, "parameters:     292.8 K (292800)\n")) << text;
  EXPECT_TRUE(contains(text,
                       "special tokens: bos 1 \"<s>\", eos 2 \"</s>\", unk 0 \"<unk>\", "
                       "pad 4294967295 (not in vocabulary)\n"))
      << text;
  EXPECT_TRUE(contains(text, "chat template:  none\n")) << text;
  EXPECT_EQ(describe(f), text);
}

TEST(Summary, WriterMadeModel) {
  Writer w;
  w.set("general.architecture", Value::string("qwen2"));
  w.set("general.name", Value::string("Tiny \"Qwen\"\n"));
  w.set("qwen2.context_length", Value::u32(32768));
  w.set("qwen2.embedding_length", Value::u32(896));
  w.set("qwen2.block_count", Value::u32(2));
  w.set("qwen2.feed_forward_length",
        Value::array(ValueType::INT32, {Value::i32(4864), Value::i32(2432)}));  // per layer
  w.set("qwen2.attention.head_count", Value::u32(14));
  w.set("qwen2.attention.head_count_kv", Value::u64(2));
  w.set("qwen2.attention.key_length", Value::u32(64));
  w.set("qwen2.rope.freq_base", Value::f32(1000000.0f));
  w.set("qwen2.rope.scaling.type", Value::string("yarn"));
  w.set("qwen2.rope.scaling.factor", Value::f32(4.0f));
  w.set("qwen2.rope.scaling.original_context_length", Value::u32(8192));
  w.set("qwen2.attention.layer_norm_rms_epsilon", Value::f32(1e-6f));
  w.set("tokenizer.ggml.model", Value::string("gpt2"));
  w.set("tokenizer.ggml.pre", Value::string("qwen2"));
  w.set("tokenizer.ggml.tokens",
        Value::array(ValueType::STRING,
                     {Value::string("a"), Value::string("<|end|>\n"), Value::string("c")}));
  w.set("tokenizer.ggml.eos_token_id", Value::u32(1));
  w.set("tokenizer.ggml.eot_token_id", Value::i32(-1));
  w.set("tokenizer.ggml.add_bos_token", Value::boolean(false));
  w.set("tokenizer.ggml.add_eos_token", Value::boolean(true));
  w.set("tokenizer.chat_template", Value::string("{{ messages }}"));
  w.add_tensor("a", {64, 3}, DType::Q4_1, pattern_bytes(2 * 20 * 3, 0));
  w.add_tensor("b", {32}, DType::Q8_0, pattern_bytes(34, 0));
  w.add_tensor("c", {5}, DType::F32, pattern_bytes(20, 0));
  w.add_tensor("d", {7, 2}, DType::F32, pattern_bytes(56, 0));
  const File f = File::from_bytes("qwen.gguf", w.to_bytes());

  const ModelSummary s = summarize(f);
  EXPECT_EQ(s.feed_forward_length, 4864);
  EXPECT_EQ(s.head_count_kv, 2);
  EXPECT_EQ(s.head_dim, 64);
  EXPECT_FALSE(s.head_dim_derived);
  EXPECT_EQ(s.vocab_size, 3);  // from the tokenizer: no qwen2.vocab_size
  EXPECT_EQ(s.parameter_count, 192u + 32 + 5 + 14);
  EXPECT_EQ(s.weight_bytes, 120u + 34 + 20 + 56);
  ASSERT_EQ(s.tensor_types.size(), 3u);
  EXPECT_EQ(s.tensor_types[0].dtype, DType::F32);  // most tensors first
  EXPECT_EQ(s.tensor_types[0].tensors, 2u);
  EXPECT_EQ(s.tensor_types[0].elements, 19u);

  const std::string text = format_summary(s);
  EXPECT_TRUE(contains(text, "name:           Tiny \\\"Qwen\\\"\\n\n")) << text;
  EXPECT_TRUE(contains(text, "hyper-parameters (qwen2.*):\n")) << text;
  EXPECT_TRUE(contains(text, "  feed-forward length   4864\n")) << text;
  EXPECT_TRUE(contains(text, "  head dim              64\n")) << text;
  EXPECT_TRUE(contains(text, "  RoPE base             1000000\n")) << text;
  EXPECT_TRUE(contains(text, "  RoPE scaling          yarn x4 (original context 8192)\n")) << text;
  EXPECT_TRUE(contains(text, "  RMS norm epsilon      1e-06\n")) << text;
  EXPECT_TRUE(contains(text, "tensors:        4 (2 F32, 1 Q4_1, 1 Q8_0)\n")) << text;
  EXPECT_TRUE(contains(text, "tokenizer:      gpt2 (pre: qwen2)\n")) << text;
  EXPECT_TRUE(contains(text, "vocabulary:     3 tokens\n")) << text;
  EXPECT_TRUE(contains(text, "special tokens: eos 1 \"<|end|>\\n\", eot -1 (not in vocabulary)\n"))
      << text;
  EXPECT_TRUE(contains(text, "add bos/eos:    bos no, eos yes\n")) << text;
  EXPECT_TRUE(contains(text, "chat template:  present (14 bytes)\n")) << text;
  EXPECT_EQ(text.find('\r'), std::string::npos);

  const std::string tensors = format_tensors(f);
  EXPECT_TRUE(contains(tensors, "a  Q4_1  [64, 3]")) << tensors;
  EXPECT_EQ(std::count(tensors.begin(), tensors.end(), '\n'), 4);
  const std::string metadata = format_metadata(f);
  EXPECT_EQ(static_cast<size_t>(std::count(metadata.begin(), metadata.end(), '\n')),
            f.metadata().size());
  EXPECT_TRUE(contains(metadata, "array[int32, 2]")) << metadata;
  EXPECT_TRUE(contains(metadata, "[\"a\", \"<|end|>\\n\", \"c\"]")) << metadata;
}

TEST(Summary, NoArchitectureNoTensors) {
  Writer w;
  w.set("tokenizer.ggml.model", Value::string("llama"));
  const std::string text = describe(File::from_bytes("vocab.gguf", w.to_bytes()));
  EXPECT_TRUE(contains(text, "architecture:   - (no general.architecture)\n")) << text;
  EXPECT_FALSE(contains(text, "hyper-parameters")) << text;
  EXPECT_TRUE(contains(text, "tensors:        0\n")) << text;
  EXPECT_TRUE(contains(text, "special tokens: -\n")) << text;
}

TEST(Summary, WrongTypesAreErrors) {
  Writer w;
  w.set("general.architecture", Value::u32(3));
  try {
    summarize(File::from_bytes("bad.gguf", w.to_bytes()));
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "bad.gguf: metadata 'general.architecture': expected a string, found uint32");
  }
  Writer per_layer;
  per_layer.set("general.architecture", Value::string("x"));
  per_layer.set("x.attention.head_count", Value::array(ValueType::STRING, {Value::string("8")}));
  EXPECT_THROW(summarize(File::from_bytes("bad.gguf", per_layer.to_bytes())), Error);
}

TEST(Summary, Sizes) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(98362432), "93.8 MiB");
  EXPECT_EQ(format_bytes(~uint64_t{0}), "16.0 EiB");
  EXPECT_EQ(format_count(999), "999");
  EXPECT_EQ(format_count(292800), "292.8 K");
  EXPECT_EQ(format_count(134515008), "134.5 M");
  EXPECT_EQ(format_count(1236000000), "1.24 B");
}

TEST(Summary, SmolLM2) {
  const std::string path =
      std::string(TOKAMAK_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not fetched";
  const std::string text = describe(File::open(path));
  EXPECT_TRUE(contains(text, "tensors:        272 (210 Q4_1, 61 F32, 1 Q8_0)\n")) << text;
  EXPECT_TRUE(contains(text, "tokenizer:      gpt2 (pre: smollm)\n")) << text;
  EXPECT_TRUE(contains(text, "  KV head count         3\n")) << text;
  EXPECT_TRUE(contains(text, "  vocab size            49152\n")) << text;
  EXPECT_TRUE(contains(text, "bos 1 \"<|im_start|>\"")) << text;
}

}  // namespace
}  // namespace tokamak::gguf
