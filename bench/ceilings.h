#pragma once
// This machine's ceilings, so that a kernel's figure can be read as a fraction of what the
// hardware can do at all:
//
//   read_bw      bytes/s streamed from a buffer far larger than the last-level cache (DRAM),
//                each thread summing its slice with SIMD loads as four concurrent streams
//                (one stream alone reaches ~85% of it here; a dot4 kernel reads four rows)
//   read_bw_pass bytes/s of one pass over the whole DRAM buffer, the threads reading it in
//                contiguous slices, median of several passes: what a decode step, which reads
//                every weight once, can expect. On a shared or virtualized machine it can sit
//                well below read_bw, a best burst (decode floors are given against both)
//   read_bw_l2   bytes/s re-read from a small per-thread buffer that stays in L2
//   fma_f32_*    fp32 FLOP/s of independent FMA chains held in registers (an FMA is 2 FLOP)
//   dot_i8_*     int8 ops/s of u8 x s8 dot products (a multiply-add is 2 ops): vpmaddubsw +
//                vpmaddwd + vpaddd (AVX2), vpdpbusd (AVX512-VNNI)
//   dot_bf16     FLOP/s of vdpbf16ps (AVX512-BF16)
//   dot_i8_blocks_*  int8 ops/s of the same dot products in GGUF's 32-element blocks, each
//                block's sums scaled in float as the quantized formats need (an int-to-float
//                conversion, a multiply and an FMA per 16 results), operands in L1: the
//                prefill matmul's own ceiling, with the vector units and with AMX tiles
//
// Each is the best of several short trials (a ceiling is what the machine reaches, not what
// it usually does on a busy day), measured at each requested thread count with all threads
// started together. On a machine shared with other work, a trial in which any thread was
// off its core for more than 5% of the time is set aside; a ceiling that got no undisturbed
// trial in its time budget keeps the best disturbed one and is listed in `disturbed`.
// A rate is 0 where the CPU lacks the ISA. The loops are chosen by CPUID
// (core/cpu_features.h), never by TOKAMAK_CPU_ISA: they describe the machine.

#include <cstddef>
#include <string>
#include <vector>

namespace tokamak::bench {

struct CeilingRow {
  int threads = 0;
  double read_bw = 0;
  double read_bw_pass = 0;
  double read_bw_l2 = 0;
  double fma_f32_avx2 = 0;
  double fma_f32_avx512 = 0;
  double dot_i8_avx2 = 0;
  double dot_i8_vnni = 0;
  double dot_bf16 = 0;
  double dot_i8_amx = 0;      // AMX tiles, 64 deep (the instruction's peak)
  double dot_i8_amx_k32 = 0;  // AMX tiles, 32 deep (one GGUF block a multiply)
  // int8 dot products of GGUF 32-element blocks with each block's float scaling (the
  // kernels' per-block arithmetic on operands in L1): what a Q4_0 / Q8_0 matmul can reach
  // with the vector units (VNNI) and with the tiles (AMX).
  double dot_i8_blocks_vnni = 0;
  double dot_i8_blocks_amx = 0;

  // The best of the ISA variants of each.
  double fma_f32() const { return fma_f32_avx512 > fma_f32_avx2 ? fma_f32_avx512 : fma_f32_avx2; }
  // The vector units' best: the floors of the kernels bench and compare.sh use this one, and
  // name the AMX rates beside it where the CPU has them.
  double dot_i8() const { return dot_i8_vnni > dot_i8_avx2 ? dot_i8_vnni : dot_i8_avx2; }
};

struct Ceilings {
  std::string cpu;        // /proc/cpuinfo's model name
  std::string isa;        // the best kernel level of this CPU (scalar | avx2 | avx512)
  double clock_ghz = 0;   // one core's clock, from a chain of dependent integer multiplies
  size_t dram_bytes = 0;  // size of the read_bw buffer
  int passes = 0;         // passes over it for read_bw_pass
  size_t l2_bytes = 0;    // per-thread size of the read_bw_l2 buffer
  int trials = 0;
  std::vector<CeilingRow> rows;  // one per thread count, ascending
  // "<rate>@<threads>" of the rates measured with no undisturbed trial (too low, likely).
  std::vector<std::string> disturbed;

  // The row measured at exactly `threads`, or nullptr.
  const CeilingRow* at(int threads) const;
};

struct CeilingOptions {
  std::vector<int> threads;  // thread counts to measure; empty = {1, all hardware threads}
  size_t dram_bytes = size_t{1} << 30;
  size_t l2_bytes = size_t{256} << 10;
  int trials = 10;              // undisturbed trials wanted per ceiling (see ceilings.cpp)
  int passes = 7;               // whole-buffer passes for read_bw_pass (the median is kept)
  double trial_seconds = 0.01;  // length of one trial of a compute loop
};

// Measures everything above (a few seconds; allocates dram_bytes).
Ceilings measure_ceilings(const CeilingOptions& options);

// A human-readable table (GB/s, GFLOP/s, GOPS, and per core and cycle at one thread).
std::string ceilings_table(const Ceilings& c);

// JSON form, and back; load_ceilings throws std::runtime_error for a missing or bad file.
std::string ceilings_json(const Ceilings& c);
Ceilings load_ceilings(const std::string& path);

}  // namespace tokamak::bench
