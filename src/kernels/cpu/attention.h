#pragma once
// Causal attention of one query head over the cached keys and values of its KV head, with
// exactly the arithmetic of llama.cpp's CPU backend (non-flash path, F16 cache), so that the
// quantized models give llama.cpp's tokens (see ggml_math.h for why bit-exactness matters):
//
//   q16      = fp16(q)
//   s_j      = (k_j · q16) * scale      8 float lanes over head_dim (lane = i % 8, fused), then
//                                       the 8-lane horizontal sum
//   e_j      = exp(s_j - max_j s_j)     ggml's vector exp, in groups of 8 positions (the last
//                                       one padded with zeros); sum = Σ group sums, in double
//   p_j      = fp16(e_j * (float)(1 / sum))
//   out[d]   = Σ_j p_j v_j[d]           8 float lanes over positions (lane = j % 8, fused),
//                                       then the 8-lane horizontal sum
//
// Both dot products above are llama.cpp's multi-token (prompt) order. For a batch of one token
// llama.cpp sums them another way (single_token_order): 4 x 8 float lanes over blocks of 32
// (element i into accumulator (i % 32) / 8, lane i % 8), the accumulators added as
// (a0 + a2) + (a1 + a3), then the lanes as ((l0+l4) + (l1+l5)) + ((l2+l6) + (l3+l7)); a head
// dim that is not a multiple of 32 adds its last elements in double. That order makes results
// depend on the batch size, so the model uses it only when asked to match llama.cpp exactly.
//
// The scores are kept for the whole row (three passes), so each query needs n_kv floats and
// n_kv halves of scratch. The order depends only on n_kv: a query gets the same result alone
// or in any batch.

#include <cstdint>

#include "kernels/cpu/kernel_table.h"

namespace tokamak::cpu {

inline constexpr int32_t kMaxHeadDim = 512;

// out (head_dim_v) = softmax_j((q · k_j) * scale) · v_j over j in [0, n_kv), n_kv >= 1.
// q: head_dim_k floats. k: n_kv rows of head_dim_k F16 values, row j at k + j * k_stride
// (elements); v likewise with head_dim_v values per row. Head dims <= kMaxHeadDim. Uses a
// per-thread scratch buffer that grows to the longest n_kv seen.
void attention_head(const KernelTable& kt, const float* q, const uint16_t* k, int64_t k_stride,
                    const uint16_t* v, int64_t v_stride, int64_t n_kv, int32_t head_dim_k,
                    int32_t head_dim_v, float scale, bool single_token_order, float* out);

}  // namespace tokamak::cpu
