#pragma once
// Hyper-parameters of a llama-family model, read from the GGUF metadata under the
// architecture's prefix (`<general.architecture>.*`), never assumed. Every value is checked
// when read; a missing or impossible one is an Error naming the file and the key.

#include <cstdint>
#include <string>

namespace tokamak {

namespace gguf {
class File;
}

enum class RopeScaling { None, Linear };

struct HParams {
  std::string arch;         // general.architecture
  int32_t n_vocab = 0;      // rows of token_embd.weight (checked against <arch>.vocab_size)
  int32_t n_ctx_train = 0;  // context_length
  int32_t n_embd = 0;       // embedding_length
  int32_t n_layer = 0;      // block_count
  int32_t n_ff = 0;         // feed_forward_length
  int32_t n_head = 0;       // attention.head_count
  int32_t n_head_kv = 0;    // attention.head_count_kv (default n_head); divides n_head
  int32_t head_dim_k = 0;   // attention.key_length (default n_embd / n_head)
  int32_t head_dim_v = 0;   // attention.value_length (default n_embd / n_head)
  int32_t n_rot = 0;        // rope.dimension_count (default head_dim_k); even, <= head_dim_k
  float rms_eps = 0.0f;     // attention.layer_norm_rms_epsilon
  float rope_freq_base = 10000.0f;               // rope.freq_base
  RopeScaling rope_scaling = RopeScaling::None;  // rope.scaling.type: none | linear
  float rope_scaling_factor = 1.0f;              // rope.scaling.factor (linear: pos / factor)

  int32_t q_dim() const { return n_head * head_dim_k; }
  int32_t k_dim() const { return n_head_kv * head_dim_k; }
  int32_t v_dim() const { return n_head_kv * head_dim_v; }
  int32_t attn_out_dim() const { return n_head * head_dim_v; }
  float rope_freq_scale() const { return 1.0f / rope_scaling_factor; }

  // Reads and validates; n_vocab comes from the shape of token_embd.weight.
  static HParams from_gguf(const gguf::File& file);
};

}  // namespace tokamak
