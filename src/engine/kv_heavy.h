#pragma once
// Heavy-hitter eviction for the sliding KV window (engine/kv_window.h), after H2O (Zhang et
// al., "H2O: Heavy-Hitter Oracle for Efficient Generative Inference of Large Language
// Models"): a small share of tokens receives most of the attention, and keeping those beats
// keeping only the newest at the same memory. Here at block granularity, since blocks are
// what the cache holds and drops:
//
//   | sink | b1 | b2 | b3 | b4 | b5 | b6 | recent ... |   window = heavy + recent tokens
//            '--- candidates ---------'                 the least-attended go first
//
// Every attention call adds each query head's softmax weight per block to the sequence's
// Sequence::block_mass (SeqAttention::block_mass, summed over queries, heads and layers:
// H2O's accumulated attention score). When the window must drop n blocks, the ones dropped
// are the n candidates (whole blocks past the sink that end before the recent tokens) with
// the least mass, instead of the n oldest.

#include <cstdint>
#include <span>
#include <vector>

namespace tokamak {

// Table indices, ascending, of the n_drop entries of [first, end) with the least mass; ties
// go to the older (lower index) entry. Entries past mass.size() count as 0. Preconditions
// (asserted): 0 <= first <= end, 0 <= n_drop <= end - first.
std::vector<int32_t> heavy_hitter_drops(std::span<const float> mass, int32_t first, int32_t end,
                                        int32_t n_drop);

}  // namespace tokamak
