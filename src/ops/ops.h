#pragma once
// The op set that models are written against. A backend (the CPU now, CUDA later) implements
// Ops; the model never names a backend. Each op is a front-end that checks shapes and dtypes
// (asserts: a mismatch is a programmer error, the model validated its file at load) and
// dispatches once to that backend's kernels. Tensors are views (core/tensor.h), shapes
// outermost first; every op writes into tensors the caller owns, and no op allocates on the
// step path (reserve() sizes the backend's scratch once, at load).

#include <cstdint>
#include <memory>
#include <span>

#include "core/cpu_features.h"
#include "core/paged_kv_view.h"
#include "core/tensor.h"

namespace tokamak {

class ThreadPool;

// RMSNorm applied to a matmul's input rows while they are encoded for its kernel, so that the
// normalised rows are never stored: each row as rmsnorm(x, weight, eps) gives it, bitwise.
struct InputNorm {
  Tensor weight;  // (k) F32; data null: the input goes in as it is
  float eps = 0.0f;

  bool on() const { return weight.data != nullptr; }
};

struct RopeParams {
  int32_t n_rot = 0;  // rotated dims per head (even, <= head_dim)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;  // 1 / linear scaling factor
};

struct AttentionParams {
  int32_t n_head = 0;
  int32_t n_head_kv = 0;  // divides n_head; query head h reads KV head h / (n_head / n_head_kv)
  int32_t head_dim_k = 0;
  int32_t head_dim_v = 0;
  float scale = 1.0f;  // usually 1 / sqrt(head_dim_k)
  // Sum the dot products in llama.cpp's single-token order (kernels/cpu/attention.h); the
  // default is its multi-token order. Set only to reproduce llama.cpp's decode steps.
  bool single_token_order = false;
};

class Ops {
 public:
  virtual ~Ops() = default;

  virtual Device device() const = 0;

  // Sizes scratch space for matmuls of up to max_rows activation rows of up to max_k
  // elements (called once at load; later calls only grow it).
  virtual void reserve(int64_t max_rows, int64_t max_k) = 0;

  // y (m, n) F32 = x (m, k) F32 · wᵀ for weights w (n, k) of dtype F32, F16, BF16, Q8_0,
  // Q4_0 or Q4_1 (k a multiple of 32 for the block types), or w as prepare_weight returned
  // it. x and y must not overlap.
  virtual void matmul(const Tensor& x, const Tensor& w, const Tensor& y) = 0;

  // The form of the matmul weight w (n, k) this backend computes fastest with: w itself, or a
  // copy repacked into its kernels' layout (made in parallel, owned by this Ops and valid
  // while it lives; the results differ from w's in rounding only). Called once per weight at
  // load.
  virtual Tensor prepare_weight(const Tensor& w) = 0;

  // Weights that multiply the same input (Q, K and V; gate and up) as one tensor whose rows
  // are theirs stacked in order, for matmul_stacked: the input is encoded once and the threads
  // are woken once instead of once per weight. An empty tensor (data null) where the backend
  // has no such form for them; the caller then prepares and multiplies each on its own.
  // Owned like prepare_weight's copies.
  virtual Tensor prepare_stacked(std::span<const Tensor> ws) = 0;

  // ys[i] (m, n_i) = norm(x) (m, k) · (weight i)ᵀ for `stacked` from prepare_stacked of
  // weights of n_0, n_1, ... rows: bitwise what rmsnorm (when norm is on) then matmul with each
  // weight prepared on its own gives.
  virtual void matmul_stacked(const Tensor& x, const InputNorm& norm, const Tensor& stacked,
                              std::span<const Tensor> ys) = 0;

  // y (m, n) += x (m, k) · wᵀ, for w as matmul takes it: a residual added where the product
  // is stored (a matmul epilogue where the backend has one), bitwise what matmul into a
  // scratch followed by add(y, scratch, y) gives. x and y must not overlap.
  virtual void matmul_add(const Tensor& x, const Tensor& w, const Tensor& y) = 0;

  // The gate and up weights of a SwiGLU feed-forward (both (n, k)) as one tensor for
  // matmul_gated, or an empty tensor where the backend has no such form (the caller then
  // multiplies them otherwise, e.g. stacked). Owned like prepare_weight's copies.
  virtual Tensor prepare_gated(const Tensor& gate, const Tensor& up) = 0;
  // y (m, n) = silu(norm(x) · gateᵀ) * (norm(x) · upᵀ) for `gated` from prepare_gated: the
  // gate and up products never leave the kernel. Bitwise what matmul_stacked of the same two
  // weights followed by silu_mul gives.
  virtual void matmul_gated(const Tensor& x, const InputNorm& norm, const Tensor& gated,
                            const Tensor& y) = 0;

  // y (m, n) = x / rms(x) * weight (n), row by row; y may be x.
  virtual void rmsnorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) = 0;

