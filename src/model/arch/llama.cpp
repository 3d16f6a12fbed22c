// The llama forward pass (llama 1-3, SmolLM, TinyLlama, ...), written against ops/ only:
//
//   x = embed(tokens)
//   for each layer:
//     h = rmsnorm(x) ; q, k, v = h·Wq, h·Wk, h·Wv ; rope(q, k)
//     cache[k, v at positions] ; x += attention(q, cache) · Wo
//                                  (contiguous cache: one sequence, llama.cpp's rounding;
//                                   paged cache: a ragged batch of many, online softmax)
//     h = rmsnorm(x) ; x += (silu(h·Wgate) * (h·Wup)) · Wdown
//   logits = rmsnorm(x[logit_rows]) · Woutput        (Woutput = token_embd when tied)
//
// Where the backend stacks weights that share an input (Ops::prepare_stacked: AVX-512 with
// quantized weights), h·Wq, h·Wk, h·Wv is one matmul and so is h·Wgate, h·Wup.

#include <cmath>
#include <memory>
#include <utility>

#include "core/aligned_buffer.h"
#include "core/error.h"
#include "format/gguf.h"
#include "kv/paged_kv_cache.h"
#include "model/arch/architectures.h"
#include "model/compute_context.h"
#include "model/llama_weights.h"
#include "model/ragged_batch.h"

namespace tokamak {
namespace {

class LlamaModel final : public Model {
 public:
  LlamaModel(std::shared_ptr<const gguf::File> file, const HParams& hp, const ModelOptions& opts)
      : file_(std::move(file)),
        hp_(hp),
        w_(LlamaWeights::load(*file_, hp_)),
        compute_(opts),
        max_tokens_(opts.max_batch_tokens),
        llama_cpp_decode_rounding_(opts.llama_cpp_decode_rounding),
        n_ctx_(opts.n_ctx > 0 ? opts.n_ctx : std::min(hp_.n_ctx_train, 4096)) {
    const size_t t = static_cast<size_t>(max_tokens_);
    x_ = AlignedBuffer<float>(t * hp_.n_embd);
    h_ = AlignedBuffer<float>(t * hp_.n_embd);
    q_ = AlignedBuffer<float>(t * hp_.q_dim());
    k_ = AlignedBuffer<float>(t * hp_.k_dim());
    v_ = AlignedBuffer<float>(t * hp_.v_dim());
    att_ = AlignedBuffer<float>(t * hp_.attn_out_dim());
    gate_ = AlignedBuffer<float>(t * hp_.n_ff);
    up_ = AlignedBuffer<float>(t * hp_.n_ff);
    const int64_t max_k = std::max({hp_.n_embd, hp_.n_ff, hp_.attn_out_dim()});
    compute_.ops().reserve(max_tokens_, max_k);
    prepare_matmul_weights();
  }

  const HParams& hparams() const override { return hp_; }
  int32_t n_ctx() const override { return n_ctx_; }
  int32_t max_batch_tokens() const override { return max_tokens_; }

  std::unique_ptr<KVCache> new_kv_cache(int32_t n_ctx) const override {
    if (n_ctx < 0) throw Error("new_kv_cache: negative n_ctx");
    return std::make_unique<KVCache>(hp_.n_layer, n_ctx > 0 ? n_ctx : n_ctx_, hp_.k_dim(),
                                     hp_.v_dim());
  }

  KVCacheShape kv_shape(int32_t block_size) const override {
    return {hp_.n_layer, hp_.n_head_kv, hp_.head_dim_k, hp_.head_dim_v, block_size};
  }

  int64_t decode_weight_bytes() const override {
    const auto bytes = [](const Tensor& t) {
      return t.data != nullptr ? static_cast<int64_t>(t.nbytes()) : int64_t{0};
    };
    int64_t sum = static_cast<int64_t>(row_bytes(w_.token_embd.dtype, hp_.n_embd)) +
                  bytes(w_.output_norm) + bytes(w_.output);
    for (const LlamaLayerWeights& L : w_.layers) {
      // The forms run() uses: stacked or gated where prepare_matmul_weights made them.
      sum += bytes(L.attn_norm) + bytes(L.ffn_norm) + bytes(L.wo) + bytes(L.w_down);
      sum += L.w_qkv.data != nullptr ? bytes(L.w_qkv) : bytes(L.wq) + bytes(L.wk) + bytes(L.wv);
      if (L.w_gated.data != nullptr) {
        sum += 2 * bytes(L.w_gated);  // shaped as its output, (n_ff, n_embd), holding both
      } else if (L.w_gate_up.data != nullptr) {
        sum += bytes(L.w_gate_up);
      } else {
        sum += bytes(L.w_gate) + bytes(L.w_up);
      }
    }
    return sum;
  }

