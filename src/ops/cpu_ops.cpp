#include "ops/cpu_ops.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "core/fp16.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/embedding.h"
#include "kernels/cpu/kv_codec.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "ops/cpu_rows.h"

namespace tokamak {
namespace {

using cpu_ops_detail::as_rows;
using cpu_ops_detail::Rows;

// Work below this many element-operations runs on the calling thread: waking the pool costs
// more than it saves.
constexpr int64_t kMinParallelWork = 1 << 15;

// Rows whose RMSNorm scales are computed together before they are normalised: a multiple of
// the sixteen the AVX-512 form takes at once, few enough to be still cached for the pass that
// normalises them (the default model's 16 x 576 floats, 36 KiB, in L1; the 1B shape's in L2).
constexpr int64_t kNormRows = 16;

// Preconditions of the paged ops that cost a loop; checked only in asserts.
[[maybe_unused]] bool distinct(std::span<const int64_t> slots) {
  for (size_t i = 0; i < slots.size(); ++i) {
    for (size_t j = i + 1; j < slots.size(); ++j) {
      if (slots[i] == slots[j]) return false;
    }
  }
  return true;
}


}  // namespace

namespace {

cpu::KernelTable table_for(Isa isa, bool repack) {
  cpu::KernelTable t = cpu::kernel_table(isa);
  if (!repack) {  // nothing packs (packed_weight_dtype)
    t.q4_0x8 = t.q4_1x8 = t.q8_0x8 = t.q6_kx8 = nullptr;
  }
  return t;
}

}  // namespace

CpuOps::CpuOps(ThreadPool& pool, Isa isa, bool repack) : pool_(pool), kt_(table_for(isa, repack)) {}

std::unique_ptr<Ops> make_cpu_ops(ThreadPool& pool, Isa isa, bool repack) {
  return std::make_unique<CpuOps>(pool, isa, repack);
}

void CpuOps::reserve(int64_t max_rows, int64_t max_k) {
  // Two bytes per element covers every activation encoding (F16/BF16; Q8_x take 1.125).
  const size_t need = static_cast<size_t>(max_rows) * static_cast<size_t>(max_k) * 2 + 64;
  if (scratch_.size() < need) scratch_ = AlignedBuffer<uint8_t>(need);
}

void CpuOps::for_rows(int64_t n, int64_t cost_per_row,
                      const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (pool_.n_threads() == 1 || n == 1 || n * cost_per_row < kMinParallelWork) {
    fn(0, n);
  } else {
    pool_.parallel_for(n, fn);
  }
}

std::pair<const void*, size_t> CpuOps::encode_activations(const Tensor& x, DType wtype,
                                                          const InputNorm& norm) {
  const Rows xr = as_rows(x);
  // F32 weights read x itself; only the packed kernels, whose inputs are encoded, take a norm.
  assert(wtype != DType::F32 || !norm.on());
  if (wtype == DType::F32) return {xr.data, static_cast<size_t>(xr.stride)};
  const int64_t m = xr.n_rows;
  const int64_t k = xr.n_cols;
  const size_t xq_stride = row_bytes(cpu::activation_dtype(wtype), k);
  if (scratch_.size() < xq_stride * static_cast<size_t>(m)) reserve(m, k);
  uint8_t* dst = scratch_.data();
  const float* src = xr.row<const float>(0);
  const int64_t x_stride = xr.stride / static_cast<int64_t>(sizeof(float));
  if (!norm.on()) {
    for_rows(m, k, [&](int64_t r0, int64_t r1) {
      cpu::convert_rows(kt_, wtype, src, x_stride, k, r0, r1, dst);
    });
    return {dst, xq_stride};
  }
  assert(norm.weight.dtype == DType::F32 && norm.weight.n_elements() == k);
  const auto* w = norm.weight.ptr<const float>();
  // Each row normalised into a row of this thread's, then encoded from there: what rmsnorm
  // then the encoder give, without the normalised rows going through memory. The scales go
  // kNormRows rows at a time, so that those rows are still in L1 when they are normalised.
  for_rows(m, 2 * k, [&](int64_t r0, int64_t r1) {
    thread_local std::vector<float> row;
    row.resize(static_cast<size_t>(k));
    float scales[kNormRows];
    for (int64_t c0 = r0; c0 < r1; c0 += kNormRows) {
      const int64_t c1 = std::min(r1, c0 + kNormRows);
      kt_.rmsnorm_scales(src + c0 * x_stride, x_stride, c1 - c0, k, norm.eps, scales);
      for (int64_t r = c0; r < c1; ++r) {
        cpu::rmsnorm_apply(src + r * x_stride, scales[r - c0], w, row.data(), k);
        cpu::convert_rows(kt_, wtype, row.data(), k, k, 0, 1,
                          dst + static_cast<size_t>(r) * xq_stride);
      }
    }
  });
  return {dst, xq_stride};
}

void CpuOps::matmul(const Tensor& x, const Tensor& w, const Tensor& y) {
  const Rows xr = as_rows(x);
  const Rows wr = as_rows(w);
  const Rows yr = as_rows(y);
  assert(xr.dtype == DType::F32 && yr.dtype == DType::F32);
  assert(cpu::matmul_supports(wr.dtype) || cpu::is_packed(wr.dtype));
  assert(xr.n_cols == wr.n_cols && yr.n_rows == xr.n_rows && yr.n_cols == wr.n_rows);
  const int64_t m = xr.n_rows;
  const int64_t k = xr.n_cols;
  const int64_t n = wr.n_rows;
  if (m == 0 || n == 0) return;

  if (cpu::is_packed(wr.dtype)) {  // a stack of one weight
    const Tensor ys[] = {y};
    matmul_stacked(x, {}, w, ys);
    return;
  }

  // Encode the activations once.
  const auto [xq, xq_stride] = encode_activations(x, wr.dtype);

  const int64_t y_stride = yr.stride / static_cast<int64_t>(sizeof(float));
  float* yp = yr.row<float>(0);
  const auto run = [&](int64_t j0, int64_t j1) {
    cpu::matmul_rows(kt_, wr.dtype, wr.data, static_cast<size_t>(wr.stride), xq, xq_stride, m, k,
                     j0, j1, yp, y_stride);
  };
  if (pool_.n_threads() == 1 || m * n * k < kMinParallelWork) {
    run(0, n);
  } else {
    // Split in groups of four weight rows, the width of the dot4 / tile kernels, so that no
    // chunk boundary sends rows through the one-row kernel (same results, faster).
    pool_.parallel_for((n + 3) / 4,
                       [&](int64_t g0, int64_t g1) { run(g0 * 4, std::min(n, g1 * 4)); });
  }
}

Tensor CpuOps::prepare_weight(const Tensor& w) {
  const DType packed = cpu::packed_weight_dtype(kt_, w.dtype);
  if (packed == w.dtype || w.rank != 2 || w.device != Device::CPU) return w;
  const int64_t n = w.shape[0];
  const int64_t k = w.shape[1];
  if (!cpu::packable(w.dtype, w.data, static_cast<size_t>(w.stride[0]), n, k)) return w;
  uint8_t* const buf = weights_.allocate(cpu::packed_bytes(w.dtype, n, k));
  const int64_t groups = (n + cpu::kPackRows - 1) / cpu::kPackRows;
  for_rows(groups, k * cpu::kPackRows, [&](int64_t g0, int64_t g1) {
    cpu::pack_groups(w.dtype, w.data, static_cast<size_t>(w.stride[0]), n, k, g0, g1, buf);
  });
  const Tensor out = Tensor::contiguous(packed, {n, k}, buf);
  return out;
}

Tensor CpuOps::prepare_stacked(std::span<const Tensor> ws) {
  if (ws.empty()) return {};
  const DType base = ws[0].dtype;
  const DType packed = cpu::packed_weight_dtype(kt_, base);
  if (packed == base) return {};
  const int64_t k = ws[0].rank == 2 ? ws[0].shape[1] : 0;
  int64_t n = 0;
  for (const Tensor& w : ws) {
    // Each weight's rows must fill whole groups, so that its outputs start on a group; the
    // weights may differ in type where they pack into the same one (Q5_0 and Q8_0).
    if (cpu::packed_weight_dtype(kt_, w.dtype) != packed || w.rank != 2 ||
        w.device != Device::CPU || w.shape[1] != k || w.shape[0] % cpu::kPackRows != 0 ||
        !cpu::packable(w.dtype, w.data, static_cast<size_t>(w.stride[0]), w.shape[0], k)) {
      return {};
    }
    n += w.shape[0];
  }
  uint8_t* const buf = weights_.allocate(cpu::packed_bytes(base, n, k));
  const size_t group_bytes = cpu::packed_group_bytes(base, k);
  int64_t first_group = 0;
  for (const Tensor& w : ws) {
    const int64_t groups = w.shape[0] / cpu::kPackRows;
    uint8_t* out = buf + static_cast<size_t>(first_group) * group_bytes;
    for_rows(groups, k * cpu::kPackRows, [&](int64_t g0, int64_t g1) {
      cpu::pack_groups(w.dtype, w.data, static_cast<size_t>(w.stride[0]), w.shape[0], k, g0, g1,
                       out);
    });
    first_group += groups;
  }
  const Tensor out = Tensor::contiguous(packed, {n, k}, buf);
  return out;
}

void CpuOps::matmul_stacked(const Tensor& x, const InputNorm& norm, const Tensor& stacked,
                            std::span<const Tensor> ys) {
  packed_matmul(x, norm, stacked, ys, cpu::PackedEpilogue::Store);
}

void CpuOps::packed_matmul(const Tensor& x, const InputNorm& norm, const Tensor& w,
                           std::span<const Tensor> ys, cpu::PackedEpilogue epilogue) {
  const Rows xr = as_rows(x);
  const Rows wr = as_rows(w);
  assert(xr.dtype == DType::F32 && cpu::is_packed(wr.dtype) && xr.n_cols == wr.n_cols);
  const int64_t m = xr.n_rows;
  const int64_t k = xr.n_cols;
  const int64_t n = wr.n_rows;  // output columns (a gated pair's: those of gate, and of up)
  if (m == 0) return;
  const auto [xq, xq_stride] = encode_activations(x, wr.dtype, norm);
  const cpu::PackedMatmulFn kernel = cpu::packed_matmul_kernel(kt_, wr.dtype);
  assert(kernel != nullptr);
  // The activations in the level's own layout (AMX's tiles), once for all the kernel calls
  // below.
  const size_t tiles_bytes =
      kt_.activation_tiles_bytes != nullptr ? kt_.activation_tiles_bytes(wr.dtype, m, k) : 0;
  const int64_t tiled_rows =
      tiles_bytes > 0 ? m / cpu::kActivationTileRows * cpu::kActivationTileRows : 0;
  if (tiles_bytes > 0) {
    x_tiles_.resize(tiles_bytes);
    const int64_t n_tiles = m / cpu::kActivationTileRows;
    for_rows(n_tiles, cpu::kActivationTileRows * k, [&](int64_t t0, int64_t t1) {
      kt_.pack_activation_tiles(wr.dtype, xq, xq_stride, k, t0, t1, x_tiles_.data());
    });
  }
  // The activation blocks' terms, also once, for the rows the tiles leave (all without them).
  x_blocks_.resize(static_cast<size_t>(m * (k / cpu::kQK)));
  for_rows(m - tiled_rows, k, [&](int64_t r0, int64_t r1) {
    cpu::packed_activation_blocks(wr.dtype, xq, xq_stride, k, tiled_rows + r0, tiled_rows + r1,
                                  x_blocks_.data());
  });

  // Each output's first row in the stack. All but the last fill whole groups
  // (prepare_stacked); the last may end in a partial group (one prepare_weight tensor).
  const auto groups_of = [](int64_t rows) { return (rows + cpu::kPackRows - 1) / cpu::kPackRows; };
  std::vector<int64_t> first_row(ys.size() + 1, 0);
  for (size_t i = 0; i < ys.size(); ++i) {
    const Rows yr = as_rows(ys[i]);
    assert(yr.dtype == DType::F32 && yr.n_rows == m);
    assert(i + 1 == ys.size() || yr.n_cols % cpu::kPackRows == 0);
    first_row[i + 1] = first_row[i] + yr.n_cols;
  }
  assert(first_row.back() == n);
  // Groups of eight output columns (gated: pairs of groups, the same columns of both).
  const auto run_groups = [&](int64_t g0, int64_t g1) {
    for (size_t i = 0; i < ys.size(); ++i) {
      const int64_t s0 = std::max(g0, first_row[i] / cpu::kPackRows);
      const int64_t s1 = std::min(g1, groups_of(first_row[i + 1]));
      if (s0 >= s1) continue;
      const Rows yr = as_rows(ys[i]);
      cpu::PackedMatmulArgs args{wr.data, n, k, xq, xq_stride, m, s0, s1, yr.row<float>(0),
                                 yr.stride / static_cast<int64_t>(sizeof(float)), first_row[i]};
      args.epilogue = epilogue;
      args.silu_mul = kt_.silu_mul;
      args.x_blocks = x_blocks_.data();
      if (tiles_bytes > 0) args.x_tiles = x_tiles_.data();
      kernel(args);
    }
  };
  const int64_t groups = groups_of(n);
  const int64_t work = m * n * k * (epilogue == cpu::PackedEpilogue::SiluMul ? 2 : 1);
  if (pool_.n_threads() == 1 || work < kMinParallelWork) {
    run_groups(0, groups);
  } else if (epilogue == cpu::PackedEpilogue::SiluMul) {
    pool_.parallel_for(groups, run_groups);
  } else {
    // Threads take whole pairs of groups: the AVX-512 kernel runs two groups per 16-lane
    // tile and a lone group at about 0.7 of that rate (packed_matmul_avx512.cpp); the AVX2
    // kernel, one group at a time, does not mind.
    pool_.parallel_for((groups + 1) / 2, [&](int64_t p0, int64_t p1) {
      run_groups(2 * p0, std::min(2 * p1, groups));
    });
  }
}

void CpuOps::matmul_add(const Tensor& x, const Tensor& w, const Tensor& y) {
  const Rows wr = as_rows(w);
  if (cpu::is_packed(wr.dtype)) {
    const Tensor ys[] = {y};
    packed_matmul(x, {}, w, ys, cpu::PackedEpilogue::Add);
    return;
  }
  // No kernel here adds in its epilogue: the product goes through a scratch, then add().
  const Rows yr = as_rows(y);
  product_.resize(static_cast<size_t>(yr.n_rows * yr.n_cols));
  const Tensor product = Tensor::contiguous(DType::F32, {yr.n_rows, yr.n_cols}, product_.data());
  matmul(x, w, product);
  add(y, product, y);
}

Tensor CpuOps::prepare_gated(const Tensor& gate, const Tensor& up) {
  const DType base = gate.dtype;
  const DType packed = cpu::packed_weight_dtype(kt_, base);
  if (packed == base || up.dtype != base || gate.rank != 2 || up.rank != 2 ||
      gate.device != Device::CPU || up.device != Device::CPU || gate.shape[0] != up.shape[0] ||
      gate.shape[1] != up.shape[1] || gate.stride[0] != up.stride[0]) {
    return {};
  }
  const int64_t n = gate.shape[0];
  const int64_t k = gate.shape[1];
  if (!cpu::packable(base, gate.data, static_cast<size_t>(gate.stride[0]), n, k) ||
      !cpu::packable(base, up.data, static_cast<size_t>(up.stride[0]), n, k)) {
    return {};
  }
  uint8_t* const buf = weights_.allocate(2 * cpu::packed_bytes(base, n, k));
  const int64_t pairs = (n + cpu::kPackRows - 1) / cpu::kPackRows;
  for_rows(pairs, 2 * k * cpu::kPackRows, [&](int64_t p0, int64_t p1) {
    cpu::pack_gated_pairs(base, gate.data, up.data, static_cast<size_t>(gate.stride[0]), n, k,
                          p0, p1, buf);
  });
  // Its shape is the output's, (n, k); its bytes hold both weights.
  const Tensor out = Tensor::contiguous(packed, {n, k}, buf);
  return out;
}

void CpuOps::matmul_gated(const Tensor& x, const InputNorm& norm, const Tensor& gated,
                          const Tensor& y) {
  const Tensor ys[] = {y};
  packed_matmul(x, norm, gated, ys, cpu::PackedEpilogue::SiluMul);
}

void CpuOps::rmsnorm(const Tensor& x, const Tensor& weight, float eps, const Tensor& y) {
  const Rows xr = as_rows(x);
  const Rows yr = as_rows(y);
  assert(xr.dtype == DType::F32 && yr.dtype == DType::F32 && weight.dtype == DType::F32);
  assert(weight.n_elements() == xr.n_cols && xr.n_rows == yr.n_rows && xr.n_cols == yr.n_cols);
  const auto* wp = weight.ptr<const float>();
  const int64_t x_stride = xr.stride / static_cast<int64_t>(sizeof(float));
  for_rows(xr.n_rows, xr.n_cols, [&](int64_t r0, int64_t r1) {
    float scales[kNormRows];  // kNormRows rows at a time, as in encode_activations
    for (int64_t c0 = r0; c0 < r1; c0 += kNormRows) {
      const int64_t c1 = std::min(r1, c0 + kNormRows);
      kt_.rmsnorm_scales(xr.row<const float>(c0), x_stride, c1 - c0, xr.n_cols, eps, scales);
      for (int64_t r = c0; r < c1; ++r) {
        cpu::rmsnorm_apply(xr.row<const float>(r), scales[r - c0], wp, yr.row<float>(r), xr.n_cols);
      }
    }
  });
}

void CpuOps::rope(const Tensor& x, std::span<const int32_t> positions, const RopeParams& params) {
  assert(x.rank == 3 && x.dtype == DType::F32 && x.is_contiguous());
  const int64_t n_tokens = x.shape[0];
  const int64_t n_heads = x.shape[1];
  const int64_t head_dim = x.shape[2];
  assert(static_cast<int64_t>(positions.size()) == n_tokens);
  assert(params.n_rot > 0 && params.n_rot % 2 == 0 && params.n_rot <= head_dim &&
         params.n_rot <= cpu::kMaxHeadDim);
  const cpu::RopeConfig cfg{params.n_rot, params.freq_base, params.freq_scale};
  float* base = x.ptr<float>();
  const bool from_table = rope_rows_ready(cfg, positions);
  for_rows(n_tokens, n_heads * head_dim, [&](int64_t t0, int64_t t1) {
    float cos_sin[cpu::kMaxHeadDim];
    for (int64_t t = t0; t < t1; ++t) {
      const int32_t pos = positions[static_cast<size_t>(t)];
      const float* cs = cos_sin;
      if (from_table) {
        cs = rope_table_.row(pos);
      } else {
        cpu::rope_cos_sin(cfg, pos, cos_sin);
      }
      kt_.rope_apply(base + t * n_heads * head_dim, n_heads, head_dim, params.n_rot, cs);
    }
  });
}

bool CpuOps::rope_rows_ready(const cpu::RopeConfig& cfg, std::span<const int32_t> positions) {
  if (positions.empty()) return false;
  const auto [lo, hi] = std::minmax_element(positions.begin(), positions.end());
  if (*lo < 0 || *hi >= cpu::RopeTable::kMaxPositions) return false;
  rope_table_.reserve(cfg, *hi + 1);
  return true;
}

void CpuOps::attention(const Tensor& q, const Tensor& k, const Tensor& v,
                       std::span<const int32_t> positions, const AttentionParams& p,
                       const Tensor& out) {
  assert(q.rank == 3 && q.dtype == DType::F32 && q.is_contiguous());
  assert(p.n_head > 0 && p.n_head_kv > 0 && p.n_head % p.n_head_kv == 0);
  assert(q.shape[1] == p.n_head && q.shape[2] == p.head_dim_k);
  const Rows kr = as_rows(k);
  const Rows vr = as_rows(v);
  const Rows outr = as_rows(out);
  assert(kr.dtype == DType::F16 && vr.dtype == DType::F16 && outr.dtype == DType::F32);
  assert(kr.n_cols == int64_t{p.n_head_kv} * p.head_dim_k);
  assert(vr.n_cols == int64_t{p.n_head_kv} * p.head_dim_v && vr.n_rows == kr.n_rows);
  const int64_t n_tokens = q.shape[0];
  assert(static_cast<int64_t>(positions.size()) == n_tokens);
  assert(outr.n_rows == n_tokens && outr.n_cols == int64_t{p.n_head} * p.head_dim_v);

  const int32_t group = p.n_head / p.n_head_kv;
  const auto* qp = q.ptr<const float>();
  const int64_t k_stride = kr.stride / 2;
  const int64_t v_stride = vr.stride / 2;
  const auto* kp = kr.row<const uint16_t>(0);
  const auto* vp = vr.row<const uint16_t>(0);
  int64_t max_kv = 0;
  for (int32_t pos : positions) {
    assert(pos >= 0 && pos < kr.n_rows);
    max_kv = std::max<int64_t>(max_kv, pos + 1);
  }
  const int64_t n_items = n_tokens * p.n_head;
  for_rows(n_items, max_kv * (p.head_dim_k + p.head_dim_v), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t = i / p.n_head;
      const int32_t h = static_cast<int32_t>(i % p.n_head);
      const int32_t hk = h / group;
      const int64_t n_kv = int64_t{positions[static_cast<size_t>(t)]} + 1;
      cpu::attention_head(kt_, qp + (t * p.n_head + h) * p.head_dim_k, kp + hk * p.head_dim_k,
                          k_stride, vp + hk * p.head_dim_v, v_stride, n_kv, p.head_dim_k,
                          p.head_dim_v, p.scale, p.single_token_order,
                          outr.row<float>(t) + h * p.head_dim_v);
    }
  });
}

