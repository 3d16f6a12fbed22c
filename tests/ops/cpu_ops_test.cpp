// The CPU op front-ends: results against the kernels they dispatch to and against plain
// loops, for every ISA this CPU has and several thread counts (bitwise equal across counts).

#include "ops/cpu_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/rope_table.h"
#include "ops_test_util.h"

namespace tokamak {
namespace {

using test::random_floats;
using test::supported_isas;

std::vector<uint8_t> encode(DType d, const std::vector<float>& x, int64_t k) {
  const size_t rb = row_bytes(d, k);
  std::vector<uint8_t> out(rb * (x.size() / static_cast<size_t>(k)));
  for (size_t r = 0; r < x.size() / static_cast<size_t>(k); ++r) {
    cpu::quantize_row(d, x.data() + r * k, out.data() + r * rb, k);
  }
  return out;
}

class CpuOpsTest : public ::testing::TestWithParam<DType> {};

// Also through prepare_weight (repacked weights where the level packs), with n off a multiple
// of the packing's eight rows: thread-count invariant, close to the reference, and each row
// of a batch the same bits as that row alone (batch invariance).
TEST_P(CpuOpsTest, MatmulIsThreadCountInvariantAndCloseToReference) {
  const DType wt = GetParam();
  for (bool prepared : {false, true}) {
    const int64_t m = 7, k = 128, n = prepared ? 203 : 200;
    const auto wf = random_floats(static_cast<size_t>(n * k), 1);
    const auto xf = random_floats(static_cast<size_t>(m * k), 2, -2.0f, 2.0f);
    auto w = encode(wt, wf, k);
    std::vector<float> wd(static_cast<size_t>(n * k));
    for (int64_t j = 0; j < n; ++j) {
      cpu::dequantize_row(wt, w.data() + j * row_bytes(wt, k), wd.data() + j * k, k);
    }
    const Tensor wt_view = Tensor::contiguous(wt, {n, k}, w.data());
    auto x = xf;
    const Tensor xt = Tensor::contiguous(DType::F32, {m, k}, x.data());
    for (Isa isa : supported_isas()) {
      std::vector<float> first;
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        CpuOps ops(pool, isa);
        ops.reserve(m, k);
        const Tensor w_used = prepared ? ops.prepare_weight(wt_view) : wt_view;
        std::vector<float> y(static_cast<size_t>(m * n));
        ops.matmul(xt, w_used, Tensor::contiguous(DType::F32, {m, n}, y.data()));
        for (int64_t i = 0; prepared && i < m; ++i) {
          std::vector<float> alone(static_cast<size_t>(n));
          ops.matmul(Tensor::contiguous(DType::F32, {1, k}, x.data() + i * k), w_used,
                     Tensor::contiguous(DType::F32, {1, n}, alone.data()));
          EXPECT_EQ(std::memcmp(alone.data(), y.data() + i * n, alone.size() * 4), 0)
              << isa_name(isa) << " row " << i << " alone differs from the batch";
        }
        if (first.empty()) {
          first = y;
          // Close to the product of the decoded weights and the unencoded activations.
          const double tol = wt == DType::F32 ? 1e-5 : wt == DType::F16 ? 2e-3 : 2e-2;
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              double ref = 0.0, mag = 0.0;
              for (int64_t p = 0; p < k; ++p) {
                ref += static_cast<double>(wd[j * k + p]) * xf[i * k + p];
                mag += std::fabs(static_cast<double>(wd[j * k + p]) * xf[i * k + p]);
              }
              EXPECT_NEAR(y[i * n + j], ref, tol * mag) << isa_name(isa);
            }
          }
        } else {
          EXPECT_EQ(std::memcmp(first.data(), y.data(), y.size() * 4), 0)
              << isa_name(isa) << " threads " << threads;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WeightTypes, CpuOpsTest,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0,
                                           DType::Q4_0, DType::Q4_1),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// The fused epilogues: matmul_add is bitwise matmul then add (the residual), for prepared
// (repacked) and plain weights; matmul_gated is bitwise the stacked gate/up matmul then
// silu_mul, where the level has the gated form (and says so with an empty tensor where not);
// an input norm fused into matmul_gated or matmul_stacked is bitwise rmsnorm before them.
// 1 to 3 threads; 1, 5 and 40 activation rows; n off a multiple of 8.
TEST(CpuOpsFusedTest, EpiloguesEqualTheUnfusedOps) {
  const int64_t k = 96;
  for (DType wt : {DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::F16}) {
    for (int64_t n : {int64_t{24}, int64_t{37}}) {
      auto gate_data = encode(wt, random_floats(static_cast<size_t>(n * k), 50 + n), k);
      auto up_data = encode(wt, random_floats(static_cast<size_t>(n * k), 60 + n), k);
      const Tensor gate = Tensor::contiguous(wt, {n, k}, gate_data.data());
      const Tensor up = Tensor::contiguous(wt, {n, k}, up_data.data());
      for (Isa isa : supported_isas()) {
        for (int threads : {1, 2, 3}) {
          ThreadPool pool(threads);
          CpuOps ops(pool, isa);
          ops.reserve(40, k);
          const bool packs = cpu::packed_weight_dtype(cpu::kernel_table(isa), wt) != wt;
          const Tensor gated = ops.prepare_gated(gate, up);
          ASSERT_EQ(gated.data != nullptr, packs) << dtype_name(wt) << " " << isa_name(isa);
          for (const Tensor& w : {gate, ops.prepare_weight(gate)}) {
            for (int64_t m : {1, 5, 40}) {
              const std::string where = std::string(dtype_name(w.dtype)) + " " +
                                        std::string(isa_name(isa)) + " threads " + std::to_string(threads) +
                                        " n " + std::to_string(n) + " m " + std::to_string(m);
              auto x = random_floats(static_cast<size_t>(m * k), 70 + m, -2.0f, 2.0f);
              const Tensor xt = Tensor::contiguous(DType::F32, {m, k}, x.data());
              auto residual = random_floats(static_cast<size_t>(m * n), 80 + m, -4.0f, 4.0f);

              std::vector<float> fused = residual;
              ops.matmul_add(xt, w, Tensor::contiguous(DType::F32, {m, n}, fused.data()));
              std::vector<float> product(fused.size());
              std::vector<float> unfused = residual;
              const Tensor ut = Tensor::contiguous(DType::F32, {m, n}, unfused.data());
              ops.matmul(xt, w, Tensor::contiguous(DType::F32, {m, n}, product.data()));
              ops.add(ut, Tensor::contiguous(DType::F32, {m, n}, product.data()), ut);
              EXPECT_EQ(std::memcmp(fused.data(), unfused.data(), fused.size() * 4), 0)
                  << "matmul_add " << where;

              if (!packs || w.data != gate.data) continue;
              std::vector<float> silu(static_cast<size_t>(m * n), -1.0f);
              ops.matmul_gated(xt, {}, gated,
                               Tensor::contiguous(DType::F32, {m, n}, silu.data()));
              std::vector<float> g(silu.size()), u(silu.size());
              const Tensor gt = Tensor::contiguous(DType::F32, {m, n}, g.data());
              ops.matmul(xt, ops.prepare_weight(gate), gt);
              ops.matmul(xt, ops.prepare_weight(up), Tensor::contiguous(DType::F32, {m, n},
                                                                        u.data()));
              ops.silu_mul(gt, Tensor::contiguous(DType::F32, {m, n}, u.data()), gt);
              EXPECT_EQ(std::memcmp(silu.data(), g.data(), silu.size() * 4), 0)
                  << "matmul_gated " << where;

              // With the input norm fused: bitwise rmsnorm, then the same matmul.
              auto norm_w = random_floats(static_cast<size_t>(k), 90, 0.5f, 1.5f);
              const InputNorm norm{Tensor::contiguous(DType::F32, {k}, norm_w.data()), 1e-5f};
              std::vector<float> h(x.size());
              const Tensor ht = Tensor::contiguous(DType::F32, {m, k}, h.data());
              ops.rmsnorm(xt, norm.weight, norm.eps, ht);
              std::vector<float> normed(silu.size()), plain(silu.size());
              ops.matmul_gated(xt, norm, gated,
                               Tensor::contiguous(DType::F32, {m, n}, normed.data()));
              ops.matmul_gated(ht, {}, gated, Tensor::contiguous(DType::F32, {m, n}, plain.data()));
              EXPECT_EQ(std::memcmp(normed.data(), plain.data(), normed.size() * 4), 0)
                  << "matmul_gated with its input norm " << where;
              const Tensor prepared = ops.prepare_weight(gate);
              const Tensor one_out[] = {Tensor::contiguous(DType::F32, {m, n}, normed.data())};
              ops.matmul_stacked(xt, norm, prepared, one_out);
              ops.matmul(ht, prepared, Tensor::contiguous(DType::F32, {m, n}, plain.data()));
              EXPECT_EQ(std::memcmp(normed.data(), plain.data(), normed.size() * 4), 0)
                  << "matmul_stacked with its input norm " << where;
            }
          }
        }
      }
    }
  }
}

// RoPE fused into the paged K/V write: the cache holds bitwise what rope() then
// write_paged_kv stores, for f16, int8 and q4 keys; k itself is left unrotated.
TEST(CpuOpsFusedTest, RopeWhileWritingKeysEqualsRopeThenWrite) {
  const int32_t n_head_kv = 2, head_dim = 64, t = 21;
  const RopeParams rope{head_dim, 10000.0f, 1.0f};
  std::vector<int32_t> positions(t);
  std::vector<int64_t> slots(t);
  for (int32_t i = 0; i < t; ++i) {
    positions[size_t(i)] = 5 + 3 * i;
    slots[size_t(i)] = (i * 7) % 48;  // distinct, out of order
  }
  for (KVDType dtype : {KVDType::F16, KVDType::Int8, KVDType::Q4}) {
    for (Isa isa : supported_isas()) {
      for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        CpuOps ops(pool, isa);
        const int64_t cols = int64_t{n_head_kv} * head_dim;
        const auto k0 = random_floats(size_t(t * cols), 7, -3.0f, 3.0f);
        const auto v0 = random_floats(size_t(t * cols), 8, -3.0f, 3.0f);
        std::vector<float> k = k0, v = v0;
        const Tensor kt = Tensor::contiguous(DType::F32, {t, cols}, k.data());
        const Tensor vt = Tensor::contiguous(DType::F32, {t, cols}, v.data());
        test::KVPool fused(dtype, 3, 16, n_head_kv, head_dim);
        test::KVPool plain(dtype, 3, 16, n_head_kv, head_dim);
        ops.rope_write_paged_kv(kt, vt, positions, rope, slots, fused.view);
        EXPECT_EQ(k, k0) << "k is left as it was";
        ops.rope(Tensor::contiguous(DType::F32, {t, n_head_kv, head_dim}, k.data()), positions,
                 rope);
        ops.write_paged_kv(kt, vt, slots, plain.view);
        EXPECT_TRUE(fused == plain) << kv_dtype_name(dtype) << " " << isa_name(isa) << " threads "
                                    << threads;
      }
    }
  }
}

// Stacked weights (Q, K, V as one tensor): each output bitwise what a matmul with that weight
// prepared on its own gives, at 1 to 3 threads and for 1 or 5 activation rows; levels without
// a stacked form say so with an empty tensor, and weights off whole groups are refused.
TEST(CpuOpsStackedTest, EachOutputEqualsItsOwnMatmul) {
  const int64_t k = 96;
  const int64_t rows[] = {24, 8, 16};
  for (DType wt : {DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::F16}) {
    std::vector<std::vector<uint8_t>> data;
    std::vector<Tensor> ws;
    for (size_t i = 0; i < 3; ++i) {
      data.push_back(encode(wt, random_floats(static_cast<size_t>(rows[i] * k), 20 + i), k));
      ws.push_back(Tensor::contiguous(wt, {rows[i], k}, data.back().data()));
    }
    for (Isa isa : supported_isas()) {
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        CpuOps ops(pool, isa);
        ops.reserve(5, k);
        const Tensor stacked = ops.prepare_stacked(ws);
        const bool packs = cpu::packed_weight_dtype(cpu::kernel_table(isa), wt) != wt;
        ASSERT_EQ(stacked.data != nullptr, packs) << dtype_name(wt) << " " << isa_name(isa);
        if (!packs) continue;
        const int64_t odd_rows[] = {12, 8};
        const Tensor odd[] = {Tensor::contiguous(wt, {odd_rows[0], k}, data[0].data()),
                              Tensor::contiguous(wt, {odd_rows[1], k}, data[1].data())};
        EXPECT_EQ(ops.prepare_stacked(odd).data, nullptr) << "12 rows are not whole groups";
        for (int64_t m : {1, 5}) {
          auto x = random_floats(static_cast<size_t>(m * k), 30 + m, -2.0f, 2.0f);
          const Tensor xt = Tensor::contiguous(DType::F32, {m, k}, x.data());
          std::vector<std::vector<float>> got(3), want(3);
          std::vector<Tensor> outs;
          for (size_t i = 0; i < 3; ++i) {
            got[i].assign(static_cast<size_t>(m * rows[i]), -1.0f);
            want[i].assign(got[i].size(), -2.0f);
            outs.push_back(Tensor::contiguous(DType::F32, {m, rows[i]}, got[i].data()));
          }
          ops.matmul_stacked(xt, {}, stacked, outs);
          for (size_t i = 0; i < 3; ++i) {
            ops.matmul(xt, ops.prepare_weight(ws[i]),
                       Tensor::contiguous(DType::F32, {m, rows[i]}, want[i].data()));
            EXPECT_EQ(std::memcmp(got[i].data(), want[i].data(), got[i].size() * 4), 0)
                << dtype_name(wt) << " " << isa_name(isa) << " threads " << threads << " m " << m
                << " output " << i;
          }
        }
      }
    }
  }
}

TEST(CpuOpsRowTest, EmbeddingRmsnormAddSiluCopy) {
  ThreadPool pool(2);
  CpuOps ops(pool, best_isa(cpu_features()));
  const int64_t vocab = 20, n = 64;
  auto table_f = random_floats(static_cast<size_t>(vocab * n), 3);
  auto table = encode(DType::Q8_0, table_f, n);
  const std::vector<int32_t> ids = {3, 0, 19, 3};
  std::vector<float> e(4 * n);
  ops.embedding(Tensor::contiguous(DType::Q8_0, {vocab, n}, table.data()), ids,
                Tensor::contiguous(DType::F32, {4, n}, e.data()));
  std::vector<float> row(n);
  cpu::dequantize_row(DType::Q8_0, table.data() + 19 * row_bytes(DType::Q8_0, n), row.data(), n);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(e[2 * n + i], row[i]);
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(e[0 * n + i], e[3 * n + i]);

  auto w = random_floats(n, 4, 0.5f, 1.5f);
  std::vector<float> y(4 * n);
  const Tensor et = Tensor::contiguous(DType::F32, {4, n}, e.data());
  const Tensor yt = Tensor::contiguous(DType::F32, {4, n}, y.data());
  ops.rmsnorm(et, Tensor::contiguous(DType::F32, {n}, w.data()), 1e-5f, yt);
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(e[n + i]) * e[n + i];
  const double inv = 1.0 / std::sqrt(ss / n + 1e-5);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[n + i], e[n + i] * inv * w[i], 1e-5);

