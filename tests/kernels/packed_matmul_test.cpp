// The packed matmul (packed_weights.h): each level's kernel against the scalar reference,
// bitwise, on raw blocks of random bits (every quant value, -128 for Q8_0 weights; scales
// normal, subnormal, zero, negative and large), for row counts off multiples of 8, block
// counts from 1 to 65, 1 to 9 activation rows and partial group ranges; the reference against
// the unpacked scalar dot product (the layout holds the same numbers); and packing as a
// function of the rows it covers. Levels without packed kernels have nothing to test here.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/fp16.h"
#include "kernel_test_util.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/packed_weights.h"

namespace tokamak::cpu {
namespace {

using test::random_half;

const DType kBases[] = {DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::Q5_0, DType::Q6_K};

// `blocks` blocks of 32, rounded up to whole super-blocks for the K-quants.
int64_t whole(DType base, int64_t blocks) {
  const int64_t per = dtype_info(base).block_size / kQK;
  return (blocks + per - 1) / per * per;
}

// n rows of random blocks of `base`, contiguous.
std::vector<uint8_t> random_weights(DType base, int64_t n, int64_t blocks, std::mt19937_64& rng) {
  const size_t rb = row_bytes(base, blocks * kQK);
  std::vector<uint8_t> w(rb * static_cast<size_t>(n));
  for (uint8_t& b : w) b = static_cast<uint8_t>(rng());
  for (int64_t j = 0; j < n; ++j) {
    uint8_t* row = w.data() + static_cast<size_t>(j) * rb;
    for (int64_t i = 0; i < blocks; ++i) {
      switch (base) {
        case DType::Q4_0:
          reinterpret_cast<block_q4_0*>(row)[i].d = random_half(rng);
          break;
        case DType::Q4_1:
          reinterpret_cast<block_q4_1*>(row)[i].d = random_half(rng);
          reinterpret_cast<block_q4_1*>(row)[i].m = random_half(rng);
          break;
        case DType::Q5_0:
          reinterpret_cast<block_q5_0*>(row)[i].d = random_half(rng);
          break;
        case DType::Q6_K:
          if (i % 8 == 0) reinterpret_cast<block_q6_K*>(row)[i / 8].d = random_half(rng);
          break;
        default:
          reinterpret_cast<block_q8_0*>(row)[i].d = random_half(rng);
      }
    }
  }
  return w;
}

// m activation rows (the encoding of `base`), quants in [-127, 127] as the encoders write them.
std::vector<uint8_t> random_activations(DType base, int64_t m, int64_t blocks, size_t stride,
                                        std::mt19937_64& rng) {
  std::vector<uint8_t> x(stride * static_cast<size_t>(m));
  for (uint8_t& b : x) b = static_cast<uint8_t>(rng());
  for (int64_t c = 0; c < m; ++c) {
    uint8_t* row = x.data() + static_cast<size_t>(c) * stride;
    for (int64_t i = 0; i < blocks; ++i) {
      int8_t* qs;
      if (base == DType::Q4_1) {
        auto& b = reinterpret_cast<block_q8_1*>(row)[i];
        b.d = random_half(rng);
        b.s = random_half(rng);
        qs = b.qs;
      } else {
        auto& b = reinterpret_cast<block_q8_0*>(row)[i];
        b.d = random_half(rng);
        qs = b.qs;
      }
      for (int e = 0; e < kQK; ++e)
        qs[e] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    }
  }
  return x;
}

std::vector<uint8_t> pack_all(DType base, const std::vector<uint8_t>& w, int64_t n, int64_t k) {
  std::vector<uint8_t> p(packed_bytes(base, n, k));
  pack_groups(base, w.data(), row_bytes(base, k), n, k, 0, (n + kPackRows - 1) / kPackRows,
              p.data());
  return p;
}

// n rows of random weights packed for `epilogue`: a gated pair's gate and up rows
// interleaved (pack_gated_pairs) for SiluMul, plain groups otherwise.
std::vector<uint8_t> packed_for(PackedEpilogue epilogue, DType base, int64_t n, int64_t blocks,
                                std::mt19937_64& rng) {
  const int64_t k = blocks * kQK;
  if (epilogue != PackedEpilogue::SiluMul) {
    return pack_all(base, random_weights(base, n, blocks, rng), n, k);
  }
  const auto gate = random_weights(base, n, blocks, rng);
  const auto up = random_weights(base, n, blocks, rng);
  std::vector<uint8_t> w(2 * packed_bytes(base, n, k));
  pack_gated_pairs(base, gate.data(), up.data(), row_bytes(base, k), n, k, 0,
                   (n + kPackRows - 1) / kPackRows, w.data());
  return w;
}

// Runs `kernel` and the reference on args, y prefilled with the same random values (what an
// Add epilogue adds to), and expects the same bits from both.
void expect_epilogue_bits(PackedMatmulFn kernel, DType packed, PackedMatmulArgs args,
                          std::mt19937_64& rng, const std::string& what) {
  std::vector<float> got(static_cast<size_t>(args.m * args.y_stride));
  for (float& v : got) v = std::ldexp(static_cast<float>(rng() % 2001) - 1000.0f, -4);
  std::vector<float> want = got;
  args.y = got.data();
  kernel(args);
  args.y = want.data();
  packed_matmul_reference(packed, args);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << what;
}

TEST(PackedMatmulTest, KernelsEqualTheReferenceBitwise) {
  int tested = 0;
  for (const auto& nt : test::simd_tables()) {
    for (DType base : kBases) {
      const DType packed = packed_dtype(base);
      const PackedMatmulFn kernel = packed_matmul_kernel(*nt.table, packed);
      if (kernel == nullptr) continue;
      ++tested;
      for (int64_t n : {8, 13, 24, 37}) {
        for (int64_t b : {1, 2, 3, 17, 64, 65}) {
          const int64_t blocks = whole(base, b);
          std::mt19937_64 rng(static_cast<uint64_t>(n * 1000 + blocks * 10) +
                              static_cast<uint64_t>(base));
          const int64_t k = blocks * kQK;
          // Every m to 9, and AMX's tiles of 16 rows (from 48 rows) with and without a rest.
          const std::vector<int64_t> ms = {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 33, 48, 49, 67};
          const int64_t max_m = ms.back();
          const size_t xs = row_bytes(activation_dtype(packed_dtype(base)), k) + 6;  // padded rows
          const auto w = pack_all(base, random_weights(base, n, blocks, rng), n, k);
          const auto x = random_activations(base, max_m, blocks, xs, rng);
          const int64_t groups = (n + kPackRows - 1) / kPackRows;
          const int64_t y_stride = n + 3;
          for (int64_t m : ms) {
            // All groups, and from the second one on (a thread's share).
            for (int64_t g0 : {int64_t{0}, std::min<int64_t>(1, groups - 1)}) {
              const float untouched = -7.0f;
              std::vector<float> got(static_cast<size_t>(m * y_stride), untouched);
              std::vector<float> want(got.size(), untouched);
              const PackedMatmulArgs args_got{w.data(), n,      k,          x.data(), xs, m,
                                              g0,       groups, got.data(), y_stride, 0};
              PackedMatmulArgs args_want = args_got;
              args_want.y = want.data();
              kernel(args_got);
              packed_matmul_reference(packed, args_want);
              ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
                  << nt.name << " " << dtype_name(packed) << " n=" << n << " blocks=" << blocks
                  << " m=" << m << " g0=" << g0;
              // The activation blocks' terms handed in, as CpuOps does: the same bits.
              std::vector<PackedActBlock> terms(static_cast<size_t>(m * blocks));
              packed_activation_blocks(packed, x.data(), xs, k, 0, m, terms.data());
              std::vector<float> with_terms(got.size(), untouched);
              PackedMatmulArgs args_terms = args_got;
              args_terms.y = with_terms.data();
              args_terms.x_blocks = terms.data();
              kernel(args_terms);
              ASSERT_EQ(std::memcmp(with_terms.data(), want.data(), got.size() * sizeof(float)), 0)
                  << nt.name << " " << dtype_name(packed) << " with block terms, n=" << n
                  << " blocks=" << blocks << " m=" << m << " g0=" << g0;
              // And the level's own activation layout handed in (AMX's tiles), as CpuOps does.
              const KernelTable& kt = *nt.table;
              const size_t tiles_bytes = kt.activation_tiles_bytes != nullptr
                                             ? kt.activation_tiles_bytes(packed, m, k)
                                             : 0;
              if (tiles_bytes > 0) {
                std::vector<uint8_t> tiles(tiles_bytes);
                const int64_t n_tiles = m / kActivationTileRows;
                kt.pack_activation_tiles(packed, x.data(), xs, k, 0, n_tiles / 2, tiles.data());
                kt.pack_activation_tiles(packed, x.data(), xs, k, n_tiles / 2, n_tiles,
                                         tiles.data());
                std::vector<float> with_tiles(got.size(), untouched);
                args_terms.y = with_tiles.data();
                args_terms.x_tiles = tiles.data();
                kernel(args_terms);
                ASSERT_EQ(std::memcmp(with_tiles.data(), want.data(), got.size() * sizeof(float)),
                          0)
                    << nt.name << " " << dtype_name(packed) << " with activation tiles, n=" << n
                    << " blocks=" << blocks << " m=" << m << " g0=" << g0;
              }
            }
          }
        }
      }
    }
  }
  if (tested == 0) GTEST_SKIP() << "no kernel level of this CPU packs weights";
}

// The packed layout holds the same numbers: the reference is the unpacked scalar dot product
// up to float rounding (it sums in another order).
TEST(PackedMatmulTest, ReferenceMatchesTheUnpackedDot) {
  const KernelTable& scalar = scalar_kernel_table();
  for (DType base : kBases) {
    const int64_t n = 21, k = 256, m = 3;
    const auto wf = test::random_floats(static_cast<size_t>(n * k), 11);
    const auto xf = test::random_floats(static_cast<size_t>(m * k), 12, -3.0f, 3.0f);
    const auto w = test::encode_rows(base, wf, k);
    const size_t xs = row_bytes(activation_dtype(packed_dtype(base)), k);
    std::vector<uint8_t> x(xs * m);
    convert_rows(scalar, packed_dtype(base), xf.data(), k, k, 0, m, x.data());
    const auto p = pack_all(base, w, n, k);
    std::vector<float> y(static_cast<size_t>(m * n));
    packed_matmul_reference(packed_dtype(base),
                            {p.data(), n, k, x.data(), xs, m, 0, (n + 7) / 8, y.data(), n, 0});
    std::vector<float> want(y.size());
    if (activation_dtype(base) == activation_dtype(packed_dtype(base))) {
      matmul_rows(scalar, base, w.data(), row_bytes(base, k), x.data(), xs, m, k, 0, n, want.data(),
                  n);
    } else {  // Q6_K: packed, it takes Q8_0 activations; the sum over the decoded operands
      const auto wd = test::decode_rows(base, w.data(), n, k);
      const auto xd = test::decode_rows(DType::Q8_0, x.data(), m, k);
      for (int64_t c = 0; c < m; ++c) {
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0.0;
          for (int64_t e = 0; e < k; ++e) sum += static_cast<double>(wd[j * k + e]) * xd[c * k + e];
          want[c * n + j] = static_cast<float>(sum);
        }
      }
    }
    for (size_t e = 0; e < y.size(); ++e) {
      EXPECT_NEAR(y[e], want[e], 1e-4 * (1.0 + std::fabs(want[e])))
          << dtype_name(base) << " element " << e;
    }
  }
}

// Packing a range of groups writes exactly those groups, the same bytes as packing them all.
TEST(PackedMatmulTest, PackingGroupRangesComposes) {
  for (DType base : kBases) {
    std::mt19937_64 rng(5);
    const int64_t n = 29, blocks = whole(base, 3), k = blocks * kQK;
    const auto w = random_weights(base, n, blocks, rng);
    const auto whole = pack_all(base, w, n, k);
    std::vector<uint8_t> parts(whole.size(), 0xAB);
    const size_t rb = row_bytes(base, k);
    pack_groups(base, w.data(), rb, n, k, 2, 4, parts.data());
    pack_groups(base, w.data(), rb, n, k, 0, 2, parts.data());
    EXPECT_EQ(parts, whole) << dtype_name(base);
  }
}

// The epilogues (packed_weights.h): Add and SiluMul in each level's kernel against the
// reference, bitwise, with y holding random values first (Add reads them).
TEST(PackedMatmulTest, EpiloguesEqualTheReferenceBitwise) {
  const SiluMulFn silu_mul = scalar_kernel_table().silu_mul;
  int tested = 0;
  for (const auto& nt : test::simd_tables()) {
    for (DType base : kBases) {
      const DType packed = packed_dtype(base);
      const PackedMatmulFn kernel = packed_matmul_kernel(*nt.table, packed);
      if (kernel == nullptr) continue;
      ++tested;
      for (PackedEpilogue epilogue : {PackedEpilogue::Add, PackedEpilogue::SiluMul}) {
        for (int64_t n : {8, 13, 37}) {
          for (int64_t b : {1, 3, 17}) {
            const int64_t blocks = whole(base, b);
            std::mt19937_64 rng(static_cast<uint64_t>(n * 1000 + blocks * 10) +
                                static_cast<uint64_t>(base) * 7 +
                                static_cast<uint64_t>(epilogue));
            const int64_t k = blocks * kQK;
            const int64_t groups = (n + kPackRows - 1) / kPackRows;
            const auto w = packed_for(epilogue, base, n, blocks, rng);
            const int64_t max_m = 53;
            const size_t xs = row_bytes(activation_dtype(packed_dtype(base)), k);
            const auto x = random_activations(base, max_m, blocks, xs, rng);
            const int64_t y_stride = n + 3;
            for (int64_t m :
                 {int64_t{1}, int64_t{4}, int64_t{5}, int64_t{16}, int64_t{48}, max_m}) {
              for (int64_t g0 : {int64_t{0}, std::min<int64_t>(1, groups - 1)}) {
                PackedMatmulArgs args{w.data(), n,      k,       x.data(), xs, m,
                                      g0,       groups, nullptr, y_stride, 0};
                args.epilogue = epilogue;
                args.silu_mul = silu_mul;
                expect_epilogue_bits(kernel, packed, args, rng,
                                     nt.name + " " + std::string(dtype_name(packed)) +
                                         " epilogue " + std::to_string(static_cast<int>(epilogue)) +
                                         " n=" + std::to_string(n) +
                                         " blocks=" + std::to_string(blocks) +
                                         " m=" + std::to_string(m) + " g0=" + std::to_string(g0));
              }
            }
          }
        }
      }
    }
  }
  if (tested == 0) GTEST_SKIP() << "no kernel level of this CPU packs weights";
}

// Rows long enough that AMX's activation tiles of all the rows outgrow its L2 budget run in
// passes over k, each over every pair, the accumulators and Q4_1's min terms saved between
// them (packed_matmul_amx.cpp): still every output's blocks in order, so the reference's bits,
// in every epilogue and for a thread's share that starts at a later group. Levels without the
// tiles run these shapes too.
TEST(PackedMatmulTest, LongRowsInPassesEqualTheReferenceBitwise) {
  const SiluMulFn silu_mul = scalar_kernel_table().silu_mul;
  int tested = 0;
  for (const auto& nt : test::simd_tables()) {
    for (DType base : {DType::Q4_0, DType::Q4_1, DType::Q8_0}) {
      const DType packed = packed_dtype(base);
      const PackedMatmulFn kernel = packed_matmul_kernel(*nt.table, packed);
      if (kernel == nullptr) continue;
      ++tested;
      // 3 tiles (48 rows) of 1,101 blocks: 2.0 MiB of tiles, three passes of an odd number of
      // blocks; 4 tiles (67 rows, 3 left to the VNNI kernel) of 651: 1.6 MiB, two passes.
      for (const auto& [m, blocks] : {std::pair<int64_t, int64_t>{48, 1101}, {67, 651}}) {
        for (PackedEpilogue epilogue :
             {PackedEpilogue::Store, PackedEpilogue::Add, PackedEpilogue::SiluMul}) {
          const int64_t n = 13, k = blocks * kQK;
          std::mt19937_64 rng(static_cast<uint64_t>(blocks) * 31 + static_cast<uint64_t>(base) +
                              static_cast<uint64_t>(epilogue) * 7);
          const int64_t groups = (n + kPackRows - 1) / kPackRows;
          const auto w = packed_for(epilogue, base, n, blocks, rng);
          const size_t xs = row_bytes(activation_dtype(packed), k);
          const auto x = random_activations(base, m, blocks, xs, rng);
          const int64_t y_stride = n + 3;
          for (int64_t g0 : {int64_t{0}, int64_t{1}}) {
            PackedMatmulArgs args{w.data(), n,      k,       x.data(), xs, m,
                                  g0,       groups, nullptr, y_stride, 0};
            args.epilogue = epilogue;
            args.silu_mul = silu_mul;
            expect_epilogue_bits(
                kernel, packed, args, rng,
                nt.name + " " + std::string(dtype_name(packed)) + " epilogue " +
                    std::to_string(static_cast<int>(epilogue)) + " m=" + std::to_string(m) +
                    " blocks=" + std::to_string(blocks) + " g0=" + std::to_string(g0));
          }
        }
      }
    }
  }
  if (tested == 0) GTEST_SKIP() << "no kernel level of this CPU packs weights";
}

// The reference's epilogues are what they claim: Add is y + (the stored product), SiluMul is
// silu_mul, over each output row, of the gate's and the up weight's stored products.
TEST(PackedMatmulTest, ReferenceEpiloguesEqualTheUnfusedSteps) {
  const SiluMulFn silu_mul = scalar_kernel_table().silu_mul;
  for (DType base : kBases) {
    std::mt19937_64 rng(static_cast<uint64_t>(base) + 77);
    const int64_t n = 21, blocks = whole(base, 4), k = blocks * kQK, m = 3;
    const size_t rb = row_bytes(base, k);
    const auto gate = random_weights(base, n, blocks, rng);
    const auto up = random_weights(base, n, blocks, rng);
    const size_t xs = row_bytes(activation_dtype(packed_dtype(base)), k);
    const auto x = random_activations(base, m, blocks, xs, rng);
    const int64_t groups = (n + kPackRows - 1) / kPackRows;
    const DType packed = packed_dtype(base);
    const auto product = [&](const std::vector<uint8_t>& w) {
      std::vector<float> y(static_cast<size_t>(m * n));
      const auto p = pack_all(base, w, n, k);
      packed_matmul_reference(packed, {p.data(), n, k, x.data(), xs, m, 0, groups, y.data(), n, 0});
      return y;
    };
    const std::vector<float> g = product(gate);
    const std::vector<float> u = product(up);

    std::vector<float> residual(g.size());
    for (float& v : residual) v = std::ldexp(static_cast<float>(rng() % 2001) - 1000.0f, -4);
    std::vector<float> added = residual;
    const auto p = pack_all(base, gate, n, k);
    PackedMatmulArgs add_args{p.data(), n, k, x.data(), xs, m, 0, groups, added.data(), n, 0};
    add_args.epilogue = PackedEpilogue::Add;
    packed_matmul_reference(packed, add_args);
    for (size_t e = 0; e < g.size(); ++e) {
      EXPECT_EQ(added[e], residual[e] + g[e]) << dtype_name(base) << " element " << e;
    }

    std::vector<uint8_t> pair(2 * packed_bytes(base, n, k));
    pack_gated_pairs(base, gate.data(), up.data(), rb, n, k, 0, groups, pair.data());
    std::vector<float> fused(g.size());
    PackedMatmulArgs gated{pair.data(), n, k, x.data(), xs, m, 0, groups, fused.data(), n, 0};
    gated.epilogue = PackedEpilogue::SiluMul;
    gated.silu_mul = silu_mul;
    packed_matmul_reference(packed, gated);
    std::vector<float> unfused(g.size());
    for (int64_t c = 0; c < m; ++c) {
      silu_mul(g.data() + c * n, u.data() + c * n, unfused.data() + c * n, n);
    }
    EXPECT_EQ(std::memcmp(fused.data(), unfused.data(), fused.size() * sizeof(float)), 0)
        << dtype_name(base);
  }
}

// The word-at-a-time packer writes the bytes of the byte-at-a-time reference, partial last
// groups included.
TEST(PackedMatmulTest, PackingEqualsTheReferencePacker) {
  for (DType base : kBases) {
    for (int64_t n : {1, 8, 13, 24, 37}) {
      std::mt19937_64 rng(static_cast<uint64_t>(n) * 31 + static_cast<uint64_t>(base));
      const int64_t blocks = whole(base, 5), k = blocks * kQK;
      const auto w = random_weights(base, n, blocks, rng);
      const size_t rb = row_bytes(base, k);
      const int64_t groups = (n + kPackRows - 1) / kPackRows;
      std::vector<uint8_t> got(packed_bytes(base, n, k), 0xAB);
      std::vector<uint8_t> want(got.size(), 0xCD);
      pack_groups(base, w.data(), rb, n, k, 0, groups, got.data());
      pack_groups_reference(base, w.data(), rb, n, k, 0, groups, want.data());
      EXPECT_EQ(got, want) << dtype_name(base) << " n=" << n;
    }
  }
}

// Q5_0 packs into Q8_0_X8 as the Q8_0 weight of the same values (q - 16, the same scale)
// packs: byte for byte, so it computes exactly as that Q8_0 weight does.
TEST(PackedMatmulTest, Q5_0PacksAsTheQ8_0OfItsValues) {
  std::mt19937_64 rng(17);
  const int64_t n = 19, blocks = 6, k = blocks * kQK;
  const auto w5 = random_weights(DType::Q5_0, n, blocks, rng);
  std::vector<float> row(static_cast<size_t>(k));
  std::vector<uint8_t> w8(row_bytes(DType::Q8_0, k) * static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    const auto* a = reinterpret_cast<const block_q5_0*>(w5.data() + j * row_bytes(DType::Q5_0, k));
    auto* b = reinterpret_cast<block_q8_0*>(w8.data() + j * row_bytes(DType::Q8_0, k));
    for (int64_t i = 0; i < blocks; ++i) {
      // Decoding with scale 1 gives q - 16 itself.
      block_q5_0 unit = a[i];
      unit.d = f32_to_fp16(1.0f);
      dequantize_row_q5_0(&unit, row.data(), kQK);
      b[i].d = a[i].d;
      for (int e = 0; e < kQK; ++e) b[i].qs[e] = static_cast<int8_t>(row[e]);
    }
  }
  EXPECT_EQ(packed_dtype(DType::Q5_0), DType::Q8_0_X8);
  EXPECT_EQ(packed_bytes(DType::Q5_0, n, k), packed_bytes(DType::Q8_0, n, k));
  EXPECT_EQ(pack_all(DType::Q5_0, w5, n, k), pack_all(DType::Q8_0, w8, n, k));
}

// Q4_K packs into Q4_1_X8 as its sub-blocks' Q4_1 blocks: each decodes to the super-block's
// values within the f16 rounding of the sub-block scale and min (2^-11 of each, relatively,
// where packable), and the packers write those blocks' bytes.
TEST(PackedMatmulTest, Q4_KPacksAsItsSubBlocksQ4_1Blocks) {
  const int64_t n = 13, k = 512;
  const auto wf = test::random_floats(static_cast<size_t>(n * k), 23, -0.3f, 0.2f);
  const auto w = test::encode_rows(DType::Q4_K, wf, k);
  const size_t rb = row_bytes(DType::Q4_K, k);
  ASSERT_TRUE(packable(DType::Q4_K, w.data(), rb, n, k));
  std::vector<uint8_t> as_q4_1(row_bytes(DType::Q4_1, k) * static_cast<size_t>(n));
  auto* blocks = reinterpret_cast<block_q4_1*>(as_q4_1.data());
  std::vector<float> want(static_cast<size_t>(k));
  std::vector<float> got(static_cast<size_t>(k));
  for (int64_t j = 0; j < n; ++j) {
    const auto* a = reinterpret_cast<const block_q4_K*>(w.data() + j * rb);
    for (int64_t i = 0; i < k / kQK_K; ++i) q4_K_as_q4_1(a[i], blocks + (j * k + i * kQK_K) / kQK);
    dequantize_row_q4_K(a, want.data(), k);
    dequantize_row_q4_1(blocks + j * k / kQK, got.data(), k);
    for (int64_t e = 0; e < k; ++e) {
      int sc = 0;
      int m = 0;
      kq_scale_min(a[e / kQK_K].scales, static_cast<int>(e % kQK_K / kQK), sc, m);
      const float step = fp16_to_f32(a[e / kQK_K].d) * static_cast<float>(sc);
      const float min = fp16_to_f32(a[e / kQK_K].dmin) * static_cast<float>(m);
      EXPECT_LE(std::fabs(got[e] - want[e]), (15.0f * step + min) * 0x1p-11f + 1e-7f)
          << "row " << j << " element " << e;
    }
  }
  const int64_t groups = (n + kPackRows - 1) / kPackRows;
  std::vector<uint8_t> packed(packed_bytes(DType::Q4_K, n, k), 0xAB);
  std::vector<uint8_t> reference(packed.size(), 0xCD);
  pack_groups(DType::Q4_K, w.data(), rb, n, k, 0, groups, packed.data());
  pack_groups_reference(DType::Q4_K, w.data(), rb, n, k, 0, groups, reference.data());
  EXPECT_EQ(packed, reference);
  EXPECT_EQ(packed, pack_all(DType::Q4_1, as_q4_1, n, k));
}

// A Q4_K weight whose sub-block scales or mins leave the normal f16 range does not pack (it
// would lose more than 2^-11 of them): too large, or too small but not zero.
TEST(PackedMatmulTest, Q4_KOutsideTheHalfRangeDoesNotPack) {
  const int64_t k = 256;
  const auto wf = test::random_floats(static_cast<size_t>(k), 29);
  auto w = test::encode_rows(DType::Q4_K, wf, k);
  auto* a = reinterpret_cast<block_q4_K*>(w.data());
  EXPECT_TRUE(packable(DType::Q4_K, w.data(), w.size(), 1, k));
  const block_q4_K fine = *a;
  a->d = f32_to_fp16(30000.0f);  // 30000 * sc overflows f16 for sc >= 3
  EXPECT_FALSE(packable(DType::Q4_K, w.data(), w.size(), 1, k));
  *a = fine;
  a->dmin = f32_to_fp16(1e-7f);  // 1e-7 * m is an f16 subnormal
  EXPECT_FALSE(packable(DType::Q4_K, w.data(), w.size(), 1, k));
  *a = fine;
  a->dmin = 0;  // all mins zero: exact
  EXPECT_TRUE(packable(DType::Q4_K, w.data(), w.size(), 1, k));
  EXPECT_TRUE(packable(DType::Q4_0, nullptr, 0, 0, 0));
}

TEST(PackedMatmulTest, OnlyLevelsWithKernelsPack) {
  EXPECT_EQ(packed_weight_dtype(scalar_kernel_table(), DType::Q4_0), DType::Q4_0);
  for (const auto& nt : test::simd_tables()) {
    for (DType base : kBases) {
      const DType chosen = packed_weight_dtype(*nt.table, base);
      EXPECT_EQ(chosen != base, packed_matmul_kernel(*nt.table, packed_dtype(base)) != nullptr)
          << nt.name;
    }
    EXPECT_EQ(packed_weight_dtype(*nt.table, DType::F16), DType::F16) << nt.name;
  }
}

}  // namespace
}  // namespace tokamak::cpu
