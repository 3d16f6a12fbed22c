// Paged attention kernels (kernels/cpu/paged_attention.h): against a float64 softmax and the
// plain attention kernel on a contiguous copy of the same K/V, scalar against SIMD, and the
// promised invariances (block size, block placement, group membership: bitwise).

#include "kernels/cpu/paged_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "core/paged_kv_view.h"
#include "kernel_test_util.h"
#include "kernels/cpu/attention.h"

namespace tokamak::cpu::paged_attention_test {
namespace {

using test::all_tables;
using test::random_floats;

std::vector<uint16_t> random_halves(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  const auto f = random_floats(n, seed, lo, hi);
  std::vector<uint16_t> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = f32_to_fp16(f[i]);
  return h;
}

// One sequence's n_kv tokens (k: (n_kv, dk), v: (n_kv, dv) F16, in token order), placed in a
// pool of n_head_kv heads as KV head `head`, in blocks listed by a shuffled table. Every other
// element of the pool (other heads, spare blocks, the tail of the last block) holds random
// values, so reading a wrong place changes the result.
struct Pool {
  std::vector<uint16_t> k;  // (n_blocks, n_head_kv, block_size, dk)
  std::vector<uint16_t> v;  // (n_blocks, n_head_kv, block_size, dv)
  std::vector<int32_t> table;
  PagedKVView view;
};

Pool make_pool(const std::vector<uint16_t>& k, const std::vector<uint16_t>& v, int64_t n_kv,
               int32_t dk, int32_t dv, int32_t block_size, int32_t n_head_kv, int32_t head,
               uint64_t seed) {
  const auto used = static_cast<int32_t>((n_kv + block_size - 1) / block_size);
  const int32_t n_blocks = used + 3;
  Pool p;
  p.k = random_halves(size_t(n_blocks) * n_head_kv * block_size * dk, seed, -4.0f, 4.0f);
  p.v = random_halves(size_t(n_blocks) * n_head_kv * block_size * dv, seed + 1, -4.0f, 4.0f);
  p.view.k = reinterpret_cast<uint8_t*>(p.k.data());
  p.view.v = reinterpret_cast<uint8_t*>(p.v.data());
  p.view.n_blocks = n_blocks;
  p.view.block_size = block_size;
  p.view.n_head_kv = n_head_kv;
  p.view.head_dim_k = dk;
  p.view.head_dim_v = dv;
  std::vector<int32_t> ids(n_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64(seed + 2));
  p.table.assign(ids.begin(), ids.begin() + used);
  for (int64_t j = 0; j < n_kv; ++j) {
    const int32_t b = p.table[j / block_size];
    const int64_t row = j % block_size;
    std::memcpy(p.view.k_tile(b, head) + row * dk * 2, &k[j * dk], dk * 2);
    std::memcpy(p.view.v_tile(b, head) + row * dv * 2, &v[j * dv], dv * 2);
  }
  return p;
}

struct Case {
  int32_t n_group;
  int32_t dk;
  int32_t dv;
  int32_t block_size;
  int64_t n_kv;
  float q_range;  // queries uniform in [-q_range, q_range]

  std::string name() const {
    return "group " + std::to_string(n_group) + " dk " + std::to_string(dk) + " dv " +
           std::to_string(dv) + " block " + std::to_string(block_size) + " n_kv " +
           std::to_string(n_kv) + " q_range " + std::to_string(q_range);
  }
};

// The data of one case: queries (n_group rows, q_stride apart, wider than dk to test strides),
// K/V in token order, and a pool holding them as KV head 1 of 2.
struct Fixture {
  Case c;
  int64_t q_stride;
  int64_t out_stride;
  std::vector<float> q;
  std::vector<uint16_t> k, v;
  Pool pool;

  Fixture(const Case& cs, uint64_t seed) : c(cs) {
    q_stride = c.dk + 8;
    out_stride = c.dv + 4;
    q = random_floats(size_t(c.n_group) * q_stride, seed, -c.q_range, c.q_range);
    k = random_halves(size_t(c.n_kv) * c.dk, seed + 1);
    v = random_halves(size_t(c.n_kv) * c.dv, seed + 2);
    pool = make_pool(k, v, c.n_kv, c.dk, c.dv, c.block_size, 2, 1, seed + 3);
  }