  int64_t matmul_flops_per_token() const override {
    const int64_t embd = hp_.n_embd;
    const int64_t per_layer = embd * (hp_.q_dim() + hp_.k_dim() + hp_.v_dim()) +
                              int64_t{hp_.attn_out_dim()} * embd + 3 * embd * hp_.n_ff;
    return 2 * per_layer * hp_.n_layer;
  }
  int64_t attention_flops_per_pair() const override {
    return 2 * int64_t{hp_.n_layer} * hp_.n_head * (hp_.head_dim_k + hp_.head_dim_v);
  }

  void forward(const Batch& batch, KVCache& kv, std::span<float> logits) override;
  void forward(const RaggedBatch& batch, PagedKVCache& kv, std::span<float> logits) override;
  void shift_kv_positions(PagedKVCache& kv, std::span<const int32_t> blocks, int32_t first_row,
                          int32_t n_rows, int32_t delta) override;

 private:
  // Every matmul weight in the form the backend computes fastest with (repacked copies on
  // AVX-512). token_embd stays as the file has it for the lookup, even when the output head
  // is tied to it: the head then gets its own copy.
  void prepare_matmul_weights() {
    Ops& ops = compute_.ops();
    // The file's copy of a repacked weight is not read again: let its pages go, so that the
    // process does not hold the weights twice. A tied head's source is token_embd, whose
    // lookups then read back only the pages of the rows they need.
    const auto drop_file_copy = [&](const Tensor& t) {
      file_->drop_pages(t.data, row_bytes(t.dtype, t.row_size()) * t.n_rows());
    };
    const auto prepare = [&](Tensor& t) {
      const Tensor prepared = ops.prepare_weight(t);
      if (prepared.data != t.data) drop_file_copy(t);
      t = prepared;
    };
    // Weights that share an input go stacked into one tensor where the backend can, else
    // each on its own.
    const auto stack = [&](std::initializer_list<Tensor*> ws) {
      std::vector<Tensor> parts;
      for (const Tensor* t : ws) parts.push_back(*t);
      const Tensor stacked = ops.prepare_stacked(parts);
      for (Tensor* t : ws) {
        if (stacked.data == nullptr) {
          prepare(*t);
        } else {
          drop_file_copy(*t);
        }
      }
      return stacked;
    };
    for (LlamaLayerWeights& L : w_.layers) {
      L.w_qkv = stack({&L.wq, &L.wk, &L.wv});
      L.w_gated = ops.prepare_gated(L.w_gate, L.w_up);
      if (L.w_gated.data != nullptr) {
        drop_file_copy(L.w_gate);
        drop_file_copy(L.w_up);
      } else {
        L.w_gate_up = stack({&L.w_gate, &L.w_up});
      }
      prepare(L.wo);
      prepare(L.w_down);
    }
    prepare(w_.output);
  }

  // The forward pass over `tokens` at `positions`, the same for both caches except for
  // attend(layer, q_heads, k, v, att): store the step's K/V and write attention into att.
  template <typename Attend>
  void run(std::span<const int32_t> tokens, std::span<const int32_t> positions,
           std::span<const int32_t> logit_rows, std::span<float> logits, const Attend& attend);

  AttentionParams attention_params(bool single_token_order) const {
    return {hp_.n_head,
            hp_.n_head_kv,
            hp_.head_dim_k,
            hp_.head_dim_v,
            1.0f / std::sqrt(static_cast<float>(hp_.head_dim_k)),
            single_token_order};
  }

