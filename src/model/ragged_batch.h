#pragma once
// The unit of work of one serving-engine step: a flat, ragged batch of the new tokens of
// many sequences (prefill chunks of some, single decode tokens of others), over the paged
// KV cache.
//
//   rows:      | seq A: prefill chunk, 5 tokens | seq B: 1 decode token | seq C: 1 decode |
//   tokens     | t t t t t                      | t                     | t               |
//   positions  | 32 33 34 35 36                 | 7                     | 130             |
//   slots      | cache slot of each token (block_table[pos / bs] * bs + pos % bs)        |
//   seqs       | {0, 5, 37, A's table}          | {5, 1, 8, B's table}  | {6, 1, 131, C's} |
//   logit_rows | (A's last row if its prompt ends here)  5                   6             |
//
// The linear layers run once over all rows; attention runs per sequence over its own blocks;
// logits are computed only for logit_rows (the rows that are sampled).

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/paged_kv_view.h"
#include "model/hparams.h"

namespace tokamak {

class PagedKVCache;

struct RaggedBatch {
  std::span<const int32_t> tokens;      // (n_tokens)
  std::span<const int32_t> positions;   // (n_tokens)
  std::span<const int64_t> slots;       // (n_tokens) where each token's K/V are written
  std::span<const SeqAttention> seqs;   // in row order, covering [0, n_tokens) exactly
  std::span<const int32_t> logit_rows;  // ascending rows whose logits are wanted
  // Hot window only (PagedKVCache::hot()), else empty: where each token's K/V are written in
  // the hot copies (the main pool gets whole blocks only), and the blocks the batch fills,
  // to be encoded from their hot copies into the main pool.
  std::span<const int64_t> hot_slots = {};     // (n_tokens)
  std::span<const KVBlockEncode> filled = {};  // blocks whose last row is in this batch
};

// Throws Error unless: 1 <= n_tokens <= max_tokens; positions, slots and seqs are mutually
// consistent (each seq's rows are contiguous, its positions run context_len - n_query ..
// context_len - 1, each slot is the one its block table gives for the position); block ids
// are inside kv's pool; token ids are in [0, n_vocab); logit_rows are strictly ascending
// rows; logits_size == logit_rows.size() * n_vocab; kv has the model's shape.
void validate_ragged_batch(const RaggedBatch& batch, const PagedKVCache& kv, const HParams& hp,
                           int32_t max_tokens, size_t logits_size);

}  // namespace tokamak