  std::vector<float> s(4 * n);
  const Tensor st = Tensor::contiguous(DType::F32, {4, n}, s.data());
  ops.add(et, yt, st);
  for (int64_t i = 0; i < 4 * n; ++i) EXPECT_EQ(s[i], e[i] + y[i]);
  ops.silu_mul(et, yt, st);
  for (int64_t i = 0; i < 4 * n; ++i) {
    EXPECT_NEAR(s[i], e[i] / (1.0 + std::exp(-static_cast<double>(e[i]))) * y[i], 1e-5);
  }

  // F32 -> F16 into strided rows (every other row of a wider buffer).
  std::vector<uint16_t> dst(4 * 2 * n, 0);
  Tensor dt = Tensor::contiguous(DType::F16, {4, n}, dst.data());
  dt.stride[0] = 2 * n * 2;
  ops.copy(et, dt);
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(dst[r * 2 * n + i], f32_to_fp16(e[r * n + i]));
      EXPECT_EQ(dst[r * 2 * n + n + i], 0);
    }
  }
}

TEST(CpuOpsRowTest, RopeUsesEachRowsPosition) {
  ThreadPool pool(2);
  CpuOps ops(pool, Isa::Scalar);
  const int64_t t = 3, h = 2, d = 8;
  auto x = random_floats(static_cast<size_t>(t * h * d), 5);
  const auto orig = x;
  const std::vector<int32_t> pos = {0, 5, 9};
  ops.rope(Tensor::contiguous(DType::F32, {t, h, d}, x.data()), pos, {8, 10000.0f, 1.0f});
  for (int64_t i = 0; i < h * d; ++i) EXPECT_EQ(x[i], orig[i]);  // position 0: identity
  // Row 2 equals rotating it alone at position 9.
  std::vector<float> lone(orig.begin() + 2 * h * d, orig.end());
  const std::vector<int32_t> p9 = {9};
  ops.rope(Tensor::contiguous(DType::F32, {1, h, d}, lone.data()), p9, {8, 10000.0f, 1.0f});
  for (int64_t i = 0; i < h * d; ++i) EXPECT_EQ(x[2 * h * d + i], lone[i]);
}

