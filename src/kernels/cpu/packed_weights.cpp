#include "kernels/cpu/packed_weights.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "kernels/cpu/quantize.h"

namespace tokamak::cpu {
namespace {

const uint8_t* row_of(const void* w, size_t w_stride, int64_t j) {
  return static_cast<const uint8_t*>(w) + static_cast<size_t>(j) * w_stride;
}

// 4-bit quants of one GGUF block (element e in byte e % 16, low nibble for e < 16) into chunk
// layout: chunk s, row r, byte t = element 8s + t (low) | element 8s + 4 + t (high).
void pack_nibbles(const uint8_t* src_qs, int r, uint8_t* dst_qs) {
  const auto element = [&](int e) { return e < 16 ? src_qs[e] & 0x0f : src_qs[e - 16] >> 4; };
  for (int s = 0; s < 4; ++s) {
    for (int t = 0; t < 4; ++t) {
      dst_qs[32 * s + 4 * r + t] =
          static_cast<uint8_t>(element(8 * s + t) | element(8 * s + 4 + t) << 4);
    }
  }
}

// The value 0..15 of element e of row r in a packed 4-bit block.
int packed_nibble(const uint8_t* qs, int r, int e) {
  const int s = e / 8;
  const int t = e % 8;
  const uint8_t byte = qs[32 * s + 4 * r + t % 4];
  return t < 4 ? byte & 0x0f : byte >> 4;
}

}  // namespace

DType packed_dtype(DType base) {
  switch (base) {
    case DType::Q4_0:
      return DType::Q4_0_X8;
    case DType::Q4_1:
      return DType::Q4_1_X8;
    case DType::Q8_0:
    case DType::Q5_0:  // its q - 16 as 8-bit quants: the same values
      return DType::Q8_0_X8;
    case DType::Q4_K:  // each sub-block as a Q4_1 block (q4_K_as_q4_1)
      return DType::Q4_1_X8;
    case DType::Q6_K:
      return DType::Q6_K_X8;
    default:
      return base;
  }
}

void q6_K_as_q6_kx8_rows(const block_q6_K& a, int r, block_q6_kx8* out) {
  for (int b = 0; b < kQK_K / kQK; ++b) {
    out[b].d[r] = a.d;
    out[b].sc[r] = a.scales[2 * b];
    out[b].sc[kPackRows + r] = a.scales[2 * b + 1];
    // Block b is group g = b % 4 of half h = b / 4 (quant_blocks.h): its element l has its low
    // bits in ql[64h + 32 (g & 1) + l] (high nibble for g >= 2), its top two in qh[32h + l].
    const int h = b / 4;
    const int g = b % 4;
    const uint8_t* low = a.ql + 64 * h + 32 * (g & 1);
    const uint8_t* high = a.qh + 32 * h;
    const int shift = g < 2 ? 0 : 4;
    uint8_t q[kQK];
    for (int l = 0; l < kQK; ++l) {
      // q - 32 + 128: the 8-bit form's bias.
      q[l] =
          static_cast<uint8_t>((((low[l] >> shift) & 0x0f) | ((high[l] >> (2 * g)) & 3) << 4) + 96);
    }
    for (int c = 0; c < kQK / 4; ++c) std::memcpy(out[b].qs + 32 * c + 4 * r, q + 4 * c, 4);
  }
}

void q4_K_as_q4_1(const block_q4_K& a, block_q4_1* out) {
  const float d = fp16_to_f32(a.d);
  const float dmin = fp16_to_f32(a.dmin);
  for (int s = 0; s < 8; ++s) {
    int sc = 0;
    int m = 0;
    kq_scale_min(a.scales, s, sc, m);
    out[s].d = f32_to_fp16(d * static_cast<float>(sc));
    out[s].m = f32_to_fp16(-(dmin * static_cast<float>(m)));
    // Sub-block s: the low (s even) or high nibbles of qs[32 (s / 2), + 32); Q4_1 holds element
    // j in the low nibble of byte j and element j + 16 in its high nibble.
    const uint8_t* q = a.qs + 32 * (s / 2);
    const int shift = 4 * (s % 2);
    for (int j = 0; j < kQK / 2; ++j) {
      out[s].qs[j] =
          static_cast<uint8_t>(((q[j] >> shift) & 0x0f) | ((q[j + kQK / 2] >> shift) & 0x0f) << 4);
    }
  }
}

namespace {

// Whether v is zero or in the normal f16 range: rounded to f16, within 2^-11 of itself.
bool normal_half(float v) {
  const float a = std::fabs(v);
  return a == 0.0f || (a >= 0x1p-14f && a <= 65504.0f);
}

}  // namespace

bool packable(DType base, const void* w, size_t w_stride, int64_t n, int64_t k) {
  if (base != DType::Q4_K) return true;
  for (int64_t j = 0; j < n; ++j) {
    const auto* a = reinterpret_cast<const block_q4_K*>(row_of(w, w_stride, j));
    for (int64_t i = 0; i < k / kQK_K; ++i) {
      const float d = fp16_to_f32(a[i].d);
      const float dmin = fp16_to_f32(a[i].dmin);
      for (int s = 0; s < 8; ++s) {
        int sc = 0;
        int m = 0;
        kq_scale_min(a[i].scales, s, sc, m);
        if (!normal_half(d * static_cast<float>(sc)) ||
            !normal_half(dmin * static_cast<float>(m))) {
          return false;
        }
      }
    }
  }
  return true;
}

bool is_packed(DType dtype) {
  return dtype == DType::Q4_0_X8 || dtype == DType::Q4_1_X8 || dtype == DType::Q8_0_X8 ||
         dtype == DType::Q6_K_X8;
}

DType unpacked_dtype(DType packed) {
  switch (packed) {
    case DType::Q4_0_X8:
      return DType::Q4_0;
    case DType::Q4_1_X8:
      return DType::Q4_1;
    case DType::Q8_0_X8:
      return DType::Q8_0;
    default:
      return packed;
  }
}

void packed_activation_blocks(DType packed, const void* xq, size_t xq_stride, int64_t k,
                              int64_t r0, int64_t r1, PackedActBlock* out) {
  const int64_t nb = k / kQK;
  const auto* base = static_cast<const uint8_t*>(xq);
  for (int64_t c = r0; c < r1; ++c) {
    PackedActBlock* row = out + c * nb;
    if (packed == DType::Q4_1_X8) {
      const auto* x = reinterpret_cast<const block_q8_1*>(base + static_cast<size_t>(c) * xq_stride);
      for (int64_t i = 0; i < nb; ++i) row[i] = {fp16_to_f32(x[i].d), fp16_to_f32(x[i].s), 0};
      continue;
    }
    assert(packed == DType::Q4_0_X8 || packed == DType::Q8_0_X8 || packed == DType::Q6_K_X8);
    const int32_t offset = packed == DType::Q4_0_X8 ? 8 : 128;
    const auto* x = reinterpret_cast<const block_q8_0*>(base + static_cast<size_t>(c) * xq_stride);
    for (int64_t i = 0; i < nb; ++i) {
      int32_t sum = 0;
      for (int e = 0; e < kQK; ++e) sum += x[i].qs[e];
      row[i] = {fp16_to_f32(x[i].d), 0.0f, -offset * sum};
    }
  }
}

const PackedActBlock* activation_blocks_of(DType packed, const PackedMatmulArgs& args) {
  if (args.x_blocks != nullptr) return args.x_blocks;
  thread_local std::vector<PackedActBlock> own;
  own.resize(static_cast<size_t>(args.m * (args.k / kQK)));
  packed_activation_blocks(packed, args.xq, args.xq_stride, args.k, 0, args.m, own.data());
  return own.data();
}

size_t packed_bytes(DType base, int64_t n, int64_t k) {
  const int64_t groups = (n + kPackRows - 1) / kPackRows;
  return static_cast<size_t>(groups) * packed_group_bytes(base, k);
}

size_t packed_group_bytes(DType base, int64_t k) {
  return kPackRows * row_bytes(packed_dtype(base), k);
}

namespace {

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

void store_u32(uint8_t* p, uint32_t v) {
  std::memcpy(p, &v, sizeof(v));
}

// A Q5_0 block's elements as Q8_0_X8 stores 8-bit quants: (q - 16) + 128, in element order.
// The 5-bit code is the nibble (element e in byte e % 16, high nibble for e >= 16) with bit e
// of qh on top; q - 16 + 128 = code + 112.
void q5_0_bytes(const block_q5_0& a, uint8_t* out) {
  uint32_t qh = 0;
  std::memcpy(&qh, a.qh, 4);
  for (int e = 0; e < kQK; ++e) {
    const int low = e < kQK / 2 ? a.qs[e] & 0x0f : a.qs[e - kQK / 2] >> 4;
    out[e] = static_cast<uint8_t>((low | static_cast<int>((qh >> e) & 1) << 4) + 112);
  }
}

// One GGUF 4-bit block of row r into the chunk layout, four bytes (one row of a chunk) at a
// time: bytes 0-7 of a GGUF block hold elements 0-7 (low nibbles) and 16-23 (high), bytes
// 8-15 elements 8-15 and 24-31. Masking keeps every nibble inside its byte across shifts.
void pack_nibbles_words(const uint8_t* src_qs, int r, uint8_t* dst_qs) {
  constexpr uint32_t kLow = 0x0f0f0f0fu;
  const uint32_t a0 = load_u32(src_qs);       // elements 0-3   | 16-19
  const uint32_t a1 = load_u32(src_qs + 4);   // elements 4-7   | 20-23
  const uint32_t a2 = load_u32(src_qs + 8);   // elements 8-11  | 24-27
  const uint32_t a3 = load_u32(src_qs + 12);  // elements 12-15 | 28-31
  store_u32(dst_qs + 4 * r, (a0 & kLow) | (a1 & kLow) << 4);
  store_u32(dst_qs + 32 + 4 * r, (a2 & kLow) | (a3 & kLow) << 4);
  store_u32(dst_qs + 64 + 4 * r, (a0 >> 4 & kLow) | (a1 & ~kLow));
  store_u32(dst_qs + 96 + 4 * r, (a2 >> 4 & kLow) | (a3 & ~kLow));
}

template <typename Src, typename Dst, typename PackRow>
void pack_group_blocks(const void* w, size_t w_stride, int64_t first_row, int rows, int64_t nb,
                       uint8_t* dst, PackRow pack_row) {
  const Src* src[kPackRows];
  for (int r = 0; r < rows; ++r) {
    src[r] = reinterpret_cast<const Src*>(row_of(w, w_stride, first_row + r));
  }
  auto* out = reinterpret_cast<Dst*>(dst);
  // Block by block, so that the group is written in order while its rows are read in order.
  for (int64_t i = 0; i < nb; ++i) {
    for (int r = 0; r < rows; ++r) pack_row(src[r][i], r, out[i]);
  }
}

}  // namespace

void pack_groups(DType base, const void* w, size_t w_stride, int64_t n, int64_t k, int64_t g0,
                 int64_t g1, void* out) {
  assert(k % kQK == 0 && packed_dtype(base) != base);
  const int64_t nb = k / kQK;
  const size_t group_bytes = packed_group_bytes(base, k);
  for (int64_t g = g0; g < g1; ++g) {
    uint8_t* dst = static_cast<uint8_t*>(out) + static_cast<size_t>(g) * group_bytes;
    const int64_t first_row = g * kPackRows;
    const int rows = static_cast<int>(std::min<int64_t>(kPackRows, n - first_row));
    // Rows past n stay zero: scale 0, contribution 0.
    if (rows < kPackRows) std::memset(dst, 0, group_bytes);
    switch (base) {
      case DType::Q4_0:
        pack_group_blocks<block_q4_0, block_q4_0x8>(
            w, w_stride, first_row, rows, nb, dst,
            [](const block_q4_0& a, int r, block_q4_0x8& b) {
              b.d[r] = a.d;
              pack_nibbles_words(a.qs, r, b.qs);
            });
        break;
      case DType::Q4_1:
        pack_group_blocks<block_q4_1, block_q4_1x8>(
            w, w_stride, first_row, rows, nb, dst,
            [](const block_q4_1& a, int r, block_q4_1x8& b) {
              b.d[r] = a.d;
              b.m[r] = a.m;
              pack_nibbles_words(a.qs, r, b.qs);
            });
        break;
      case DType::Q8_0:
        pack_group_blocks<block_q8_0, block_q8_0x8>(
            w, w_stride, first_row, rows, nb, dst,
            [](const block_q8_0& a, int r, block_q8_0x8& b) {
              b.d[r] = a.d;
              const auto* q = reinterpret_cast<const uint8_t*>(a.qs);
              // q + 128 in every byte: flipping the sign bit, four bytes at once.
              for (int s = 0; s < kQK / 4; ++s) {
                store_u32(b.qs + 32 * s + 4 * r, load_u32(q + 4 * s) ^ 0x80808080u);
              }
            });
        break;
      case DType::Q4_K:
        // One super-block of a row is eight blocks of the group.
        pack_group_blocks<block_q4_K, std::array<block_q4_1x8, 8>>(
            w, w_stride, first_row, rows, nb / 8, dst,
            [](const block_q4_K& a, int r, std::array<block_q4_1x8, 8>& b) {
              block_q4_1 sub[8];
              q4_K_as_q4_1(a, sub);
              for (int s = 0; s < 8; ++s) {
                b[s].d[r] = sub[s].d;
                b[s].m[r] = sub[s].m;
                pack_nibbles_words(sub[s].qs, r, b[s].qs);
              }
            });
        break;
      case DType::Q6_K:
        pack_group_blocks<block_q6_K, std::array<block_q6_kx8, 8>>(
            w, w_stride, first_row, rows, nb / 8, dst,
            [](const block_q6_K& a, int r, std::array<block_q6_kx8, 8>& b) {
              q6_K_as_q6_kx8_rows(a, r, b.data());
            });
        break;
      case DType::Q5_0:
        pack_group_blocks<block_q5_0, block_q8_0x8>(
            w, w_stride, first_row, rows, nb, dst, [](const block_q5_0& a, int r, block_q8_0x8& b) {
              b.d[r] = a.d;
              uint8_t q[kQK];
              q5_0_bytes(a, q);
              for (int s = 0; s < kQK / 4; ++s)
                store_u32(b.qs + 32 * s + 4 * r, load_u32(q + 4 * s));
            });
        break;
      default:
        assert(false && "no packed form");
    }
  }
}

void pack_groups_reference(DType base, const void* w, size_t w_stride, int64_t n, int64_t k,
                           int64_t g0, int64_t g1, void* out) {
  assert(k % kQK == 0 && packed_dtype(base) != base);
  const int64_t nb = k / kQK;
  const size_t group_bytes = packed_group_bytes(base, k);
  for (int64_t g = g0; g < g1; ++g) {
    uint8_t* dst = static_cast<uint8_t*>(out) + static_cast<size_t>(g) * group_bytes;
    std::memset(dst, 0, group_bytes);  // rows past n stay zero: scale 0, contribution 0
    for (int r = 0; r < kPackRows; ++r) {
      const int64_t j = g * kPackRows + r;
      if (j >= n) break;
      const uint8_t* src = row_of(w, w_stride, j);
      for (int64_t i = 0; i < nb; ++i) {
        switch (base) {
          case DType::Q4_0: {
            const auto& a = reinterpret_cast<const block_q4_0*>(src)[i];
            auto& b = reinterpret_cast<block_q4_0x8*>(dst)[i];
            b.d[r] = a.d;
            pack_nibbles(a.qs, r, b.qs);
            break;
          }
          case DType::Q4_1: {
            const auto& a = reinterpret_cast<const block_q4_1*>(src)[i];
            auto& b = reinterpret_cast<block_q4_1x8*>(dst)[i];
            b.d[r] = a.d;
            b.m[r] = a.m;
            pack_nibbles(a.qs, r, b.qs);
            break;
          }
          case DType::Q8_0: {
            const auto& a = reinterpret_cast<const block_q8_0*>(src)[i];
            auto& b = reinterpret_cast<block_q8_0x8*>(dst)[i];
            b.d[r] = a.d;
            for (int e = 0; e < kQK; ++e) {
              b.qs[32 * (e / 4) + 4 * r + e % 4] = static_cast<uint8_t>(a.qs[e] + 128);
            }
            break;
          }
          case DType::Q4_K: {
            if (i % 8 != 0) break;  // a super-block's eight blocks at its first
            const auto& a = reinterpret_cast<const block_q4_K*>(src)[i / 8];
            block_q4_1 sub[8];
            q4_K_as_q4_1(a, sub);
            for (int s = 0; s < 8; ++s) {
              auto& b = reinterpret_cast<block_q4_1x8*>(dst)[i + s];
              b.d[r] = sub[s].d;
              b.m[r] = sub[s].m;
              pack_nibbles(sub[s].qs, r, b.qs);
            }
            break;
          }
          case DType::Q6_K: {
            // Element by element from the decoded row: 32b + e is (x / (d * sc)) + 32 of the
            // super-block's Q6_K value x, which dequantize_row_q6_K gives as d * sc * (q - 32).
            const auto& a = reinterpret_cast<const block_q6_K*>(src)[i / 8];
            const int b8 = static_cast<int>(i % 8);
            auto& b = reinterpret_cast<block_q6_kx8*>(dst)[i];
            b.d[r] = a.d;
            b.sc[r] = a.scales[2 * b8];
            b.sc[kPackRows + r] = a.scales[2 * b8 + 1];
            block_q6_K unit = a;
            unit.d = f32_to_fp16(1.0f);
            for (int s = 0; s < 16; ++s) unit.scales[s] = 1;
            float v[kQK_K];
            dequantize_row_q6_K(&unit, v, kQK_K);  // q - 32 itself
            for (int e = 0; e < kQK; ++e) {
              b.qs[32 * (e / 4) + 4 * r + e % 4] =
                  static_cast<uint8_t>(static_cast<int>(v[kQK * b8 + e]) + 128);
            }
            break;
          }
          case DType::Q5_0: {
            const auto& a = reinterpret_cast<const block_q5_0*>(src)[i];
            auto& b = reinterpret_cast<block_q8_0x8*>(dst)[i];
            b.d[r] = a.d;
            uint32_t qh = 0;
            std::memcpy(&qh, a.qh, 4);
            for (int e = 0; e < kQK; ++e) {
              const int low = e < 16 ? a.qs[e] & 0x0f : a.qs[e - 16] >> 4;
              const int q = low | static_cast<int>((qh >> e) & 1) << 4;
              b.qs[32 * (e / 4) + 4 * r + e % 4] = static_cast<uint8_t>(q - 16 + 128);
            }
            break;
          }
          default:
            assert(false && "no packed form");
        }
      }
    }
  }
}

void pack_gated_pairs(DType base, const void* gate, const void* up, size_t w_stride, int64_t n,
                      int64_t k, int64_t p0, int64_t p1, void* out) {
  const size_t group_bytes = packed_group_bytes(base, k);
  for (int64_t p = p0; p < p1; ++p) {
    // pack_groups puts group g at g * group_bytes: shift the base so that group p lands at
    // pair slot 2p (gate) or 2p + 1 (up).
    auto* pair = static_cast<uint8_t*>(out) + static_cast<size_t>(p) * group_bytes;
    pack_groups(base, gate, w_stride, n, k, p, p + 1, pair);
    pack_groups(base, up, w_stride, n, k, p, p + 1, pair + group_bytes);
  }
}

namespace {

// One output of the packed arithmetic (packed_weights.h): row r of the group at `group`
// against activation row x, over nb blocks.
float packed_dot_reference(DType packed, const uint8_t* group, int r, const uint8_t* x,
                           int64_t nb) {
  float acc = 0.0f;
  float mins = 0.0f;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t isum = 0;
    float dw = 0.0f;
    float dx = 0.0f;
    switch (packed) {
      case DType::Q4_0_X8: {
        const auto& b = reinterpret_cast<const block_q4_0x8*>(group)[i];
        const auto& xb = reinterpret_cast<const block_q8_0*>(x)[i];
        for (int e = 0; e < kQK; ++e) isum += (packed_nibble(b.qs, r, e) - 8) * xb.qs[e];
        dw = fp16_to_f32(b.d[r]);
        dx = fp16_to_f32(xb.d);
        break;
      }
      case DType::Q4_1_X8: {
        const auto& b = reinterpret_cast<const block_q4_1x8*>(group)[i];
        const auto& xb = reinterpret_cast<const block_q8_1*>(x)[i];
        for (int e = 0; e < kQK; ++e) isum += packed_nibble(b.qs, r, e) * xb.qs[e];
        dw = fp16_to_f32(b.d[r]);
        dx = fp16_to_f32(xb.d);
        mins = std::fma(fp16_to_f32(b.m[r]), fp16_to_f32(xb.s), mins);
        break;
      }
      case DType::Q8_0_X8: {
        const auto& b = reinterpret_cast<const block_q8_0x8*>(group)[i];
        const auto& xb = reinterpret_cast<const block_q8_0*>(x)[i];
        for (int e = 0; e < kQK; ++e) {
          isum += (b.qs[32 * (e / 4) + 4 * r + e % 4] - 128) * xb.qs[e];
        }
        dw = fp16_to_f32(b.d[r]);
        dx = fp16_to_f32(xb.d);
        break;
      }
      case DType::Q6_K_X8: {
        const auto& b = reinterpret_cast<const block_q6_kx8*>(group)[i];
        const auto& xb = reinterpret_cast<const block_q8_0*>(x)[i];
        int32_t half[2] = {0, 0};
        for (int e = 0; e < kQK; ++e) {
          half[e / 16] += (b.qs[32 * (e / 4) + 4 * r + e % 4] - 128) * xb.qs[e];
        }
        isum = b.sc[r] * half[0] + b.sc[kPackRows + r] * half[1];
        dw = fp16_to_f32(b.d[r]);
        dx = fp16_to_f32(xb.d);
        break;
      }
      default:
        assert(false);
    }
    const float scale = dw * dx;
    acc = std::fma(scale, static_cast<float>(isum), acc);
  }
  return packed == DType::Q4_1_X8 ? acc + mins : acc;
}

}  // namespace

