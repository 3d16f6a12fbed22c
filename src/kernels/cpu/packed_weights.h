#pragma once
// Quantized weights repacked at load into groups of eight interleaved rows, for matmul kernels
// whose SIMD lanes are weight rows: one 8-lane vpdpbusd multiplies four consecutive elements of
// eight rows by the same four activation quants (broadcast), so a block of 32 elements of
// eight rows takes 8 integer instructions and a single float scaling step for all eight,
// with no horizontal sums. GGUF's layout puts one row's block in a register instead, which
// costs an int-to-float conversion and an fma per row and block (quant_dots_avx512.cpp).
//
// Q4_0, Q4_1 and Q8_0 pack as they are; Q5_0 packs into Q8_0_X8, Q4_K into Q4_1_X8 and Q6_K
// into Q6_K_X8 (packed_dtype says how).
//
// A packed tensor of n rows holds ceil(n / 8) groups; a group is the k / 32 blocks of its eight
// rows in block order (rows past n, in the last group, are zero). One block of a group:
//
//   block_q4_0x8  | d[8]:f16 |           qs[128] |  144 bytes = 8 x block_q4_0
//   block_q4_1x8  | d[8]:f16 | m[8]:f16 | qs[128] |  160 bytes = 8 x block_q4_1
//   block_q8_0x8  | d[8]:f16 |           qs[256] |  272 bytes = 8 x block_q8_0
//   block_q6_kx8  | d[8]:f16 | sc[16]:i8 | qs[256] |  288 bytes (Q6_K: 8 x 26.25)
//
// d[r] (and m[r]) is row r's scale (and min). Quants come in 32-byte chunks of 8 rows x 4
// bytes, row r's four bytes at 4r:
//   4-bit  chunk s (0..3): byte t of row r holds element 8s + t in its low nibble and element
//          8s + 4 + t in its high nibble, each 0..15 as in GGUF.
//   8-bit  chunk s (0..7): byte t of row r holds element 4s + t as q + 128 (0..255), the
//          unsigned operand vpdpbusd wants.
// Q6_K_X8 holds a Q6_K row's 32 elements in 8-bit form, q - 32 (-32..31), and its two
// sub-block scales: sc[r] for elements 0-15 of row r (chunks 0-3), sc[8 + r] for 16-31
// (chunks 4-7); d[r] is the row's super-block scale. Its values are Q6_K's, exactly.
//
// The arithmetic of one output y[c][j] (weight row j, activation row c, blocks i in order),
// identical in the scalar reference and every SIMD kernel:
//   isum_i = sum of the 32 integer products (Q4_0: (q - 8) * x; Q4_1: q * x; Q8_0: q * x;
//            Q6_K_X8: sc[r] * (the first 16's) + sc[8 + r] * (the last 16's)), exact, so any
//            SIMD order gives it;
//   acc    = fma(d_w,i * d_x,i, float(isum_i), acc)          (the product rounded first)
//   Q4_1:  mins = fma(m_w,i, s_x,i, mins), and y = acc + mins at the end; otherwise y = acc.
// No step depends on how many activation rows or weight groups a call covers, so results are
// batch invariant. They differ in rounding from the unpacked kernels (which reproduce llama.cpp
// bit for bit): a model computes with one layout or the other, chosen at load by kernel level.

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cpu/quant_blocks.h"

