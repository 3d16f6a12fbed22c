// The AVX-512 ceiling loops (ceilings_kernels.h). Compiled with AVX-512 F/BW/VL/DQ, VNNI and
// BF16; read_sum and fma_f32 need AVX-512F, dot_i8 VNNI and dot_bf16 BF16 besides, which
// ceilings.cpp checks before calling them.

// GCC 12 warns inside its own AVX-512 headers (see src/kernels/cpu/kernels_avx512.cpp).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

#include "ceilings_kernels.h"

namespace tokamak::bench::avx512 {
namespace {

// 16 independent chains per loop: covers latency x pipes on every AVX-512 core we know of
// (4-5 cycles, 1-2 zmm operations per cycle), and with the operands fits the 32 zmm registers.
constexpr int kChains = 16;

double fma_loop(int64_t iters) {
  const __m512 mul = _mm512_set1_ps(0.999999f);  // acc converges to 1, as in the AVX2 loop
  const __m512 add = _mm512_set1_ps(1e-6f);
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], mul, add);
  }
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

double dot_i8_loop(int64_t iters) {
  const __m512i a = _mm512_set1_epi8(1);  // unsigned operand
  const __m512i b = _mm512_set1_epi8(-1);
  // As asm on 16 named accumulators (acc += a(u8) . b(s8)): with the intrinsic, or with an
  // array, GCC 12 copies or stores every accumulator on each step. An asm takes at most 30
  // operands, hence two of 8 steps.
  static_assert(kChains == 16);
  __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0,
          c7 = c0, c8 = c0, c9 = c0, c10 = c0, c11 = c0, c12 = c0, c13 = c0, c14 = c0, c15 = c0;
#define TOKAMAK_DPBUSD(i) "vpdpbusd %9, %8, %" #i "\n\t"
#define TOKAMAK_DPBUSD8(x0, x1, x2, x3, x4, x5, x6, x7)                                         \
  asm(TOKAMAK_DPBUSD(0) TOKAMAK_DPBUSD(1) TOKAMAK_DPBUSD(2) TOKAMAK_DPBUSD(3) TOKAMAK_DPBUSD(4) \
          TOKAMAK_DPBUSD(5) TOKAMAK_DPBUSD(6) TOKAMAK_DPBUSD(7)                                 \
      : "+v"(x0), "+v"(x1), "+v"(x2), "+v"(x3), "+v"(x4), "+v"(x5), "+v"(x6), "+v"(x7)          \
      : "v"(a), "v"(b))
  for (int64_t it = 0; it < iters; ++it) {
    TOKAMAK_DPBUSD8(c0, c1, c2, c3, c4, c5, c6, c7);
    TOKAMAK_DPBUSD8(c8, c9, c10, c11, c12, c13, c14, c15);
  }
#undef TOKAMAK_DPBUSD8
#undef TOKAMAK_DPBUSD
  // Sums wrap around: harmless, the value only keeps the work alive.
  const __m512i s0 = _mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3));
  const __m512i s1 = _mm512_add_epi32(_mm512_add_epi32(c4, c5), _mm512_add_epi32(c6, c7));
  const __m512i s2 = _mm512_add_epi32(_mm512_add_epi32(c8, c9), _mm512_add_epi32(c10, c11));
  const __m512i s3 = _mm512_add_epi32(_mm512_add_epi32(c12, c13), _mm512_add_epi32(c14, c15));
  const __m512i s = _mm512_add_epi32(_mm512_add_epi32(s0, s1), _mm512_add_epi32(s2, s3));
  return static_cast<double>(_mm512_reduce_add_epi32(s));
}

double dot_bf16_loop(int64_t iters) {
  // bf16 0x3a83 ~ 0.001: each step adds 2e-6 per lane, far from overflow and denormals.
  const __m512i a = _mm512_set1_epi16(0x3a83);
  const __m512i b = _mm512_set1_epi16(0x3a83);
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 16
    for (int i = 0; i < kChains; ++i) {
      acc[i] = _mm512_dpbf16_ps(acc[i], (__m512bh)a, (__m512bh)b);
    }
  }
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

