// The q4 scale search with the 30 candidate scales in two 16-lane registers: for each of the
// group's 32 values in order, every lane does what the scalar q4_error does for its candidate
// (x * (1 / d), round to nearest even, clamp to [-8, 7], x - q * d, err + e * e), so each
// lane's error is bitwise the scalar one, and the choice is then made in the scalar order.
// Every multiply, add and divide goes through the explicit-rounding intrinsics (round to
// nearest, as IEEE's default): GCC may fuse plain vector a * b + c into an fma, which rounds
// once where the scalar reference rounds twice; these builtins are never fused.

#include "kernels/cpu/kv_codec_avx512.h"

#include "kernels/cpu/immintrin_avx512.h"

namespace tokamak::cpu::avx512 {
namespace {

constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
constexpr int kCandidates = 30;  // 15 shrink steps, each on both sides of zero

}  // namespace

float q4_group_scale(const float* x, float extreme) {
  if (extreme == 0.0f) return 0.0f;
  // The candidates in the scalar order: shrink step k, then the negative and the positive
  // side. The two spare lanes repeat the first and are never looked at.
  alignas(64) float d[32];
  for (int k = 0; k < kCandidates / 2; ++k) {
    const float shrink = 1.0f - 0.025f * static_cast<float>(k);
    d[2 * k] = extreme / -8.0f * shrink;
    d[2 * k + 1] = extreme / 7.0f * shrink;
  }
  d[30] = d[31] = d[0];
  const __m512 d0 = _mm512_load_ps(d);
  const __m512 d1 = _mm512_load_ps(d + 16);
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 inv0 = _mm512_div_round_ps(one, d0, kRound);
  const __m512 inv1 = _mm512_div_round_ps(one, d1, kRound);
  const __m512 lo = _mm512_set1_ps(-8.0f);
  const __m512 hi = _mm512_set1_ps(7.0f);
  __m512 err0 = _mm512_setzero_ps();
  __m512 err1 = _mm512_setzero_ps();
  for (int i = 0; i < 32; ++i) {
    const __m512 xi = _mm512_set1_ps(x[i]);
    // std::clamp(q, lo, hi) keeps a NaN q; max/min return their second operand when either
    // is NaN, so q goes second.
    __m512 q0 = _mm512_roundscale_ps(_mm512_mul_round_ps(xi, inv0, kRound), kRound);
    __m512 q1 = _mm512_roundscale_ps(_mm512_mul_round_ps(xi, inv1, kRound), kRound);
    q0 = _mm512_min_ps(hi, _mm512_max_ps(lo, q0));
    q1 = _mm512_min_ps(hi, _mm512_max_ps(lo, q1));
    const __m512 e0 = _mm512_sub_round_ps(xi, _mm512_mul_round_ps(q0, d0, kRound), kRound);
    const __m512 e1 = _mm512_sub_round_ps(xi, _mm512_mul_round_ps(q1, d1, kRound), kRound);
    err0 = _mm512_add_round_ps(err0, _mm512_mul_round_ps(e0, e0, kRound), kRound);
    err1 = _mm512_add_round_ps(err1, _mm512_mul_round_ps(e1, e1, kRound), kRound);
  }
  alignas(64) float err[32];
  _mm512_store_ps(err, err0);
  _mm512_store_ps(err + 16, err1);
  // The scalar order: the unshrunk negative side first, then every candidate with a strictly
  // smaller error (the first of them, when two tie).
  float best = d[0];
  float best_err = err[0];
  for (int c = 0; c < kCandidates; ++c) {
    if (err[c] < best_err) {
      best_err = err[c];
      best = d[c];
    }
  }
  return best;
}

}  // namespace tokamak::cpu::avx512
