#pragma once
// The per-ISA kernels, as a table of function pointers chosen once from the CPU's features
// (see core/cpu_features.h). Every entry has a scalar twin in the Scalar table that the
// tests compare it with. Kernels take raw pointers and sizes and know nothing of tensors.
//
// Reduction order: each kernel sums in one fixed order for given n, whatever the caller's
// batching or threading, so a result never depends on how work is split. Different ISAs
// may round differently (SIMD lanes); the conversions (to_*) are exact and equal in all.

#include <cstddef>
#include <cstdint>

#include "core/cpu_features.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/cpu/rmsnorm.h"

namespace tokamak::cpu {

struct PagedAttentionArgs;  // paged_attention.h
struct PagedPartial;        // paged_attention.h

// Dot product of a weight row and an activation row of n elements, each in its encoding
// (the activation encoding of weight type W is given by activation_dtype(W) in matmul.h).
using VecDotFn = float (*)(int64_t n, const void* w, const void* x);
// Four weight rows (w_stride bytes apart) against one activation row: out[r] is bitwise
// equal to dot(n, w + r * w_stride, x). Shares the activation loads and hides latency.
using VecDot4Fn = void (*)(int64_t n, const void* w, size_t w_stride, const void* x, float* out);
// A tile of four weight rows (w_stride bytes apart) by kTileActRows activation rows (x_stride
// bytes apart): out[c * out_stride + r] is bitwise equal to dot(n, w + r * w_stride,
// x + c * x_stride) for r < 4, c < kTileActRows. Decodes each weight block once for all the
// activation rows of the tile.
using VecDot4xRFn = void (*)(int64_t n, const void* w, size_t w_stride, const void* x,
                             size_t x_stride, float* out, int64_t out_stride);
// Encodes n floats into an activation row.
using ConvertFn = void (*)(const float* x, void* y, int64_t n);

// Activation rows of a dot4xr tile. Four: with AVX2's 16 registers the 4 x 4 accumulators
// do not all fit, but the spills cost less than decoding the weights more often (4 x 2 and
// 4 x 3 measured slower for Q4_0, Q4_1 and Q8_0).
inline constexpr int kTileActRows = 4;

// Rows of an activation tile of KernelTable::pack_activation_tiles.
inline constexpr int kActivationTileRows = 16;

struct DotKernel {
  VecDotFn dot;
  VecDot4Fn dot4;
  VecDot4xRFn dot4xr;
};

struct KernelTable {
  Isa isa;

  // Activation encoders; q8 ones need n % 32 == 0.
  ConvertFn to_q8_0;  // weights Q8_0, Q4_0
  ConvertFn to_q8_1;  // weights Q4_1
  ConvertFn to_f16;   // weights F16 (and attention queries against the F16 KV cache)
  ConvertFn to_bf16;  // weights BF16
  ConvertFn to_q8_K;  // weights Q4_K, Q5_K, Q6_K; n % 256 == 0

  // Dot products by weight type, against that type's activation encoding: q4_0, q5_0 and
  // q8_0 with Q8_0, q4_1 and q5_1 with Q8_1, the K-quants with Q8_K, f16 with F16, bf16 with
  // BF16, f32 with F32. Block types need n % 32 == 0 (K-quants n % 256 == 0); the others take
  // any n.
  DotKernel q4_0;
  DotKernel q4_1;
  DotKernel q8_0;
  DotKernel f16;
  DotKernel bf16;
  DotKernel f32;
  DotKernel q5_0;
  DotKernel q5_1;
  DotKernel q4_k;
  DotKernel q5_k;
  DotKernel q6_k;

  // rmsnorm_scales (rmsnorm.h): each row's scale, the scalar loop's bits at every level.
  void (*rmsnorm_scales)(const float* x, int64_t x_stride, int64_t rows, int64_t n, float eps,
                         float* scales) = cpu::rmsnorm_scales;

  // out = silu(gate) * up, rounding as ggml does (ggml_math.h); out may alias.
  void (*silu_mul)(const float* gate, const float* up, float* out, int64_t n);
  // RoPE's rotation of n_heads heads of one token in place, from rope_cos_sin's row (rope.h).
  void (*rope_apply)(float* x, int64_t n_heads, int64_t head_dim, int32_t n_rot,
                     const float* cos_sin);

