// No fma contraction (with -mfma or -march=native GCC would fuse sum += a * b): the SIMD
// twins rely on these float steps rounding one operation at a time.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "kernels/cpu/kquant_dots.h"

#include <cassert>

#include "core/fp16.h"
#include "kernels/cpu/quant_blocks.h"

namespace tokamak::cpu::scalar {
namespace {

// The fifth bits of a 5-bit block, element j at bit j.
uint32_t high_bits(const uint8_t* qh) {
  return uint32_t{qh[0]} | uint32_t{qh[1]} << 8 | uint32_t{qh[2]} << 16 | uint32_t{qh[3]} << 24;
}

// Σ q * x over a 5-bit block, q less `offset` (16 for Q5_0, 0 for Q5_1).
template <typename Block>
int sum_q5(const Block& a, const int8_t* x, int offset) {
  const uint32_t qh = high_bits(a.qh);
  int sumi = 0;
  for (int j = 0; j < kQK / 2; ++j) {
    const int lo = (a.qs[j] & 0x0f) | static_cast<int>((qh >> j) & 1) << 4;
    const int hi = (a.qs[j] >> 4) | static_cast<int>((qh >> (j + 16)) & 1) << 4;
    sumi += (lo - offset) * x[j] + (hi - offset) * x[j + kQK / 2];
  }
  return sumi;
}

// sumi and summ of a Q4_K or Q5_K super-block (the fifth bits from qh, or none).
void sums_q45_K(const uint8_t* scales, const uint8_t* qs, const uint8_t* qh, const block_q8_K& b,
                int& sumi, int& summ) {
  sumi = 0;
  summ = 0;
  for (int s = 0; s < 8; ++s) {
    int sc = 0;
    int m = 0;
    kq_scale_min(scales, s, sc, m);
    const uint8_t* q = qs + 32 * (s / 2);
    const int shift = 4 * (s % 2);
    int dot = 0;
    for (int l = 0; l < 32; ++l) {
      int v = (q[l] >> shift) & 0x0f;
      if (qh != nullptr) v |= ((qh[l] >> s) & 1) << 4;
      dot += v * b.qs[32 * s + l];
    }
    sumi += sc * dot;
    summ += m * (b.bsums[2 * s] + b.bsums[2 * s + 1]);
  }
}

}  // namespace

float dot_q5_0_q8_0(int64_t n, const void* w, const void* x) {
  assert(n % kQK == 0);
  const auto* a = static_cast<const block_q5_0*>(w);
  const auto* b = static_cast<const block_q8_0*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const int sumi = sum_q5(a[i], b[i].qs, 16);
    sum += static_cast<float>(sumi) * (fp16_to_f32(a[i].d) * fp16_to_f32(b[i].d));
  }
  return sum;
}

float dot_q5_1_q8_1(int64_t n, const void* w, const void* x) {
  assert(n % kQK == 0);
  const auto* a = static_cast<const block_q5_1*>(w);
  const auto* b = static_cast<const block_q8_1*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const int sumi = sum_q5(a[i], b[i].qs, 0);
    sum += static_cast<float>(sumi) * (fp16_to_f32(a[i].d) * fp16_to_f32(b[i].d)) +
           fp16_to_f32(a[i].m) * fp16_to_f32(b[i].s);
  }
  return sum;
}

float dot_q4_K_q8_K(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* a = static_cast<const block_q4_K*>(w);
  const auto* b = static_cast<const block_q8_K*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int sumi = 0;
    int summ = 0;
    sums_q45_K(a[i].scales, a[i].qs, nullptr, b[i], sumi, summ);
    sum += (b[i].d * fp16_to_f32(a[i].d)) * static_cast<float>(sumi);
    sum -= (b[i].d * fp16_to_f32(a[i].dmin)) * static_cast<float>(summ);
  }
  return sum;
}

float dot_q5_K_q8_K(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* a = static_cast<const block_q5_K*>(w);
  const auto* b = static_cast<const block_q8_K*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int sumi = 0;
    int summ = 0;
    sums_q45_K(a[i].scales, a[i].qs, a[i].qh, b[i], sumi, summ);
    sum += (b[i].d * fp16_to_f32(a[i].d)) * static_cast<float>(sumi);
    sum -= (b[i].d * fp16_to_f32(a[i].dmin)) * static_cast<float>(summ);
  }
  return sum;
}

float dot_q6_K_q8_K(int64_t n, const void* w, const void* x) {
  assert(n % kQK_K == 0);
  const auto* a = static_cast<const block_q6_K*>(w);
  const auto* b = static_cast<const block_q8_K*>(x);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int sumi = 0;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = a[i].ql + 64 * h;
      const uint8_t* qh = a[i].qh + 32 * h;
      for (int g = 0; g < 4; ++g) {
        const uint8_t* low = ql + 32 * (g & 1);
        const int shift = g < 2 ? 0 : 4;
        for (int half16 = 0; half16 < 2; ++half16) {
          const int e0 = 128 * h + 32 * g + 16 * half16;  // the sub-block's first element
          int dot = 0;
          for (int l = 16 * half16; l < 16 * half16 + 16; ++l) {
            const int q = ((low[l] >> shift) & 0x0f) | ((qh[l] >> (2 * g)) & 3) << 4;
            dot += (q - 32) * b[i].qs[128 * h + 32 * g + l];
          }
          sumi += a[i].scales[e0 / 16] * dot;
        }
      }
    }
    sum += (b[i].d * fp16_to_f32(a[i].d)) * static_cast<float>(sumi);
  }
  return sum;
}

}  // namespace tokamak::cpu::scalar
