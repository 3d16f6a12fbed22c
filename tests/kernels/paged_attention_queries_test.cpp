// Several queries of one sequence in one call (paged_attention_queries, paged_attention.h):
// every query gets exactly the bits of its own paged_attention call, in every KV dtype, on
// every kernel level, across tile, block and span edges; the SIMD level takes the calls it has
// a form for and declines the others.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/kv_dtype.h"
#include "core/paged_kv_view.h"
#include "kernel_test_util.h"
#include "kernels/cpu/kv_codec.h"
#include "kernels/cpu/paged_attention.h"

namespace tokamak::cpu {
namespace {

using test::all_tables;
using test::random_floats;

struct QueriesCase {
  KVDTypes dtype;
  int32_t n_group;
  int32_t dk;
  int32_t dv;
  int32_t block_size;
  int64_t n_kv;  // the first query's context; query r attends to n_kv + r tokens
  int32_t n_queries;

  std::string name() const {
    return kv_dtypes_name(dtype) + " group " + std::to_string(n_group) + " dk " +
           std::to_string(dk) + " dv " + std::to_string(dv) + " block " +
           std::to_string(block_size) + " n_kv " + std::to_string(n_kv) + " queries " +
           std::to_string(n_queries);
  }
};

// The last query's context written through the encoder as KV head 1 of 2, in shuffled blocks;
// queries (n_queries, n_group, q_stride) and outputs with gaps between rows and between queries.
struct QueriesFixture {
  QueriesCase c;
  int64_t q_stride, q_step, out_stride, out_step;
  std::vector<float> q;
  test::PagedTestPool pool;  // the last query's context

  QueriesFixture(const QueriesCase& cs, uint64_t seed)
      : c(cs), pool(cs.dtype, cs.dk, cs.dv, cs.block_size, cs.n_kv + cs.n_queries - 1, seed) {
    q_stride = c.dk + 8;
    q_step = c.n_group * q_stride + 16;
    out_stride = c.dv + 4;
    out_step = c.n_group * out_stride + 8;
    const int64_t n_kv = c.n_kv + c.n_queries - 1;
    q = random_floats(size_t(c.n_queries) * q_step, seed + 1, -3.0f, 3.0f);
    for (int64_t j = 0; j < n_kv; ++j) {
      const int32_t b = pool.table[j / c.block_size];
      const auto row = static_cast<int32_t>(j % c.block_size);
      const auto kx = random_floats(c.dk, seed + 1000 + j, -2.0f, 2.0f);
      const auto vx = random_floats(c.dv, seed + 9000 + j, -2.0f, 2.0f);
      kv_write_row(c.dtype.k, kx.data(), c.dk, pool.view.k_tile(b, 1),
                   pool.view.k_tile_scales(b, 1), row);
      kv_write_row(c.dtype.v, vx.data(), c.dv, pool.view.v_tile(b, 1),
                   pool.view.v_tile_scales(b, 1), row);
    }
  }

  // The first query's call.
  PagedAttentionArgs args(float* out) const {
    PagedAttentionArgs a;
    static_cast<PagedPool&>(a) = pool_of(pool.view, 1, pool.table.data());
    a.q = q.data();
    a.q_stride = q_stride;
    a.out = out;
    a.out_stride = out_stride;
    a.n_group = c.n_group;
    a.block_size = c.block_size;
    a.n_kv = c.n_kv;
    a.head_dim_k = c.dk;
    a.head_dim_v = c.dv;
    a.scale = 1.0f / std::sqrt(static_cast<float>(c.dk));
    return a;
  }

  std::vector<float> output() const { return std::vector<float>(c.n_queries * out_step, NAN); }

  // One paged_attention call per query.
  std::vector<float> one_by_one(const KernelTable& kt) const {
    std::vector<float> out = output();
    for (int32_t r = 0; r < c.n_queries; ++r) {
      PagedAttentionArgs a = args(out.data() + r * out_step);
      a.q += r * q_step;
      a.n_kv += r;
      paged_attention(kt, a);
    }
    return out;
  }

