// Bit-exact sampling across builds needs every float rounding as written: no a * b + c fused
// into an FMA, which GCC does even in ISO C++ mode once the target has FMA (-mfma,
// -march=native). This file's loops inline exp_nonpositive, so it is turned off here for the
// whole file (before any include, so every function in it agrees).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "engine/sampling_filters.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cmath>
#include <utility>

#include "engine/fast_exp.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tokamak {
namespace {

// Sums over a vocabulary keep 8 partial sums (element i goes to lane i % 8), added up in a
// fixed order at the end: the compiler may vectorise the loop, yet the result is the same on
// every machine, which a single running sum (4 cycles per element) would also be, but slowly.
constexpr size_t kLanes = 8;

// The loops over a whole vocabulary that the compiler vectorises (sum_weights, weigh_logits)
// are built for AVX-512, AVX2 and the baseline, one picked when the program loads (GCC's
// target_clones):
// wider vectors, the same operations per element and the same lanes (kLanes), and no FMA
// (fp-contract is off above), so the same bits. Concurrency 32 of the default model at
// temperature 0.8 spent ~3% of its samples here in 4-wide SSE2 on the engine thread;
// 16-wide: 775.0 / 769.6 -> 804.4 / 798.5 output tok/s.

double add_lanes(const double (&lanes)[kLanes]) {
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
         ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

[[gnu::target_clones("avx512f", "avx2", "default")]] double sum_weights(std::span<const float> w) {
  double lanes[kLanes] = {};
  const size_t body = w.size() - w.size() % kLanes;
  for (size_t i = 0; i < body; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) lanes[j] += w[i + j];
  }
  for (size_t i = body; i < w.size(); ++i) lanes[i - body] += w[i];
  return add_lanes(lanes);
}

// The largest of `x` (not empty), NaNs passed over unless x[0] is one, which gives NaN: four
// SSE2 running maxima (maxps returns its second operand when the first is NaN), where the
// compiler leaves a loop of std::max scalar. Greedy decoding and every weighing start here.
float largest(std::span<const float> x) {
  assert(!x.empty());
  const float* p = x.data();
  const size_t n = x.size();
  float best = p[0];
  size_t i = 1;
#if defined(__SSE2__)
  if (n >= 17) {
    __m128 m[4];
    for (__m128& v : m) v = _mm_set1_ps(best);
    for (; i + 16 <= n; i += 16) {
      for (int u = 0; u < 4; ++u) m[u] = _mm_max_ps(_mm_loadu_ps(p + i + 4 * u), m[u]);
    }
    __m128 v = _mm_max_ps(_mm_max_ps(m[0], m[1]), _mm_max_ps(m[2], m[3]));
    v = _mm_max_ps(v, _mm_shuffle_ps(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
    v = _mm_max_ps(v, _mm_shuffle_ps(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
    best = _mm_cvtss_f32(v);
  }
#endif
  for (; i < n; ++i) best = p[i] > best ? p[i] : best;
  return best;
}

float max_of(std::span<const float> values) {
  const float max = largest(values);
  assert(std::isfinite(max));  // NaN and +inf logits are the model's bug; all -inf the caller's
  return max;
}

// Range below which top_p_filter sorts instead of partitioning.
constexpr size_t kSortBelow = 32;

// Index of the median of c[a], c[b], c[d] under more_likely.
size_t median_of_three(std::span<const Candidate> c, size_t a, size_t b, size_t d) {
  if (more_likely(c[b], c[a])) std::swap(a, b);  // now c[a] before c[b]
  if (more_likely(c[d], c[b])) {
    return more_likely(c[d], c[a]) ? a : d;
  }
  return b;
}

}  // namespace

size_t top_k_candidates(std::span<const float> logits, size_t k, std::span<Candidate> out) {
  const size_t n = logits.size();
  assert(out.size() >= n);
  k = std::min(k, n);
  if (k == 0) return 0;
  Candidate* const c = out.data();
  if (k * 16 <= n) {
    // A heap of the k best so far with the least likely on top. Ids rise, so a newcomer that
    // only ties the top loses (ties go to the lower id): it enters on a strictly larger logit.
    for (size_t i = 0; i < k; ++i) c[i] = {logits[i], static_cast<int32_t>(i)};
    std::make_heap(c, c + k, more_likely);
    for (size_t i = k; i < n; ++i) {
      if (!(logits[i] > c[0].value)) continue;
      std::pop_heap(c, c + k, more_likely);
      c[k - 1] = {logits[i], static_cast<int32_t>(i)};
      std::push_heap(c, c + k, more_likely);
    }
  } else {
    for (size_t i = 0; i < n; ++i) c[i] = {logits[i], static_cast<int32_t>(i)};
    if (k < n) std::nth_element(c, c + k, c + n, more_likely);
  }
  std::sort(c, c + k, more_likely);  // the set is unique; sorting fixes the order too
  return k;
}

double weigh_candidates(std::span<Candidate> c, float temperature) {
  assert(!c.empty() && temperature > 0.0f);
  float max = c[0].value;
  for (const Candidate& x : c) {
    assert(!std::isnan(x.value));
    max = std::max(max, x.value);
  }
  assert(std::isfinite(max));
  const float inverse = 1.0f / temperature;
  double mass = 0.0;
  for (Candidate& x : c) {
    x.value = exp_nonpositive((x.value - max) * inverse);
    mass += x.value;
  }
  return mass;
}

[[gnu::target_clones("avx512f", "avx2", "default")]] double weigh_logits(
    std::span<const float> logits, float temperature, std::span<float> weights) {
  assert(temperature > 0.0f && weights.size() == logits.size());
  const float max = max_of(logits);
  const float inverse = 1.0f / temperature;
  for (size_t i = 0; i < logits.size(); ++i) {
    weights[i] = exp_nonpositive((logits[i] - max) * inverse);
  }
  return sum_weights(weights);
}

size_t gather_candidates(std::span<const float> weights, float min_weight,
                         std::span<Candidate> out) {
  assert(out.size() >= weights.size());
  size_t count = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    // Branch-free: always write, keep by advancing (count <= i, so the slot exists).
    out[count] = {weights[i], static_cast<int32_t>(i)};
    count += weights[i] >= min_weight ? 1 : 0;
  }
  return count;
}

float top_p_negligible_weight(float top_p, double mass, size_t vocab_size) {
  // Tokens below w each weigh < w, so all of them together < vocab_size * w; with
  // w = (1 - top_p) * mass / (2 * vocab_size) that is half of what top-p may drop, a margin
  // that no rounding eats. They form the least likely tail, so top-p drops all of them.
  return static_cast<float>((1.0 - static_cast<double>(top_p)) * mass /
                            (2.0 * static_cast<double>(vocab_size)));
}

Kept top_p_filter(std::span<Candidate> c, bool sorted, float top_p, double total) {
  assert(top_p > 0.0f && top_p <= 1.0f);
  const double target = static_cast<double>(top_p) * total;
  size_t lo = 0;
  size_t hi = c.size();
  double above = 0.0;  // mass of c[0, lo): all more likely than anything in c[lo, hi)
  size_t count = 0;
  bool found = false;
  // Quickselect by mass. A bound on the rounds keeps pathological inputs at O(n log n).
  size_t rounds_left = sorted ? 0 : 2 * static_cast<size_t>(std::bit_width(c.size())) + 8;
  while (hi - lo > kSortBelow && rounds_left-- > 0) {
    const size_t p = median_of_three(c, lo, lo + (hi - lo) / 2, hi - 1);
    std::swap(c[p], c[hi - 1]);
    const Candidate pivot = c[hi - 1];
    // Branch-free Lomuto partition: candidates more likely than the pivot move to the front,
    // summing their mass on the way.
    size_t i = lo;
    double up = 0.0;
    for (size_t j = lo; j + 1 < hi; ++j) {
      const Candidate x = c[j];
      const bool more = (x.value > pivot.value) |
                        ((x.value == pivot.value) & (x.token < pivot.token));  // more_likely
      const uint32_t mask = 0u - static_cast<uint32_t>(more);
      c[j] = c[i];
      c[i] = x;
      i += more;
      up += std::bit_cast<float>(std::bit_cast<uint32_t>(x.value) & mask);  // x's weight or 0
    }
    std::swap(c[i], c[hi - 1]);  // c[lo, i) above the pivot, c[i] the pivot, then the rest
    if (above + up >= target) {
      hi = i;
    } else if (above + up + pivot.value >= target) {
      count = i + 1;
      found = true;
      break;
    } else {
      above += up + pivot.value;
      lo = i + 1;
    }
  }
  if (!found) {
    // Few left (or already sorted): sort them and walk on from `above`.
    if (!sorted)
      std::sort(c.begin() + static_cast<std::ptrdiff_t>(lo),
                c.begin() + static_cast<std::ptrdiff_t>(hi), more_likely);
    count = lo;
    double mass = above;
    while (count < hi && mass < target) mass += c[count++].value;
  }
  double mass = 0.0;
  for (size_t i = 0; i < count; ++i) mass += c[i].value;
  return {count, mass};
}

Kept min_p_filter(std::span<Candidate> c, float min_p) {
  assert(!c.empty() && min_p >= 0.0f && min_p <= 1.0f);
  float max_weight = c[0].value;
  for (const Candidate& x : c) max_weight = std::max(max_weight, x.value);
  const float threshold = min_p * max_weight;
  size_t kept = 0;
  double mass = 0.0;
  for (const Candidate& x : c) {
    if (x.value >= threshold) {
      c[kept++] = x;
      mass += x.value;
    }
  }
  return {kept, mass};
}

double min_p_weights(std::span<float> weights, float min_p) {
  assert(min_p >= 0.0f && min_p <= 1.0f);
  // Weights are >= 0, where float order is the order of the bit patterns: an integer
  // comparison keeps the loop branch-free.
  const uint32_t threshold = std::bit_cast<uint32_t>(min_p);
  for (float& w : weights) {
    const uint32_t bits = std::bit_cast<uint32_t>(w);
    w = std::bit_cast<float>(bits & (0u - static_cast<uint32_t>(bits >= threshold)));
  }
  return sum_weights(weights);
}

double log_sum_exp(std::span<const float> logits) {
  const float max = max_of(logits);
  // exp() a block at a time into a small buffer (a loop that vectorises), then sum it.
  constexpr size_t kBlock = 512;  // a multiple of kLanes
  float block[kBlock];
  double lanes[kLanes] = {};
  for (size_t start = 0; start < logits.size(); start += kBlock) {
    const size_t n = std::min(kBlock, logits.size() - start);
    for (size_t i = 0; i < n; ++i) block[i] = exp_nonpositive(logits[start + i] - max);
    for (size_t i = 0; i < n; ++i) lanes[i % kLanes] += block[i];
  }
  return static_cast<double>(max) + std::log(add_lanes(lanes));
}

int32_t pick(std::span<const Candidate> c, double mass, double u) {
  assert(!c.empty() && u >= 0.0 && u < 1.0);
  const double target = u * mass;
  double running = 0.0;
  for (const Candidate& x : c) {
    running += x.value;
    if (target < running) return x.token;
  }
  for (size_t i = c.size(); i-- > 0;) {
    if (c[i].value > 0.0f) return c[i].token;
  }
  return c[0].token;
}

int32_t pick(std::span<const float> weights, double mass, double u) {
  assert(!weights.empty() && u >= 0.0 && u < 1.0);
  const double target = u * mass;
  double running = 0.0;
  for (size_t i = 0; i < weights.size(); ++i) {
    running += weights[i];
    if (target < running) return static_cast<int32_t>(i);
  }
  for (size_t i = weights.size(); i-- > 0;) {
    if (weights[i] > 0.0f) return static_cast<int32_t>(i);
  }
  return 0;
}

int32_t greedy_token(std::span<const float> logits) {
  const float* x = logits.data();
  const size_t n = logits.size();
  const float best = largest(logits);
  // The first index holding the max (best is one of the logits, or NaN from x[0]).
  size_t j = 0;
#if defined(__SSE2__)
  const __m128 target = _mm_set1_ps(best);
  for (; j + 4 <= n; j += 4) {
    const int hits = _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(x + j), target));
    if (hits != 0)
      return static_cast<int32_t>(
          j + static_cast<size_t>(std::countr_zero(static_cast<unsigned>(hits))));
  }
#endif
  for (; j < n; ++j) {
    if (x[j] == best) return static_cast<int32_t>(j);
  }
  return 0;  // best is NaN: x[0] was
}

}  // namespace tokamak
