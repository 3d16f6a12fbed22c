#include "model/synthetic_model.h"

#include <cmath>
#include <random>

#include "core/error.h"
#include "format/gguf.h"
#include "kernels/cpu/quantize.h"

namespace tokamak {
namespace {

using gguf::Value;
using gguf::ValueType;

// Deterministic uniform floats in [-a, a] (independent of the standard library's
// distributions, so a seed means the same model everywhere).
class Uniform {
 public:
  explicit Uniform(uint64_t seed) : rng_(seed) {}
  float operator()(float a) {
    const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;  // [0, 1)
    return static_cast<float>((2.0 * u - 1.0) * a);
  }

 private:
  std::mt19937_64 rng_;
};

std::vector<uint8_t> encode(DType dtype, const std::vector<float>& values, int64_t row) {
  const size_t rb = row_bytes(dtype, row);
  const int64_t rows = static_cast<int64_t>(values.size()) / row;
  std::vector<uint8_t> out(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    cpu::quantize_row(dtype, values.data() + r * row, out.data() + static_cast<size_t>(r) * rb,
                      row);
  }
  return out;
}

void add_vocab(SyntheticModel& m, int32_t n_vocab) {
  std::vector<Value> tokens;
  std::vector<Value> scores;
  std::vector<Value> types;
  const auto push = [&](std::string piece, int32_t type) {
    if (static_cast<int32_t>(tokens.size()) >= n_vocab) return;
    scores.push_back(Value::f32(type == 1 ? -static_cast<float>(tokens.size()) : 0.0f));
    tokens.push_back(Value::string(std::move(piece)));
    types.push_back(Value::i32(type));
  };
  push("<unk>", 2);
  push("<s>", 3);
  push("</s>", 3);
  static const char* kHex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    push(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 6);
  }
  const std::string space = "\xe2\x96\x81";  // U+2581, SentencePiece's word boundary
  push(space, 1);
  for (char c = 'a'; c <= 'z'; ++c) push(std::string(1, c), 1);
  for (char c = 'a'; c <= 'z'; ++c) push(space + c, 1);
  for (char a = 'a'; a <= 'z'; ++a) {
    for (char b = 'a'; b <= 'z'; ++b) push(std::string{a, b}, 1);
  }
  for (int i = 0; static_cast<int32_t>(tokens.size()) < n_vocab; ++i) {
    push("<dummy" + std::to_string(i) + ">", 1);
  }
  m.set("tokenizer.ggml.model", Value::string("llama"));
  m.set("tokenizer.ggml.tokens", Value::array(ValueType::STRING, std::move(tokens)));
  m.set("tokenizer.ggml.scores", Value::array(ValueType::FLOAT32, std::move(scores)));
  m.set("tokenizer.ggml.token_type", Value::array(ValueType::INT32, std::move(types)));
  m.set("tokenizer.ggml.unknown_token_id", Value::u32(0));
  m.set("tokenizer.ggml.bos_token_id", Value::u32(1));
  m.set("tokenizer.ggml.eos_token_id", Value::u32(2));
  m.set("tokenizer.ggml.add_bos_token", Value::boolean(true));
}

// GGML's llama_ftype of a file whose matrices are mostly `d`.
uint32_t synthetic_file_type(DType d) {
  const auto t = gguf_file_type(d);
  if (!t) throw Error("synthetic model: unsupported dtype " + std::string(dtype_name(d)));
  return *t;
}

void check_spec(const SyntheticModelSpec& s) {
  const auto fail = [](const std::string& what) { throw Error("synthetic model: " + what); };
  if (s.n_vocab <= 0 || s.n_embd <= 0 || s.n_layer <= 0 || s.n_head <= 0 || s.n_head_kv <= 0 ||
      s.n_ff <= 0 || s.n_ctx <= 0) {
    fail("every size must be positive");
  }
  if (s.n_head % s.n_head_kv != 0) fail("n_head must be a multiple of n_head_kv");
  if (s.n_embd % s.n_head != 0) fail("n_embd must be a multiple of n_head");
  const int32_t hd = s.n_embd / s.n_head;
  if (s.n_rot < 0 || s.n_rot > hd || s.n_rot % 2 != 0) fail("n_rot must be even and <= head dim");
  for (DType d : {s.weight_dtype, s.embedding_dtype}) {
    if (!cpu::can_quantize(d) || d == DType::Q8_1) {
      fail("unsupported dtype " + std::string(dtype_name(d)));
    }
    const uint32_t bs = dtype_info(d).block_size;
    if (s.n_embd % bs != 0 || (d == s.weight_dtype && s.n_ff % bs != 0)) {
      fail("n_embd and n_ff must be multiples of the " + std::string(dtype_name(d)) +
           " block size " + std::to_string(bs));
    }
  }
}

}  // namespace

