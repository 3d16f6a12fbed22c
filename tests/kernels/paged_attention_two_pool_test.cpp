// Paged attention over two pools (kernels/cpu/paged_attention.h, n_cold): the first n_cold
// tokens from a cold pool (q4c keys, typically, written a block at a time), the rest from the
// main one. Each kernel against a float64 softmax over the decoded rows of both segments,
// SIMD against scalar, the scores output across the segments, and the invariances (block
// placement; n_cold = 0; the same dtypes in both pools with n_cold on a tile edge: bitwise
// the one-pool call).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/paged_kv_view.h"
#include "kernel_test_util.h"
#include "kernels/cpu/kv_codec.h"
#include "kernels/cpu/paged_attention.h"

namespace tokamak::cpu::paged_attention_two_pool_test {
namespace {

using test::all_tables;
using test::random_floats;

struct Case {
  KVDTypes cold;
  KVDTypes hot;
  int32_t n_group;
  int32_t dk;
  int32_t dv;
  int32_t block_size;
  int64_t n_cold;
  int64_t n_kv;

  std::string name() const {
    return "cold " + kv_dtypes_name(cold) + " hot " + kv_dtypes_name(hot) + " group " +
           std::to_string(n_group) + " dk " + std::to_string(dk) + " dv " + std::to_string(dv) +
           " block " + std::to_string(block_size) + " n_cold " + std::to_string(n_cold) + " n_kv " +
           std::to_string(n_kv);
  }
};

// One pool holding n tokens (rows of kx (n, dk), vx (n, dv)) as KV head 1 of 2, in blocks in
// shuffled order, each block written whole by kv_write_tile (the cold pool's way; for the
// row-written dtypes the same bytes as row by row). Everything else in the pool is random
// bytes drawn from the placement seed, so a wrong read shows and moves with the placement.
struct Pool {
  std::vector<uint8_t> k, v, ks, vs;
  std::vector<int32_t> table;
  PagedKVView view;

  Pool(KVDTypes dtypes, const Case& c, const float* kx, const float* vx, int64_t n,
       uint64_t placement_seed) {
    const auto used = static_cast<int32_t>((n + c.block_size - 1) / c.block_size);
    view.dtypes = dtypes;
    view.n_blocks = used + 3;
    view.block_size = c.block_size;
    view.n_head_kv = 2;
    view.head_dim_k = c.dk;
    view.head_dim_v = c.dv;
    std::mt19937_64 rng(placement_seed);
    auto junk = [&](std::vector<uint8_t>& b, size_t size) {
      b.resize(size + 1);
      for (uint8_t& x : b) x = static_cast<uint8_t>(rng());
    };
    junk(k, view.k_block_stride() * view.n_blocks);
    junk(v, view.v_block_stride() * view.n_blocks);
    junk(ks, view.k_scale_block_stride() * view.n_blocks);
    junk(vs, view.v_scale_block_stride() * view.n_blocks);
    view.k = k.data();
    view.v = v.data();
    view.k_scales = ks.data();
    view.v_scales = vs.data();
    std::vector<int32_t> ids(view.n_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    table.assign(ids.begin(), ids.begin() + used);
    for (int32_t i = 0; i < used; ++i) {
      const int64_t first = int64_t{i} * c.block_size;
      const auto rows = static_cast<int32_t>(std::min<int64_t>(c.block_size, n - first));
      const int32_t b = table[i];
      kv_write_tile(dtypes.k, kx + first * c.dk, rows, c.dk, view.k_tile(b, 1),
                    view.k_tile_scales(b, 1));
      kv_write_tile(dtypes.v, vx + first * c.dv, rows, c.dv, view.v_tile(b, 1),
                    view.v_tile_scales(b, 1));
    }
  }

  // Token i of the pool decoded, keys into k_out (dk), values into v_out (dv).
  void decode(const Case& c, int64_t i, float* k_out, float* v_out) const {
    const int32_t b = table[i / c.block_size];
    const auto row = static_cast<int32_t>(i % c.block_size);
    kv_decode_row(view.dtypes.k, view.k_tile(b, 1), view.k_tile_scales(b, 1), c.dk, row, k_out);
    kv_decode_row(view.dtypes.v, view.v_tile(b, 1), view.v_tile_scales(b, 1), c.dv, row, v_out);
  }
};

// Keys with per-channel offsets (a few large: the outlier channels q4c is for) and spreads
// that vary by token; values plain.
std::vector<float> make_keys(int64_t n, int32_t dk, uint64_t seed) {
  auto x = random_floats(size_t(n) * dk, seed, -1.0f, 1.0f);
  for (int64_t j = 0; j < n; ++j) {
    const float range = 0.5f + static_cast<float>((j * 37) % 13) / 8.0f;
    for (int32_t c = 0; c < dk; ++c) {
      const float offset = c % 17 == 3 ? 6.0f : 0.2f * static_cast<float>(c % 5) - 0.4f;
      x[j * dk + c] = offset + range * x[j * dk + c];
    }
  }
  return x;
}

struct Fixture {
  Case c;
  std::vector<float> q;             // (n_group, dk)
  std::vector<float> k_dec, v_dec;  // (n_kv, dk) / (n_kv, dv), decoded, in token order
  Pool cold, hot;