namespace tokamak::cpu {

inline constexpr int kPackRows = 8;

struct block_q4_0x8 {
  uint16_t d[kPackRows];
  uint8_t qs[kPackRows * kQK / 2];
};
struct block_q4_1x8 {
  uint16_t d[kPackRows];
  uint16_t m[kPackRows];
  uint8_t qs[kPackRows * kQK / 2];
};
struct block_q8_0x8 {
  uint16_t d[kPackRows];
  uint8_t qs[kPackRows * kQK];
};
static_assert(sizeof(block_q4_0x8) == 8 * sizeof(block_q4_0));
static_assert(sizeof(block_q4_1x8) == 8 * sizeof(block_q4_1));
struct block_q6_kx8 {
  uint16_t d[kPackRows];
  int8_t sc[2 * kPackRows];
  uint8_t qs[kPackRows * kQK];
};
static_assert(sizeof(block_q8_0x8) == 8 * sizeof(block_q8_0));
static_assert(sizeof(block_q6_kx8) == 288);

// The packed type of a GGUF weight type (Q4_0 -> Q4_0_X8, ...), or `base` itself when it has
// none. Q5_0 packs into Q8_0_X8: its quants less 16 are 8-bit quants of the same scale, so a
// Q5_0 weight computes exactly as the Q8_0 weight of the same values does (1.55x the bytes of
// the file, read by the 8-bit kernel, ~3x faster than Q5_0's own in GGUF's layout). Q4_K packs
// into Q4_1_X8, each 32-element sub-block as a Q4_1 block (q4_K_as_q4_1), where packable;
// Q6_K into Q6_K_X8 (above), exactly.
DType packed_dtype(DType base);

// Whether the (n, k) weight w of type `base` packs (packed_dtype(base) != base assumed): always,
// except that Q4_K packs only when every sub-block's scale d * sc and min dmin * m is zero or
// within the normal f16 range, so that rounded to f16 each is within 2^-11 of itself,
// relatively. Weights that do not pack compute in GGUF's layout.
bool packable(DType base, const void* w, size_t w_stride, int64_t n, int64_t k);

// The eight sub-blocks of a Q4_K super-block as Q4_1 blocks: scale f16(d * sc), min
// f16(-dmin * m), the same 4-bit quants. Their values are the super-block's to within the f16
// rounding of those scales and mins (packable says when that is 2^-11 relative).
void q4_K_as_q4_1(const block_q4_K& a, block_q4_1* out);

// Row r of the eight Q6_K_X8 blocks that hold a Q6_K super-block (the layout above).
void q6_K_as_q6_kx8_rows(const block_q6_K& a, int r, block_q6_kx8* out);
bool is_packed(DType dtype);
DType unpacked_dtype(DType packed);  // Q4_0_X8 -> Q4_0, ...

// Bytes of a packed (n, k) tensor: ceil(n / 8) groups, each packed_group_bytes.
size_t packed_bytes(DType base, int64_t n, int64_t k);
// Bytes of one group of eight packed rows of k elements of `base` (in the packed type's blocks).
size_t packed_group_bytes(DType base, int64_t k);

// Packs groups [g0, g1) of the (n, k) tensor w (rows w_stride bytes apart, type `base`) into
// `out`, which holds all packed_bytes(base, n, k) bytes (group g starts at g * 8 rows' bytes).
void pack_groups(DType base, const void* w, size_t w_stride, int64_t n, int64_t k, int64_t g0,
                 int64_t g1, void* out);
// The same, a byte at a time straight from the layout above: what pack_groups (four bytes at
// a time) is tested against.
void pack_groups_reference(DType base, const void* w, size_t w_stride, int64_t n, int64_t k,
                           int64_t g0, int64_t g1, void* out);

// Packs a gated pair, the gate and up weights of a SwiGLU feed-forward (both (n, k), rows
// w_stride bytes apart), for PackedEpilogue::SiluMul: pair p is group 2p, gate rows
// [8p, 8p + 8), then group 2p + 1, the same rows of up. Packs pairs [p0, p1) into `out`, which
// holds 2 * packed_bytes(base, n, k) bytes.
void pack_gated_pairs(DType base, const void* gate, const void* up, size_t w_stride, int64_t n,
                      int64_t k, int64_t p0, int64_t p1, void* out);

// What a packed matmul does with each result v of (activation row c, weight row j):
//   Store    y = v
//   Add      y = y + v  (a residual added in the epilogue: bitwise what an add after it gives)
//   SiluMul  the weight is a gated pair (pack_gated_pairs): y = silu(v_gate) * v_up, through
//            the kernel table's silu_mul, so bitwise what a silu_mul after the matmuls gives.
//            g0 and g1 then count pairs, and n is the rows of gate (and of up).
enum class PackedEpilogue : uint8_t { Store, Add, SiluMul };
using SiluMulFn = void (*)(const float* gate, const float* up, float* out, int64_t n);

// What an activation block (row c, block i) adds to a packed matmul besides its quants:
//   d     its scale, as F32
//   s     Q8_1's d * sum(q) as F32 (Q4_1's min term); 0 for the other types
//   bias  -offset * sum(q), where the block's integer sum starts: the weights of Q4_0 and
//         Q8_0 are stored unsigned, offset by 8 and 128 (pack_groups); 0 for Q4_1
struct PackedActBlock {
  float d;
  float s;
  int32_t bias;
};

// One call of a packed matmul: y[c * y_stride + j - y_origin] for activation rows c in [0, m)
// and weight rows j of groups [g0, g1) (j < n). xq: m activation rows, xq_stride bytes apart,
// in the encoding of the base type (activation_dtype in matmul.h). y_origin lets a tensor of
// several weights stacked by rows (Ops::prepare_stacked) write each one's rows to its own
// output.
struct PackedMatmulArgs {
  const void* w;  // the whole packed tensor
  int64_t n;
  int64_t k;
  const void* xq;
  size_t xq_stride;
  int64_t m;
  int64_t g0;
  int64_t g1;
  float* y;
  int64_t y_stride;
  int64_t y_origin = 0;  // the weight row written to y's column 0
  PackedEpilogue epilogue = PackedEpilogue::Store;
  SiluMulFn silu_mul = nullptr;  // for PackedEpilogue::SiluMul
  // Optional: the activation blocks' terms (packed_activation_blocks) for all m rows (with
  // x_tiles, for the rows after the tiles' only: KernelTable::activation_tiles_bytes), else
  // the kernel forms them itself, in every call.
  const PackedActBlock* x_blocks = nullptr;
  // Optional: the activations in the layout of a level whose kernel wants its own
  // (KernelTable::pack_activation_tiles), for all m rows; else the kernel forms it per call.
  const void* x_tiles = nullptr;
};

// out[c * (k / 32) + i] = the terms of block i of activation row c, for rows [r0, r1) of xq
// (rows xq_stride bytes apart, in the activation encoding of the packed type's base). Formed
// once per matmul, they spare every kernel call (a matmul is split among threads, four chunks
// each, and among stacked outputs) its own pass over the activations.
void packed_activation_blocks(DType packed, const void* xq, size_t xq_stride, int64_t k,
                              int64_t r0, int64_t r1, PackedActBlock* out);
using PackedMatmulFn = void (*)(const PackedMatmulArgs& args);

// For the kernels: args.x_blocks, or, where the caller gave none, the terms formed here into a
// buffer of the calling thread's (valid until its next call).
const PackedActBlock* activation_blocks_of(DType packed, const PackedMatmulArgs& args);

// For the kernels: activation row c of args, in the encoding X (block_q8_0 or block_q8_1).
template <typename X>
const X* activation_row(const PackedMatmulArgs& args, int64_t c) {
  return reinterpret_cast<const X*>(static_cast<const uint8_t*>(args.xq) +
                                    static_cast<size_t>(c) * args.xq_stride);
}

// The scalar reference of the arithmetic above (what the SIMD kernels are tested against).
void packed_matmul_reference(DType packed, const PackedMatmulArgs& args);

}  // namespace tokamak::cpu