// Rows come from the op's table of cos/sin rows, or are computed per token for positions the
// table does not keep: the same bits either way, those of rope_cos_sin then rope_apply.
TEST(CpuOpsRowTest, RopeFromTheTableOrNotGivesTheSameBits) {
  ThreadPool pool(2);
  CpuOps ops(pool, Isa::Scalar);
  const int64_t h = 3, d = 64;
  const RopeParams params{64, 10000.0f, 1.0f};
  const cpu::RopeConfig cfg{64, 10000.0f, 1.0f};
  for (const std::vector<int32_t>& pos :
       {std::vector<int32_t>{3, 12, 4000}, {3, cpu::RopeTable::kMaxPositions + 5, 12}}) {
    const auto t = static_cast<int64_t>(pos.size());
    auto x = random_floats(static_cast<size_t>(t * h * d), 9);
    auto want = x;
    for (int64_t r = 0; r < t; ++r) {
      float cs[cpu::kMaxHeadDim];
      cpu::rope_cos_sin(cfg, pos[static_cast<size_t>(r)], cs);
      cpu::rope_apply(want.data() + r * h * d, h, d, 64, cs);
    }
    ops.rope(Tensor::contiguous(DType::F32, {t, h, d}, x.data()), pos, params);
    EXPECT_EQ(std::memcmp(x.data(), want.data(), x.size() * sizeof(float)), 0) << pos[1];
  }
}