  Fixture(const Case& cs, uint64_t seed, uint64_t placement_seed)
      : c(cs),
        q(random_floats(size_t(cs.n_group) * cs.dk, seed, -1.0f, 1.0f)),
        k_dec(size_t(cs.n_kv) * cs.dk),
        v_dec(size_t(cs.n_kv) * cs.dv),
        cold(cs.cold, cs, keys(cs, seed).data(), values(cs, seed).data(), cs.n_cold,
             placement_seed),
        hot(cs.hot, cs, keys(cs, seed).data() + cs.n_cold * cs.dk,
            values(cs, seed).data() + cs.n_cold * cs.dv, cs.n_kv - cs.n_cold, placement_seed + 1) {
    for (int64_t j = 0; j < c.n_kv; ++j) {
      const Pool& p = j < c.n_cold ? cold : hot;
      p.decode(c, j < c.n_cold ? j : j - c.n_cold, &k_dec[j * c.dk], &v_dec[j * c.dv]);
    }
  }

  static std::vector<float> keys(const Case& c, uint64_t seed) {
    return make_keys(c.n_kv, c.dk, seed + 1);
  }
  static std::vector<float> values(const Case& c, uint64_t seed) {
    return random_floats(size_t(c.n_kv) * c.dv, seed + 2, -2.0f, 2.0f);
  }

  PagedAttentionArgs args(float* out) const {
    PagedAttentionArgs a;
    a.q = q.data();
    a.q_stride = c.dk;
    a.out = out;
    a.out_stride = c.dv;
    a.n_group = c.n_group;
    a.block_size = c.block_size;
    a.n_kv = c.n_kv;
    a.head_dim_k = c.dk;
    a.head_dim_v = c.dv;
    a.scale = 1.0f / std::sqrt(static_cast<float>(c.dk));
    const PagedKVView& h = hot.view;
    a.dtypes = h.dtypes;
    a.k = h.k_tile(0, 1);
    a.v = h.v_tile(0, 1);
    a.k_block_stride = static_cast<int64_t>(h.k_block_stride());
    a.v_block_stride = static_cast<int64_t>(h.v_block_stride());
    a.k_scales = h.k_tile_scales(0, 1);
    a.v_scales = h.v_tile_scales(0, 1);
    a.k_scale_block_stride = static_cast<int64_t>(h.k_scale_block_stride());
    a.v_scale_block_stride = static_cast<int64_t>(h.v_scale_block_stride());
    a.block_table = hot.table.empty() ? nullptr : hot.table.data();
    const PagedKVView& k = cold.view;
    a.n_cold = c.n_cold;
    a.cold = pool_of(k, 1, cold.table.empty() ? nullptr : cold.table.data());
    return a;
  }

