#pragma once
// Helpers shared by the kernel tests: seeded random data and the SIMD kernel tables this CPU
// can run.

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/kv_dtype.h"
#include "core/paged_kv_view.h"
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
  if (isa_supported(cpu_features(), Isa::AvxVnni)) {
    out.push_back({"avxvnni", &cpu::avxvnni_kernel_table()});
  }
  if (best >= Isa::Avx512) {
    out.push_back({"avx512", &cpu::avx512_kernel_table(false)});
    if (cpu_features().avx512_bf16) {
      out.push_back({"avx512+bf16", &cpu::avx512_kernel_table(true)});
    }
  }
  if (best >= Isa::Amx) out.push_back({"amx", &cpu::amx_kernel_table(cpu_features().avx512_bf16)});
  return out;
}

// The AVX2 table and those of the wider levels (AVX-512, AMX), whose kernels built from AVX2's
// body must give its bits; avx2 is null, or wider empty, where the CPU lacks them.
struct Avx2AndWider {
  const cpu::KernelTable* avx2 = nullptr;
  std::vector<const cpu::KernelTable*> wider;
};

inline Avx2AndWider avx2_and_wider_tables() {
  Avx2AndWider out;
  for (const NamedTable& nt : simd_tables()) {
    if (nt.table->isa == Isa::Avx2) out.avx2 = nt.table;
    if (nt.table->isa > Isa::Avx2) out.wider.push_back(nt.table);
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

// A paged K/V pool for one sequence of n_kv tokens as KV head 1 of 2, in any dtypes: three
// blocks more than the sequence needs, every byte first set to something in range for every
// dtype (elements 0x11, scales 0x3f) so that a wrong read shows, and a block table of the
// sequence's blocks in shuffled order. The caller writes the tokens (view.k_tile(b, 1), ...).
// Not copyable: view points into the buffers.
struct PagedTestPool {
  std::vector<uint8_t> k, v, ks, vs;
  std::vector<int32_t> table;
  PagedKVView view;

  PagedTestPool(KVDTypes dtypes, int32_t dk, int32_t dv, int32_t block_size, int64_t n_kv,
                uint64_t placement_seed) {
    const auto used = static_cast<int32_t>((n_kv + block_size - 1) / block_size);
    view.dtypes = dtypes;
    view.n_blocks = used + 3;
    view.block_size = block_size;
    view.n_head_kv = 2;
    view.head_dim_k = dk;
    view.head_dim_v = dv;
    k.assign(view.k_block_stride() * view.n_blocks, 0x11);
    v.assign(view.v_block_stride() * view.n_blocks, 0x11);
    ks.assign(view.k_scale_block_stride() * view.n_blocks + 1, 0x3f);
    vs.assign(view.v_scale_block_stride() * view.n_blocks + 1, 0x3f);
    view.k = k.data();
    view.v = v.data();
    view.k_scales = ks.data();
    view.v_scales = vs.data();
    std::vector<int32_t> ids(view.n_blocks);
    for (int32_t i = 0; i < view.n_blocks; ++i) ids[i] = i;
    std::shuffle(ids.begin(), ids.end(), std::mt19937_64(placement_seed));
    table.assign(ids.begin(), ids.begin() + used);
  }
  PagedTestPool(const PagedTestPool&) = delete;
  PagedTestPool& operator=(const PagedTestPool&) = delete;
};

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