void CpuOps::write_paged_kv(const Tensor& k, const Tensor& v, std::span<const int64_t> slots,
                            const PagedKVView& kv) {
  write_kv_rows(k, v, {}, {}, slots, kv);
}

void CpuOps::rope_write_paged_kv(const Tensor& k, const Tensor& v,
                                 std::span<const int32_t> positions, const RopeParams& rope,
                                 std::span<const int64_t> slots, const PagedKVView& kv) {
  assert(positions.size() == slots.size());
  write_kv_rows(k, v, positions, rope, slots, kv);
}

void CpuOps::write_kv_rows(const Tensor& k, const Tensor& v, std::span<const int32_t> positions,
                           const RopeParams& rope, std::span<const int64_t> slots,
                           const PagedKVView& kv) {
  const Rows kr = as_rows(k);
  const Rows vr = as_rows(v);
  assert(kr.dtype == DType::F32 && vr.dtype == DType::F32);
  assert(kv.k != nullptr && kv.v != nullptr && kv.block_size > 0 && kv.n_head_kv > 0);
  assert(kr.n_cols == int64_t{kv.n_head_kv} * kv.head_dim_k);
  assert(vr.n_cols == int64_t{kv.n_head_kv} * kv.head_dim_v);
  assert(kr.n_rows == static_cast<int64_t>(slots.size()) && vr.n_rows == kr.n_rows);
  assert(distinct(slots));
  [[maybe_unused]] const int64_t n_slots = int64_t{kv.n_blocks} * kv.block_size;
  const int32_t dk = kv.head_dim_k;
  const int32_t dv = kv.head_dim_v;
  const bool rotate = !positions.empty();
  assert(!rotate || (rope.n_rot > 0 && rope.n_rot % 2 == 0 && rope.n_rot <= dk &&
                     rope.n_rot <= cpu::kMaxHeadDim));
  const cpu::RopeConfig rope_cfg{rope.n_rot, rope.freq_base, rope.freq_scale};
  const bool from_table = rotate && rope_rows_ready(rope_cfg, positions);
  // Rows are independent (each is encoded on its own, kv_codec.h): any split. F16 through
  // the ISA's conversion, the others through the one encoder.
  for_rows(kr.n_rows, int64_t{kv.n_head_kv} * (dk + dv), [&](int64_t r0, int64_t r1) {
    // With RoPE: each key row rotated into this thread's copy (as rope() would in place).
    thread_local std::vector<float> rotated;
    if (rotate) rotated.resize(static_cast<size_t>(kr.n_cols));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t slot = slots[static_cast<size_t>(r)];
      assert(slot >= 0 && slot < n_slots);
      const auto block = static_cast<int32_t>(slot / kv.block_size);
      const auto row = static_cast<int32_t>(slot % kv.block_size);
      const float* k_row = kr.row<const float>(r);
      if (rotate) {
        const int32_t pos = positions[static_cast<size_t>(r)];
        float cos_sin[cpu::kMaxHeadDim];
        const float* cs = cos_sin;
        if (from_table) {
          cs = rope_table_.row(pos);
        } else {
          cpu::rope_cos_sin(rope_cfg, pos, cos_sin);
        }
        std::memcpy(rotated.data(), k_row, rotated.size() * sizeof(float));
        kt_.rope_apply(rotated.data(), kv.n_head_kv, dk, rope.n_rot, cs);
        k_row = rotated.data();
      }
      for (int32_t h = 0; h < kv.n_head_kv; ++h) {
        const float* k_src = k_row + h * dk;
        const float* v_src = vr.row<const float>(r) + h * dv;
        if (kv.dtypes.k == KVDType::F16) {
          kt_.to_f16(k_src, reinterpret_cast<uint16_t*>(kv.k_tile(block, h)) + row * dk, dk);
        } else {
          cpu::kv_write_row(kv.dtypes.k, k_src, dk, kv.k_tile(block, h), kv.k_tile_scales(block, h),
                            row);
        }
        if (kv.dtypes.v == KVDType::F16) {
          kt_.to_f16(v_src, reinterpret_cast<uint16_t*>(kv.v_tile(block, h)) + row * dv, dv);
        } else {
          cpu::kv_write_row(kv.dtypes.v, v_src, dv, kv.v_tile(block, h), kv.v_tile_scales(block, h),
                            row);
        }
      }
    }
  });
}

