#pragma once
// Block layouts of GGML's quantized types (ggml-common.h), byte for byte, so that tensors in
// GGUF files are read in place. Every block covers 32 consecutive elements of a row.
//
//   block_q4_0  | d:f16 | qs[16]: nibbles |   x[j] = (q[j] - 8) * d
//   block_q4_1  | d:f16 | m:f16 | qs[16]  |   x[j] = q[j] * d + m
//   block_q8_0  | d:f16 | qs[32]: int8    |   x[j] = q[j] * d
//   block_q8_1  | d:f16 | s:f16 | qs[32]  |   x[j] = q[j] * d,  s = d * sum(q)
//
// In the 4-bit types byte j holds element j in its low nibble and element j + 16 in its high
// nibble (j < 16). Q8_1 exists only as the activation encoding for Q4_1 weights.

#include <cstddef>
#include <cstdint>

namespace tokamak::cpu {

inline constexpr int kQK = 32;  // elements per block of every type here

struct block_q4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
struct block_q4_1 {
  uint16_t d;
  uint16_t m;
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

static_assert(sizeof(block_q4_0) == 18 && alignof(block_q4_0) == 2);
static_assert(sizeof(block_q4_1) == 20 && alignof(block_q4_1) == 2);
static_assert(sizeof(block_q8_0) == 34 && alignof(block_q8_0) == 2);
static_assert(sizeof(block_q8_1) == 36 && alignof(block_q8_1) == 2);
static_assert(offsetof(block_q4_1, qs) == 4 && offsetof(block_q8_1, qs) == 4);

}  // namespace tokamak::cpu