  std::vector<float> together(const KernelTable& kt) const {
    std::vector<float> out = output();
    paged_attention_queries(kt, args(out.data()), c.n_queries, q_step, out_step);
    return out;
  }
};

std::vector<QueriesCase> queries_cases() {
  std::vector<QueriesCase> out;
  // Contexts and query counts across tile (32), block and span (256) edges, and more queries
  // than the kernel takes in one pass.
  const std::pair<int64_t, int32_t> spans[] = {{1, 1},   {1, 40},  {30, 3},   {31, 2},  {250, 20},
                                               {256, 9}, {255, 1}, {500, 17}, {700, 33}};
  uint64_t i = 0;
  for (KVDTypes dtype :
       {KVDTypes(KVDType::F16), KVDTypes(KVDType::BF16), KVDTypes(KVDType::F32),
        KVDTypes(KVDType::Int8), KVDTypes(KVDType::Fp8), KVDTypes(KVDType::F16, KVDType::Int8),
        KVDTypes(KVDType::Int8, KVDType::Fp8), KVDTypes(KVDType::Q4),
        KVDTypes(KVDType::F16, KVDType::Q4)}) {
    for (int32_t group : {1, 3, 4, 5, 8}) {
      for (int32_t bs : {1, 7, 16}) {
        const auto [n_kv, n_queries] = spans[i++ % std::size(spans)];
        out.push_back({dtype, group, 64, 64, bs, n_kv, n_queries});
      }
    }
  }
  for (const auto& [n_kv, n_queries] : spans) {
    out.push_back({KVDType::F16, 3, 64, 64, 16, n_kv, n_queries});
  }
  // Other head dims: wider, different for K and V, past what the SIMD form takes, not a
  // multiple of 8.
  out.push_back({KVDType::F16, 4, 128, 128, 16, 300, 12});
  out.push_back({KVDType::F16, 2, 32, 128, 16, 90, 7});
  out.push_back({KVDType::BF16, 8, 128, 32, 5, 260, 5});
  out.push_back({KVDType::F16, 2, 160, 160, 16, 40, 4});
  out.push_back({KVDType::F16, 3, 20, 12, 4, 45, 6});
  return out;
}

TEST(PagedAttentionQueriesTest, EachQueryGetsTheBitsOfItsOwnCall) {
  for (const KernelTable* kt : all_tables()) {
    uint64_t seed = 40;
    for (const QueriesCase& c : queries_cases()) {
      const QueriesFixture f(c, seed += 10);
      const auto want = f.one_by_one(*kt);
      const auto got = f.together(*kt);
      for (size_t i = 0; i < want.size(); ++i) {
        if (std::isnan(want[i])) {
          ASSERT_TRUE(std::isnan(got[i]))
              << isa_name(kt->isa) << " " << c.name() << ": wrote between rows at " << i;
        } else {
          ASSERT_EQ(std::memcmp(&got[i], &want[i], 4), 0)
              << isa_name(kt->isa) << " " << c.name() << " float " << i << ": " << got[i] << " vs "
              << want[i];
        }
      }
    }
  }
}

// A prefill chunk's queries on the AVX-512 level: the AVX2 kernel's bits.
TEST(PagedAttentionQueriesTest, Avx512GivesAvx2sBits) {
  const auto [avx2, wider] = test::avx2_and_wider_tables();
  if (avx2 == nullptr || wider.empty()) GTEST_SKIP() << "no AVX-512 level on this CPU";
  for (const KernelTable* kt : wider) {
    uint64_t seed = 90;
    for (const QueriesCase& c : queries_cases()) {
      const QueriesFixture f(c, seed += 10);
      const auto want = f.together(*avx2);
      const auto got = f.together(*kt);
      ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
          << isa_name(kt->isa) << " " << c.name();
    }
  }
}

// The SIMD form is taken for caches without q4 rows, with head dims it has, and declined
// (nothing written) for the others, which the front then runs one query at a time.
TEST(PagedAttentionQueriesTest, SimdFormTakesWhatItHasAFormFor) {
  if (test::simd_tables().empty()) GTEST_SKIP() << "no SIMD level on this CPU";
  for (const auto& [name, kt] : test::simd_tables()) {
    ASSERT_NE(kt->paged_attention_queries, nullptr) << name;
    const auto takes = [&](const QueriesCase& c) {
      const QueriesFixture f(c, 7);
      auto out = f.output();
      const bool took =
          kt->paged_attention_queries(f.args(out.data()), c.n_queries, f.q_step, f.out_step);
      if (!took) {
        EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float x) { return std::isnan(x); }))
            << name << " " << c.name() << ": declined but wrote";
      }
      return took;
    };
    EXPECT_TRUE(takes({KVDType::F16, 3, 64, 64, 16, 100, 8})) << name;
    EXPECT_TRUE(takes({KVDType::BF16, 4, 128, 128, 16, 100, 8})) << name;
    EXPECT_TRUE(takes({KVDType::F32, 1, 32, 32, 16, 100, 8})) << name;
    EXPECT_TRUE(takes({KVDType::Int8, 3, 64, 64, 16, 100, 8})) << name;
    EXPECT_TRUE(takes({KVDType::Fp8, 3, 64, 64, 16, 100, 8})) << name;
    EXPECT_TRUE(takes({KVDTypes(KVDType::F16, KVDType::Int8), 3, 64, 64, 16, 100, 8})) << name;
    EXPECT_FALSE(takes({KVDType::Q4, 3, 64, 64, 16, 100, 8})) << name;
    EXPECT_FALSE(takes({KVDTypes(KVDType::F16, KVDType::Q4), 3, 64, 64, 16, 100, 8})) << name;
    EXPECT_FALSE(takes({KVDType::F16, 2, 160, 160, 16, 100, 8})) << name;
    EXPECT_FALSE(takes({KVDType::F16, 3, 20, 12, 4, 100, 8})) << name;
  }
}

}  // namespace
}  // namespace tokamak::cpu
