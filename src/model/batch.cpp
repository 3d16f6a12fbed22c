#include "model/batch.h"

#include <string>

#include "core/error.h"

namespace tokamak {

void validate_batch(const Batch& batch, const KVCache& kv, const HParams& hp, int32_t max_tokens,
                    size_t logits_size) {
  const size_t n = batch.tokens.size();
  if (n == 0) throw Error("forward: empty batch");
  if (n > static_cast<size_t>(max_tokens)) {
    throw Error("forward: batch of " + std::to_string(n) + " tokens is larger than " +
                "max_batch_tokens " + std::to_string(max_tokens) + " (split the prompt)");
  }
  if (batch.positions.size() != n) {
    throw Error("forward: " + std::to_string(batch.positions.size()) + " positions for " +
                std::to_string(n) + " tokens");
  }
  if (kv.n_layer() != hp.n_layer || kv.k_dim() != hp.k_dim() || kv.v_dim() != hp.v_dim()) {
    throw Error("forward: the KV cache was not made for this model");
  }
  if (static_cast<int64_t>(kv.size()) + static_cast<int64_t>(n) > kv.n_ctx()) {
    throw Error("forward: context full (" + std::to_string(kv.size()) + " + " + std::to_string(n) +
                " tokens > n_ctx " + std::to_string(kv.n_ctx()) + ")");
  }
  for (size_t i = 0; i < n; ++i) {
    if (batch.positions[i] != kv.size() + static_cast<int32_t>(i)) {
      throw Error("forward: position " + std::to_string(batch.positions[i]) + " at row " +
                  std::to_string(i) + " does not continue the cache (expected " +
                  std::to_string(kv.size() + static_cast<int32_t>(i)) + ")");
    }
    if (batch.tokens[i] < 0 || batch.tokens[i] >= hp.n_vocab) {
      throw Error("forward: token id " + std::to_string(batch.tokens[i]) +
                  " is outside the vocabulary [0, " + std::to_string(hp.n_vocab) + ")");
    }
  }
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