  // One query head over n_kv cached positions; see attention.h for the arithmetic.
  // scores: n_kv floats and probs: n_kv halves of scratch.
  void (*attention)(const float* q, const uint16_t* k, int64_t k_stride, const uint16_t* v,
                    int64_t v_stride, int64_t n_kv, int32_t head_dim_k, int32_t head_dim_v,
                    float scale, bool single_token_order, float* out, float* scores,
                    uint16_t* probs);

  // One query token of a GQA group over tokens [begin, end) of a sequence in the paged KV
  // cache, online softmax, into a span state; see paged_attention.h. No scratch.
  void (*paged_attention_span)(const PagedAttentionArgs& args, int64_t begin, int64_t end,
                               const PagedPartial& out);
  // Consecutive query tokens of one sequence over one KV head (a prefill chunk), each with the
  // bits paged_attention gives it alone; see paged_attention_queries in paged_attention.h.
  // Returns false, having written nothing, for a call it has no form for. Null: none.
  bool (*paged_attention_queries)(const PagedAttentionArgs& first, int32_t n_queries,
                                  int64_t q_step, int64_t out_step) = nullptr;
  // Matmuls over weights repacked for this level (packed_weights.h), by base type: null where
  // the level computes in GGUF's layout. A model packs a weight type exactly when its entry is
  // set (Ops::prepare_weight); the scalar twin is packed_matmul_reference.
  PackedMatmulFn q4_0x8 = nullptr;
  PackedMatmulFn q4_1x8 = nullptr;
  PackedMatmulFn q8_0x8 = nullptr;
  PackedMatmulFn q6_kx8 = nullptr;  // Q6_K packed (AVX2's also serves AVX-512 and AMX)
  // For a level whose packed kernels read the activations in a layout of their own (AMX's
  // tiles): the bytes of that layout for m rows of k against a packed type, or 0 where that
  // type's kernel takes none for such a call, and the packer of its tiles [t0, t1)
  // (kActivationTileRows rows each), from the rows in the base type's activation encoding.
  // Formed once per matmul, shared by every call (PackedMatmulArgs::x_tiles). Where the bytes
  // are not 0, the kernel takes the tiles' rows (the first m / kActivationTileRows *
  // kActivationTileRows) from them alone, and reads x_blocks only for the rows after. Null:
  // the level has no such layout.
  size_t (*activation_tiles_bytes)(DType packed, int64_t m, int64_t k) = nullptr;
  void (*pack_activation_tiles)(DType packed, const void* xq, size_t xq_stride, int64_t k,
                                int64_t t0, int64_t t1, void* out) = nullptr;
};

// dot4 as four calls of dot, for kernels without a four-row form.
template <VecDotFn Dot>
void dot4_by_rows(int64_t n, const void* w, size_t w_stride, const void* x, float* out) {
  for (int r = 0; r < 4; ++r) out[r] = Dot(n, static_cast<const char*>(w) + r * w_stride, x);
}

// dot4xr as one dot4 per activation row, for kernels without a tile form.
template <VecDot4Fn Dot4>
void dot4xr_by_rows(int64_t n, const void* w, size_t w_stride, const void* x, size_t x_stride,
                    float* out, int64_t out_stride) {
  for (int c = 0; c < kTileActRows; ++c) {
    Dot4(n, w, w_stride, static_cast<const char*>(x) + c * x_stride, out + c * out_stride);
  }
}

// The four-row and tile forms of a dot as loops over it.
template <VecDotFn Dot>
constexpr DotKernel dot_by_rows() {
  return {Dot, dot4_by_rows<Dot>, dot4xr_by_rows<dot4_by_rows<Dot>>};
}

// The table of one level; `isa` must be supported by this CPU (resolve it first).
const KernelTable& kernel_table(Isa isa);

// Per-level tables, defined in kernels_<isa>.cpp (only the matching level may call them).
const KernelTable& scalar_kernel_table();
const KernelTable& avx2_kernel_table();
const KernelTable& avxvnni_kernel_table();
const KernelTable& avx512_kernel_table(bool with_bf16);
const KernelTable& amx_kernel_table(bool with_bf16);

}  // namespace tokamak::cpu
