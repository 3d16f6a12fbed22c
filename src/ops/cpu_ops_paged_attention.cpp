// CpuOps::paged_attention: the (sequence, KV head, query) items of a step, shared among
// threads, split into their context's spans when there are too few of them (split-K), a
// prefill chunk's queries taken in blocks, and the attention-mass tracking of the sequences
// that ask for it.

#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

#include "kernels/cpu/paged_attention.h"
#include "ops/cpu_ops.h"
#include "ops/cpu_rows.h"

namespace tokamak {
namespace {

using cpu_ops_detail::as_rows;
using cpu_ops_detail::Rows;

// Paged attention splits its items' spans among threads (split-K) when a step has fewer
// items than this per thread. Two: three items (the default model's KV heads) on two threads
// leave one idle a third of the time, and splitting them took its decode attention at a
// 2,048-token context from 178-187 to 136-171 us (kernels bench, medians of 3, two rounds);
// eight items (the 1B shape's) keep both busy, and splitting them came out slower at 512
// and 2,048 tokens (88-96 -> 93-164 us, 333-342 -> 438-499 us).
constexpr int64_t kSplitBelowItemsPerThread = 2;

// Query tokens of a prefill chunk per item (one KV head of one sequence): the kernel reads and
// decodes each K/V tile once for all of them (cpu::paged_attention_queries), so more queries
// an item share that work more widely. Kernels bench, 512 queries at a 2,048-token context, one
// thread, 8 / 16 / 32 queries an item: default model 26.7-27.0 / 24.6-25.2 / 23.5-24.0 ms,
// 1B shape 88.3-88.6 / 81.6-83.2 / 80.1-80.7 ms (32 is the most the kernel's stack states take
// for their groups). With several threads, a step with few queries halves it until each
// thread has kMinBlockedItemsPerThread items, or down to one query an item.
constexpr int32_t kQueriesPerItem = 32;
constexpr int64_t kMinBlockedItemsPerThread = 4;

[[maybe_unused]] bool blocks_in_pool(const SeqAttention& s, const PagedKVView& kv) {
  const int64_t n_blocks = (int64_t{s.context_len} + kv.block_size - 1) / kv.block_size;
  for (int64_t b = 0; b < n_blocks; ++b) {
    if (s.block_table[b] < 0 || s.block_table[b] >= kv.n_blocks) return false;
  }
  return true;
}

}  // namespace

void CpuOps::paged_attention(const Tensor& q, const PagedKVView& kv,
                             std::span<const SeqAttention> seqs, const AttentionParams& p,
                             const Tensor& out) {
  assert(q.rank == 3 && q.dtype == DType::F32 && q.is_contiguous());
  assert(p.n_head > 0 && p.n_head_kv > 0 && p.n_head % p.n_head_kv == 0);
  assert(q.shape[1] == p.n_head && q.shape[2] == p.head_dim_k);
  assert(!p.single_token_order);  // llama.cpp's decode order exists for attention() only
  const Rows outr = as_rows(out);
  [[maybe_unused]] const int64_t n_tokens = q.shape[0];
  assert(outr.dtype == DType::F32 && outr.n_rows == n_tokens);
  assert(outr.n_cols == int64_t{p.n_head} * p.head_dim_v);
  assert(kv.k != nullptr && kv.v != nullptr && kv.block_size > 0);
  assert(kv.n_head_kv == p.n_head_kv && kv.head_dim_k == p.head_dim_k &&
         kv.head_dim_v == p.head_dim_v);

  // Work items: (sequence, KV head, chunk of at most kMaxGroup query heads, query token), in
  // that order, so that neighbouring items read the same K/V tiles. Each item is one kernel
  // call whose result depends on its own query and context alone. Outside split-K an item
  // takes a block of a sequence's consecutive query tokens (kQueriesPerItem), each still with
  // the bits of its own call (cpu::paged_attention_queries).
  const int32_t group = p.n_head / p.n_head_kv;
  const int32_t n_chunks = (group + cpu::kMaxGroup - 1) / cpu::kMaxGroup;
  const int64_t per_query = int64_t{p.n_head_kv} * n_chunks;
  int64_t n_items = 0;
  int64_t work = 0;  // Σ context_len over the items (an upper bound of their n_kv)
  for (const SeqAttention& s : seqs) {
    assert(s.query_start >= 0 && s.n_query >= 0 && s.query_start + s.n_query <= n_tokens);
    assert(s.context_len >= s.n_query);
    assert(s.n_query == 0 || (s.block_table != nullptr && blocks_in_pool(s, kv)));
    n_items += per_query * s.n_query;
    work += per_query * s.n_query * s.context_len;
  }
  if (n_items == 0) return;

  // Attention-mass tracking: each item of a tracked sequence sums its heads' softmax weights
  // per block into its own row of mass_rows_ (no two threads share a row); the rows are
  // added to block_mass after the pass, in item order.
  mass_offsets_.assign(seqs.size(), -1);
  int64_t mass_floats = 0;
  for (size_t si = 0; si < seqs.size(); ++si) {
    const SeqAttention& s = seqs[si];
    if (s.block_mass == nullptr || s.n_query == 0) continue;
    mass_offsets_[si] = mass_floats;
    mass_floats += per_query * s.n_query * ((s.context_len + kv.block_size - 1) / kv.block_size);
  }
  if (mass_floats > 0) mass_rows_.assign(static_cast<size_t>(mass_floats), 0.0f);

  const auto* qp = q.ptr<const float>();
  const int64_t q_row = int64_t{p.n_head} * p.head_dim_k;  // floats between query rows
  // Hot window: each query reads its first cold_blocks(position) blocks from the main pool
  // and the rest from the hot copies.
  const bool hot_window = kv.hot_window_blocks > 0;
  const PagedKVView hot = hot_window ? kv.hot_view() : PagedKVView{};
  // Queries per item of a sequence: one, or for blocked items up to queries_per_item
  // consecutive ones, except where a query's call has more than the block shares: a hot window
  // (each query's own cold segment) or attention-mass tracking (each query's scores).
  int32_t queries_per_item = 1;
  const auto block_of = [&](const SeqAttention& s) -> int32_t {
    return !hot_window && s.block_mass == nullptr ? queries_per_item : 1;
  };
  const auto blocks_of = [&](const SeqAttention& s) -> int64_t {
    return (s.n_query + block_of(s) - 1) / block_of(s);
  };
  // The kernel call of an item (its first query's, with n_queries queries), and its sequence
  // (si, found from a hint: items come in order).
  const auto item_args = [&](int64_t item, size_t& si, int64_t& first, int64_t& local,
                             int32_t* n_queries = nullptr) {
    while (item >= first + per_query * blocks_of(seqs[si])) {
      first += per_query * blocks_of(seqs[si++]);
    }
    const SeqAttention& s = seqs[si];
    local = item - first;
    const int32_t qb = block_of(s);
    const auto i = static_cast<int32_t>(local % blocks_of(s) * qb);
    if (n_queries != nullptr) *n_queries = std::min(qb, s.n_query - i);
    const auto head_chunk = static_cast<int32_t>(local / blocks_of(s));
    const int32_t hk = head_chunk / n_chunks;
    const int32_t h0 = hk * group + head_chunk % n_chunks * cpu::kMaxGroup;
    const int64_t row = int64_t{s.query_start} + i;
    cpu::PagedAttentionArgs a;
    a.q = qp + row * q_row + int64_t{h0} * p.head_dim_k;
    a.q_stride = p.head_dim_k;
    a.out = outr.row<float>(row) + int64_t{h0} * p.head_dim_v;
    a.out_stride = p.head_dim_v;
    a.n_group = std::min(cpu::kMaxGroup, (hk + 1) * group - h0);
    static_cast<cpu::PagedPool&>(a) = cpu::pool_of(kv, hk, s.block_table);
    a.block_size = kv.block_size;
    a.n_kv = int64_t{s.context_len} - s.n_query + i + 1;
    a.head_dim_k = p.head_dim_k;
    a.head_dim_v = p.head_dim_v;
    a.scale = p.scale;
    if (hot_window) {
      const int32_t cold = kv.cold_blocks(a.n_kv - 1);
      assert(cold >= s.hot_first && s.hot_block_table != nullptr);
      a.n_cold = int64_t{cold} * kv.block_size;
      a.cold = static_cast<const cpu::PagedPool&>(a);
      static_cast<cpu::PagedPool&>(a) =
          cpu::pool_of(hot, hk, s.hot_block_table + (cold - s.hot_first));
    }
    return a;
  };

  // Split-K: a step with too few items to keep every thread busy (a decode step of a few
  // sequences: one item per KV head) runs each item's spans as items of their own, then
  // merges them per item in span order. The same bits as one call per item
  // (paged_attention.h); only the sharing out changes. Not with attention-mass tracking,
  // whose items read their whole score rows.
  const int64_t n_threads = pool_.n_threads();
  if (n_threads > 1 && mass_floats == 0 && n_items < kSplitBelowItemsPerThread * n_threads) {
    span_first_.assign(static_cast<size_t>(n_items) + 1, 0);
    size_t si = 0;
    int64_t first = 0;
    int64_t local = 0;
    for (int64_t item = 0; item < n_items; ++item) {
      const int64_t spans = cpu::paged_spans(item_args(item, si, first, local).n_kv);
      span_first_[static_cast<size_t>(item) + 1] = span_first_[static_cast<size_t>(item)] + spans;
    }
    const int64_t n_spans = span_first_.back();
    if (n_spans > n_items) {
      // Each span's state: m and l of the heads, then their accumulator rows.
      const int32_t ng = std::min(group, cpu::kMaxGroup);
      const int64_t state_floats = 2 * int64_t{ng} + int64_t{ng} * p.head_dim_v;
      span_states_.resize(static_cast<size_t>(n_spans * state_floats));
      const auto state_of = [&](int64_t span_item) {
        float* base = span_states_.data() + span_item * state_floats;
        return cpu::PagedPartial{base, base + ng, base + 2 * ng};
      };
      const auto item_of = [&](int64_t span_item) {
        return std::upper_bound(span_first_.begin(), span_first_.end(), span_item) -
               span_first_.begin() - 1;
      };
      for_rows(n_spans, cpu::kPagedSpan * ng * (int64_t{p.head_dim_k} + p.head_dim_v),
               [&](int64_t s0, int64_t s1) {
                 size_t si = 0;
                 int64_t first = 0;
                 int64_t local = 0;
                 for (int64_t sub = s0; sub < s1; ++sub) {
                   const int64_t item = item_of(sub);
                   const cpu::PagedAttentionArgs a = item_args(item, si, first, local);
                   cpu::paged_attention_span(kt_, a, sub - span_first_[static_cast<size_t>(item)],
                                             state_of(sub));
                 }
               });
      for_rows(n_items, n_spans / n_items * state_floats, [&](int64_t i0, int64_t i1) {
        size_t si = 0;
        int64_t first = 0;
        int64_t local = 0;
        thread_local std::vector<cpu::PagedPartial> states;
        for (int64_t item = i0; item < i1; ++item) {
          const cpu::PagedAttentionArgs a = item_args(item, si, first, local);
          const int64_t s0 = span_first_[static_cast<size_t>(item)];
          const int64_t s1 = span_first_[static_cast<size_t>(item) + 1];
          states.clear();
          for (int64_t sub = s0; sub < s1; ++sub) states.push_back(state_of(sub));
          cpu::paged_finish(a, states.data(), s1 - s0);
        }
      });
      return;
    }
  }

  // A prefill chunk's queries in blocks; what an item costs, for the split among threads.
  const auto count_items = [&] {
    int64_t n = 0;
    for (const SeqAttention& s : seqs) n += per_query * blocks_of(s);
    return n;
  };
  queries_per_item = kQueriesPerItem;
  n_items = count_items();
  while (n_threads > 1 && queries_per_item > 1 && n_items < kMinBlockedItemsPerThread * n_threads) {
    queries_per_item /= 2;
    n_items = count_items();
  }
  const int64_t cost_per_item =
      work / n_items * std::min(group, cpu::kMaxGroup) * (int64_t{p.head_dim_k} + p.head_dim_v);
  for_rows(n_items, cost_per_item, [&](int64_t i0, int64_t i1) {
    // The sequence of item i0, by a walk over the (few) sequences: no storage per call.
    size_t si = 0;
    int64_t first = 0;  // the first item of seqs[si]
    // The next item's arguments, made one item ahead so that its first tile can be
    // prefetched while this item computes (paged_prefetch).
    size_t next_si = si;
    int64_t next_first = first;
    int64_t next_local = 0;
    int32_t next_queries = 0;
    cpu::PagedAttentionArgs next = item_args(i0, next_si, next_first, next_local, &next_queries);
    for (int64_t item = i0; item < i1; ++item) {
      cpu::PagedAttentionArgs a = next;
      si = next_si;
      first = next_first;
      const int64_t local = next_local;
      const int32_t n_queries = next_queries;
      if (item + 1 < i1) {
        next = item_args(item + 1, next_si, next_first, next_local, &next_queries);
        cpu::paged_prefetch(next, 0);
      }
      const SeqAttention& s = seqs[si];
      if (mass_offsets_[si] < 0) {
        cpu::paged_attention_queries(kt_, a, n_queries, q_row,
                                     outr.stride / int64_t{sizeof(float)});
        continue;
      }
      assert(n_queries == 1);
      // The heads' scores, then their softmax weights summed per block into the item's row.
      thread_local std::vector<float> scores;  // (n_group, n_kv); grows once, then reused
      scores.resize(static_cast<size_t>(a.n_group * a.n_kv));
      a.scores = scores.data();
      a.scores_stride = a.n_kv;
      cpu::paged_attention(kt_, a);
      const int64_t n_blocks = (s.context_len + kv.block_size - 1) / kv.block_size;
      float* mass = mass_rows_.data() + mass_offsets_[si] + local * n_blocks;
      for (int32_t g = 0; g < a.n_group; ++g) {
        float* sg = scores.data() + g * a.n_kv;
        const float mx = *std::max_element(sg, sg + a.n_kv);
        float sum = 0.0f;
        for (int64_t j = 0; j < a.n_kv; ++j) sum += (sg[j] = std::exp(sg[j] - mx));
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < a.n_kv; ++j) mass[j / kv.block_size] += sg[j] * inv;
      }
    }
  });
  if (mass_floats > 0) add_block_mass(seqs, kv.block_size, static_cast<int32_t>(per_query));
}

void CpuOps::add_block_mass(std::span<const SeqAttention> seqs, int32_t block_size,
                            int32_t n_rows_per_query) {
  for (size_t si = 0; si < seqs.size(); ++si) {
    const SeqAttention& s = seqs[si];
    if (mass_offsets_[si] < 0) continue;
    const int64_t n_blocks = (s.context_len + block_size - 1) / block_size;
    const float* row = mass_rows_.data() + mass_offsets_[si];
    for (int64_t r = 0; r < int64_t{n_rows_per_query} * s.n_query; ++r, row += n_blocks) {
      for (int64_t b = 0; b < n_blocks; ++b) s.block_mass[b] += row[b];
    }
  }
}

}  // namespace tokamak