  PagedAttentionArgs args(float* out) const {
    PagedAttentionArgs a;
    a.q = q.data();
    a.q_stride = q_stride;
    a.out = out;
    a.out_stride = out_stride;
    a.n_group = c.n_group;
    a.k = pool.view.k_tile(0, 1);
    a.v = pool.view.v_tile(0, 1);
    a.k_block_stride = static_cast<int64_t>(pool.view.k_block_stride());
    a.v_block_stride = static_cast<int64_t>(pool.view.v_block_stride());
    a.block_size = c.block_size;
    a.block_table = pool.table.data();
    a.n_kv = c.n_kv;
    a.head_dim_k = c.dk;
    a.head_dim_v = c.dv;
    a.scale = 1.0f / std::sqrt(static_cast<float>(c.dk));
    return a;
  }

  // (n_group, out_stride) floats; the gaps between rows hold NaN and must stay NaN.
  std::vector<float> run(const KernelTable& kt) const {
    std::vector<float> out(size_t(c.n_group) * out_stride, NAN);
    paged_attention(kt, args(out.data()));
    return out;
  }

  // Softmax attention in double of head g (q exactly as given).
  std::vector<double> reference(int32_t g) const {
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.dk));
    std::vector<double> s(c.n_kv);
    double mx = -INFINITY;
    for (int64_t j = 0; j < c.n_kv; ++j) {
      double dot = 0.0;
      for (int32_t i = 0; i < c.dk; ++i) {
        dot += double{q[g * q_stride + i]} * fp16_to_f32(k[j * c.dk + i]);
      }
      s[j] = dot * scale;
      mx = std::max(mx, s[j]);
    }
    double sum = 0.0;
    for (double& x : s) sum += (x = std::exp(x - mx));
    std::vector<double> out(c.dv, 0.0);
    for (int64_t j = 0; j < c.n_kv; ++j) {
      for (int32_t d = 0; d < c.dv; ++d) out[d] += s[j] / sum * fp16_to_f32(v[j * c.dv + d]);
    }
    return out;
  }
};

// A spread of shapes: every group size, head dim and block size, contexts around the tile and
// block edges and up to ~600.
std::vector<Case> cases() {
  std::vector<Case> out;
  const int64_t n_kvs[] = {1, 2, 7, 8, 9, 16, 31, 32, 33, 63, 64, 65, 100, 255, 256, 257, 600};
  std::mt19937_64 rng(7);
  for (int32_t group : {1, 2, 3, 4}) {
    for (int32_t d : {32, 64, 80, 128}) {
      for (int32_t bs : {1, 4, 16, 32}) {
        // Three contexts per shape (all of them over the whole set).
        for (int r = 0; r < 3; ++r) {
          const int64_t n_kv = n_kvs[rng() % std::size(n_kvs)];
          out.push_back({group, d, d, bs, n_kv, 1.0f});
        }
      }
    }
  }
  for (int64_t n_kv : n_kvs) out.push_back({3, 64, 64, 16, n_kv, 1.0f});
  // Groups of up to kMaxGroup (two register sub-groups), and dk != dv.
  out.push_back({5, 64, 64, 16, 100, 1.0f});
  out.push_back({8, 32, 32, 4, 77, 1.0f});
  out.push_back({3, 64, 128, 16, 50, 1.0f});
  out.push_back({2, 128, 32, 32, 300, 1.0f});
  // Sharp softmaxes (large scores): the running max moves and the rescaling matters.
  out.push_back({3, 64, 64, 16, 600, 12.0f});
  out.push_back({4, 32, 32, 1, 200, 20.0f});
  // Scores spread over hundreds: most weights underflow (the exp's far ranges).
  out.push_back({3, 64, 64, 16, 300, 100.0f});
  return out;
}

