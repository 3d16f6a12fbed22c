#pragma once
// The unit of work of one forward pass, and its validation against a model and a cache.

#include <cstddef>
#include <cstdint>
#include <span>

#include "kv/kv_cache.h"
#include "model/hparams.h"

namespace tokamak {

struct Batch {                          // one sequence for now; the engine issue extends it
  std::span<const int32_t> tokens;      // (n_tokens)
  std::span<const int32_t> positions;   // (n_tokens), contiguous from the cache's current length
  std::span<const int32_t> logit_rows;  // rows of `tokens` whose logits are wanted, ascending
};

// Throws Error unless: 1 <= n_tokens <= max_tokens; positions == kv.size() + [0, n_tokens);
// they fit in kv; token ids are in [0, n_vocab); logit_rows are strictly ascending rows of the
// batch; logits_size == logit_rows.size() * n_vocab; kv has the model's shape.
void validate_batch(const Batch& batch, const KVCache& kv, const HParams& hp, int32_t max_tokens,
                    size_t logits_size);

}  // namespace tokamak
