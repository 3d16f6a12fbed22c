#include "model/ragged_batch.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "kv/paged_kv_cache.h"

namespace tokamak {

void validate_ragged_batch(const RaggedBatch& batch, const PagedKVCache& kv, const HParams& hp,
                           int32_t max_tokens, size_t logits_size) {
  const size_t n = batch.tokens.size();
  if (n == 0) throw Error("forward: empty batch");
  if (n > static_cast<size_t>(max_tokens)) {
    throw Error("forward: batch of " + std::to_string(n) + " tokens is larger than " +
                "max_batch_tokens " + std::to_string(max_tokens));
  }
  if (batch.positions.size() != n || batch.slots.size() != n) {
    throw Error("forward: tokens, positions and slots differ in length");
  }
  const KVCacheShape& shape = kv.shape();
  if (shape.n_layer != hp.n_layer || shape.n_head_kv != hp.n_head_kv ||
      shape.head_dim_k != hp.head_dim_k || shape.head_dim_v != hp.head_dim_v) {
    throw Error("forward: the KV cache was not made for this model");
  }
  const int64_t bs = shape.block_size;
  const PagedKVCache* hot = kv.hot();
  if (hot != nullptr && batch.hot_slots.size() != n) {
    throw Error("forward: a cache with a hot window needs a hot slot per token");
  }
  for (const KVBlockEncode& f : batch.filled) {
    if (hot == nullptr || f.hot < 0 || f.hot >= hot->n_blocks() || f.main < 0 ||
        f.main >= kv.n_blocks()) {
      throw Error("forward: a filled block outside the pools, or no hot window");
    }
  }
  const int32_t window = kv.hot_window_blocks();
  size_t row = 0;
  for (const SeqAttention& s : batch.seqs) {
    if (s.query_start != static_cast<int64_t>(row) || s.n_query < 1 || s.context_len < s.n_query ||
        row + static_cast<size_t>(s.n_query) > n || s.block_table == nullptr) {
      throw Error("forward: sequence rows must be contiguous, non-empty and cover the batch");
    }
    for (int32_t i = 0; i < s.n_query; ++i, ++row) {
      const int32_t pos = s.context_len - s.n_query + i;
      if (batch.positions[row] != pos) {
        throw Error("forward: position " + std::to_string(batch.positions[row]) + " at row " +
                    std::to_string(row) + ", expected " + std::to_string(pos));
      }
      const int32_t block = s.block_table[pos / bs];
      if (block < 0 || block >= kv.n_blocks()) {
        throw Error("forward: block id " + std::to_string(block) + " outside the pool");
      }
      if (batch.slots[row] != block * bs + pos % bs) {
        throw Error("forward: slot of row " + std::to_string(row) +
                    " does not match its block table");
      }
      if (hot != nullptr) {
        // Every entry this query reads hot, its own included, has a hot copy.
        const int64_t first_hot = std::max<int64_t>(0, pos / bs - window + 1);
        const int64_t n_hot = static_cast<int64_t>(pos / bs) - s.hot_first + 1;
        if (s.hot_block_table == nullptr || first_hot < s.hot_first || n_hot < 1) {
          throw Error("forward: the hot copies do not cover the blocks row " +
                      std::to_string(row) + " reads hot");
        }
        for (int64_t e = first_hot; e <= pos / bs; ++e) {
          const int32_t h = s.hot_block_table[e - s.hot_first];
          if (h < 0 || h >= hot->n_blocks()) {
            throw Error("forward: hot block id " + std::to_string(h) + " outside the hot pool");
          }
        }
        const int32_t own = s.hot_block_table[pos / bs - s.hot_first];
        if (batch.hot_slots[row] != own * bs + pos % bs) {
          throw Error("forward: hot slot of row " + std::to_string(row) +
                      " does not match its hot table");
        }
      }
      if (batch.tokens[row] < 0 || batch.tokens[row] >= hp.n_vocab) {
        throw Error("forward: token id " + std::to_string(batch.tokens[row]) +
                    " is outside the vocabulary [0, " + std::to_string(hp.n_vocab) + ")");
      }
    }
    // The earlier tokens' blocks are read by attention: they must be in the pool too.
    for (int64_t b = 0; b < (s.context_len + bs - 1) / bs; ++b) {
      if (s.block_table[b] < 0 || s.block_table[b] >= kv.n_blocks()) {
        throw Error("forward: block id " + std::to_string(s.block_table[b]) + " outside the pool");
      }
    }
  }
  if (row != n) throw Error("forward: sequences do not cover the batch");
  for (size_t i = 0; i < batch.logit_rows.size(); ++i) {
    const int32_t r = batch.logit_rows[i];
    if (r < 0 || static_cast<size_t>(r) >= n || (i > 0 && r <= batch.logit_rows[i - 1])) {
      throw Error("forward: logit_rows must be ascending rows of the batch");
    }
  }
  if (logits_size != batch.logit_rows.size() * static_cast<size_t>(hp.n_vocab)) {
    throw Error("forward: logits buffer holds " + std::to_string(logits_size) +
                " floats, expected " +
                std::to_string(batch.logit_rows.size() * static_cast<size_t>(hp.n_vocab)));
  }
}

}  // namespace tokamak
