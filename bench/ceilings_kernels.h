#pragma once
// The loops behind the ceilings (ceilings.h), one file per ISA: ceilings_avx2.cpp and
// ceilings_avx512.cpp and ceilings_amx.cpp are compiled with their ISA's flags and may only be
// called on a CPU that has it (ceilings.cpp checks CPUID first). Each loop returns a value computed
// from all its work, so that the compiler cannot drop any of it.

#include <cstddef>
#include <cstdint>

namespace tokamak::bench {

// A compute loop: run(iters) executes `iters` iterations of `ops_per_iter` arithmetic
// operations each (a fused multiply-add counts as two: one multiply, one add).
struct PeakLoop {
  double (*run)(int64_t iters);
  double ops_per_iter;
};

// Sums the 64-bit words of [p, p + bytes) (bytes a multiple of 1 KiB, p 64-byte aligned).
// The SIMD loops read it as four concurrent streams, one per quarter.
using ReadLoop = uint64_t (*)(const void* p, size_t bytes);

uint64_t read_sum_generic(const void* p, size_t bytes);  // plain C++, ceilings.cpp

namespace avx2 {
uint64_t read_sum(const void* p, size_t bytes);  // 256-bit loads
PeakLoop fma_f32();                              // vfmadd231ps ymm: 8 lanes x 2 ops per instruction
PeakLoop dot_i8();  // vpmaddubsw + vpmaddwd + vpaddd ymm: 32 u8*s8 products, 64 ops
}  // namespace avx2

namespace avx512 {
uint64_t read_sum(const void* p, size_t bytes);  // 512-bit loads
PeakLoop fma_f32();                              // vfmadd231ps zmm: 16 lanes x 2 ops
PeakLoop dot_i8();    // vpdpbusd zmm (AVX512-VNNI): 64 u8*s8 products, 128 ops
PeakLoop dot_bf16();  // vdpbf16ps zmm (AVX512-BF16): 32 bf16 products, 64 ops
// A 32-deep block of 16 weight rows against 8 activation rows with its float steps (the VNNI
// kernel's per-block arithmetic, ceilings_avx512.cpp): 8,192 ops.
PeakLoop dot_i8_blocks();
}  // namespace avx512

namespace amx {
PeakLoop dot_i8();      // tdpbssd, 16 x 16 results of 64-deep s8 x s8 products: 32,768 ops
PeakLoop dot_i8_k32();  // the same 32 deep, as a kernel of GGUF's 32-element blocks must use
// Two 32-deep blocks of 16 x 16 with their sums stored and their float steps (the AMX
// kernel's inner loop, ceilings_amx.cpp): 32,768 ops.
PeakLoop dot_i8_blocks();
}  // namespace amx

}  // namespace tokamak::bench
