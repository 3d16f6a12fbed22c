#pragma once
// A loaded model: the public face of model/. Model::load reads the architecture from the
// GGUF file and builds it through the architecture registry (model/registry.h); the forward
// pass of each architecture lives in model/arch/<name>.cpp, written against ops/ only.
//
// Typical use (one sequence):
//   auto model = Model::load(file, {.n_threads = 2});
//   auto kv = model->new_kv_cache(0);
//   std::vector<float> logits(model->hparams().n_vocab);
//   model->forward({prompt, positions, last_row}, *kv, logits);   // prefill (chunked by caller)
//   model->forward({next, {pos}, {0}}, *kv, logits);              // decode, one token a step

#include <cstdint>
#include <memory>
#include <span>

#include "kv/kv_cache.h"
#include "kv/paged_kv_cache.h"
#include "model/batch.h"
#include "model/hparams.h"
#include "model/model_options.h"
#include "model/ragged_batch.h"

namespace tokamak {

namespace gguf {
class File;
}

class Model {
 public:
  virtual ~Model() = default;

  // Builds the model of `file`'s architecture; throws Error naming the file and the problem
  // (unknown architecture, bad hyper-parameters, missing or malformed tensors). The weights
  // stay in the file's memory map, which the model keeps alive through `file`.
  static std::unique_ptr<Model> load(std::shared_ptr<const gguf::File> file,
                                     const ModelOptions& opts = {});

  virtual const HParams& hparams() const = 0;
  virtual int32_t n_ctx() const = 0;  // the default cache length
  virtual int32_t max_batch_tokens() const = 0;

  // A cache of n_ctx positions (0 = n_ctx()) shaped for this model.
  virtual std::unique_ptr<KVCache> new_kv_cache(int32_t n_ctx = 0) const = 0;

  // Runs the batch, appending its K/V to `kv`; writes logits (logit_rows.size(), n_vocab)
  // row-major into `logits`. Allocates nothing. Throws Error for a batch that does not fit
  // (empty, more than max_batch_tokens, past the cache, positions not continuing the cache,
  // token ids out of the vocabulary, logit rows out of order, wrong logits size).
  virtual void forward(const Batch& batch, KVCache& kv, std::span<float> logits) = 0;

  // Bytes of weights one decode token reads, in the form the backend computes with (repacked
  // copies included): every matrix and norm of every layer and the output head once, and one
  // row of the embedding table. With the KV bytes it reads, the numerator of a decode floor
  // (docs/BENCHMARKS.md).
  virtual int64_t decode_weight_bytes() const = 0;

  // Arithmetic of a token, the numerator of a prefill floor (docs/BENCHMARKS.md), a multiply-add
  // counting as two operations: every layer's matmuls once (the output head, which a prefill
  // runs for its last token only, left out), and per (query, key) pair of attention, the
  // scores' and the values' products of every head of every layer. A prompt of n tokens
  // costs n * matmul_flops_per_token() + n (n + 1) / 2 * attention_flops_per_pair().
  virtual int64_t matmul_flops_per_token() const = 0;
  virtual int64_t attention_flops_per_pair() const = 0;

  // The shape of a paged KV cache for this model (PagedKVCache is built by the engine, sized
  // from its memory budget).
  virtual KVCacheShape kv_shape(int32_t block_size) const = 0;

  // The serving engine's step: runs a ragged batch of many sequences' new tokens, writing
  // their K/V into `kv` at batch.slots; logits (logit_rows.size(), n_vocab) row-major into
  // `logits`. Attention uses the online-softmax paged kernel in float (closer to exact
  // attention than forward(Batch, KVCache&), which rounds q and the probabilities to F16 as
  // llama.cpp does). The two differ by ulps in attention, but the 8-bit quantization of the
  // activations feeding quantized weights can flip a code on such a difference and the model
  // amplifies it: on the default model the logits of the two paths differ by up to 1-2, as
  // much as each differs from a float64 forward (tests/model/ragged_forward_test.cpp), so
  // near-ties can be decided differently. Every row's result is the same whatever else is in
  // the batch. Allocates nothing. Throws Error for a
  // batch that validate_ragged_batch rejects.
  virtual void forward(const RaggedBatch& batch, PagedKVCache& kv, std::span<float> logits) = 0;

  // Re-rotates the keys of rows [first_row, first_row + n_rows) of the listed blocks (a
  // sequence's table, block_size rows each) from their positions p to p + delta, in every
  // layer (Ops::shift_paged_k): what a sliding KV window needs after dropping tokens before
  // them, so that positions stay those in the cache (StreamingLLM).
  virtual void shift_kv_positions(PagedKVCache& kv, std::span<const int32_t> blocks,
                                  int32_t first_row, int32_t n_rows, int32_t delta) = 0;
};

}  // namespace tokamak