TEST(PagedAttentionTest, MatchesFloat64Reference) {
  double worst = 0.0;
  for (const KernelTable* kt : all_tables()) {
    uint64_t seed = 100;
    for (const Case& c : cases()) {
      const Fixture f(c, seed += 10);
      const auto out = f.run(*kt);
      for (int32_t g = 0; g < c.n_group; ++g) {
        const auto ref = f.reference(g);
        for (int32_t d = 0; d < c.dv; ++d) {
          const double err = std::fabs(out[g * f.out_stride + d] - ref[d]);
          worst = std::max(worst, err);
          ASSERT_LE(err, 2e-6 + 2e-6 * std::fabs(ref[d]))
              << isa_name(kt->isa) << " " << c.name() << " head " << g << " d " << d;
        }
        for (int64_t d = c.dv; d < f.out_stride && g + 1 < c.n_group; ++d) {
          ASSERT_TRUE(std::isnan(out[g * f.out_stride + d])) << "wrote between rows";
        }
      }
    }
  }
  std::printf("largest error against float64: %.3g\n", worst);
}

// The optional scores output: each head's raw scaled scores, against float64, for every
// kernel; asking for them changes no bit of the output; nothing past n_kv is written.
TEST(PagedAttentionTest, WritesScoresWhenAsked) {
  for (const KernelTable* kt : all_tables()) {
    uint64_t seed = 3000;
    for (const Case& c : cases()) {
      const Fixture f(c, seed += 10);
      const auto plain = f.run(*kt);
      const int64_t stride = c.n_kv + 3;
      std::vector<float> scores(size_t(c.n_group) * stride, NAN);
      std::vector<float> out(size_t(c.n_group) * f.out_stride, NAN);
      PagedAttentionArgs a = f.args(out.data());
      a.scores = scores.data();
      a.scores_stride = stride;
      paged_attention(*kt, a);
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.dk));
      for (int32_t g = 0; g < c.n_group; ++g) {
        for (int32_t d = 0; d < c.dv; ++d) {
          ASSERT_EQ(std::memcmp(&out[g * f.out_stride + d], &plain[g * f.out_stride + d], 4), 0)
              << isa_name(kt->isa) << " " << c.name();
        }
        for (int64_t j = 0; j < c.n_kv; ++j) {
          double dot = 0.0;
          for (int32_t i = 0; i < c.dk; ++i) {
            dot += double{f.q[g * f.q_stride + i]} * fp16_to_f32(f.k[j * c.dk + i]);
          }
          const double want = dot * scale;
          ASSERT_NEAR(scores[g * stride + j], want, 1e-5 + 1e-5 * std::fabs(want))
              << isa_name(kt->isa) << " " << c.name() << " head " << g << " token " << j;
        }
        for (int64_t j = c.n_kv; j < stride; ++j) {
          ASSERT_TRUE(std::isnan(scores[g * stride + j])) << "wrote past n_kv";
        }
      }
    }
  }
}

// The plain kernel (attention.h) rounds q and the probabilities to F16, so agreement is to
// ~1e-3; the K/V it reads is a contiguous copy of what the pool holds.
TEST(PagedAttentionTest, MatchesPlainAttentionOnContiguousCopy) {
  for (const KernelTable* kt : all_tables()) {
    uint64_t seed = 5000;
    for (const Case& c : cases()) {
      if (c.q_range > 1.0f) continue;
      const Fixture f(c, seed += 10);
      const auto out = f.run(*kt);
      std::vector<float> plain(c.dv);
      for (int32_t g = 0; g < c.n_group; ++g) {
        attention_head(*kt, f.q.data() + g * f.q_stride, f.k.data(), c.dk, f.v.data(), c.dv, c.n_kv,
                       c.dk, c.dv, 1.0f / std::sqrt(static_cast<float>(c.dk)), false, plain.data());
        for (int32_t d = 0; d < c.dv; ++d) {
          ASSERT_NEAR(out[g * f.out_stride + d], plain[d], 2e-3)
              << isa_name(kt->isa) << " " << c.name() << " head " << g << " d " << d;
        }
      }
    }
  }
}

TEST(PagedAttentionTest, SimdAgreesWithScalar) {
  if (test::simd_tables().empty()) GTEST_SKIP() << "no SIMD level on this CPU";
  for (const auto& [name, kt] : test::simd_tables()) {
    uint64_t seed = 9000;
    for (const Case& c : cases()) {
      const Fixture f(c, seed += 10);
      const auto a = f.run(scalar_kernel_table());
      const auto b = f.run(*kt);
      for (int32_t g = 0; g < c.n_group; ++g) {
        for (int32_t d = 0; d < c.dv; ++d) {
          const float x = a[g * f.out_stride + d];
          ASSERT_NEAR(b[g * f.out_stride + d], x, 1e-6f + 1e-6f * std::fabs(x))
              << name << " " << c.name() << " head " << g << " d " << d;
        }
      }
    }
  }
}