std::optional<SyntheticModelSpec> synthetic_shape(std::string_view name) {
  SyntheticModelSpec s;
  if (name == "tiny") return s;
  if (name == "smol") {
    s.n_vocab = 49152;
    s.n_embd = 576;
    s.n_layer = 30;
    s.n_head = 9;
    s.n_head_kv = 3;
    s.n_ff = 1536;
    s.n_ctx = 8192;
    s.rope_freq_base = 100000.0f;
    s.tied_output = true;
    return s;
  }
  if (name == "1b") {
    s.n_vocab = 128256;
    s.n_embd = 2048;
    s.n_layer = 16;
    s.n_head = 32;
    s.n_head_kv = 8;
    s.n_ff = 8192;
    s.n_ctx = 8192;
    s.rope_freq_base = 500000.0f;
    s.tied_output = true;
    return s;
  }
  return std::nullopt;
}

TokenizerMetadata tokenizer_metadata(const gguf::File& file) {
  const Value::Array* tokens = file.get_array("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->empty()) {
    throw Error(file.path() + ": no tokenizer (tokenizer.ggml.tokens) to copy");
  }
  TokenizerMetadata tok;
  tok.n_tokens = static_cast<int32_t>(tokens->size());
  for (const auto& [key, value] : file.metadata()) {
    if (key.starts_with("tokenizer.")) tok.entries.emplace_back(key, value);
  }
  return tok;
}

