#pragma once
// The weights of a llama-family model as views into the mapped GGUF file (zero copy), each
// checked at load for presence, shape (against HParams) and dtype:
//
//   token_embd.weight        (n_vocab, n_embd)          any supported dtype
//   blk.N.attn_norm.weight   (n_embd)                   F32
//   blk.N.attn_q.weight      (n_head * hd_k, n_embd)    matmul dtype
//   blk.N.attn_k.weight      (n_head_kv * hd_k, n_embd)
//   blk.N.attn_v.weight      (n_head_kv * hd_v, n_embd)
//   blk.N.attn_output.weight (n_embd, n_head * hd_v)
//   blk.N.ffn_norm.weight    (n_embd)                   F32
//   blk.N.ffn_gate.weight    (n_ff, n_embd)
//   blk.N.ffn_up.weight      (n_ff, n_embd)
//   blk.N.ffn_down.weight    (n_embd, n_ff)
//   output_norm.weight       (n_embd)                   F32
//   output.weight            (n_vocab, n_embd)          optional: tied to token_embd if absent
//
// (Shapes outermost first; GGUF lists them the other way round.) "matmul dtype" is F32, F16,
// BF16, Q8_0, Q4_0 or Q4_1.

#include <vector>

#include "core/tensor.h"
#include "model/hparams.h"

namespace tokamak {

namespace gguf {
class File;
}

struct LlamaLayerWeights {
  Tensor attn_norm;
  Tensor wq;
  Tensor wk;
  Tensor wv;
  Tensor wo;
  Tensor ffn_norm;
  Tensor w_gate;
  Tensor w_up;
  Tensor w_down;
  // Set by the model when its backend stacks them (Ops::prepare_stacked): wq, wk and wv as
  // one tensor, w_gate and w_up as one; data null otherwise.
  Tensor w_qkv;
  Tensor w_gate_up;
  // w_gate and w_up as a gated pair (Ops::prepare_gated) when the backend has that form,
  // which SwiGLU is then applied in; data null otherwise (w_gate_up or the two are used).
  Tensor w_gated;
};

struct LlamaWeights {
  Tensor token_embd;
  std::vector<LlamaLayerWeights> layers;
  Tensor output_norm;
  Tensor output;  // token_embd when the file ties them
  bool tied_output = false;

  // Throws Error("<path>: tensor <name>: <problem>") for anything missing or inconsistent.
  static LlamaWeights load(const gguf::File& file, const HParams& hp);
};

}  // namespace tokamak
