#include "kernels/cpu/attention.h"

#include <cassert>
#include <vector>

namespace tokamak::cpu {

void attention_head(const KernelTable& kt, const float* q, const uint16_t* k, int64_t k_stride,
                    const uint16_t* v, int64_t v_stride, int64_t n_kv, int32_t head_dim_k,
                    int32_t head_dim_v, float scale, bool single_token_order, float* out) {
  assert(n_kv >= 1);
  assert(head_dim_k > 0 && head_dim_k <= kMaxHeadDim && head_dim_v > 0 &&
         head_dim_v <= kMaxHeadDim);
  // Grows to the longest context seen by this thread, then stays: no allocation per token.
  thread_local std::vector<float> scores;
  thread_local std::vector<uint16_t> probs;
  if (scores.size() < static_cast<size_t>(n_kv)) {
    scores.resize(static_cast<size_t>(n_kv));
    probs.resize(static_cast<size_t>(n_kv));
  }
  kt.attention(q, k, k_stride, v, v_stride, n_kv, head_dim_k, head_dim_v, scale, single_token_order,
               out, scores.data(), probs.data());
}

}  // namespace tokamak::cpu
