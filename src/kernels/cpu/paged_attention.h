#pragma once
// Attention of one query token over one sequence's keys and values in the paged cache (layout
// in core/paged_kv_view.h), for the query heads of one GQA group at once (they share the KV
// head, so each K/V tile is loaded once for all of them), with an online softmax in the manner
// of FlashAttention: a running max m, a running sum l and a rescaled accumulator, so nothing
// grows with the context.
//
//   m = -inf, l = 0, acc = 0                           per head, F32
//   for each tile [t0, t1) of kPagedTile tokens of [0, n_kv), in token order:
//     s_j   = (q · k_j) * scale                        q F32 as given (not rounded to F16),
//                                                      k_j decoded to F32 (kv_codec.h)
//     m'    = max(m, max_j s_j)
//     alpha = exp(m - m')                              0 for the first tile (exp(-inf))
//     l     = l * alpha + Σ_j exp(s_j - m')
//     acc   = acc * alpha + Σ_j exp(s_j - m') v_j      in j order
//     m     = m'
//   out = acc * (1 / l)
//
// Token j is row j % block_size of block block_table[j / block_size], and the tiles are cut
// from the token order, not from the blocks: the arithmetic depends only on n_kv and the data,
// never on the block size, on which blocks hold the tokens, on the other heads of the group, or
// on how the caller batches and threads its calls. That is what batch invariance rests on.
// The SIMD forms sum in other orders, apply int8 / fp8 row scales to whole dot products
// rather than to elements, and use a polynomial exp, so they differ from the scalar twin by
// float rounding, but each is just as fixed.
//
// K and V are read in any KV dtype (core/kv_dtype.h) and decoded in registers; a quantized
// cache costs no extra pass and no scratch.
//
// Two pools. A call may read its first n_cold tokens from a second, "cold" pool (full, older
// blocks kept in another dtype, such as q4c keys, which can only be written a whole block at
// a time) and the rest from the main one:
//
//   token j in [0, n_cold)       cold pool: row j % block_size of cold_block_table[j / bs]
//   token j in [n_cold, n_kv)    main pool: i = j - n_cold, row i % bs of block_table[i / bs]
//
//   tiles: [0, 32) [32, 64) ... [.., n_cold) | [n_cold, n_cold + 32) ... [.., n_kv)
//          cut from 0 in the cold segment      cut from n_cold in the main one
//
// One online softmax runs over both (m, l and acc carry over from the last cold tile to the
// first main one), so the result depends on (n_cold, n_kv, the data) and still on nothing
// else; the caller must choose n_cold from the sequence's own state, never from the batch
// (batch invariance). Each segment is read in its own pool's dtypes, q4's rotation included
// (kv_codec.h): the SIMD kernel rotates the query for a segment of q4 keys only, and takes the
// accumulator out of the rotated form before a segment of plain values adds to it.

#include <cstdint>

#include "core/kv_dtype.h"
#include "core/paged_kv_view.h"
#include "kernels/cpu/attention.h"  // kMaxHeadDim
#include "kernels/cpu/kernel_table.h"

namespace tokamak::cpu {

inline constexpr int32_t kPagedTile = 32;  // tokens per online-softmax step
inline constexpr int32_t kMaxGroup = 8;    // query heads per call (callers split larger groups)

// One KV head's tiles in one pool, and a sequence's blocks there: block b's keys start at
// k + b * k_block_stride (bytes), its values at v + b * v_block_stride, their scales (dtypes
// with scales only) at k_scales + b * k_scale_block_stride, and so on.
struct PagedPool {
  KVDTypes dtypes = KVDType::F16;  // of keys and of values
  const uint8_t* k = nullptr;
  const uint8_t* v = nullptr;
  int64_t k_block_stride = 0;
  int64_t v_block_stride = 0;
  const uint8_t* k_scales = nullptr;
  const uint8_t* v_scales = nullptr;
  int64_t k_scale_block_stride = 0;
  int64_t v_scale_block_stride = 0;
  const int32_t* block_table = nullptr;
};

// KV head kv_head of a layer's view, with a sequence's block table there.
PagedPool pool_of(const PagedKVView& view, int32_t kv_head, const int32_t* block_table);

// One call: n_group query heads of one token against one KV head of one sequence. The
// PagedPool it is made of is the main pool: the KV head's tile in block 0, its (block_size,
// head_dim_k) keys, values and scales laid out as PagedPool says, and block_table listing
// ceil(n_kv / block_size) block ids (from token n_cold on with a cold segment, below).
struct PagedAttentionArgs : PagedPool {
  const float* q = nullptr;  // (n_group, head_dim_k) F32, rows q_stride floats apart
  int64_t q_stride = 0;
  float* out = nullptr;  // (n_group, head_dim_v) F32, rows out_stride floats apart
  int64_t out_stride = 0;
  int32_t n_group = 0;  // in [1, kMaxGroup]
  int32_t block_size = 0;

  int64_t n_kv = 0;  // >= 1: the query attends to tokens [0, n_kv)
  int32_t head_dim_k = 0;
  int32_t head_dim_v = 0;
  float scale = 1.0f;

  // Optional (null: not wanted): each head's raw scores s_j = (q · k_j) * scale, j in
  // [0, n_kv), to scores[g * scores_stride + j], so a caller can tell which tokens the query
  // attended to (attention-mass tracking for KV eviction, engine/kv_heavy.h). j counts the
  // cold tokens first, as above.
  float* scores = nullptr;
  int64_t scores_stride = 0;  // >= n_kv when scores is set

  // Optional cold segment (n_cold == 0: none, and `cold` is not read): tokens
  // [0, n_cold) come from this pool, laid out as the main one (same block_size, head dims and
  // KV head; its own dtypes and strides), and block_table then lists the main pool's blocks
  // from token n_cold on. n_cold is a multiple of block_size in [0, n_kv]; n_cold == n_kv
  // leaves the main pool unread (block_table, k, v may then be null).
  int64_t n_cold = 0;
  PagedPool cold;  // its block_table lists n_cold / block_size block ids
};

// One pool's run of a call's tokens, [begin, end) of [0, n_kv): the fields of that pool,
// with token begin + i in row i % block_size of block block_table[i / block_size]. What the
// kernels walk; paged_segments() cuts a call into them.
struct PagedSegment : PagedPool {
  int64_t begin = 0;
  int64_t end = 0;
};

// The call's non-empty segments in token order (the cold one, then the main one) into seg;
// returns how many (1 or 2).
int32_t paged_segments(const PagedAttentionArgs& args, PagedSegment (&seg)[2]);

// Checks the arguments, then runs kt's kernel. Allocates nothing (the state is on the stack).
void paged_attention(const KernelTable& kt, const PagedAttentionArgs& args);

// The kernels (tables in kernels_<isa>.cpp). The AVX2 one needs head dims that are multiples
// of 8 and hands others to the scalar one.
namespace scalar {
void paged_attention(const PagedAttentionArgs& args);
}
namespace avx2 {
void paged_attention(const PagedAttentionArgs& args);
}

}  // namespace tokamak::cpu
