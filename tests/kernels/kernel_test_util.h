#pragma once
// Helpers shared by the kernel tests: seeded random data and the SIMD kernel tables this CPU
// can run.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/quantize.h"

namespace tokamak::test {

inline std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A finite half of varied kind: normal (small to large), subnormal or zero, either sign.
inline uint16_t random_half(std::mt19937_64& rng) {
  const uint16_t sign = rng() % 2 ? 0x8000 : 0;
  const uint16_t mant = static_cast<uint16_t>(rng() % 1024);
  switch (rng() % 8) {
    case 0:  // subnormal (or zero when mant == 0)
      return sign | mant;
    case 1:  // zero
      return sign;
    case 2:  // large: 2^8 .. 2^15
      return sign | static_cast<uint16_t>((23 + rng() % 8) << 10) | mant;
    default:  // 2^-14 .. 2^3, where real scales live
      return sign | static_cast<uint16_t>((1 + rng() % 18) << 10) | mant;
  }
}

// Every SIMD table this CPU supports, with a name for messages.
struct NamedTable {
  std::string name;
  const cpu::KernelTable* table;
};

inline std::vector<NamedTable> simd_tables() {
  std::vector<NamedTable> out;
  const Isa best = best_isa(cpu_features());
  if (best >= Isa::Avx2) out.push_back({"avx2", &cpu::avx2_kernel_table()});
  if (best >= Isa::Avx512) {
    out.push_back({"avx512", &cpu::avx512_kernel_table(false)});
    if (cpu_features().avx512_bf16) {
      out.push_back({"avx512+bf16", &cpu::avx512_kernel_table(true)});
    }
  }
  return out;
}

// The scalar table, then every SIMD one: what a kernel test runs each case on.
inline std::vector<const cpu::KernelTable*> all_tables() {
  std::vector<const cpu::KernelTable*> out{&cpu::scalar_kernel_table()};
  for (const NamedTable& nt : simd_tables()) out.push_back(nt.table);
  return out;
}

// Encodes `rows` rows of k floats in dtype.
inline std::vector<uint8_t> encode_rows(DType dtype, const std::vector<float>& x, int64_t k) {
  const size_t rb = row_bytes(dtype, k);
  const int64_t rows = static_cast<int64_t>(x.size()) / k;
  std::vector<uint8_t> out(rb * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    cpu::quantize_row(dtype, x.data() + r * k, out.data() + static_cast<size_t>(r) * rb, k);
  }
  return out;
}

inline std::vector<float> decode_rows(DType dtype, const uint8_t* data, int64_t rows, int64_t k) {
  std::vector<float> out(static_cast<size_t>(rows * k));
  const size_t rb = row_bytes(dtype, k);
  for (int64_t r = 0; r < rows; ++r) {
    cpu::dequantize_row(dtype, data + static_cast<size_t>(r) * rb, out.data() + r * k, k);
  }
  return out;
}

// paged_attention(kt, a) the way a caller that splits spans among threads runs it: each span
// into a state of its own, last span first, then paged_finish into a.out.
inline void paged_attention_by_spans(const cpu::KernelTable& kt, const cpu::PagedAttentionArgs& a) {
  const int64_t n = cpu::paged_spans(a.n_kv);
  const int64_t floats = 2 * int64_t{a.n_group} + int64_t{a.n_group} * a.head_dim_v;
  std::vector<float> store(static_cast<size_t>(n * floats));
  std::vector<cpu::PagedPartial> states;
  for (int64_t s = 0; s < n; ++s) {
    float* base = store.data() + s * floats;
    states.push_back({base, base + a.n_group, base + 2 * a.n_group});
  }
  for (int64_t s = n - 1; s >= 0; --s) cpu::paged_attention_span(kt, a, s, states[s]);
  cpu::paged_finish(a, states.data(), n);
}

}  // namespace tokamak::test