  RopeParams rope_params() const {
    return {hp_.n_rot, hp_.rope_freq_base, hp_.rope_freq_scale()};
  }
  // k (t, n_head_kv * head_dim_k) seen as (t, n_head_kv, head_dim_k), for rope().
  Tensor k_heads_of(const Tensor& k) const {
    return Tensor::contiguous(DType::F32, {k.shape[0], hp_.n_head_kv, hp_.head_dim_k}, k.data);
  }

  // A (rows, cols) F32 view of the first `rows` rows of a workspace.
  static Tensor view(AlignedBuffer<float>& buf, int64_t rows, int64_t cols) {
    return Tensor::contiguous(DType::F32, {rows, cols}, buf.data());
  }

  std::shared_ptr<const gguf::File> file_;  // keeps the mapped weights alive
  HParams hp_;
  LlamaWeights w_;
  ComputeContext compute_;
  int32_t max_tokens_;
  bool llama_cpp_decode_rounding_;
  int32_t n_ctx_;

  // Workspaces, sized for max_tokens_ rows:
  AlignedBuffer<float> x_;     // (t, n_embd)        residual stream
  AlignedBuffer<float> h_;     // (t, n_embd)        normalised input of a block
  AlignedBuffer<float> q_;     // (t, n_head, hd_k)
  AlignedBuffer<float> k_;     // (t, n_head_kv, hd_k)
  AlignedBuffer<float> v_;     // (t, n_head_kv * hd_v)
  AlignedBuffer<float> att_;   // (t, n_head * hd_v) attention output
  AlignedBuffer<float> gate_;  // (t, n_ff)
  AlignedBuffer<float> up_;    // (t, n_ff)
};

void LlamaModel::forward(const Batch& batch, KVCache& kv, std::span<float> logits) {
  validate_batch(batch, kv, hp_, max_tokens_, logits.size());
  const ProfiledStep step(compute_.profile(),
                          batch.tokens.size() == 1 ? StepKind::Decode : StepKind::Prefill);
  const int32_t t = static_cast<int32_t>(batch.tokens.size());
  const int32_t pos0 = kv.size();
  const AttentionParams attn =
      attention_params(llama_cpp_decode_rounding_ && batch.tokens.size() == 1);
  Ops& ops = compute_.ops();
  run(batch.tokens, batch.positions, batch.logit_rows, logits,
      [&](int32_t l, const Tensor& q_heads, const Tensor& k, const Tensor& v, const Tensor& att) {
        ops.rope(k_heads_of(k), batch.positions, rope_params());
        ops.copy(k, kv.key_rows(l, pos0, t));
        ops.copy(v, kv.value_rows(l, pos0, t));
        ops.attention(q_heads, kv.keys(l), kv.values(l), batch.positions, attn, att);
      });
  kv.advance(t);
}

void LlamaModel::forward(const RaggedBatch& batch, PagedKVCache& kv, std::span<float> logits) {
  validate_ragged_batch(batch, kv, hp_, max_tokens_, logits.size());
  // A step is a decode step when every sequence in it brings one new token.
  const ProfiledStep step(compute_.profile(), batch.tokens.size() == batch.seqs.size()
                                                  ? StepKind::Decode
                                                  : StepKind::Prefill);
  const AttentionParams attn = attention_params(false);
  Ops& ops = compute_.ops();
  run(batch.tokens, batch.positions, batch.logit_rows, logits,
      [&](int32_t l, const Tensor& q_heads, const Tensor& k, const Tensor& v, const Tensor& att) {
        const PagedKVView layer = kv.layer(l);
        // Keys are rotated (RoPE) on their way into the cache.
        if (layer.hot_window_blocks > 0) {
          // Rows go to the hot copies; the blocks they fill are encoded into the main pool.
          const PagedKVView hot = layer.hot_view();
          ops.rope_write_paged_kv(k, v, batch.positions, rope_params(), batch.hot_slots, hot);
          ops.encode_kv_blocks(hot, layer, batch.filled);
        } else {
          ops.rope_write_paged_kv(k, v, batch.positions, rope_params(), batch.slots, layer);
        }
        ops.paged_attention(q_heads, layer, batch.seqs, attn, att);
      });
}

void LlamaModel::shift_kv_positions(PagedKVCache& kv, std::span<const int32_t> blocks,
                                    int32_t first_row, int32_t n_rows, int32_t delta) {
  if (n_rows == 0 || delta == 0) return;
  for (int32_t l = 0; l < hp_.n_layer; ++l) {
    compute_.ops().shift_paged_k(kv.layer(l), blocks, first_row, n_rows, delta, rope_params());
  }
}

template <typename Attend>
void LlamaModel::run(std::span<const int32_t> tokens, std::span<const int32_t> positions,
                     std::span<const int32_t> logit_rows, std::span<float> logits,
                     const Attend& attend) {
  Ops& ops = compute_.ops();
  const int64_t t = static_cast<int64_t>(tokens.size());

  const Tensor x = view(x_, t, hp_.n_embd);
  const Tensor h = view(h_, t, hp_.n_embd);
  const Tensor q = view(q_, t, hp_.q_dim());
  const Tensor k = view(k_, t, hp_.k_dim());
  const Tensor v = view(v_, t, hp_.v_dim());
  const Tensor q_heads = Tensor::contiguous(DType::F32, {t, hp_.n_head, hp_.head_dim_k}, q_.data());
  const Tensor att = view(att_, t, hp_.attn_out_dim());
  const Tensor gate = view(gate_, t, hp_.n_ff);
  const Tensor up = view(up_, t, hp_.n_ff);
  const RopeParams rope = rope_params();

  // x = token embeddings
  ops.embedding(w_.token_embd, tokens, x);

  for (int32_t l = 0; l < hp_.n_layer; ++l) {
    const LlamaLayerWeights& L = w_.layers[static_cast<size_t>(l)];

    // Attention block: project, rotate, cache K/V and attend over the cache, project back.
    if (L.w_qkv.data != nullptr) {
      // The norm is applied as the rows are encoded for the matmul.
      const Tensor qkv_out[] = {q, k, v};
      ops.matmul_stacked(x, {L.attn_norm, hp_.rms_eps}, L.w_qkv, qkv_out);
    } else {
      ops.rmsnorm(x, L.attn_norm, hp_.rms_eps, h);
      ops.matmul(h, L.wq, q);
      ops.matmul(h, L.wk, k);
      ops.matmul(h, L.wv, v);
    }
    ops.rope(q_heads, positions, rope);
    attend(l, q_heads, k, v, att);  // rotates k too, as it stores it
    ops.matmul_add(att, L.wo, x);  // x += att · Woᵀ, the residual in the epilogue

    // Feed-forward block (SwiGLU).
    const InputNorm ffn_norm{L.ffn_norm, hp_.rms_eps};
    if (L.w_gated.data != nullptr) {
      ops.matmul_gated(x, ffn_norm, L.w_gated, gate);  // silu(h · gateᵀ) * (h · upᵀ)
    } else {
      if (L.w_gate_up.data != nullptr) {
        const Tensor gate_up_out[] = {gate, up};
        ops.matmul_stacked(x, ffn_norm, L.w_gate_up, gate_up_out);
      } else {
        ops.rmsnorm(x, L.ffn_norm, hp_.rms_eps, h);
        ops.matmul(h, L.w_gate, gate);
        ops.matmul(h, L.w_up, up);
      }
      ops.silu_mul(gate, up, gate);
    }
    ops.matmul_add(gate, L.w_down, x);
  }

  // Logits for the requested rows only: gather, normalise, project onto the vocabulary.
  const int64_t n_out = static_cast<int64_t>(logit_rows.size());
  if (n_out == 0) return;
  const Tensor rows = view(h_, n_out, hp_.n_embd);
  ops.embedding(x, logit_rows, rows);
  ops.rmsnorm(rows, w_.output_norm, hp_.rms_eps, rows);
  ops.matmul(rows, w_.output, Tensor::contiguous(DType::F32, {n_out, hp_.n_vocab}, logits.data()));
}

}  // namespace

std::unique_ptr<Model> make_llama_model(std::shared_ptr<const gguf::File> file,
                                        const HParams& hparams, const ModelOptions& opts) {
  return std::make_unique<LlamaModel>(std::move(file), hparams, opts);
}

}  // namespace tokamak