// The arithmetic a GGUF 32-element block of int8 quants costs in the VNNI kernels, on operands in
// L1: for each of 8 activation rows, 8 vpdpbusd (the block's 32 quants of 16 weight rows, four
// activation quants broadcast from memory each), then its float steps, acc = fma(dw * dx,
// float(isum), acc). The weights stay in registers (no unpacking, as Q8_0 needs none), so this is
// what any 32-block format reaches at most with the vector units: the dot products' rate less
// what the per-block scaling takes from the same pipes.
constexpr int kBlocks = 16;    // activation blocks cycled through (2 KiB of quants, in L1)
constexpr int kBlockRows = 8;  // activation rows a block, as the 16-lane tile of the kernel

double dot_i8_blocks_loop(int64_t iters) {
  alignas(64) static thread_local int8_t x[kBlocks][kBlockRows][32];
  alignas(64) static thread_local float dx[kBlocks][kBlockRows];
  for (int b = 0; b < kBlocks; ++b) {
    for (int c = 0; c < kBlockRows; ++c) {
      for (int e = 0; e < 32; ++e) x[b][c][e] = static_cast<int8_t>((b + c + e) % 7 - 3);
      dx[b][c] = 1e-6f * static_cast<float>(b + c + 1);
    }
  }
  __m512i q[8];
  for (int s = 0; s < 8; ++s) q[s] = _mm512_set1_epi8(static_cast<char>(s + 1));
  const __m512 dw = _mm512_set1_ps(0.5f);
  __m512 acc[kBlockRows];
  for (int c = 0; c < kBlockRows; ++c) acc[c] = _mm512_setzero_ps();
  for (int64_t it = 0; it < iters; ++it) {
    const int b = static_cast<int>(it % kBlocks);
#pragma GCC unroll 8
    for (int c = 0; c < kBlockRows; ++c) {
      __m512i p = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) {
        asm("vpdpbusd %2%{1to16%}, %1, %0"
            : "+v"(p)
            : "v"(q[s]), "m"(*reinterpret_cast<const int32_t*>(&x[b][c][4 * s])));
      }
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(dx[b][c]));
      acc[c] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(p), acc[c]);
    }
  }
  __m512 s = acc[0];
  for (int c = 1; c < kBlockRows; ++c) s = _mm512_add_ps(s, acc[c]);
  return _mm512_reduce_add_ps(s);
}

}  // namespace

uint64_t read_sum(const void* p, size_t bytes) {
  // Four streams, one per quarter (as a four-row dot product reads): one stream alone does not
  // keep enough misses in flight to reach the bandwidth.
  const size_t quarter = bytes / 4 / 256 * 256;
  const auto* s0 = static_cast<const uint8_t*>(p);
  const uint8_t* s1 = s0 + quarter;
  const uint8_t* s2 = s1 + quarter;
  const uint8_t* s3 = s2 + quarter;
  __m512i a0 = _mm512_setzero_si512();
  __m512i a1 = _mm512_setzero_si512();
  __m512i a2 = _mm512_setzero_si512();
  __m512i a3 = _mm512_setzero_si512();
  for (size_t i = 0; i < quarter; i += 128) {  // 2 x 64 bytes of each stream per step
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(s0 + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(s1 + i));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(s2 + i));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(s3 + i));
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(s0 + i + 64));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(s1 + i + 64));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(s2 + i + 64));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(s3 + i + 64));
  }
  const __m512i s = _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3));
  return static_cast<uint64_t>(_mm512_reduce_add_epi64(s));
}

PeakLoop fma_f32() {
  return {fma_loop, kChains * 16 * 2.0};
}
PeakLoop dot_i8() {
  return {dot_i8_loop, kChains * 64 * 2.0};
}
PeakLoop dot_i8_blocks() {
  return {dot_i8_blocks_loop, kBlockRows * 16 * 32 * 2.0};
}
PeakLoop dot_bf16() {
  return {dot_bf16_loop, kChains * 32 * 2.0};
}

}  // namespace tokamak::bench::avx512