namespace {

// A hot tile's F16 elements as floats (a block's worth, once per block filled).
void f16_rows_to_f32(const uint8_t* src, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    out[i] = fp16_to_f32(h);
  }
}

}  // namespace

void CpuOps::encode_kv_blocks(const PagedKVView& hot, const PagedKVView& main,
                              std::span<const KVBlockEncode> blocks) {
  assert(hot.dtypes == KVDTypes(KVDType::F16) && hot.block_size == main.block_size &&
         hot.n_head_kv == main.n_head_kv && hot.head_dim_k == main.head_dim_k &&
         hot.head_dim_v == main.head_dim_v);
  const int32_t bs = main.block_size;
  const int32_t dk = main.head_dim_k;
  const int32_t dv = main.head_dim_v;
  // Items (block, KV head); each encodes whole K and V tiles of its own.
  const int64_t items = static_cast<int64_t>(blocks.size()) * main.n_head_kv;
  for_rows(items, int64_t{bs} * (dk + dv) * 8, [&](int64_t i0, int64_t i1) {
    thread_local std::vector<float> rows;  // (bs, head dim); grows once, then reused
    rows.resize(static_cast<size_t>(bs) * std::max(dk, dv));
    for (int64_t i = i0; i < i1; ++i) {
      const KVBlockEncode& b = blocks[static_cast<size_t>(i / main.n_head_kv)];
      const auto h = static_cast<int32_t>(i % main.n_head_kv);
      assert(b.hot >= 0 && b.hot < hot.n_blocks && b.main >= 0 && b.main < main.n_blocks);
      f16_rows_to_f32(hot.k_tile(b.hot, h), int64_t{bs} * dk, rows.data());
      cpu::kv_write_tile(main.dtypes.k, rows.data(), bs, dk, main.k_tile(b.main, h),
                         main.k_tile_scales(b.main, h));
      f16_rows_to_f32(hot.v_tile(b.hot, h), int64_t{bs} * dv, rows.data());
      cpu::kv_write_tile(main.dtypes.v, rows.data(), bs, dv, main.v_tile(b.main, h),
                         main.v_tile_scales(b.main, h));
    }
  });
}

