#pragma once
// Block layouts of GGML's quantized types (ggml-common.h), byte for byte, so that tensors in
// GGUF files are read in place.
//
// Blocks of 32 consecutive elements of a row:
//
//   block_q4_0  | d:f16 | qs[16]: nibbles |                  x[j] = (q[j] - 8) * d
//   block_q4_1  | d:f16 | m:f16 | qs[16]  |                  x[j] = q[j] * d + m
//   block_q5_0  | d:f16 | qh[4] | qs[16]  |                  x[j] = (q[j] - 16) * d
//   block_q5_1  | d:f16 | m:f16 | qh[4] | qs[16] |           x[j] = q[j] * d + m
//   block_q8_0  | d:f16 | qs[32]: int8    |                  x[j] = q[j] * d
//   block_q8_1  | d:f16 | s:f16 | qs[32]  |                  x[j] = q[j] * d,  s = d * sum(q)
//
// In the 4- and 5-bit types byte j holds element j in its low nibble and element j + 16 in
// its high nibble (j < 16); a 5-bit type's fifth bit of element j is bit j of qh (read as a
// little-endian uint32). Q8_1 exists only as the activation encoding for Q4_1 and Q5_1 weights.
//
// K-quants: super-blocks of 256 elements (kQK_K) in sub-blocks with scales of their own.
//
//   block_q4_K  | d:f16 | dmin:f16 | scales[12] | qs[128] |
//       8 sub-blocks of 32: x = d * sc[s] * q - dmin * m[s], q in 0..15, sc and m 6-bit
//       (packed as in kq_scale_min). Elements [64c, 64c + 32) are the low nibbles of
//       qs[32c, 32c + 32), elements [64c + 32, 64c + 64) their high nibbles.
//   block_q5_K  | d:f16 | dmin:f16 | scales[12] | qh[32] | qs[128] |
//       as Q4_K with q in 0..31: the fifth bit of element 32s + l is bit s of qh[l].
//   block_q6_K  | ql[128] | qh[64] | scales[16]: int8 | d:f16 |
//       16 sub-blocks of 16: x = d * scales[s] * (q - 32), q in 0..63. Each half h of 128
//       elements: element 128h + 32g + l has low bits from ql[64h + l + 32 (g & 1)] (low nibble
//       for g < 2, high for g >= 2) and high bits (qh[32h + l] >> 2g) & 3.
//   block_q8_K  | d:f32 | qs[256]: int8 | bsums[16]: int16 |
//       x = q * d; bsums[i] = the sum of q over elements [16i, 16i + 16). Only as the
//       activation encoding of K-quant weights.

#include <cstddef>
#include <cstdint>

namespace tokamak::cpu {

inline constexpr int kQK = 32;     // elements per block of the 32-element types
inline constexpr int kQK_K = 256;  // elements per super-block of the K-quants

struct block_q4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
struct block_q4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
struct block_q5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct block_q5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct block_q8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
struct block_q8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK];
};

inline constexpr int kKScaleBytes = 12;  // packed 6-bit scales and mins of Q4_K / Q5_K

struct block_q4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQK_K / 2];
};
struct block_q5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
struct block_q6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
struct block_q8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};

// Scale and min of sub-block s (0..7) of a Q4_K / Q5_K super-block: the first four in the
// low 6 bits of bytes s and s + 4; the last four in the nibbles of byte s + 4 with their top
// two bits in the top bits of bytes s - 4 and s.
inline void kq_scale_min(const uint8_t* scales, int s, int& sc, int& m) {
  if (s < 4) {
    sc = scales[s] & 63;
    m = scales[s + 4] & 63;
  } else {
    sc = (scales[s + 4] & 0x0f) | ((scales[s - 4] >> 6) << 4);
    m = (scales[s + 4] >> 4) | ((scales[s] >> 6) << 4);
  }
}

static_assert(sizeof(block_q4_0) == 18 && alignof(block_q4_0) == 2);
static_assert(sizeof(block_q4_1) == 20 && alignof(block_q4_1) == 2);
static_assert(sizeof(block_q8_0) == 34 && alignof(block_q8_0) == 2);
static_assert(sizeof(block_q8_1) == 36 && alignof(block_q8_1) == 2);
static_assert(sizeof(block_q5_0) == 22 && sizeof(block_q5_1) == 24);
static_assert(sizeof(block_q4_K) == 144 && sizeof(block_q5_K) == 176);
static_assert(sizeof(block_q6_K) == 210 && sizeof(block_q8_K) == 292);
static_assert(offsetof(block_q4_1, qs) == 4 && offsetof(block_q8_1, qs) == 4);

}  // namespace tokamak::cpu
