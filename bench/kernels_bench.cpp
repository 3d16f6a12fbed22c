// tokamak_kernels_bench: the CPU kernels through the real op front-end (CpuOps over a
// ThreadPool of 1 and 2 threads), on the shapes of the default model (SmolLM2-135M) and of a
// 1B llama (Llama-3.2-1B): matmul per weight type as decode GEMV (1 row), batched decode
// (32 rows) and prefill GEMM (128 rows), paged attention of one decode query over 512 / 2k /
// 8k tokens and of a 32-sequence decode step, rmsnorm, rope.
//
// Every benchmark reports bytes/s and FLOP/s, each also as a fraction of this machine's
// ceiling, and on_cpu (bench_context.h lists the counters; bench/README.md explains them).
// The ceilings are measured at start (ceilings.h) or read from --ceilings=FILE.
//
// Own flags (before Google Benchmark's):
//   --ceilings=FILE       read the ceilings from tokamak_ceilings --json FILE
//   --save_ceilings=FILE  write the measured ceilings there
//   --cache=cold|hot      stream operands from DRAM (default) or re-read one copy (caches)
//   --cold_mib=N          footprint of the cold copies (default 256 MiB, 8x this LLC)
// A short --benchmark_min_time (0.05 s) is the default.

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench_context.h"
#include "bench_data.h"
#include "ceilings.h"
#include "core/fp16.h"
#include "kernels/cpu/kv_codec.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/cpu/quantize.h"
#include "ops/ops.h"

