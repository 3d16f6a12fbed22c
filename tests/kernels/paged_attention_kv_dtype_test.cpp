// Paged attention over caches in every KV dtype (kernels/cpu/paged_attention.h,
// kv_codec.h): each kernel against a float64 softmax over the decoded K/V (so the test checks
// the in-register decoding, not the quantization error), SIMD against scalar, and block
// placement invariance (bitwise).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/paged_kv_view.h"
#include "kernel_test_util.h"
#include "kernels/cpu/kv_codec.h"
#include "kernels/cpu/paged_attention.h"

namespace tokamak::cpu {
namespace {

using test::all_tables;
using test::random_floats;

struct Case {
  KVDTypes dtype;
  int32_t n_group;
  int32_t dk;
  int32_t dv;
  int32_t block_size;
  int64_t n_kv;

  std::string name() const {
    return kv_dtypes_name(dtype) + " group " + std::to_string(n_group) + " dk " +
           std::to_string(dk) + " dv " + std::to_string(dv) + " block " +
           std::to_string(block_size) + " n_kv " + std::to_string(n_kv);
  }
};

// n_kv tokens written through the encoder, in token order, as KV head 1 of 2, into blocks in
// shuffled order; the decoded rows kept for the reference.
struct Fixture {
  Case c;
  std::vector<float> q;               // (n_group, dk)
  std::vector<float> k_dec, v_dec;    // decoded (n_kv, dk) / (n_kv, dv)
  test::PagedTestPool pool;

  Fixture(const Case& cs, uint64_t seed, uint64_t placement_seed)
      : c(cs), pool(cs.dtype, cs.dk, cs.dv, cs.block_size, cs.n_kv, placement_seed) {
    q = random_floats(size_t(c.n_group) * c.dk, seed, -1.0f, 1.0f);
    k_dec.resize(size_t(c.n_kv) * c.dk);
    v_dec.resize(size_t(c.n_kv) * c.dv);
    for (int64_t j = 0; j < c.n_kv; ++j) {
      const int32_t b = pool.table[j / c.block_size];
      const auto row = static_cast<int32_t>(j % c.block_size);
      // Magnitudes vary by token, so per-tile scales grow inside blocks.
      const float range = 0.5f + static_cast<float>((j * 37) % 13) / 4.0f;
      const auto kx = random_floats(c.dk, seed + 1000 + j, -range, range);
      const auto vx = random_floats(c.dv, seed + 5000 + j, -range, range);
      kv_write_row(c.dtype.k, kx.data(), c.dk, pool.view.k_tile(b, 1),
                   pool.view.k_tile_scales(b, 1), row);
      kv_write_row(c.dtype.v, vx.data(), c.dv, pool.view.v_tile(b, 1),
                   pool.view.v_tile_scales(b, 1), row);
    }
    for (int64_t j = 0; j < c.n_kv; ++j) {  // after all writes: re-encoding is done
      const int32_t b = pool.table[j / c.block_size];
      const auto row = static_cast<int32_t>(j % c.block_size);
      kv_decode_row(c.dtype.k, pool.view.k_tile(b, 1), pool.view.k_tile_scales(b, 1), c.dk, row,
                    &k_dec[j * c.dk]);
      kv_decode_row(c.dtype.v, pool.view.v_tile(b, 1), pool.view.v_tile_scales(b, 1), c.dv, row,
                    &v_dec[j * c.dv]);
    }
  }

  std::vector<float> run(const KernelTable& kt) const {
    std::vector<float> out(size_t(c.n_group) * c.dv, NAN);
    PagedAttentionArgs a;
    a.q = q.data();
    a.q_stride = c.dk;
    a.out = out.data();
    a.out_stride = c.dv;
    a.n_group = c.n_group;
    a.dtypes = c.dtype;
    a.k = pool.view.k_tile(0, 1);
    a.v = pool.view.v_tile(0, 1);
    a.k_block_stride = static_cast<int64_t>(pool.view.k_block_stride());
    a.v_block_stride = static_cast<int64_t>(pool.view.v_block_stride());
    a.k_scales = pool.view.k_tile_scales(0, 1);
    a.v_scales = pool.view.v_tile_scales(0, 1);
    a.k_scale_block_stride = static_cast<int64_t>(pool.view.k_scale_block_stride());
    a.v_scale_block_stride = static_cast<int64_t>(pool.view.v_scale_block_stride());
    a.block_size = c.block_size;
    a.block_table = pool.table.data();
    a.n_kv = c.n_kv;
    a.head_dim_k = c.dk;
    a.head_dim_v = c.dv;
    a.scale = 1.0f / std::sqrt(static_cast<float>(c.dk));
    paged_attention(kt, a);
    return out;
  }