// Grouped-query attention: query head h reads KV head h / (n_head / n_head_kv), and query i
// sees cache rows [0, positions[i]]. Compared with the single-head kernel.
TEST(CpuOpsRowTest, AttentionMapsHeadsAndPositions) {
  const int32_t n_head = 6, n_head_kv = 2, dk = 16, dv = 16, n_ctx = 40;
  const AttentionParams p{n_head, n_head_kv, dk, dv, 0.25f};
  const auto kf = random_floats(static_cast<size_t>(n_ctx * n_head_kv * dk), 6);
  const auto vf = random_floats(static_cast<size_t>(n_ctx * n_head_kv * dv), 7);
  std::vector<uint16_t> k(kf.size()), v(vf.size());
  for (size_t i = 0; i < k.size(); ++i) k[i] = f32_to_fp16(kf[i]);
  for (size_t i = 0; i < v.size(); ++i) v[i] = f32_to_fp16(vf[i]);
  const std::vector<int32_t> pos = {10, 11, 12, 39};
  const int64_t t = static_cast<int64_t>(pos.size());
  auto q = random_floats(static_cast<size_t>(t * n_head * dk), 8);
  for (Isa isa : supported_isas()) {
    std::vector<float> first;
    for (int threads : {1, 3}) {
      ThreadPool pool(threads);
      CpuOps ops(pool, isa);
      std::vector<float> out(static_cast<size_t>(t * n_head * dv));
      ops.attention(Tensor::contiguous(DType::F32, {t, n_head, dk}, q.data()),
                    Tensor::contiguous(DType::F16, {n_ctx, n_head_kv * dk}, k.data()),
                    Tensor::contiguous(DType::F16, {n_ctx, n_head_kv * dv}, v.data()), pos, p,
                    Tensor::contiguous(DType::F32, {t, n_head * dv}, out.data()));
      const auto& kt = cpu::kernel_table(isa);
      for (int64_t i = 0; i < t; ++i) {
        for (int32_t h = 0; h < n_head; ++h) {
          std::vector<float> ref(dv);
          const int32_t hk = h / (n_head / n_head_kv);
          cpu::attention_head(kt, q.data() + (i * n_head + h) * dk, k.data() + hk * dk,
                              n_head_kv * dk, v.data() + hk * dv, n_head_kv * dv, pos[i] + 1, dk,
                              dv, p.scale, false, ref.data());
          for (int32_t c = 0; c < dv; ++c) {
            EXPECT_EQ(out[(i * n_head + h) * dv + c], ref[c]) << isa_name(isa);
          }
        }
      }
      if (first.empty()) {
        first = out;
      } else {
        EXPECT_EQ(first, out);
      }
    }
  }
}

}  // namespace
}  // namespace tokamak
