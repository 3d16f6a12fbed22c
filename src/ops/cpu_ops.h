#pragma once
// The CPU implementation of Ops: kernels from kernels/cpu chosen once per ISA, work split
// statically across a ThreadPool (matmul by output columns = weight rows, attention by
// (token, head), paged attention by (sequence, KV head, query token), the row-wise ops by rows
// when there is enough work to share).

#include <span>
#include <utility>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/buffer_arena.h"
#include "core/thread_pool.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/rope_table.h"
#include "ops/ops.h"

namespace tokamak {

class CpuOps final : public Ops {
 public:
  // repack: quantized weights go into the level's interleaved layout where it has kernels for
  // it (kernels/cpu/packed_weights.h); off, every matmul reads GGUF's layout.
  CpuOps(ThreadPool& pool, Isa isa, bool repack = true);

  Device device() const override { return Device::CPU; }
  Isa isa() const { return kt_.isa; }
  void reserve(int64_t max_rows, int64_t max_k) override;

  void matmul(const Tensor& x, const Tensor& w, const Tensor& y) override;
  Tensor prepare_weight(const Tensor& w) override;
  Tensor prepare_stacked(std::span<const Tensor> ws) override;
  void matmul_stacked(const Tensor& x, const InputNorm& norm, const Tensor& stacked,
                      std::span<const Tensor> ys) override;
  void matmul_add(const Tensor& x, const Tensor& w, const Tensor& y) override;
  Tensor prepare_gated(const Tensor& gate, const Tensor& up) override;
  void matmul_gated(const Tensor& x, const InputNorm& norm, const Tensor& gated,
                    const Tensor& y) override;
  void rmsnorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) override;
  void rope(const Tensor& x, std::span<const int32_t> positions, const RopeParams& params) override;
  void attention(const Tensor& q, const Tensor& k, const Tensor& v,
                 std::span<const int32_t> positions, const AttentionParams& params,
                 const Tensor& out) override;
  void write_paged_kv(const Tensor& k, const Tensor& v, std::span<const int64_t> slots,
                      const PagedKVView& kv) override;
  void rope_write_paged_kv(const Tensor& k, const Tensor& v, std::span<const int32_t> positions,
                           const RopeParams& rope, std::span<const int64_t> slots,
                           const PagedKVView& kv) override;
  void encode_kv_blocks(const PagedKVView& hot, const PagedKVView& main,
                        std::span<const KVBlockEncode> blocks) override;
  void shift_paged_k(const PagedKVView& kv, std::span<const int32_t> blocks, int32_t first_row,
                     int32_t n_rows, int32_t delta, const RopeParams& rope) override;
  void paged_attention(const Tensor& q, const PagedKVView& kv, std::span<const SeqAttention> seqs,
                       const AttentionParams& params, const Tensor& out) override;
  void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) override;
  void add(const Tensor& a, const Tensor& b, const Tensor& out) override;
  void embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) override;
  void copy(const Tensor& src, const Tensor& dst) override;

 private:
  // x's rows encoded for weights of type wtype (in scratch_; F32 weights take x as it is):
  // the rows and their stride in bytes. With norm on, each row is normalised first, on its
  // way to the encoder (not for F32 weights, which have no encoder).
  // Whether rope_table_ holds the rows of every position (reserving them if needed): false
  // for positions it does not keep, which are then computed per token.
  bool rope_rows_ready(const cpu::RopeConfig& cfg, std::span<const int32_t> positions);

  std::pair<const void*, size_t> encode_activations(const Tensor& x, DType wtype,
                                                    const InputNorm& norm = {});
  // A packed matmul of norm(x) against w, whose rows are those of the outputs ys stacked in
  // order (one output for a single weight or a gated pair), split across the pool by group,
  // with the given epilogue (kernels/cpu/packed_weights.h).
  void packed_matmul(const Tensor& x, const InputNorm& norm, const Tensor& w,
                     std::span<const Tensor> ys, cpu::PackedEpilogue epilogue);
  // write_paged_kv, with RoPE applied to the key rows on the way when positions is not empty.
  void write_kv_rows(const Tensor& k, const Tensor& v, std::span<const int32_t> positions,
                     const RopeParams& rope, std::span<const int64_t> slots,
                     const PagedKVView& kv);

  // Runs fn over [0, n) rows: on the caller when the work (n * cost_per_row) is small,
  // else split across the pool.
  void for_rows(int64_t n, int64_t cost_per_row, const std::function<void(int64_t, int64_t)>& fn);

  // Adds each tracked sequence's softmax weights per block to its SeqAttention::block_mass,
  // from the scores its items wrote to mass_rows_.
  void add_block_mass(std::span<const SeqAttention> seqs, int32_t block_size,
                      int32_t n_rows_per_query);

  ThreadPool& pool_;
  const cpu::KernelTable kt_;  // the level's table, its packed kernels removed without repack
  // Attention-mass tracking (SeqAttention::block_mass): per work item, its heads' weights
  // summed per block, (items of tracked sequences, their blocks); and where each sequence's
  // rows start (-1: not tracked).
  std::vector<float> mass_rows_;
  std::vector<int64_t> mass_offsets_;
  // RoPE's cos/sin rows by position, shared by rope() and the K writes of every layer.
  cpu::RopeTable rope_table_;
  std::vector<cpu::PackedActBlock> x_blocks_;  // packed_matmul's activation block terms
  std::vector<uint8_t> x_tiles_;  // its activations in the level's own layout, if it has one
  // paged_attention's split-K scratch: item i's spans are span items [span_first_[i],
  // span_first_[i + 1]), whose states span_states_ holds.
  std::vector<int64_t> span_first_;
  std::vector<float> span_states_;
  AlignedBuffer<uint8_t> scratch_;  // encoded activation rows of the current matmul
  std::vector<float> product_;      // matmul_add's product where no kernel adds it
  // What the prepare_* calls made, side by side on huge pages: a decode step streams every
  // weight once (core/aligned_buffer.h), and a small model's weights are each a fraction of
  // a 2 MiB page.
  BufferArena weights_;
};

}  // namespace tokamak
