#pragma once
// What the kernel benchmarks (kernels_bench.cpp) share: the run's settings and this machine's
// ceilings (one BenchContext, made by main and handed to every benchmark), the ops of each
// thread count, and the counters every benchmark reports:
//
//   bytes     bytes/s read (and, for in-place row ops, written)
//   flops     FLOP/s, 2 per multiply-add whatever the arithmetic
//   of_bw     bytes/s over the DRAM read ceiling at that thread count (operands from DRAM);
//   of_l2bw   the same over the L2 read ceiling for operands that live in cache
//   of_fma | of_dot | of_bfdot   flops over the ceiling of the kernel's arithmetic: fp32 FMA,
//             int8 dot or bf16 dot
//   of_blk    int8 kernels also over the 32-blocks scaled ceiling, the best of its VNNI and AMX
//             forms (ceilings.h): what a quantized matmul can reach at all on this CPU
//   on_cpu    the process's CPU time over threads x wall time of the timed loop: below ~0.9
//             other work took the cores and the figures understate the kernel
//   par       the process's CPU time over the calling thread's: how many threads shared the
//             work (1 = the caller alone; 2 = both pool threads busy throughout). With on_cpu
//             it tells a pool whose second thread sat idle (par 1) from two threads that had
//             to take turns on one core because another program held the other (par 2, on_cpu
//             0.5)

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>

#include "ceilings.h"
#include "ops/ops.h"

namespace tokamak::bench {

class BenchContext {
 public:
  BenchContext(Ceilings ceilings, bool cold, size_t cold_bytes);
  ~BenchContext();

  // Stream operands from DRAM: each benchmark keeps copies of its operands filling this many
  // bytes and takes the next one every iteration (bench_data.h). 0 when hot.
  size_t footprint() const { return cold_ ? cold_bytes_ : 0; }
  bool cold() const { return cold_; }
  const Ceilings& ceilings() const { return ceilings_; }
  // The ceilings measured at `threads`, or at the largest count below it.
  const CeilingRow& ceiling(int threads) const;

  // CpuOps of the selected kernel level over a pool of `threads`, made on first use, with
  // scratch for matmuls of up to max_rows x max_k.
  Ops& ops(int threads, int64_t max_rows, int64_t max_k);

 private:
  struct Backend;
  Ceilings ceilings_;
  bool cold_;
  size_t cold_bytes_;
  std::map<int, std::unique_ptr<Backend>> backends_;
};

// Started just before a benchmark's loop; see on_cpu and par above. (Pool workers spin briefly
// between tasks, which counts; a pool thread an op leaves idle pulls the figure towards 1 /
// threads.)
class OnCpu {
 public:
  explicit OnCpu(int threads);
  double fraction() const;     // on_cpu
  double parallelism() const;  // par

 private:
  int threads_;
  std::chrono::steady_clock::time_point wall0_;
  double cpu0_;
  double thread_cpu0_;
};

enum class Arith { Fma, DotI8, DotBf16 };  // which arithmetic ceiling a kernel is held to
enum class Memory { Dram, Cache };         // where its operands live in a forward

// Sets the counters above from per-iteration bytes and flops.
void set_counters(benchmark::State& state, const BenchContext& ctx, const OnCpu& on_cpu,
                  double bytes, double flops, Arith arith, Memory memory, int threads);

// The console reporter, showing the fractions (rate counters) as plain numbers, not "/s".
class FractionReporter : public benchmark::ConsoleReporter {
 public:
  using ConsoleReporter::ConsoleReporter;
  void ReportRuns(const std::vector<Run>& runs) override;
};

}  // namespace tokamak::bench
