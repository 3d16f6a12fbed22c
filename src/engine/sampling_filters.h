#pragma once
// The steps of random sampling as small functions on plain arrays, so that each can be tested
// alone. Sampler::sample() chains them (see sampler.h for the order and its reasons):
//
//   with top-k:     logits -> top_k_candidates -> weigh_candidates -> [top_p_filter]
//                          -> [min_p_filter] -> pick(candidates)
//   with top-p:     logits -> weigh_logits -> gather_candidates -> top_p_filter
//                          -> [min_p_filter] -> pick(candidates)
//   otherwise:      logits -> weigh_logits -> [min_p_weights] -> pick(weights)
//
// A "weight" is an unnormalised probability exp((logit - max) / T): the most likely token
// weighs exactly 1. A "mass" is a sum of weights. Candidate arrays keep their survivors in
// c[0, count). Orders use more_likely, a strict total order, and the partitions are our own
// code, so every result is the same whatever the standard library.

#include <cstddef>
#include <cstdint>
#include <span>

namespace tokamak {

struct Candidate {
  float value;  // a logit, then a weight
  int32_t token;
};

// Larger value first, then the lower token id.
inline bool more_likely(const Candidate& a, const Candidate& b) {
  return a.value > b.value || (a.value == b.value && a.token < b.token);
}

// Greedy decoding: the index of the largest logit, the lowest one among equals (+0 and -0
// are equal). Logits hold no NaN (one at index 0 gives 0; elsewhere it is passed over). Two
// vector passes, the max then its first index: the one-element loop is a chain of dependent
// compares, ~55 us for a 49,152-token vocabulary, which a batch of 32 paid on one thread
// every step (1.7 ms of a ~27 ms step of the default model).
int32_t greedy_token(std::span<const float> logits);

// Writes the k most likely tokens of `logits` to out[0, k) in more_likely order and returns
// k' = min(k, logits.size()). `out` holds logits.size() entries. O(V log k) for small k (a
// heap; most tokens cost one comparison), O(V + k log k) otherwise.
size_t top_k_candidates(std::span<const float> logits, size_t k, std::span<Candidate> out);

// Turns the candidates' logits into weights exp((logit - max) / temperature); returns their
// mass. temperature > 0; no NaN; at least one finite logit.
double weigh_candidates(std::span<Candidate> c, float temperature);

// weights[i] = exp((logits[i] - max) / temperature) for the whole vocabulary; returns the mass.
double weigh_logits(std::span<const float> logits, float temperature, std::span<float> weights);

// Copies the tokens whose weight is >= min_weight to out, in token order; returns how many.
size_t gather_candidates(std::span<const float> weights, float min_weight,
                         std::span<Candidate> out);

// Below this weight, a token cannot survive top-p over a vocabulary of `vocab_size` with the
// given mass: all such tokens together weigh less than half the mass that top-p drops.
float top_p_negligible_weight(float top_p, double mass, size_t vocab_size);

struct Kept {
  size_t count;  // survivors are c[0, count)
  double mass;   // their mass, summed in array order
};

// Keeps the shortest more_likely-prefix of c whose mass >= top_p * total, where `total` is the
// mass of the whole distribution (c may hold only part of it; if c's mass never reaches the
// target, all of c is kept). `sorted`: c is already in more_likely order. Otherwise an
// expected O(n) selection by mass (quickselect that sums each side), leaving the survivors
// in an order fixed by the algorithm, not sorted. top_p in (0, 1].
Kept top_p_filter(std::span<Candidate> c, bool sorted, float top_p, double total);

// Keeps, in their order, the candidates with weight >= min_p * (largest weight in c).
Kept min_p_filter(std::span<Candidate> c, float min_p);

// Sets to 0 the weights below min_p * (largest weight, which is 1); returns the new mass.
double min_p_weights(std::span<float> weights, float min_p);

// log(sum(exp(logits))), computed as max + log(sum(exp(logits - max))) with exp_nonpositive.
// No NaN; at least one finite logit.
double log_sum_exp(std::span<const float> logits);

// The first entry whose running weight sum exceeds u * mass, u in [0, 1). Falls back to the
// last entry with any weight when rounding leaves u * mass at the very end. The first form
// returns a candidate's token, the second an index into `weights`.
int32_t pick(std::span<const Candidate> c, double mass, double u);
int32_t pick(std::span<const float> weights, double mass, double u);

}  // namespace tokamak