void packed_matmul_reference(DType packed, const PackedMatmulArgs& a) {
  assert(is_packed(packed) && a.k % kQK == 0);
  const int64_t nb = a.k / kQK;
  const size_t group_bytes = kPackRows * row_bytes(packed, a.k);
  const bool gated = a.epilogue == PackedEpilogue::SiluMul;
  const auto* w = static_cast<const uint8_t*>(a.w);
  for (int64_t g = a.g0; g < a.g1; ++g) {
    const uint8_t* group = w + static_cast<size_t>(g) * group_bytes * (gated ? 2 : 1);
    const int64_t j0 = g * kPackRows;
    const int rows = static_cast<int>(std::min<int64_t>(kPackRows, a.n - j0));
    for (int64_t c = 0; c < a.m; ++c) {
      const uint8_t* x = static_cast<const uint8_t*>(a.xq) + static_cast<size_t>(c) * a.xq_stride;
      float* y = a.y + c * a.y_stride + (j0 - a.y_origin);
      float v[kPackRows];
      for (int r = 0; r < rows; ++r) v[r] = packed_dot_reference(packed, group, r, x, nb);
      switch (a.epilogue) {
        case PackedEpilogue::Store:
          for (int r = 0; r < rows; ++r) y[r] = v[r];
          break;
        case PackedEpilogue::Add:
          for (int r = 0; r < rows; ++r) y[r] = y[r] + v[r];
          break;
        case PackedEpilogue::SiluMul: {
          // One call per group: silu_mul's rounding depends on where a group of 8 starts
          // (ggml's vector exp for whole groups of 8, libm's for the rest), and a row-wide
          // call over y, whose groups start at multiples of 8, rounds each group the same.
          float up[kPackRows];
          for (int r = 0; r < rows; ++r) {
            up[r] = packed_dot_reference(packed, group + group_bytes, r, x, nb);
          }
          a.silu_mul(v, up, y, rows);
          break;
        }
      }
    }
  }
}

}  // namespace tokamak::cpu
