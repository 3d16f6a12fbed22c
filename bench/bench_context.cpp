#include "bench_context.h"

#include <time.h>

#include <algorithm>
#include <cassert>
#include <utility>

#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace tokamak::bench {

struct BenchContext::Backend {
  ThreadPool pool;
  std::unique_ptr<Ops> ops;
  explicit Backend(int n) : pool(n), ops(make_cpu_ops(pool, selected_isa())) {}
};

BenchContext::BenchContext(Ceilings ceilings, bool cold, size_t cold_bytes)
    : ceilings_(std::move(ceilings)), cold_(cold), cold_bytes_(cold_bytes) {
  assert(!ceilings_.rows.empty());
}

BenchContext::~BenchContext() = default;

const CeilingRow& BenchContext::ceiling(int threads) const {
  const CeilingRow* best = &ceilings_.rows.front();
  for (const CeilingRow& r : ceilings_.rows) {
    if (r.threads <= threads) best = &r;
  }
  return *best;
}

Ops& BenchContext::ops(int threads, int64_t max_rows, int64_t max_k) {
  std::unique_ptr<Backend>& b = backends_[threads];
  if (!b) b = std::make_unique<Backend>(threads);
  b->ops->reserve(max_rows, max_k);  // only ever grows
  return *b->ops;
}

namespace {

double cpu_seconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

OnCpu::OnCpu(int threads)
    : threads_(threads),
      wall0_(std::chrono::steady_clock::now()),
      cpu0_(cpu_seconds(CLOCK_PROCESS_CPUTIME_ID)),
      thread_cpu0_(cpu_seconds(CLOCK_THREAD_CPUTIME_ID)) {}

double OnCpu::fraction() const {
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0_).count();
  return wall > 0 ? (cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0_) / (wall * threads_) : 0;
}

double OnCpu::parallelism() const {
  const double caller = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - thread_cpu0_;
  return caller > 0 ? (cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0_) / caller : 0;
}

void set_counters(benchmark::State& state, const BenchContext& ctx, const OnCpu& on_cpu,
                  double bytes, double flops, Arith arith, Memory memory, int threads) {
  using benchmark::Counter;
  const auto rate = [](double v) { return Counter(v, Counter::kIsIterationInvariantRate); };
  state.counters["on_cpu"] = on_cpu.fraction();
  if (threads > 1) state.counters["par"] = on_cpu.parallelism();
  state.counters["bytes"] = rate(bytes);
  state.counters["flops"] = rate(flops);

  const CeilingRow& c = ctx.ceiling(threads);
  const bool dram = memory == Memory::Dram && ctx.cold();
  const double bw = dram ? c.read_bw : c.read_bw_l2;
  if (bw > 0) state.counters[dram ? "of_bw" : "of_l2bw"] = rate(bytes / bw);
  const char* name = "of_fma";
  double peak = c.fma_f32();
  if (arith == Arith::DotI8) {
    name = "of_dot";
    peak = c.dot_i8();
    // Against the quantized formats' own ceiling too (ceilings.h): a 32-block kernel's bound.
    const double blocks = std::max(c.dot_i8_blocks_vnni, c.dot_i8_blocks_amx);
    if (blocks > 0) state.counters["of_blk"] = rate(flops / blocks);
  } else if (arith == Arith::DotBf16 && c.dot_bf16 > 0) {
    name = "of_bfdot";
    peak = c.dot_bf16;
  }
  if (peak > 0) state.counters[name] = rate(flops / peak);
}

void FractionReporter::ReportRuns(const std::vector<Run>& runs) {
  std::vector<Run> copy = runs;
  for (Run& run : copy) {
    for (auto& [name, counter] : run.counters) {
      if (name.rfind("of_", 0) == 0) counter.flags = benchmark::Counter::kDefaults;
    }
  }
  ConsoleReporter::ReportRuns(copy);
}

}  // namespace tokamak::bench