void CpuOps::shift_paged_k(const PagedKVView& kv, std::span<const int32_t> blocks,
                           int32_t first_row, int32_t n_rows, int32_t delta,
                           const RopeParams& rope) {
  assert(kv.k != nullptr && kv.block_size > 0 && first_row >= 0 && n_rows >= 0);
  assert(int64_t{first_row} + n_rows <= int64_t{kv.block_size} * int64_t(blocks.size()));
  assert(rope.n_rot > 0 && rope.n_rot % 2 == 0 && rope.n_rot <= kv.head_dim_k &&
         rope.n_rot <= cpu::kMaxHeadDim);
  const int32_t dk = kv.head_dim_k;
  const cpu::RopeConfig cfg{rope.n_rot, rope.freq_base, rope.freq_scale};
  float cos_sin[cpu::kMaxHeadDim];
  cpu::rope_cos_sin(cfg, delta, cos_sin);
  if (!kv_dtype_writes_rows(kv.dtypes.k)) {
    // Keys encoded per block (q4c): whole tiles, decoded, rotated and encoded again. Rows
    // past n_rows in the last block are not computed yet (their block is encoded when it
    // fills, from its hot copy); they go through as they are.
    assert(first_row % kv.block_size == 0);
    const int32_t first_block = first_row / kv.block_size;
    const int32_t n_tiles = (first_row + n_rows + kv.block_size - 1) / kv.block_size - first_block;
    const int64_t tiles = int64_t{n_tiles} * kv.n_head_kv;  // (block, head)
    for_rows(tiles, int64_t{dk} * kv.block_size * 16, [&](int64_t i0, int64_t i1) {
      thread_local std::vector<float> rows;  // (block_size, dk); grows once, then reused
      rows.resize(static_cast<size_t>(kv.block_size) * dk);
      for (int64_t i = i0; i < i1; ++i) {
        const int32_t block = blocks[static_cast<size_t>(first_block + i / kv.n_head_kv)];
        const auto h = static_cast<int32_t>(i % kv.n_head_kv);
        uint8_t* tile = kv.k_tile(block, h);
        uint8_t* scales = kv.k_tile_scales(block, h);
        for (int32_t r = 0; r < kv.block_size; ++r) {
          float* row = rows.data() + static_cast<size_t>(r) * dk;
          cpu::kv_decode_row(kv.dtypes.k, tile, scales, dk, r, row);
          kt_.rope_apply(row, 1, dk, rope.n_rot, cos_sin);
        }
        cpu::kv_write_tile(kv.dtypes.k, rows.data(), kv.block_size, dk, tile, scales);
      }
    });
    return;
  }
  const int64_t items = int64_t{n_rows} * kv.n_head_kv;  // (row, head)
  for_rows(items, int64_t{dk} * 16, [&](int64_t i0, int64_t i1) {
    float row[cpu::kMaxHeadDim];
    for (int64_t i = i0; i < i1; ++i) {
      const auto r = static_cast<int32_t>(first_row + i / kv.n_head_kv);
      const auto h = static_cast<int32_t>(i % kv.n_head_kv);
      const int32_t block = blocks[static_cast<size_t>(r / kv.block_size)];
      assert(block >= 0 && block < kv.n_blocks);
      const int32_t offset = r % kv.block_size;
      uint8_t* tile = kv.k_tile(block, h);
      uint8_t* scales = kv.k_tile_scales(block, h);
      cpu::kv_decode_row(kv.dtypes.k, tile, scales, dk, offset, row);
      kt_.rope_apply(row, 1, dk, rope.n_rot, cos_sin);
      cpu::kv_write_row(kv.dtypes.k, row, dk, tile, scales, offset);
    }
  });
}