// The AVX-512 level runs the AVX2 kernel's body with 16 lanes (two tokens' partial dots a
// register, 16 value dims a register), each lane doing what it does in AVX2: the same bits,
// for every shape of the cases, with the tile sizes' edges and both group sub-blocks.
TEST(PagedAttentionTest, Avx512GivesAvx2sBits) {
  const auto [avx2, wider] = test::avx2_and_wider_tables();
  if (avx2 == nullptr || wider.empty()) GTEST_SKIP() << "no AVX-512 level on this CPU";
  for (const KernelTable* kt : wider) {
    uint64_t seed = 11000;
    for (const Case& c : cases()) {
      const Fixture f(c, seed += 10);
      const auto want = f.run(*avx2);
      const auto got = f.run(*kt);
      ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
          << isa_name(kt->isa) << " " << c.name();
    }
  }
}

// Scores 87 to 133 below the running max take the far range of the vector exp, whose weights
// are subnormal. With the value rows of the max's tokens zero, those weights alone make the
// output, so that range's bits show: AVX-512's 16-lane exp must give AVX2's there too.
TEST(PagedAttentionTest, Avx512GivesAvx2sBitsInTheExpsFarRange) {
  const auto [avx2, wider] = test::avx2_and_wider_tables();
  if (avx2 == nullptr || wider.empty()) GTEST_SKIP() << "no AVX-512 level on this CPU";
  const Case c{3, 64, 64, 16, 70, 1.0f};
  Fixture f(c, 4242);
  // Every head's query is 80 in dimension 0 and 0 elsewhere: score j = 80 k[j][0] / 8.
  std::fill(f.q.begin(), f.q.end(), 0.0f);
  for (int32_t g = 0; g < c.n_group; ++g) f.q[g * f.q_stride] = 80.0f;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> far(-13.5f, -8.5f);
  for (int64_t j = 0; j < c.n_kv; ++j) {
    const bool top = j % 23 == 0;  // score 0, the max, with a zero value row
    for (int32_t d = 0; d < c.dk; ++d) {
      f.k[j * c.dk + d] = f32_to_fp16(d > 0 ? 0.5f : (top ? 0.0f : far(rng)));
    }
    if (top) std::fill_n(f.v.begin() + j * c.dv, c.dv, f32_to_fp16(0.0f));
  }
  f.pool = make_pool(f.k, f.v, c.n_kv, c.dk, c.dv, c.block_size, 2, 1, 4245);
  const auto want = f.run(*avx2);
  const bool subnormal = std::any_of(want.begin(), want.end(),
                                     [](float x) { return std::fpclassify(x) == FP_SUBNORMAL; });
  ASSERT_TRUE(subnormal) << "the case no longer reaches the exp's far range";
  for (const KernelTable* kt : wider) {
    const auto got = f.run(*kt);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
        << isa_name(kt->isa);
  }
}