  std::vector<float> run(const KernelTable& kt) const {
    std::vector<float> out(size_t(c.n_group) * c.dv, NAN);
    paged_attention(kt, args(out.data()));
    return out;
  }

  // Raw scores of head g in float64, token order (cold first).
  std::vector<double> scores(int32_t g) const {
    const double scale = 1.0f / std::sqrt(static_cast<float>(c.dk));
    std::vector<double> s(c.n_kv);
    for (int64_t j = 0; j < c.n_kv; ++j) {
      double dot = 0.0;
      for (int32_t i = 0; i < c.dk; ++i) dot += double{q[g * c.dk + i]} * k_dec[j * c.dk + i];
      s[j] = dot * scale;
    }
    return s;
  }

  std::vector<double> reference(int32_t g) const {
    std::vector<double> s = scores(g);
    const double mx = *std::max_element(s.begin(), s.end());
    double sum = 0.0;
    for (double& x : s) sum += (x = std::exp(x - mx));
    std::vector<double> out(c.dv, 0.0);
    for (int64_t j = 0; j < c.n_kv; ++j) {
      for (int32_t d = 0; d < c.dv; ++d) out[d] += s[j] / sum * v_dec[j * c.dv + d];
    }
    return out;
  }
};

const KVDTypes kF16 = KVDType::F16;
const KVDTypes kQ4cQ4(KVDType::Q4C, KVDType::Q4);
const KVDTypes kQ4cInt8(KVDType::Q4C, KVDType::Int8);
const KVDTypes kQ4cF16(KVDType::Q4C, KVDType::F16);
const KVDTypes kInt8 = KVDType::Int8;
const KVDTypes kQ4 = KVDType::Q4;

// The pairs the engine will use (cold q4c keys or int8 beside f16 hot blocks), the rotation
// cases (q4 values cold and plain hot: the accumulator is un-rotated between; q4 keys on one
// side only: the query is rotated for that side only; plain cold and q4 hot), a pair the AVX2
// kernel leaves to the scalar one, contexts around tile (32) and block edges, dk != dv.
std::vector<Case> cases() {
  std::vector<Case> out;
  for (const auto& [cold, hot] :
       {std::pair{kQ4cQ4, kF16}, std::pair{kQ4cInt8, kF16}, std::pair{kInt8, kF16},
        std::pair{kQ4, kF16}, std::pair{kQ4cF16, kQ4}, std::pair{kF16, kQ4},
        std::pair{kQ4cQ4, kInt8}, std::pair{KVDTypes(KVDType::Q4C, KVDType::Fp8), kF16}}) {
    for (const auto& [n_cold, n_kv] : {std::pair<int64_t, int64_t>{16, 17},
                                       {16, 31},
                                       {16, 48},
                                       {16, 49},
                                       {32, 33},
                                       {32, 64},
                                       {32, 65},
                                       {48, 80},
                                       {48, 81},
                                       {64, 64},
                                       {96, 100},
                                       {128, 257},
                                       {240, 700},     // spans (256) across the cold edge
                                       {400, 600}}) {
      out.push_back({cold, hot, 3, 64, 64, 16, n_cold, n_kv});
    }
    out.push_back({cold, hot, 1, 32, 32, 1, 33, 40});
    out.push_back({cold, hot, 4, 128, 64, 4, 60, 75});
    out.push_back({cold, hot, 8, 64, 128, 32, 64, 130});
    out.push_back({cold, hot, 5, 96, 96, 16, 112, 140});
    out.push_back({cold, hot, 2, 64, 64, 16, 0, 50});  // no cold segment
  }
  // q4c keys in the main pool, written by tiles (the last block partly), with no cold pool.
  for (const KVDTypes& d : {kQ4cQ4, kQ4cInt8, kQ4cF16}) {
    out.push_back({kF16, d, 3, 64, 64, 16, 0, 100});
    out.push_back({kF16, d, 2, 128, 32, 16, 0, 33});
  }
  // Odd head dims (multiples of 8, not 32): q4c keys beside plain values.
  out.push_back({kQ4cF16, kF16, 2, 40, 24, 16, 32, 45});
  return out;
}

TEST(PagedAttentionTwoPoolTest, MatchesFloat64OverBothSegments) {
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

TEST(PagedAttentionTwoPoolTest, SimdAgreesWithScalar) {
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

// The raw scores of both segments land at their global token index; asking for them changes
// no bit of the output; nothing past n_kv is written.
TEST(PagedAttentionTwoPoolTest, WritesScoresAcrossSegments) {
  for (const KernelTable* kt : all_tables()) {
    uint64_t seed = 3000;
    for (const Case& c : cases()) {
      const Fixture f(c, seed += 10, 11);
      const auto plain = f.run(*kt);
      const int64_t stride = c.n_kv + 3;
      std::vector<float> scores(size_t(c.n_group) * stride, NAN);
      std::vector<float> out(plain.size(), NAN);
      PagedAttentionArgs a = f.args(out.data());
      a.scores = scores.data();
      a.scores_stride = stride;
      paged_attention(*kt, a);
      ASSERT_EQ(std::memcmp(out.data(), plain.data(), out.size() * 4), 0)
          << isa_name(kt->isa) << " " << c.name();
      for (int32_t g = 0; g < c.n_group; ++g) {
        const auto want = f.scores(g);
        for (int64_t j = 0; j < c.n_kv; ++j) {
          ASSERT_NEAR(scores[g * stride + j], want[j], 1e-5 + 1e-5 * std::fabs(want[j]))
              << isa_name(kt->isa) << " " << c.name() << " head " << g << " token " << j;
        }
        for (int64_t j = c.n_kv; j < stride; ++j) {
          ASSERT_TRUE(std::isnan(scores[g * stride + j])) << "wrote past n_kv";
        }
      }
    }
  }
}

// Where the blocks of either pool sit, and what the rest of the pools hold, changes no bit.
TEST(PagedAttentionTwoPoolTest, BlockPlacementDoesNotChangeBits) {
  for (const KernelTable* kt : all_tables()) {
    for (const auto& [cold, hot] :
         {std::pair{kQ4cQ4, kF16}, std::pair{kQ4, kF16}, std::pair{kQ4cInt8, kQ4}}) {
      const Case c{cold, hot, 3, 64, 64, 16, 80, 150};
      const auto a = Fixture(c, 42, 1).run(*kt);
      const auto b = Fixture(c, 42, 2).run(*kt);
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0)
          << isa_name(kt->isa) << " " << c.name();
    }
  }
}

// Spans computed apart and merged give the one call's bits, with the cold edge inside a span.
TEST(PagedAttentionTwoPoolTest, SpansComputedApartGiveTheSameBits) {
  for (const KernelTable* kt : all_tables()) {
    for (const auto& [cold, hot] :
         {std::pair{kQ4cQ4, kF16}, std::pair{kQ4, kF16}, std::pair{kF16, kQ4}}) {
      for (const auto& [n_cold, n_kv] : {std::pair<int64_t, int64_t>{240, 700}, {400, 600}}) {
        const Case c{cold, hot, 3, 64, 64, 16, n_cold, n_kv};
        const Fixture f(c, 7, 1);
        const auto whole = f.run(*kt);
        std::vector<float> split(whole.size(), NAN);
        test::paged_attention_by_spans(*kt, f.args(split.data()));
        EXPECT_EQ(std::memcmp(split.data(), whole.data(), whole.size() * 4), 0)
            << isa_name(kt->isa) << " " << c.name();
      }
    }
  }
}

// n_cold = 0 reads nothing of the cold fields: garbage there changes no bit of the call with
// them left at their defaults.
TEST(PagedAttentionTwoPoolTest, NoColdSegmentIsTheOnePoolCall) {
  for (const KernelTable* kt : all_tables()) {
    for (const KVDTypes& d : {kF16, kQ4, kQ4cQ4}) {
      const Case c{kF16, d, 3, 64, 64, 16, 0, 90};
      const Fixture f(c, 5, 3);
      std::vector<float> one(size_t(c.n_group) * c.dv, NAN);
      PagedAttentionArgs plain = f.args(one.data());
      plain.cold = {};
      paged_attention(*kt, plain);

      const int32_t junk_table[1] = {1 << 30};
      const uint8_t junk[1] = {};
      std::vector<float> two(one.size(), NAN);
      PagedAttentionArgs a = f.args(two.data());
      a.cold.dtypes = KVDTypes(KVDType::Q4C, KVDType::Q4);
      a.cold.k = a.cold.v = junk;
      a.cold.block_table = junk_table;
      a.cold.k_block_stride = 1 << 20;
      paged_attention(*kt, a);
      EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * 4), 0)
          << isa_name(kt->isa) << " " << kv_dtypes_name(d);
    }
  }
}

// With the same dtypes in both pools and n_cold a multiple of the tile (32), the tiles are
// those of one pool holding every token, so the result is that call's, bit for bit: the
// softmax state carries over the seam untouched (and q4's rotations with it).
TEST(PagedAttentionTwoPoolTest, SameDtypesOnATileEdgeEqualOnePool) {
  for (const KernelTable* kt : all_tables()) {
    for (const KVDTypes& d : {kF16, kInt8, kQ4, kQ4cQ4}) {
      for (const auto& [n_cold, n_kv] : {std::pair<int64_t, int64_t>{32, 33}, {64, 150}}) {
        const Case c{d, d, 3, 64, 64, 16, n_cold, n_kv};
        const Fixture f(c, 77, 4);
        const auto two = f.run(*kt);
        // The same rows in one pool: the cold blocks, then the hot ones, in one table (the
        // hot pool's blocks copied into spare blocks of a copy of the cold pool).
        Pool pool = f.cold;
        const auto n_hot_blocks = static_cast<int32_t>(f.hot.table.size());
        std::vector<int32_t> table = f.cold.table;
        PagedKVView& v = pool.view;
        const int32_t base = v.n_blocks;
        v.n_blocks += n_hot_blocks;
        pool.k.resize(v.k_block_stride() * v.n_blocks + 1);
        pool.v.resize(v.v_block_stride() * v.n_blocks + 1);
        pool.ks.resize(v.k_scale_block_stride() * v.n_blocks + 1);
        pool.vs.resize(v.v_scale_block_stride() * v.n_blocks + 1);
        v.k = pool.k.data();
        v.v = pool.v.data();
        v.k_scales = pool.ks.data();
        v.v_scales = pool.vs.data();
        const PagedKVView& h = f.hot.view;
        for (int32_t i = 0; i < n_hot_blocks; ++i) {
          const int32_t from = f.hot.table[i];
          std::memcpy(v.k_tile(base + i, 0), h.k_tile(from, 0), h.k_block_stride());
          std::memcpy(v.v_tile(base + i, 0), h.v_tile(from, 0), h.v_block_stride());
          std::memcpy(v.k_tile_scales(base + i, 0), h.k_tile_scales(from, 0),
                      h.k_scale_block_stride());
          std::memcpy(v.v_tile_scales(base + i, 0), h.v_tile_scales(from, 0),
                      h.v_scale_block_stride());
          table.push_back(base + i);
        }
        std::vector<float> one(two.size(), NAN);
        PagedAttentionArgs a = f.args(one.data());
        a.n_cold = 0;
        a.k = v.k_tile(0, 1);
        a.v = v.v_tile(0, 1);
        a.k_scales = v.k_tile_scales(0, 1);
        a.v_scales = v.v_tile_scales(0, 1);
        a.block_table = table.data();
        paged_attention(*kt, a);
        EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * 4), 0)
            << isa_name(kt->isa) << " " << c.name();
      }
    }
  }
}

}  // namespace
}  // namespace tokamak::cpu::paged_attention_two_pool_test
