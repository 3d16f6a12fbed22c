#pragma once
// Sequence: one sample of one request as the scheduler sees it. The scheduler needs only
// how many tokens there are, how many have their K/V in the cache, which blocks hold them,
// and the rank that orders queues and picks preemption victims; "prefill" and "decode" are
// just uncomputed() > 1 and == 1 (as in vLLM v1, there is no phase in the scheduler).
//
//   tokens      | prompt ......................... | output ...... |
//   n_computed  |<------ K/V in the cache ------------------->|      (uncomputed: the rest)
//   block_table | b7 | b2 | b9 | ...  (ceil(n_computed / block_size) blocks, or more once a
//                                      step's chunk has been allocated)

#include <cstdint>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

namespace tokamak {

enum class SeqState { Waiting, Running, Preempted, Finished };

struct SampleState;  // the output side (sampler, detokenizer, stops): engine_core.cpp
struct PrefixNode;   // kv/prefix_cache.h

struct Sequence {
  uint64_t request_id = 0;
  int32_t index = 0;  // sample index within its request
  int32_t priority = 0;
  uint64_t arrival = 0;  // submission order, shared by the samples of a request

  SeqState state = SeqState::Waiting;
  std::vector<int32_t> tokens;       // prompt, then output tokens
  int32_t n_prompt = 0;              // prompt tokens still in `tokens`
  int32_t n_computed = 0;            // leading tokens whose K/V are in the cache
  std::vector<int32_t> block_table;  // blocks holding tokens [0, n_computed + scheduled)

  // KV window (engine/kv_window.h): tokens dropped from after the attention sink, and from
  // `tokens` with them, so that `tokens` is always what the cache holds (then what is to be
  // computed) and a token's index there is its position. 0 without a window.
  int32_t n_evicted = 0;
  // Heavy-hitter eviction (engine/kv_heavy.h): per block-table entry, the softmax weight its
  // tokens received, summed over every query, head and layer since it was computed. Empty
  // unless the window tracks attention; entries follow the table (ModelRunner grows it,
  // the window erases what it drops, BlockManager::free clears it).
  std::vector<float> block_mass;

  // Hot window (kv/paged_kv_cache.h, PagedKVCache::hot()): the F16 copies of table entries
  // [hot_first, hot_first + hot_table.size()), blocks of the hot cache. Empty without one.
  std::vector<int32_t> hot_table;
  int32_t hot_first = 0;

  // Swap preemption: the n_swapped_blocks blocks it had. With KV tiers the first
  // n_swapped_cached of them (its full blocks) were left to the prefix cache, which keeps
  // them in the pool or moves them down the tiers like any cached block; swapped_kv holds
  // the K/V of the rest, in host memory (then those of its hot copies, n_swapped_hot of
  // them from entry swapped_hot_first on).
  std::vector<uint8_t> swapped_kv;
  int32_t n_swapped_blocks = 0;
  int32_t n_swapped_cached = 0;
  int32_t n_swapped_hot = 0;
  int32_t swapped_hot_first = 0;
  int32_t preemptions = 0;

  // Prefix cache: the deepest cached node of this sequence's leading full blocks, locked
  // for it (null: it holds no lock), and how many leading full blocks that node covers.
  // Blocks past it are inserted as they fill (BlockManager::cache_full_blocks).
  PrefixNode* cache_node = nullptr;
  int32_t n_cached_blocks = 0;
  // Times a later-ranked request was admitted before it (longest-prefix-match scheduling).
  int32_t bypassed = 0;
  // Prompt tokens its first admission took from the prefix cache (0 with the cache off);
  // nullopt until admitted. A resumption after preemption does not change it: what the
  // request was spared on arrival is what clients are told (usage.cached_tokens), not
  // how much of its own recomputation the cache later saved.
  std::optional<int32_t> cached_at_admission;
  // Samples still to fork off this one once its prompt is computed (n - 1 for the first
  // sample of a request with n samples, then 0): admission reserves their max_seqs places.
  int32_t forks_pending = 0;

  std::unique_ptr<SampleState> sample;  // null in scheduler-only tests

  Sequence();
  ~Sequence();
  Sequence(Sequence&&) noexcept;
  Sequence& operator=(Sequence&&) noexcept;

  // Another sample of the same request at the same point: identity, rank and tokens are
  // copied, with `index`; blocks (share them through BlockManager::share) and the output
  // side are not.
  std::unique_ptr<Sequence> fork(int32_t new_index) const;

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t uncomputed() const { return num_tokens() - n_computed; }
  bool swapped() const { return n_swapped_blocks > 0; }
  // Queue order: lower priority value first, then earlier arrival, then sample index.
  auto rank() const { return std::tuple(priority, arrival, index); }
};

inline bool runs_before(const Sequence* a, const Sequence* b) {
  return a->rank() < b->rank();
}

}  // namespace tokamak