// The tiles follow the token order, so neither the block size nor where the blocks sit may
// change a bit of the result; nor may the other heads in the call.
TEST(PagedAttentionTest, BlockSizePlacementAndGroupDoNotChangeBits) {
  for (const KernelTable* kt : all_tables()) {
    for (int64_t n_kv : {1, 33, 97, 600}) {
      const Case c{4, 64, 64, 16, n_kv, 3.0f};
      const Fixture f(c, 77 + n_kv);
      const auto base = f.run(*kt);
      for (int32_t bs : {1, 4, 7, 32, 64}) {
        for (uint64_t placement = 0; placement < 2; ++placement) {
          Fixture g = f;
          g.c.block_size = bs;
          const auto head = static_cast<int32_t>(placement);
          g.pool = make_pool(f.k, f.v, n_kv, c.dk, c.dv, bs, 2, head, 300 + placement);
          PagedAttentionArgs a = g.args(nullptr);
          a.k = g.pool.view.k_tile(0, head);
          a.v = g.pool.view.v_tile(0, head);
          std::vector<float> out(base.size(), NAN);
          a.out = out.data();
          paged_attention(*kt, a);
          for (int32_t h = 0; h < c.n_group; ++h) {
            EXPECT_EQ(std::memcmp(&out[h * f.out_stride], &base[h * f.out_stride], c.dv * 4), 0)
                << isa_name(kt->isa) << " n_kv " << n_kv << " block " << bs << " head " << h;
          }
        }
      }
      // Each head alone, and heads 1..3 as a group of three.
      for (int32_t h = 0; h < c.n_group; ++h) {
        PagedAttentionArgs a = f.args(nullptr);
        std::vector<float> out(c.dv);
        a.q = f.q.data() + h * f.q_stride;
        a.out = out.data();
        a.n_group = 1;
        paged_attention(*kt, a);
        EXPECT_EQ(std::memcmp(out.data(), &base[h * f.out_stride], c.dv * 4), 0)
            << isa_name(kt->isa) << " n_kv " << n_kv << " head " << h << " alone";
      }
      PagedAttentionArgs a = f.args(nullptr);
      std::vector<float> out(3 * f.out_stride);
      a.q = f.q.data() + f.q_stride;
      a.out = out.data();
      a.n_group = 3;
      paged_attention(*kt, a);
      for (int32_t h = 1; h < 4; ++h) {
        EXPECT_EQ(std::memcmp(&out[(h - 1) * f.out_stride], &base[h * f.out_stride], c.dv * 4), 0)
            << isa_name(kt->isa) << " n_kv " << n_kv << " head " << h << " of heads 1..3";
      }
    }
  }
}

// A context's spans computed apart, in any order, and merged give the bits of the one call
// (paged_attention.h): what lets CpuOps share a long context out among threads.
TEST(PagedAttentionTest, SpansComputedApartGiveTheSameBits) {
  for (const KernelTable* kt : all_tables()) {
    for (int64_t n_kv : {1, 200, 256, 257, 600, 1100}) {
      for (int32_t bs : {7, 16}) {
        const Case c{3, 64, 64, bs, n_kv, 3.0f};
        const Fixture f(c, 500 + n_kv);
        const auto whole = f.run(*kt);
        std::vector<float> split(whole.size(), NAN);
        test::paged_attention_by_spans(*kt, f.args(split.data()));
        EXPECT_EQ(std::memcmp(split.data(), whole.data(), whole.size() * 4), 0)
            << isa_name(kt->isa) << " " << c.name();
      }
    }
  }
}

// Head dims that are not multiples of 8 go to the scalar kernel from every table.
TEST(PagedAttentionTest, OddHeadDimsMatchReference) {
  for (const KernelTable* kt : all_tables()) {
    for (const Case& c : {Case{3, 20, 12, 4, 45, 1.0f}, Case{2, 36, 36, 16, 130, 1.0f}}) {
      const Fixture f(c, 31);
      const auto out = f.run(*kt);
      const auto scalar = f.run(scalar_kernel_table());
      EXPECT_EQ(std::memcmp(out.data(), scalar.data(), out.size() * 4), 0) << isa_name(kt->isa);
      for (int32_t g = 0; g < c.n_group; ++g) {
        const auto ref = f.reference(g);
        for (int32_t d = 0; d < c.dv; ++d) {
          EXPECT_NEAR(out[g * f.out_stride + d], ref[d], 2e-6) << c.name();
        }
      }
    }
  }
}

// One key: softmax weight 1, the output is that token's value (exactly: acc = v, l = 1).
TEST(PagedAttentionTest, OneTokenReturnsItsValue) {
  for (const KernelTable* kt : all_tables()) {
    const Fixture f({2, 64, 64, 16, 1, 5.0f}, 3);
    const auto out = f.run(*kt);
    for (int32_t g = 0; g < 2; ++g) {
      for (int32_t d = 0; d < 64; ++d) {
        EXPECT_EQ(out[g * f.out_stride + d], fp16_to_f32(f.v[d])) << isa_name(kt->isa);
      }
    }
  }
}

}  // namespace
}  // namespace tokamak::cpu::paged_attention_test
