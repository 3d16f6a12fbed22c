// Real GGUF files open and read as expected: the stories260K llama, llama.cpp's
// vocabulary-only files, and the default SmolLM2 model when it has been fetched.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "format/gguf.h"
#include "gguf_test_util.h"

namespace tokamak::gguf {
namespace {

std::map<DType, int> count_types(const File& f) {
  std::map<DType, int> counts;
  for (const auto& t : f.tensors()) counts[t.dtype]++;
  return counts;
}

// Data sections of llama.cpp files are laid out back to back in declaration order.
void expect_contiguous(const File& f) {
  uint64_t expected = 0;
  for (const auto& t : f.tensors()) {
    ASSERT_EQ(t.offset, expected) << t.name;
    expected += (t.nbytes + f.alignment() - 1) / f.alignment() * f.alignment();
  }
}

TEST(RealFiles, Stories260K) {
  const File f = File::open(test::shared_file("testdata/stories260K.gguf"));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.file_size(), 1185376u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.metadata().size(), 19u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("llama.context_length"), 2048);
  EXPECT_EQ(f.get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f.get_int("llama.block_count"), 5);
  EXPECT_EQ(f.get_int("llama.feed_forward_length"), 172);
  EXPECT_EQ(f.get_int("llama.attention.head_count"), 8);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(f.get_int("llama.rope.dimension_count"), 8);
  EXPECT_FLOAT_EQ(static_cast<float>(*f.get_float("llama.attention.layer_norm_rms_epsilon")),
                  1e-5f);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(f.get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(f.get_int("tokenizer.ggml.eos_token_id"), 2);
  const Value::Array* tokens = f.get_array("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[1].as_string(), "<s>");
  EXPECT_EQ(f.get_array("tokenizer.ggml.scores")->size(), 512u);
  EXPECT_EQ(f.find("tokenizer.ggml.token_type")->elem_type(), ValueType::INT32);

  ASSERT_EQ(f.tensors().size(), 48u);
  EXPECT_EQ(count_types(f), (std::map<DType, int>{{DType::F32, 48}}));
  expect_contiguous(f);
  const TensorInfo* emb = f.find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->shape, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(emb->nbytes, 64u * 512 * 4);
  const TensorInfo* down = f.find_tensor("blk.4.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->shape, (std::vector<int64_t>{172, 64}));
  int64_t params = 0;
  for (const auto& t : f.tensors()) params += t.n_elements();
  EXPECT_EQ(params, 292800);
  // The last tensor ends at the end of the file; weights are finite floats.
  const TensorInfo& last = f.tensors().back();
  EXPECT_EQ(f.data_offset() + last.offset + last.nbytes, f.file_size());
  float w;
  std::memcpy(&w, emb->data, sizeof w);
  EXPECT_TRUE(std::isfinite(w));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(emb->data) % 32, 0u);
}

TEST(RealFiles, VocabularyOnlyFiles) {
  struct Expected {
    const char* file;
    const char* model;
    size_t tokens;
  };
  for (const auto& e : {Expected{"ggml-vocab-gpt-2.gguf", "gpt2", 50257},
                        Expected{"ggml-vocab-llama-spm.gguf", "llama", 32000}}) {
    SCOPED_TRACE(e.file);
    const File f = File::open(test::shared_file(std::string("testdata/tokenizer/") + e.file));
    EXPECT_EQ(f.version(), 3u);
    EXPECT_TRUE(f.tensors().empty());
    EXPECT_EQ(f.get_string("tokenizer.ggml.model"), e.model);
    ASSERT_NE(f.get_array("tokenizer.ggml.tokens"), nullptr);
    EXPECT_EQ(f.get_array("tokenizer.ggml.tokens")->size(), e.tokens);
  }
}

TEST(RealFiles, SmolLM2DefaultModel) {
  const std::string path =
      std::string(TOKAMAK_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not fetched";
  const File f = File::open(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("llama.block_count"), 30);
  EXPECT_EQ(f.get_int("llama.embedding_length"), 576);
  EXPECT_EQ(f.get_int("llama.attention.head_count"), 9);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 3);
  EXPECT_EQ(f.get_float("llama.rope.freq_base"), 100000.0);
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f.get_array("tokenizer.ggml.tokens")->size(), 49152u);
  EXPECT_EQ(f.get_array("tokenizer.ggml.merges")->size(), 48900u);
  EXPECT_TRUE(f.get_string("tokenizer.chat_template").has_value());

  ASSERT_EQ(f.tensors().size(), 272u);
  EXPECT_EQ(count_types(f),
            (std::map<DType, int>{{DType::Q4_1, 210}, {DType::F32, 61}, {DType::Q8_0, 1}}));
  expect_contiguous(f);
  const TensorInfo* emb = f.find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->dtype, DType::Q8_0);
  EXPECT_EQ(emb->shape, (std::vector<int64_t>{576, 49152}));
  EXPECT_EQ(emb->nbytes, 576u / 32 * 34 * 49152);
}

}  // namespace
}  // namespace tokamak::gguf