void CpuOps::silu_mul(const Tensor& gate, const Tensor& up, const Tensor& out) {
  const Rows g = as_rows(gate);
  const Rows u = as_rows(up);
  const Rows o = as_rows(out);
  assert(g.dtype == DType::F32 && u.dtype == DType::F32 && o.dtype == DType::F32);
  assert(g.n_rows == u.n_rows && g.n_rows == o.n_rows && g.n_cols == u.n_cols &&
         g.n_cols == o.n_cols);
  for_rows(g.n_rows, g.n_cols * 8, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      kt_.silu_mul(g.row<const float>(r), u.row<const float>(r), o.row<float>(r), g.n_cols);
    }
  });
}

void CpuOps::add(const Tensor& a, const Tensor& b, const Tensor& out) {
  const Rows ar = as_rows(a);
  const Rows br = as_rows(b);
  const Rows o = as_rows(out);
  assert(ar.dtype == DType::F32 && br.dtype == DType::F32 && o.dtype == DType::F32);
  assert(ar.n_rows == br.n_rows && ar.n_rows == o.n_rows && ar.n_cols == br.n_cols &&
         ar.n_cols == o.n_cols);
  for_rows(ar.n_rows, ar.n_cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      cpu::add(ar.row<const float>(r), br.row<const float>(r), o.row<float>(r), ar.n_cols);
    }
  });
}