  std::vector<double> reference(int32_t g) const {
    const double scale = 1.0f / std::sqrt(static_cast<float>(c.dk));
    std::vector<double> s(c.n_kv);
    double mx = -INFINITY;
    for (int64_t j = 0; j < c.n_kv; ++j) {
      double dot = 0.0;
      for (int32_t i = 0; i < c.dk; ++i) dot += double{q[g * c.dk + i]} * k_dec[j * c.dk + i];
      s[j] = dot * scale;
      mx = std::max(mx, s[j]);
    }
    double sum = 0.0;
    for (double& x : s) sum += (x = std::exp(x - mx));
    std::vector<double> out(c.dv, 0.0);
    for (int64_t j = 0; j < c.n_kv; ++j) {
      for (int32_t d = 0; d < c.dv; ++d) out[d] += s[j] / sum * v_dec[j * c.dv + d];
    }
    return out;
  }
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (KVDType dtype :
       {KVDType::F16, KVDType::BF16, KVDType::F32, KVDType::Int8, KVDType::Fp8, KVDType::Q4}) {
    for (int64_t n_kv : {1, 7, 16, 33, 100, 257}) {
      out.push_back({dtype, 3, 64, 64, 16, n_kv});
    }
    out.push_back({dtype, 1, 32, 32, 1, 40});
    out.push_back({dtype, 4, 128, 64, 4, 75});
    out.push_back({dtype, 8, 64, 128, 32, 130});
    out.push_back({dtype, 2, 96, 96, 16, 50});
  }
  return out;
}

TEST(PagedAttentionKVDtypeTest, MatchesFloat64OverTheDecodedCache) {
  for (const KernelTable* kt : all_tables()) {
    uint64_t seed = 1;
    for (const Case& c : cases()) {
      const Fixture f(c, seed += 10, 7);
      const auto out = f.run(*kt);
      for (int32_t g = 0; g < c.n_group; ++g) {
        const auto ref = f.reference(g);
        for (int32_t d = 0; d < c.dv; ++d) {
          ASSERT_NEAR(out[g * c.dv + d], ref[d], 1e-5 + 1e-5 * std::fabs(ref[d]))
              << isa_name(kt->isa) << " " << c.name() << " head " << g << " d " << d;
        }
      }
    }
  }
}

TEST(PagedAttentionKVDtypeTest, SimdAgreesWithScalar) {
  if (test::simd_tables().empty()) GTEST_SKIP() << "no SIMD level on this CPU";
  for (const auto& [name, kt] : test::simd_tables()) {
    uint64_t seed = 500;
    for (const Case& c : cases()) {
      const Fixture f(c, seed += 10, 9);
      const auto a = f.run(scalar_kernel_table());
      const auto b = f.run(*kt);
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_NEAR(b[i], a[i], 2e-6f + 2e-6f * std::fabs(a[i])) << name << " " << c.name();
      }
    }
  }
}

// The AVX-512 level's 16-lane loads of every dtype (two rows a register, or 16 elements of
// one) give the AVX2 kernel's bits.
TEST(PagedAttentionKVDtypeTest, Avx512GivesAvx2sBits) {
  const auto [avx2, wider] = test::avx2_and_wider_tables();
  if (avx2 == nullptr || wider.empty()) GTEST_SKIP() << "no AVX-512 level on this CPU";
  for (const KernelTable* kt : wider) {
    uint64_t seed = 700;
    for (const Case& c : cases()) {
      const Fixture f(c, seed += 10, 5);
      const auto want = f.run(*avx2);
      const auto got = f.run(*kt);
      ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
          << isa_name(kt->isa) << " " << c.name();
    }
  }
}

// Where the blocks sit in the pool changes no bit of the result.
TEST(PagedAttentionKVDtypeTest, BlockPlacementDoesNotChangeBits) {
  for (const KernelTable* kt : all_tables()) {
    for (KVDType dtype : {KVDType::Int8, KVDType::Fp8, KVDType::Q4, KVDType::BF16}) {
      const Case c{dtype, 3, 64, 64, 16, 150};
      const auto a = Fixture(c, 42, 1).run(*kt);
      const auto b = Fixture(c, 42, 2).run(*kt);
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0)
          << isa_name(kt->isa) << " " << c.name();
    }
  }
}

}  // namespace
}  // namespace tokamak::cpu
