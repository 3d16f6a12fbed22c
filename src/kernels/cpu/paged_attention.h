#pragma once
// Attention of one query token over one sequence's keys and values in the paged cache (layout
// in core/paged_kv_view.h), for the query heads of one GQA group at once (they share the KV
// head, so each K/V tile is loaded once for all of them), with an online softmax in the manner
// of FlashAttention: a running max m, a running sum l and a rescaled accumulator, so nothing
// grows with the context.
//
// The context is cut into spans of kPagedSpan tokens from token 0 (the last one shorter), so
// that one long context can be shared out among threads (split-K); each span runs its own
// online softmax, and the spans' states are merged in span order:
//
//   for each span [b, e) of [0, n_kv):                 (m_s, l_s, acc_s), per head:
//     m = -inf, l = 0, acc = 0                         F32
//     for each tile [t0, t1) of kPagedTile tokens of [b, e), in token order:
//     s_j   = (q · k_j) * scale                        q F32 as given (not rounded to F16),
//                                                      k_j decoded to F32 (kv_codec.h)
//     m'    = max(m, max_j s_j)
//     alpha = exp(m - m')                              0 for the first tile (exp(-inf))
//     l     = l * alpha + Σ_j exp(s_j - m')
//     acc   = acc * alpha + Σ_j exp(s_j - m') v_j      in j order
//     m     = m'
//   (M, L, A) = span 0's (m, l, acc)
//   for each further span s, in order:                 paged_merge
//     M' = max(M, m_s),  a = exp(M - M'),  b = exp(m_s - M')
//     L  = L * a + l_s * b,  A = A * a + acc_s * b,  M = M'
//   out = A * (1 / L)
//
// With one span (n_kv <= kPagedSpan) that is the plain online softmax. The spans depend on n_kv
// alone, and a span's state does not depend on which thread computes it or when, so splitting
// a call's spans among threads (CpuOps::paged_attention) or running them one after the other
// (paged_attention below) gives the same bits.
//
// Token j is row j % block_size of block block_table[j / block_size], and the tiles are cut
// from the token order, not from the blocks: the arithmetic depends only on n_kv and the data,
// never on the block size, on which blocks hold the tokens, on the other heads of the group, or
// on how the caller batches and threads its calls (spans included). That is what batch
// invariance rests on.
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
// Tokens per span. Long enough that a span's tiles outweigh its merge (an exp per head and a
// pass over its accumulator), short enough that a decode step over a few KV heads finds work
// for every thread at contexts of a few hundred tokens.
inline constexpr int64_t kPagedSpan = 256;

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

// One span's online-softmax state for the n_group heads of a call: running max and sum per
// head, and the accumulator rows (n_group rows of head_dim_v floats, not yet divided by l).
struct PagedPartial {
  float* m = nullptr;    // n_group floats
  float* l = nullptr;    // n_group floats
  float* acc = nullptr;  // n_group * head_dim_v floats
};

inline int64_t paged_spans(int64_t n_kv) {
  return (n_kv + kPagedSpan - 1) / kPagedSpan;
}

// Checks the arguments, then runs kt's kernel over every span, one after the other, merging
// as it goes, into args.out. Allocates nothing (the states are on the stack).
void paged_attention(const KernelTable& kt, const PagedAttentionArgs& args);

// Several consecutive query tokens of one sequence against one KV head, as in a prefill
// chunk: query r in [0, n_queries) has its n_group heads at args.q + r * q_step and its output
// at args.out + r * out_step, and attends to tokens [0, args.n_kv + r). Each query gets the
// bits of a paged_attention call of its own (the spans, tiles and order above depend on its
// n_kv alone), so a query's result does not depend on how a prefill is chunked or whether it
// is computed as a decode step. What it saves: the SIMD kernel decodes each K/V tile once for
// all the queries instead of once per query, and reads it from memory once.
void paged_attention_queries(const KernelTable& kt, const PagedAttentionArgs& args,
                             int32_t n_queries, int64_t q_step, int64_t out_step);

// Span `span` (in [0, paged_spans(n_kv))) of a call into `out`, and what the spans' states
// make once merged: paged_attention() in two steps, for a caller that runs spans on several
// threads. paged_finish merges parts[0, n) (a call's spans in order) into args.out.
void paged_attention_span(const KernelTable& kt, const PagedAttentionArgs& args, int64_t span,
                          const PagedPartial& out);
void paged_finish(const PagedAttentionArgs& args, const PagedPartial* parts, int64_t n);

// Prefetching: hints that change no result.
//
// paged_prefetch_tile asks for the K and V rows of the tile that starts at token t0 of a
// segment (block index `block` into its table, row `offset` in that block) into L2. The
// kernels issue it for the next tile while they compute one: a sequence's blocks lie anywhere
// in the pool, so the hardware prefetcher starts over at every block, and in a decode step
// over many sequences the rows come from DRAM. Measured on Zen 4: one query over 512 tokens
// with the pool out of cache 80-98 -> 40-47 us (kernels bench); decode steps at batch 32 of
// the default model spent 19.8 -> 11.6 ms a step in paged attention (`--profile`). Into L1
// (T0) instead gained a fifth of that: a tile's 128 lines overflow L1's miss queue. q4c's
// channel scales (4 * head_dim bytes a block) come along; the per-row scales of the other
// dtypes are a few bytes a row and are left to the demand loads.
//
// paged_prefetch does it for a call's first tile from token `begin` on. A caller running many
// calls one after the other issues it for the next call while the current one computes: a
// call's first tile would otherwise start cold, and with a decode step's contexts of a few
// tiles each, that tile is a large share of the reads (batch-32 step, 2 threads: 323 -> 293
// us, kernels bench `paged_attention_batch`).
void paged_prefetch_tile(const PagedAttentionArgs& args, const PagedSegment& segment, int64_t t0,
                         int64_t block, int32_t offset);
void paged_prefetch(const PagedAttentionArgs& args, int64_t begin);

// Adds span state `next` into `into` (the state of the spans before it): the merge step above.
void paged_merge(const PagedPartial& into, const PagedPartial& next, int32_t n_group,
                 int32_t head_dim_v);

// The kernels (tables in kernels_<isa>.cpp): tokens [begin, end) of the call, the tiles cut
// from begin (and from n_cold), into `out`. The AVX2 one needs head dims that are multiples
// of 8 and hands others, and dtypes it has no instantiation for, to the scalar one; which
// kernel runs depends on the whole call, never on the span.
namespace scalar {
void paged_attention_span(const PagedAttentionArgs& args, int64_t begin, int64_t end,
                          const PagedPartial& out);
}
namespace avx2 {
void paged_attention_span(const PagedAttentionArgs& args, int64_t begin, int64_t end,
                          const PagedPartial& out);
// Keys and values in any dtype but q4 and q4c (the pairs paged_attention_span has a form for),
// head dims multiples of 8 and at most kMaxQueriesHeadDim, no cold segment, no scores wanted;
// false for any other call.
bool paged_attention_queries(const PagedAttentionArgs& first, int32_t n_queries, int64_t q_step,
                             int64_t out_step);
inline constexpr int32_t kMaxQueriesHeadDim = 128;
}
// The same kernels compiled with AVX-512 (paged_attention_avx512.cpp): the same bits.
namespace avx512 {
void paged_attention_span(const PagedAttentionArgs& args, int64_t begin, int64_t end,
                          const PagedPartial& out);
bool paged_attention_queries(const PagedAttentionArgs& first, int32_t n_queries, int64_t q_step,
                             int64_t out_step);
}  // namespace avx512

}  // namespace tokamak::cpu