  // Rotates x (t, n_heads, head_dim) F32 in place; row i is at position positions[i].
  virtual void rope(const Tensor& x, std::span<const int32_t> positions,
                    const RopeParams& params) = 0;

  // Causal attention. q (t, n_head, head_dim_k) F32; k (n_ctx, n_head_kv * head_dim_k) and
  // v (n_ctx, n_head_kv * head_dim_v) F16, the cache rows by position; query i attends to
  // positions [0, positions[i]], all of which must be in k and v already.
  // out (t, n_head * head_dim_v) F32.
  virtual void attention(const Tensor& q, const Tensor& k, const Tensor& v,
                         std::span<const int32_t> positions, const AttentionParams& params,
                         const Tensor& out) = 0;

  // Stores the step's new keys and values in the paged cache: row i of k (t, n_head_kv *
  // head_dim_k) F32 and of v (t, n_head_kv * head_dim_v) F32 goes, converted to F16, to token
  // slot slots[i] = block * block_size + offset of `kv` (layout in core/paged_kv_view.h).
  // Slots are distinct and inside the pool.
  virtual void write_paged_kv(const Tensor& k, const Tensor& v, std::span<const int64_t> slots,
                              const PagedKVView& kv) = 0;
  // The same with RoPE applied to each key row (at positions[i]) on its way into the cache:
  // bitwise what rope(k) then write_paged_kv gives, without the rotated keys being stored
  // anywhere else (k itself is left as it is).
  virtual void rope_write_paged_kv(const Tensor& k, const Tensor& v,
                                   std::span<const int32_t> positions, const RopeParams& rope,
                                   std::span<const int64_t> slots, const PagedKVView& kv) = 0;

  // Hot window (kv/paged_kv_cache.h): each listed block's F16 hot copy (all block_size rows,
  // every KV head, keys and values) encoded into its block of `main`, in main's dtypes, whole
  // (KVDType::Q4C keys are quantized per channel across the block's rows). Distinct main
  // blocks; any order and split give the same bytes.
  virtual void encode_kv_blocks(const PagedKVView& hot, const PagedKVView& main,
                                std::span<const KVBlockEncode> blocks) = 0;

  // Moves cached keys by `delta` positions: rows [first_row, first_row + n_rows) of the
  // blocks listed (in order, block_size rows each) have their keys, RoPE'd at position p,
  // re-rotated to p + delta (rotations compose: R(delta) R(p) = R(p + delta)), for every KV
  // head, decoded and encoded again in the cache's dtype. Values carry no position and are
  // left alone. The KV window (engine/kv_window.h) uses it after dropping tokens.
  virtual void shift_paged_k(const PagedKVView& kv, std::span<const int32_t> blocks,
                             int32_t first_row, int32_t n_rows, int32_t delta,
                             const RopeParams& rope) = 0;

  // Causal attention of a ragged batch over the paged cache, with an online softmax (no
  // score matrix: memory does not grow with the context). q (t, n_head, head_dim_k) F32 holds
  // every sequence's queries at the rows its SeqAttention names (the seqs cover disjoint row
  // ranges); out (t, n_head * head_dim_v) F32 gets the same rows; rows no seq names are left
  // alone. Each output element is reduced in one fixed order (KV blocks in table order, tokens
  // in block order) that depends only on its query's context, never on the other sequences,
  // the chunking of the prompt or the thread count: the engine's batch invariance rests on it.
  // A seq with block_mass set also gets its queries' softmax weights added per block there.
  virtual void paged_attention(const Tensor& q, const PagedKVView& kv,
                               std::span<const SeqAttention> seqs, const AttentionParams& params,
                               const Tensor& out) = 0;

  // out = silu(gate) * up, all (m, n) F32; out may be gate or up.
  virtual void silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) = 0;

  // out = a + b, all (m, n) F32; out may be a or b.
  virtual void add(const Tensor& a, const Tensor& b, const Tensor& out) = 0;

  // out (t, n) F32 = rows ids[i] of table (n_rows, n) (any supported dtype, decoded).
  virtual void embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) = 0;

  // dst = src converted to dst's dtype, same shape (m, n); src F32, dst F32 or F16.
  // Rows of dst may be strided (a range of KV cache rows, say).
  virtual void copy(const Tensor& src, const Tensor& dst) = 0;
};

// The CPU backend with the kernels of `isa` (must be supported: see selected_isa()), splitting
// work across `pool`, which must outlive it. repack: quantized weights are repacked at load
// where the level has kernels for that (faster, rounded differently from llama.cpp); off,
// they are read in GGUF's layout by the kernels that reproduce llama.cpp's AVX2 build.
std::unique_ptr<Ops> make_cpu_ops(ThreadPool& pool, Isa isa, bool repack = true);

}  // namespace tokamak