namespace tokamak::bench {
namespace {

constexpr int kThreadCounts[] = {1, 2};
constexpr int64_t kPrefillRows = 128;
constexpr int32_t kHeadDim = 64;    // both models
constexpr int32_t kBlockSize = 16;  // the KV cache's default

// ---- Matmul --------------------------------------------------------------------------------

struct Shape {
  const char* name;
  int64_t n;  // output features (weight rows)
  int64_t k;  // input features
};

// SmolLM2-135M: n_embd 576, n_ff 1536, 9 heads / 3 KV heads of 64, vocab 49152.
constexpr Shape kSmolShapes[] = {
    {"smol.attn_q", 576, 576},    {"smol.attn_kv", 192, 576},  {"smol.ffn_up", 1536, 576},
    {"smol.ffn_down", 576, 1536}, {"smol.output", 49152, 576},
};
// Llama-3.2-1B: n_embd 2048, n_ff 8192, 32 heads / 8 KV heads of 64.
constexpr Shape kLlama1bShapes[] = {
    {"1b.attn_q", 2048, 2048},
    {"1b.attn_kv", 512, 2048},
    {"1b.ffn_up", 8192, 2048},
    {"1b.ffn_down", 2048, 8192},
};
constexpr DType kWeightTypes[] = {DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0,
                                  DType::Q4_1, DType::Q5_0, DType::Q4_K, DType::Q6_K};

Arith arith_of(DType wtype) {
  switch (wtype) {
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q4_K:
    case DType::Q6_K:
      return Arith::DotI8;
    case DType::BF16:
      return Arith::DotBf16;
    default:
      return Arith::Fma;
  }
}

// The dtype a model computes with for `wtype` weights at the selected kernel level: the
// repacked one where the level packs (kernels/cpu/packed_weights.h), as Ops::prepare_weight.
DType model_weight_dtype(DType wtype) {
  return cpu::packed_weight_dtype(cpu::kernel_table(selected_isa()), wtype);
}

// n rows of k random weights quantized to wtype, in GGUF's layout; `seed` picks the values.
std::vector<uint8_t> random_quantized(DType wtype, int64_t n, int64_t k, uint64_t seed) {
  const size_t row = row_bytes(wtype, k);
  std::vector<float> f(static_cast<size_t>(n * k));
  fill_random(f.data(), f.size(), seed);
  std::vector<uint8_t> q(row * static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    cpu::quantize_row(wtype, f.data() + r * k, q.data() + static_cast<size_t>(r) * row, k);
  }
  return q;
}

// Random weights of one (dtype, n, k) in the layout the model would use, in rotation. One set
// is kept at a time: the benchmarks of a set are registered one after the other.
Rotation& weights(DType wtype, int64_t n, int64_t k, size_t footprint) {
  struct Key {
    DType dtype;
    int64_t n, k;
    bool operator==(const Key&) const = default;
  };
  static Key key{};
  static std::unique_ptr<Rotation> rot;
  const Key want{wtype, n, k};
  if (rot && key == want) return *rot;
  rot.reset();
  const size_t row = row_bytes(wtype, k);
  std::vector<uint8_t> q = random_quantized(wtype, n, k, static_cast<uint64_t>(n * 131 + k));
  if (model_weight_dtype(wtype) != wtype) {
    std::vector<uint8_t> packed(cpu::packed_bytes(wtype, n, k));
    cpu::pack_groups(wtype, q.data(), row, n, k, 0, (n + cpu::kPackRows - 1) / cpu::kPackRows,
                     packed.data());
    q = std::move(packed);
  }
  rot = std::make_unique<Rotation>(q.data(), q.size(), footprint);
  key = want;
  return *rot;
}

// A matmul's random input x (m, k) and its output y (m, n), F32.
struct MatmulIo {
  AlignedBuffer<float> x, y;
  Tensor xt, yt;
  MatmulIo(int64_t m, const Shape& shape)
      : x(static_cast<size_t>(m * shape.k)), y(static_cast<size_t>(m * shape.n)) {
    fill_random(x.data(), x.size(), 7);
    xt = Tensor::contiguous(DType::F32, {m, shape.k}, x.data());
    yt = Tensor::contiguous(DType::F32, {m, shape.n}, y.data());
  }
};

void bm_matmul(benchmark::State& state, BenchContext* ctx, DType wtype, Shape shape, int64_t m,
               int threads) {
  Ops& ops = ctx->ops(threads, m, shape.k);
  Rotation& w = weights(wtype, shape.n, shape.k, ctx->footprint());
  const MatmulIo io(m, shape);
  const OnCpu on_cpu(threads);
  for (auto _ : state) {
    ops.matmul(io.xt, Tensor::contiguous(model_weight_dtype(wtype), {shape.n, shape.k}, w.next()),
               io.yt);
    benchmark::ClobberMemory();
  }
  const double w_bytes = static_cast<double>(row_bytes(wtype, shape.k)) * shape.n;
  set_counters(state, *ctx, on_cpu, w_bytes + 4.0 * m * shape.k, 2.0 * m * shape.n * shape.k,
               arith_of(wtype), Memory::Dram, threads);
}

// The feed-forward's gate and up matmuls as one call with silu(gate) * up in the epilogue,
// the way the model runs them where the level packs gated pairs (weights and activations hot:
// this prices the epilogue beside the two products). n is the width of each of the two.
void bm_matmul_gated(benchmark::State& state, BenchContext* ctx, DType wtype, Shape shape,
                     int64_t m, int threads) {
  Ops& ops = ctx->ops(threads, m, shape.k);
  const auto seed = static_cast<uint64_t>(shape.n * 131 + shape.k);
  std::vector<uint8_t> gate = random_quantized(wtype, shape.n, shape.k, seed);
  std::vector<uint8_t> up = random_quantized(wtype, shape.n, shape.k, seed + 1);
  const Tensor gated = ops.prepare_gated(Tensor::contiguous(wtype, {shape.n, shape.k}, gate.data()),
                                         Tensor::contiguous(wtype, {shape.n, shape.k}, up.data()));
  if (gated.data == nullptr) {
    state.SkipWithError("this kernel level has no gated form of this type");
    return;
  }
  const MatmulIo io(m, shape);
  const OnCpu on_cpu(threads);
  for (auto _ : state) {
    ops.matmul_gated(io.xt, {}, gated, io.yt);
    benchmark::ClobberMemory();
  }
  const double w_bytes = static_cast<double>(row_bytes(wtype, shape.k)) * shape.n;
  set_counters(state, *ctx, on_cpu, 2.0 * w_bytes + 4.0 * m * shape.k, 4.0 * m * shape.n * shape.k,
               arith_of(wtype), Memory::Cache, threads);
}

// ---- Paged attention -----------------------------------------------------------------------

struct AttnShape {
  const char* name;
  int32_t n_head;
  int32_t n_head_kv;
};
constexpr AttnShape kAttnShapes[] = {{"smol:9q-3kv", 9, 3}, {"1b:32q-8kv", 32, 8}};
constexpr int32_t kContexts[] = {512, 2048, 8192};

// One decode step of `batch` sequences, one query (all heads) each, over `ctx` cached tokens
// each, in KV dtypes `dtypes`. The pool holds as many sequences' worth of blocks as the
// footprint needs, in a random block order (a cache that has been in use), and each iteration
// attends over the next `batch` sequences' block tables.
//
// With queries > 1, a prefill chunk instead: each sequence's last `queries` tokens query it
// causally, as one sequence of that many queries (`together`: the way a prefill step passes
// them, which the kernel takes in blocks) or as that many one-query sequences of growing
// contexts (the same work, one query at a time).
void bm_paged_attention(benchmark::State& state, BenchContext* bc, KVDTypes dtypes, AttnShape shape,
                        int32_t ctx, int32_t batch, int threads, int32_t queries, bool together) {
  Ops& ops = bc->ops(threads, 1, 1);
  const int32_t blocks_per_seq = (ctx + kBlockSize - 1) / kBlockSize;
  PagedKVView kv;
  kv.dtypes = dtypes;
  kv.block_size = kBlockSize;
  kv.n_head_kv = shape.n_head_kv;
  kv.head_dim_k = kv.head_dim_v = kHeadDim;
  const size_t block_bytes = kv.k_block_stride() + kv.v_block_stride() + kv.k_scale_block_stride() +
                             kv.v_scale_block_stride();
  const size_t seq_bytes = block_bytes * static_cast<size_t>(blocks_per_seq);
  const size_t n_seqs = std::max<size_t>(static_cast<size_t>(batch),
                                         (bc->footprint() + seq_bytes - 1) / seq_bytes);
  kv.n_blocks = static_cast<int32_t>(n_seqs) * blocks_per_seq;

  // Pools filled by repeating kPattern blocks written by the real encoder from random rows, a
  // tile at a time (q4c keys can only be written so; the other dtypes get the same bytes as
  // row by row).
  const size_t nb = static_cast<size_t>(kv.n_blocks);
  AlignedBuffer<uint8_t> k(kv.k_block_stride() * nb);
  AlignedBuffer<uint8_t> v(kv.v_block_stride() * nb);
  AlignedBuffer<uint8_t> ks(std::max<size_t>(1, kv.k_scale_block_stride() * nb));
  AlignedBuffer<uint8_t> vs(std::max<size_t>(1, kv.v_scale_block_stride() * nb));
  kv.k = k.data();
  kv.v = v.data();
  kv.k_scales = ks.data();
  kv.v_scales = vs.data();
  constexpr int32_t kPattern = 64;
  {
    std::vector<float> k_rows(kBlockSize * kHeadDim);  // (kBlockSize, kHeadDim)
    std::vector<float> v_rows(kBlockSize * kHeadDim);
    uint64_t seed = 11;
    for (int32_t b = 0; b < std::min(kPattern, kv.n_blocks); ++b) {
      for (int32_t h = 0; h < kv.n_head_kv; ++h) {
        for (int32_t r = 0; r < kBlockSize; ++r) {
          fill_random(k_rows.data() + r * kHeadDim, kHeadDim, seed++);
          fill_random(v_rows.data() + r * kHeadDim, kHeadDim, seed++);
        }
        cpu::kv_write_tile(dtypes.k, k_rows.data(), kBlockSize, kHeadDim, kv.k_tile(b, h),
                           kv.k_tile_scales(b, h));
        cpu::kv_write_tile(dtypes.v, v_rows.data(), kBlockSize, kHeadDim, kv.v_tile(b, h),
                           kv.v_tile_scales(b, h));
      }
    }
    for (int32_t b = kPattern; b < kv.n_blocks; ++b) {
      const int32_t from = b % kPattern;
      std::memcpy(kv.k_tile(b, 0), kv.k_tile(from, 0), kv.k_block_stride());
      std::memcpy(kv.v_tile(b, 0), kv.v_tile(from, 0), kv.v_block_stride());
      std::memcpy(kv.k_tile_scales(b, 0), kv.k_tile_scales(from, 0), kv.k_scale_block_stride());
      std::memcpy(kv.v_tile_scales(b, 0), kv.v_tile_scales(from, 0), kv.v_scale_block_stride());
    }
  }

  std::vector<int32_t> blocks(static_cast<size_t>(kv.n_blocks));
  for (int32_t b = 0; b < kv.n_blocks; ++b) blocks[static_cast<size_t>(b)] = b;
  uint64_t s = 12345;
  for (size_t i = blocks.size(); i > 1; --i) {  // Fisher-Yates with an LCG
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(blocks[i - 1], blocks[(s >> 33) % i]);
  }

  const int64_t q_elems = int64_t{shape.n_head} * kHeadDim;
  const int64_t rows = int64_t{batch} * queries;
  AlignedBuffer<float> q(static_cast<size_t>(q_elems * rows));
  AlignedBuffer<float> out(static_cast<size_t>(q_elems * rows));
  fill_random(q.data(), q.size(), 13);
  const Tensor qt = Tensor::contiguous(DType::F32, {rows, shape.n_head, kHeadDim}, q.data());
  const Tensor ot = Tensor::contiguous(DType::F32, {rows, q_elems}, out.data());
  AttentionParams p;
  p.n_head = shape.n_head;
  p.n_head_kv = shape.n_head_kv;
  p.head_dim_k = p.head_dim_v = kHeadDim;
  p.scale = 0.125f;  // 1 / sqrt(64)

  size_t seq = 0;
  const OnCpu on_cpu(threads);
  std::vector<SeqAttention> step;
  for (auto _ : state) {
    step.clear();
    for (int32_t i = 0; i < batch; ++i) {
      const int32_t* table = blocks.data() + seq * static_cast<size_t>(blocks_per_seq);
      const int32_t first_row = i * queries;
      if (together) {
        step.push_back({first_row, queries, ctx, table});
      } else {
        for (int32_t r = 0; r < queries; ++r) {
          step.push_back({first_row + r, 1, ctx - queries + 1 + r, table});
        }
      }
      seq = seq + 1 == n_seqs ? 0 : seq + 1;
    }
    ops.paged_attention(qt, kv, step, p, ot);
    benchmark::ClobberMemory();
  }
  // The keys each query reads: ctx for a decode query, ctx - queries / 2 on average for a
  // prefill chunk's.
  const double attended = queries == 1 ? ctx : (ctx - queries / 2.0 + 0.5) * queries;
  const double kv_bytes = static_cast<double>(block_bytes) * ctx / kBlockSize;
  set_counters(state, *bc, on_cpu, batch * (kv_bytes + 8.0 * q_elems * queries),
               4.0 * batch * shape.n_head * attended * kHeadDim, Arith::Fma, Memory::Dram, threads);
}

// ---- Row-wise ops (their operands are activations: cache-resident in a forward) -------------

void bm_rmsnorm(benchmark::State& state, BenchContext* ctx, int64_t rows, int64_t n, int threads) {
  Ops& ops = ctx->ops(threads, 1, 1);
  AlignedBuffer<float> x(static_cast<size_t>(rows * n));
  AlignedBuffer<float> w(static_cast<size_t>(n));
  AlignedBuffer<float> y(static_cast<size_t>(rows * n));
  fill_random(x.data(), x.size(), 17);
  fill_random(w.data(), w.size(), 19);
  const Tensor xt = Tensor::contiguous(DType::F32, {rows, n}, x.data());
  const Tensor wt = Tensor::contiguous(DType::F32, {n}, w.data());
  const Tensor yt = Tensor::contiguous(DType::F32, {rows, n}, y.data());
  const OnCpu on_cpu(threads);
  for (auto _ : state) {
    ops.rmsnorm(xt, wt, 1e-5f, yt);
    benchmark::ClobberMemory();
  }
  // Per element: square and sum, then two products.
  set_counters(state, *ctx, on_cpu, 4.0 * (2 * rows * n + n), 4.0 * rows * n, Arith::Fma,
               Memory::Cache, threads);
}

void bm_rope(benchmark::State& state, BenchContext* ctx, int32_t n_head, int64_t rows,
             int threads) {
  Ops& ops = ctx->ops(threads, 1, 1);
  AlignedBuffer<float> x(static_cast<size_t>(rows * n_head * kHeadDim));
  fill_random(x.data(), x.size(), 23);
  std::vector<int32_t> positions(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i)
    positions[static_cast<size_t>(i)] = 1000 + static_cast<int32_t>(i);
  const Tensor xt = Tensor::contiguous(DType::F32, {rows, n_head, kHeadDim}, x.data());
  RopeParams p;
  p.n_rot = kHeadDim;
  p.freq_base = 500000.0f;
  const OnCpu on_cpu(threads);
  for (auto _ : state) {
    ops.rope(xt, positions, p);  // rotates in place: the norms stay as they are
    benchmark::ClobberMemory();
  }
  // Per element: one product and one FMA (the cos/sin table per token is not counted).
  const double elems = static_cast<double>(rows) * n_head * kHeadDim;
  set_counters(state, *ctx, on_cpu, 8.0 * elems, 3.0 * elems, Arith::Fma, Memory::Cache, threads);
}

// ---- Registration --------------------------------------------------------------------------

std::string dtype_label(DType t) {
  std::string s(dtype_name(t));
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

void register_all(BenchContext* ctx) {
  const auto tune = [](benchmark::internal::Benchmark* b) {
    b->UseRealTime()->Unit(benchmark::kMicrosecond);
  };
  for (const auto& shapes :
       {std::vector<Shape>(std::begin(kSmolShapes), std::end(kSmolShapes)),
        std::vector<Shape>(std::begin(kLlama1bShapes), std::end(kLlama1bShapes))}) {
    for (DType wtype : kWeightTypes) {
      for (const Shape& shape : shapes) {
        if (shape.k % dtype_info(wtype).block_size != 0) continue;  // K-quants: 1b shapes
        for (int64_t m : {int64_t{1}, int64_t{32}, kPrefillRows}) {
          for (int t : kThreadCounts) {
            const std::string name = "matmul/" + dtype_label(wtype) + "/m:" + std::to_string(m) +
                                     "/" + shape.name + ":" + std::to_string(shape.n) + "x" +
                                     std::to_string(shape.k) + "/t:" + std::to_string(t);
            tune(benchmark::RegisterBenchmark(name.c_str(), bm_matmul, ctx, wtype, shape, m, t));
          }
        }
      }
    }
  }
  // The gated feed-forward of both models, in the types whose packed kernels have the form.
  for (const Shape& shape :
       {Shape{"smol.ffn_gate_up", 1536, 576}, Shape{"1b.ffn_gate_up", 8192, 2048}}) {
    for (DType wtype : {DType::Q4_0, DType::Q4_1, DType::Q8_0}) {
      for (int64_t m : {int64_t{1}, int64_t{32}, kPrefillRows}) {
        for (int t : kThreadCounts) {
          const std::string name = "matmul_gated/" + dtype_label(wtype) +
                                   "/m:" + std::to_string(m) + "/" + shape.name + ":" +
                                   std::to_string(shape.n) + "x" + std::to_string(shape.k) +
                                   "/t:" + std::to_string(t);
          tune(
              benchmark::RegisterBenchmark(name.c_str(), bm_matmul_gated, ctx, wtype, shape, m, t));
        }
      }
    }
  }
  for (const AttnShape& shape : kAttnShapes) {
    for (int32_t n_ctx : kContexts) {
      for (int t : kThreadCounts) {
        const std::string name = std::string("paged_attention/") + shape.name +
                                 "/ctx:" + std::to_string(n_ctx) + "/t:" + std::to_string(t);
        tune(benchmark::RegisterBenchmark(name.c_str(), bm_paged_attention, ctx, KVDType::F16,
                                          shape, n_ctx, 1, t, 1, true));
      }
    }
  }
  // A decode step of a serving batch: 32 sequences of 192 tokens each (the mean context of
  // 128-in / 128-out requests), every one on its own blocks.
  for (const AttnShape& shape : kAttnShapes) {
    for (int t : kThreadCounts) {
      const std::string name =
          std::string("paged_attention_batch/") + shape.name + "/32x192/t:" + std::to_string(t);
      tune(benchmark::RegisterBenchmark(name.c_str(), bm_paged_attention, ctx, KVDType::F16, shape,
                                        192, 32, t, 1, true));
    }
  }
  // A 512-token prefill chunk at the end of a 2,048-token prompt, its queries as a prefill step
  // passes them and one at a time.
  for (const AttnShape& shape : kAttnShapes) {
    for (bool together : {true, false}) {
      for (int t : kThreadCounts) {
        const std::string name = std::string("paged_attention_prefill/") + shape.name +
                                 "/512q-ctx:2048/" + (together ? "together" : "one_by_one") +
                                 "/t:" + std::to_string(t);
        tune(benchmark::RegisterBenchmark(name.c_str(), bm_paged_attention, ctx, KVDType::F16,
                                          shape, 2048, 1, t, 512, together));
      }
    }
  }
  // The other KV dtypes, at one context: the cost of decoding in registers against the bytes
  // saved. q4c keys (per-channel, for cold blocks) beside q4 and f16 values, in one pool.
  for (KVDTypes dtype :
       {KVDTypes(KVDType::BF16), KVDTypes(KVDType::F32), KVDTypes(KVDType::Int8),
        KVDTypes(KVDType::Fp8), KVDTypes(KVDType::Q4), KVDTypes(KVDType::Q4C, KVDType::Q4),
        KVDTypes(KVDType::Q4C, KVDType::F16)}) {
    for (const AttnShape& shape : kAttnShapes) {
      for (int t : kThreadCounts) {
        const std::string name = "paged_attention_kv/" + kv_dtypes_name(dtype) + "/" + shape.name +
                                 "/ctx:2048/t:" + std::to_string(t);
        tune(benchmark::RegisterBenchmark(name.c_str(), bm_paged_attention, ctx, dtype, shape, 2048,
                                          1, t, 1, true));
      }
    }
  }
  for (int64_t n : {int64_t{576}, int64_t{2048}}) {
    for (int64_t rows : {int64_t{1}, kPrefillRows}) {
      for (int t : kThreadCounts) {
        const std::string name = "rmsnorm/rows:" + std::to_string(rows) +
                                 "/n:" + std::to_string(n) + "/t:" + std::to_string(t);
        tune(benchmark::RegisterBenchmark(name.c_str(), bm_rmsnorm, ctx, rows, n, t));
      }
    }
  }
  for (int32_t n_head : {9, 32}) {
    for (int64_t rows : {int64_t{1}, kPrefillRows}) {
      for (int t : kThreadCounts) {
        const std::string name = "rope/heads:" + std::to_string(n_head) +
                                 "x64/rows:" + std::to_string(rows) + "/t:" + std::to_string(t);
        tune(benchmark::RegisterBenchmark(name.c_str(), bm_rope, ctx, n_head, rows, t));
      }
    }
  }
}

// ---- Command line --------------------------------------------------------------------------

// The flags of our own (see the header comment).
struct Flags {
  std::string ceilings_in;
  std::string ceilings_out;
  bool cold = true;
  size_t cold_bytes = size_t{256} << 20;
};

// Takes our flags out of argv; nullopt (after a message) for a bad one.
std::optional<Flags> parse_own_flags(int* argc, char** argv) {
  Flags flags;
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&](const char* flag) -> const char* {
      const size_t len = std::strlen(flag);
      return arg.compare(0, len, flag) == 0 ? argv[i] + len : nullptr;
    };
    if (const char* v = value("--ceilings=")) {
      flags.ceilings_in = v;
    } else if (const char* v = value("--save_ceilings=")) {
      flags.ceilings_out = v;
    } else if (const char* v = value("--cache=")) {
      if (std::strcmp(v, "cold") != 0 && std::strcmp(v, "hot") != 0) {
        std::fprintf(stderr, "--cache must be cold or hot\n");
        return std::nullopt;
      }
      flags.cold = std::strcmp(v, "cold") == 0;
    } else if (const char* v = value("--cold_mib=")) {
      char* end = nullptr;
      const long mib = std::strtol(v, &end, 10);
      if (*v == '\0' || *end != '\0' || mib < 1 || mib > (1 << 16)) {
        std::fprintf(stderr, "--cold_mib must be a number of MiB in [1, 65536]\n");
        return std::nullopt;
      }
      flags.cold_bytes = static_cast<size_t>(mib) << 20;
    } else {
      argv[out++] = argv[i];
    }
  }
  *argc = out;
  argv[out] = nullptr;
  return flags;
}

// The ceilings: from the file, else measured now (and saved if asked); nullopt after a message.
std::optional<Ceilings> get_ceilings(const Flags& flags) {
  Ceilings c;
  try {
    if (!flags.ceilings_in.empty()) {
      c = load_ceilings(flags.ceilings_in);
    } else {
      std::fprintf(stderr, "measuring this machine's ceilings (tokamak_ceilings) ...\n");
      CeilingOptions opt;
      opt.threads.assign(std::begin(kThreadCounts), std::end(kThreadCounts));
      c = measure_ceilings(opt);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return std::nullopt;
  }
  if (c.rows.empty()) {
    std::fprintf(stderr, "no ceilings\n");
    return std::nullopt;
  }
  std::fputs(ceilings_table(c).c_str(), stderr);
  if (!flags.ceilings_out.empty()) {
    FILE* f = std::fopen(flags.ceilings_out.c_str(), "w");
    const bool ok = f != nullptr && std::fputs(ceilings_json(c).c_str(), f) >= 0;
    if (f != nullptr) std::fclose(f);
    if (!ok) {
      std::fprintf(stderr, "cannot write %s\n", flags.ceilings_out.c_str());
      return std::nullopt;
    }
  }
  return c;
}

bool has_flag(int argc, char** argv, const char* prefix) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix, std::strlen(prefix)) == 0) return true;
  }
  return false;
}