SyntheticModel::TensorData* SyntheticModel::find(const std::string& name) {
  for (auto& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

void SyntheticModel::set(const std::string& key, Value value) {
  for (auto& [k, v] : metadata) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata.emplace_back(key, std::move(value));
}

void SyntheticModel::erase(const std::string& key) {
  for (auto it = metadata.begin(); it != metadata.end(); ++it) {
    if (it->first == key) {
      metadata.erase(it);
      return;
    }
  }
}

void SyntheticModel::set_tokenizer(const TokenizerMetadata& tok) {
  const TensorData* embd = find("token_embd.weight");
  if (embd == nullptr || embd->shape.size() != 2 || embd->shape[1] != tok.n_tokens) {
    throw Error("synthetic model: the tokenizer has " + std::to_string(tok.n_tokens) +
                " tokens, the model's vocabulary another size");
  }
  std::erase_if(metadata, [](const auto& kv) { return kv.first.starts_with("tokenizer."); });
  for (const auto& [k, v] : tok.entries) set(k, v);
  set("llama.vocab_size", Value::u32(static_cast<uint32_t>(tok.n_tokens)));
}

gguf::Writer SyntheticModel::to_writer() const& {
  gguf::Writer w;
  for (const auto& [k, v] : metadata) w.set(k, v);
  for (const auto& t : tensors) w.add_tensor(t.name, t.shape, t.dtype, t.data);
  return w;
}

gguf::Writer SyntheticModel::to_writer() && {
  gguf::Writer w;
  for (const auto& [k, v] : metadata) w.set(k, v);
  for (auto& t : tensors) w.add_tensor(t.name, t.shape, t.dtype, std::move(t.data));
  tensors.clear();
  return w;
}

void SyntheticModel::write(const std::string& path) const& {
  to_writer().write(path);
}

void SyntheticModel::write(const std::string& path) && {
  std::move(*this).to_writer().write(path);
}

SyntheticModel make_synthetic_model(const SyntheticModelSpec& s) {
  check_spec(s);
  SyntheticModel m;
  const int32_t hd = s.n_embd / s.n_head;
  m.set("general.architecture", Value::string("llama"));
  m.set("general.name", Value::string(s.name));
  m.set("general.file_type", Value::u32(synthetic_file_type(s.weight_dtype)));
  m.set("llama.context_length", Value::u32(static_cast<uint32_t>(s.n_ctx)));
  m.set("llama.embedding_length", Value::u32(static_cast<uint32_t>(s.n_embd)));
  m.set("llama.block_count", Value::u32(static_cast<uint32_t>(s.n_layer)));
  m.set("llama.feed_forward_length", Value::u32(static_cast<uint32_t>(s.n_ff)));
  m.set("llama.attention.head_count", Value::u32(static_cast<uint32_t>(s.n_head)));
  m.set("llama.attention.head_count_kv", Value::u32(static_cast<uint32_t>(s.n_head_kv)));
  m.set("llama.attention.layer_norm_rms_epsilon", Value::f32(s.rms_eps));
  m.set("llama.rope.freq_base", Value::f32(s.rope_freq_base));
  m.set("llama.rope.dimension_count", Value::u32(static_cast<uint32_t>(s.n_rot ? s.n_rot : hd)));
  if (s.rope_scaling_factor > 0.0f) {
    m.set("llama.rope.scaling.type", Value::string("linear"));
    m.set("llama.rope.scaling.factor", Value::f32(s.rope_scaling_factor));
  }
  m.set("llama.vocab_size", Value::u32(static_cast<uint32_t>(s.n_vocab)));
  add_vocab(m, s.n_vocab);

  Uniform rand(s.seed);
  // A matrix (rows, cols) in our order = GGUF shape [cols, rows], variance 1 / cols.
  const auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, DType dtype,
                          float amplitude) {
    std::vector<float> values(static_cast<size_t>(rows * cols));
    for (float& v : values) v = rand(amplitude);
    m.tensors.push_back({name, {cols, rows}, dtype, encode(dtype, values, cols)});
  };
  const auto fan_in = [](int64_t cols) { return std::sqrt(3.0f / static_cast<float>(cols)); };
  const auto norm = [&](const std::string& name) {
    std::vector<float> values(static_cast<size_t>(s.n_embd));
    for (float& v : values) v = 1.0f + rand(0.2f);
    m.tensors.push_back({name, {s.n_embd}, DType::F32, encode(DType::F32, values, s.n_embd)});
  };

  matrix("token_embd.weight", s.n_vocab, s.n_embd, s.embedding_dtype, 1.0f);
  for (int32_t l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const DType w = s.weight_dtype;
    norm(p + "attn_norm.weight");
    matrix(p + "attn_q.weight", int64_t{s.n_head} * hd, s.n_embd, w, fan_in(s.n_embd));
    matrix(p + "attn_k.weight", int64_t{s.n_head_kv} * hd, s.n_embd, w, fan_in(s.n_embd));
    matrix(p + "attn_v.weight", int64_t{s.n_head_kv} * hd, s.n_embd, w, fan_in(s.n_embd));
    matrix(p + "attn_output.weight", s.n_embd, int64_t{s.n_head} * hd, w, fan_in(s.n_embd));
    norm(p + "ffn_norm.weight");
    matrix(p + "ffn_gate.weight", s.n_ff, s.n_embd, w, fan_in(s.n_embd));
    matrix(p + "ffn_up.weight", s.n_ff, s.n_embd, w, fan_in(s.n_embd));
    matrix(p + "ffn_down.weight", s.n_embd, s.n_ff, w, fan_in(s.n_ff));
  }
  norm("output_norm.weight");
  if (!s.tied_output) {
    matrix("output.weight", s.n_vocab, s.n_embd, s.weight_dtype, fan_in(s.n_embd));
  }
  return m;
}

}  // namespace tokamak