void CpuOps::embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) {
  const Rows tr = as_rows(table);
  const Rows o = as_rows(out);
  assert(o.dtype == DType::F32 && o.n_cols == tr.n_cols);
  assert(static_cast<int64_t>(ids.size()) == o.n_rows);
  for_rows(o.n_rows, tr.n_cols * 2, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int32_t id = ids[static_cast<size_t>(r)];
      assert(id >= 0 && id < tr.n_rows);
      cpu::embedding_row(tr.dtype, tr.data, static_cast<size_t>(tr.stride), id, tr.n_cols,
                         o.row<float>(r));
    }
  });
}

void CpuOps::copy(const Tensor& src, const Tensor& dst) {
  const Rows s = as_rows(src);
  const Rows d = as_rows(dst);
  assert(s.dtype == DType::F32 && (d.dtype == DType::F32 || d.dtype == DType::F16));
  assert(s.n_rows == d.n_rows && s.n_cols == d.n_cols);
  for_rows(s.n_rows, s.n_cols, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      if (d.dtype == DType::F16) {
        kt_.to_f16(s.row<const float>(r), d.row<void>(r), s.n_cols);
      } else {
        std::memcpy(d.row<void>(r), s.row<const void>(r),
                    static_cast<size_t>(s.n_cols) * sizeof(float));
      }
    }
  });
}

}  // namespace tokamak