std::string gb(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v / 1e9);
  return buf;
}

}  // namespace
}  // namespace tokamak::bench

int main(int argc, char** argv) {
  using namespace tokamak::bench;
  const std::optional<Flags> flags = parse_own_flags(&argc, argv);
  if (!flags) return 2;
  // A short minimum time unless asked otherwise: ~200 benchmarks in a few minutes.
  std::vector<char*> args(argv, argv + argc);
  static char min_time[] = "--benchmark_min_time=0.05";
  if (!has_flag(argc, argv, "--benchmark_min_time")) args.push_back(min_time);
  int n_args = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n_args, args.data());
  if (benchmark::ReportUnrecognizedArguments(n_args, args.data())) return 2;

  if (has_flag(argc, argv, "--benchmark_list_tests")) {  // no ceilings needed
    register_all(nullptr);
    benchmark::RunSpecifiedBenchmarks();
    return 0;
  }
  std::optional<Ceilings> ceilings = get_ceilings(*flags);
  if (!ceilings) return 1;
  BenchContext ctx(std::move(*ceilings), flags->cold, flags->cold_bytes);

  const Ceilings& c = ctx.ceilings();
  benchmark::AddCustomContext("kernel_isa",
                              std::string(tokamak::isa_name(tokamak::selected_isa())));
  benchmark::AddCustomContext("operands", flags->cold
                                              ? "cold (" + std::to_string(flags->cold_bytes >> 20) +
                                                    " MiB of copies, from DRAM)"
                                              : "hot (one copy, from the caches)");
  benchmark::AddCustomContext("clock_ghz", gb(c.clock_ghz * 1e9));
  for (const CeilingRow& r : c.rows) {
    const std::string t = "ceiling_t" + std::to_string(r.threads) + "_";
    benchmark::AddCustomContext(t + "read_bw_GBps", gb(r.read_bw));
    benchmark::AddCustomContext(t + "read_bw_l2_GBps", gb(r.read_bw_l2));
    benchmark::AddCustomContext(t + "fma_f32_GFLOPs", gb(r.fma_f32()));
    benchmark::AddCustomContext(t + "dot_i8_GOPs", gb(r.dot_i8()));
    benchmark::AddCustomContext(t + "dot_bf16_GFLOPs", gb(r.dot_bf16));
  }

  register_all(&ctx);
  // Our console reporter unless another format was asked for.
  const bool console = !has_flag(argc, argv, "--benchmark_format=") ||
                       has_flag(argc, argv, "--benchmark_format=console");
  const bool color = isatty(STDOUT_FILENO) && !has_flag(argc, argv, "--benchmark_color=false");
  FractionReporter reporter(color ? FractionReporter::OO_ColorTabular
                                  : FractionReporter::OO_Tabular);
  benchmark::RunSpecifiedBenchmarks(console ? &reporter : nullptr);
  benchmark::Shutdown();
  return 0;
}
