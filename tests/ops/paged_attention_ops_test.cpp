// CpuOps::write_paged_kv and CpuOps::paged_attention: where written rows land, agreement with
// the plain attention op, and batch invariance (bitwise) across batch composition, prefill
// chunking and thread counts, for every ISA this CPU has.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "core/paged_kv_view.h"
#include "core/thread_pool.h"
#include "ops/cpu_ops.h"
#include "ops_test_util.h"

namespace tokamak::paged_attention_ops_test {
namespace {

using test::random_floats;

bool same_bits(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * sizeof(float)) == 0;
}

TEST(PagedKVWriteTest, RowsLandWhereTheLayoutSays) {
  const int32_t n_blocks = 6, block_size = 4, n_head_kv = 2, dk = 8, dv = 16;
  const std::vector<int64_t> slots = {13, 0, 22, 7, 3};
  const int64_t t = static_cast<int64_t>(slots.size());
  const auto k = random_floats(static_cast<size_t>(t * n_head_kv * dk), 1);
  const auto v = random_floats(static_cast<size_t>(t * n_head_kv * dv), 2);
  constexpr uint16_t kUntouched = 0xabcd;
  for (Isa isa : test::supported_isas()) {
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      CpuOps ops(pool, isa);
      std::vector<uint16_t> pk(size_t(n_blocks) * n_head_kv * block_size * dk, kUntouched);
      std::vector<uint16_t> pv(size_t(n_blocks) * n_head_kv * block_size * dv, kUntouched);
      PagedKVView kv;
      kv.k = reinterpret_cast<uint8_t*>(pk.data());
      kv.v = reinterpret_cast<uint8_t*>(pv.data());
      kv.n_blocks = n_blocks;
      kv.block_size = block_size;
      kv.n_head_kv = n_head_kv;
      kv.head_dim_k = dk;
      kv.head_dim_v = dv;
      auto kc = k, vc = v;
      ops.write_paged_kv(Tensor::contiguous(DType::F32, {t, n_head_kv * dk}, kc.data()),
                         Tensor::contiguous(DType::F32, {t, n_head_kv * dv}, vc.data()), slots, kv);
      for (int32_t b = 0; b < n_blocks; ++b) {
        for (int32_t h = 0; h < n_head_kv; ++h) {
          for (int32_t row = 0; row < block_size; ++row) {
            const auto it = std::find(slots.begin(), slots.end(), b * block_size + row);
            const int64_t r = it == slots.end() ? -1 : it - slots.begin();
            // By the documented layout: k[block][kv_head][token][d].
            const size_t k_at = ((size_t(b) * n_head_kv + h) * block_size + row) * dk;
            const size_t v_at = ((size_t(b) * n_head_kv + h) * block_size + row) * dv;
            for (int32_t d = 0; d < dk; ++d) {
              const uint16_t want =
                  r < 0 ? kUntouched : f32_to_fp16(k[(r * n_head_kv + h) * dk + d]);
              ASSERT_EQ(pk[k_at + d], want) << "block " << b << " head " << h << " row " << row;
            }
            for (int32_t d = 0; d < dv; ++d) {
              const uint16_t want =
                  r < 0 ? kUntouched : f32_to_fp16(v[(r * n_head_kv + h) * dv + d]);
              ASSERT_EQ(pv[v_at + d], want) << "block " << b << " head " << h << " row " << row;
            }
          }
        }
      }
    }
  }
}

struct Shape {
  int32_t n_head;
  int32_t n_head_kv;
  int32_t head_dim;
  int32_t block_size;
  KVDTypes dtype = KVDType::F16;
};

// One sequence: its whole context's K/V rows (F32, as the model produces them), its block
// table, and queries for every position (the last n_query of them go into a batch).
struct Seq {
  int32_t context_len;
  int32_t n_query;
  std::vector<int32_t> table;
  std::vector<float> k;  // (context_len, n_head_kv * head_dim)
  std::vector<float> v;
  std::vector<float> q;  // (context_len, n_head * head_dim)
};

// A pool with several sequences written into it (through write_paged_kv, in one call), their
// blocks taken from a shuffled free list so that tables are not contiguous.
class PagedBatch {
 public:
  PagedBatch(const Shape& s, std::vector<std::pair<int32_t, int32_t>> ctx_and_queries,
             uint64_t seed)
      : s_(s) {
    int32_t used = 0;
    for (auto [ctx, nq] : ctx_and_queries) used += (ctx + s.block_size - 1) / s.block_size;
    const int32_t n_blocks = used + 5;
    pool_ = std::make_unique<test::KVPool>(s.dtype, n_blocks, s.block_size, s.n_head_kv,
                                           s.head_dim);
    view_ = pool_->view;
    std::vector<int32_t> free(n_blocks);
    std::iota(free.begin(), free.end(), 0);
    std::shuffle(free.begin(), free.end(), std::mt19937_64(seed));
    size_t next = 0;
    for (auto [ctx, nq] : ctx_and_queries) {
      Seq sq{ctx, nq, {}, {}, {}, {}};
      for (int32_t b = 0; b < (ctx + s.block_size - 1) / s.block_size; ++b) {
        sq.table.push_back(free[next++]);
      }
      const size_t kv_row = size_t(s.n_head_kv) * s.head_dim;
      sq.k = random_floats(ctx * kv_row, ++seed);
      sq.v = random_floats(ctx * kv_row, ++seed);
      sq.q = random_floats(size_t(ctx) * s.n_head * s.head_dim, ++seed);
      seqs_.push_back(std::move(sq));
    }
  }

  const Shape& shape() const { return s_; }
  const PagedKVView& view() const { return view_; }
  const std::vector<Seq>& seqs() const { return seqs_; }

  AttentionParams params() const {
    return {s_.n_head, s_.n_head_kv, s_.head_dim, s_.head_dim,
            1.0f / std::sqrt(static_cast<float>(s_.head_dim))};
  }

  void write_all(Ops& ops) {
    std::vector<float> k, v;
    std::vector<int64_t> slots;
    for (const Seq& q : seqs_) {
      k.insert(k.end(), q.k.begin(), q.k.end());
      v.insert(v.end(), q.v.begin(), q.v.end());
      for (int32_t j = 0; j < q.context_len; ++j) {
        slots.push_back(int64_t{q.table[j / s_.block_size]} * s_.block_size + j % s_.block_size);
      }
    }
    const auto t = static_cast<int64_t>(slots.size());
    const int64_t cols = int64_t{s_.n_head_kv} * s_.head_dim;
    ops.write_paged_kv(Tensor::contiguous(DType::F32, {t, cols}, k.data()),
                       Tensor::contiguous(DType::F32, {t, cols}, v.data()), slots, view_);
  }

  int64_t q_row() const { return int64_t{s_.n_head} * s_.head_dim; }
  int64_t out_row() const { return int64_t{s_.n_head} * s_.head_dim; }

  // Runs queries [q0, q0 + n) of sequence i (context q0 + n) alone; returns (n, out_row) floats.
  std::vector<float> run_alone(Ops& ops, size_t i, int32_t q0, int32_t n) const {
    const Seq& sq = seqs_[i];
    std::vector<float> q(sq.q.begin() + q0 * q_row(), sq.q.begin() + (q0 + n) * q_row());
    std::vector<float> out(size_t(n) * out_row(), NAN);
    const SeqAttention one{0, n, q0 + n, sq.table.data()};
    ops.paged_attention(Tensor::contiguous(DType::F32, {n, s_.n_head, s_.head_dim}, q.data()),
                        view_, std::span(&one, 1), params(), out_tensor(out, n));
    return out;
  }

  Tensor out_tensor(std::vector<float>& out, int64_t rows) const {
    return Tensor::contiguous(DType::F32, {rows, out_row()}, out.data());
  }

 private:
  Shape s_;
  std::unique_ptr<test::KVPool> pool_;
  PagedKVView view_;
  std::vector<Seq> seqs_;
};

class PagedAttentionOpsTest : public ::testing::TestWithParam<Shape> {};

// Prefill chunks (one from the start, one later in a prompt) and decode tokens in one call,
// with rows that no sequence names in between.
TEST_P(PagedAttentionOpsTest, RaggedBatchEqualsEachSequenceAloneAndPlainAttention) {
  const Shape shape = GetParam();
  // The decode rows of {257, 1} and {700, 1} alone leave two threads too few items: their
  // spans are shared out (split-K), which must not change a bit.
  const std::vector<std::pair<int32_t, int32_t>> seq_shapes = {
      {40, 40}, {257, 1}, {100, 30}, {1, 1}, {16, 1}, {33, 5}, {700, 1}};
  const float kSentinel = 12345.0f;
  for (Isa isa : test::supported_isas()) {
    PagedBatch batch(shape, seq_shapes, 11);
    std::vector<float> first;  // the batch's output with one thread
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      CpuOps ops(pool, isa);
      batch.write_all(ops);
      // Rows: seq 0, two loose rows, then the others in reverse order.
      std::vector<SeqAttention> seqs;
      std::vector<float> q;
      int32_t row = 0;
      const auto add_seq = [&](size_t i) {
        const Seq& s = batch.seqs()[i];
        const int32_t q0 = s.context_len - s.n_query;
        q.insert(q.end(), s.q.begin() + q0 * batch.q_row(), s.q.end());
        seqs.push_back({row, s.n_query, s.context_len, s.table.data()});
        row += s.n_query;
      };
      add_seq(0);
      q.resize(q.size() + 2 * batch.q_row(), 7.0f);
      row += 2;
      for (size_t i = seq_shapes.size() - 1; i >= 1; --i) add_seq(i);
      std::vector<float> out(size_t(row) * batch.out_row(), kSentinel);
      ops.paged_attention(
          Tensor::contiguous(DType::F32, {row, shape.n_head, shape.head_dim}, q.data()),
          batch.view(), seqs, batch.params(), batch.out_tensor(out, row));

      const int64_t loose = seq_shapes[0].second * batch.out_row();
      for (int64_t i = loose; i < loose + 2 * batch.out_row(); ++i) {
        ASSERT_EQ(out[i], kSentinel) << "a row no sequence names was written";
      }
      if (first.empty()) {
        first = out;
      } else {
        EXPECT_TRUE(same_bits(out.data(), first.data(), out.size()))
            << isa_name(isa) << ": differs with " << threads << " threads";
      }

      for (size_t i = 0; i < seq_shapes.size(); ++i) {
        const Seq& s = batch.seqs()[i];
        const SeqAttention& at = seqs[i == 0 ? 0 : seq_shapes.size() - i];
        const float* got = out.data() + at.query_start * batch.out_row();
        const auto alone = batch.run_alone(ops, i, s.context_len - s.n_query, s.n_query);
        EXPECT_TRUE(same_bits(got, alone.data(), alone.size()))
            << isa_name(isa) << " seq " << i << ": batch differs from alone";

        // The plain attention op on a contiguous F16 copy (it rounds q and the probabilities
        // to F16, hence the tolerance); for F16 caches only (the kernel tests compare the
        // other dtypes with their decoded values).
        if (shape.dtype != KVDType::F16) continue;
        std::vector<uint16_t> kc(s.k.size()), vc(s.v.size());
        for (size_t j = 0; j < kc.size(); ++j) kc[j] = f32_to_fp16(s.k[j]);
        for (size_t j = 0; j < vc.size(); ++j) vc[j] = f32_to_fp16(s.v[j]);
        const int64_t cols = int64_t{shape.n_head_kv} * shape.head_dim;
        std::vector<int32_t> positions(s.n_query);
        std::iota(positions.begin(), positions.end(), s.context_len - s.n_query);
        std::vector<float> qa(s.q.end() - s.n_query * batch.q_row(), s.q.end());
        std::vector<float> plain(alone.size());
        ops.attention(
            Tensor::contiguous(DType::F32, {s.n_query, shape.n_head, shape.head_dim}, qa.data()),
            Tensor::contiguous(DType::F16, {s.context_len, cols}, kc.data()),
            Tensor::contiguous(DType::F16, {s.context_len, cols}, vc.data()), positions,
            batch.params(), batch.out_tensor(plain, s.n_query));
        for (size_t j = 0; j < plain.size(); ++j) {
          ASSERT_NEAR(got[j], plain[j], 2e-3) << isa_name(isa) << " seq " << i << " at " << j;
        }
      }
    }
  }
}

// Attention-mass tracking (SeqAttention::block_mass): the softmax weights per block, against
// float64 on the F32 rows as written (tolerance for F16 / quantized caches), adding
// to what the array held; each query head's weights sum to 1; the output is the same bits as
// untracked; the sums are the same bits at 1 and 2 threads and for a tracked sequence batched
// with untracked ones.
TEST_P(PagedAttentionOpsTest, BlockMassIsTheSoftmaxWeightPerBlock) {
  const Shape shape = GetParam();
  const int32_t ctx = 70;
  const int32_t nq = 9;
  const int32_t n_blocks = (ctx + shape.block_size - 1) / shape.block_size;
  const double tol = shape.dtype == KVDType::F32 ? 1e-5 : shape.dtype == KVDType::F16 ? 2e-3 : 0.1;
  for (Isa isa : test::supported_isas()) {
    PagedBatch batch(shape, {{ctx, nq}, {40, 3}}, 31);
    std::vector<float> first_mass;
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      CpuOps ops(pool, isa);
      batch.write_all(ops);
      const Seq& s = batch.seqs()[0];
      const Seq& other = batch.seqs()[1];
      const int32_t q0 = ctx - nq;
      std::vector<float> q(s.q.begin() + q0 * batch.q_row(), s.q.end());
      q.insert(q.end(), other.q.end() - 3 * batch.q_row(), other.q.end());
      std::vector<float> mass(n_blocks, 1.0f);  // sums are added to what is there
      const SeqAttention seqs[] = {{0, nq, ctx, s.table.data(), mass.data()},
                                   {nq, 3, 40, other.table.data()}};
      std::vector<float> out((nq + 3) * batch.out_row(), NAN);
      ops.paged_attention(
          Tensor::contiguous(DType::F32, {nq + 3, shape.n_head, shape.head_dim}, q.data()),
          batch.view(), seqs, batch.params(), batch.out_tensor(out, nq + 3));

      const auto alone = batch.run_alone(ops, 0, q0, nq);
      EXPECT_TRUE(same_bits(out.data(), alone.data(), alone.size()))
          << isa_name(isa) << ": tracking changed the output";

      // float64 weights from the rows as written (F32), per query and head.
      std::vector<double> want(n_blocks, 1.0);
      const int32_t group = shape.n_head / shape.n_head_kv;
      const double scale = 1.0 / std::sqrt(static_cast<double>(shape.head_dim));
      for (int32_t i = 0; i < nq; ++i) {
        const int32_t n_kv = q0 + i + 1;
        for (int32_t h = 0; h < shape.n_head; ++h) {
          const int32_t hk = h / group;
          std::vector<double> sc(n_kv);
          double mx = -INFINITY;
          for (int32_t j = 0; j < n_kv; ++j) {
            double dot = 0.0;
            for (int32_t d = 0; d < shape.head_dim; ++d) {
              dot += double{q[i * batch.q_row() + h * shape.head_dim + d]} *
                     s.k[(size_t(j) * shape.n_head_kv + hk) * shape.head_dim + d];
            }
            mx = std::max(mx, sc[j] = dot * scale);
          }
          double sum = 0.0;
          for (double& x : sc) sum += (x = std::exp(x - mx));
          for (int32_t j = 0; j < n_kv; ++j) want[j / shape.block_size] += sc[j] / sum;
        }
      }
      double total = 0.0;
      for (int32_t b = 0; b < n_blocks; ++b) {
        EXPECT_NEAR(mass[b], want[b], tol * (1.0 + want[b])) << isa_name(isa) << " block " << b;
        total += mass[b] - 1.0;
      }
      EXPECT_NEAR(total, double{nq} * shape.n_head, 1e-3 * nq * shape.n_head);
      if (first_mass.empty()) {
        first_mass = mass;
      } else {
        EXPECT_TRUE(same_bits(mass.data(), first_mass.data(), mass.size()))
            << isa_name(isa) << ": block mass differs with " << threads << " threads";
      }
    }
  }
}

// A prompt prefilled at once, in chunks of other sizes, or token by token: the same bits.
TEST_P(PagedAttentionOpsTest, PrefillChunkingDoesNotChangeBits) {
  const Shape shape = GetParam();
  const int32_t n = 100;
  for (Isa isa : test::supported_isas()) {
    PagedBatch batch(shape, {{n, n}}, 21);
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      CpuOps ops(pool, isa);
      batch.write_all(ops);
      const auto whole = batch.run_alone(ops, 0, 0, n);
      for (const std::vector<int32_t>& chunks :
           {std::vector<int32_t>{37, 1, 62}, std::vector<int32_t>{16, 16, 16, 16, 16, 20},
            std::vector<int32_t>{99, 1}}) {
        int32_t q0 = 0;
        for (int32_t len : chunks) {
          const auto part = batch.run_alone(ops, 0, q0, len);
          EXPECT_TRUE(same_bits(part.data(), whole.data() + q0 * batch.out_row(), part.size()))
              << isa_name(isa) << " chunk at " << q0 << " of " << len;
          q0 += len;
        }
        ASSERT_EQ(q0, n);
      }
      for (int32_t i = 0; i < n; i += 13) {
        const auto one = batch.run_alone(ops, 0, i, 1);
        EXPECT_TRUE(same_bits(one.data(), whole.data() + i * batch.out_row(), one.size()))
            << isa_name(isa) << " token " << i << " alone";
      }
    }
  }
}

// The pool's bytes after writing a sequence's K/V in one call, in chunks, or token by token
// in separate calls (as decode does): identical, whatever the dtype and the thread count.
TEST_P(PagedAttentionOpsTest, WritingInChunksGivesTheSameBytes) {
  const Shape shape = GetParam();
  const int32_t n = 70;
  for (Isa isa : test::supported_isas()) {
    std::vector<uint8_t> first;
    for (int threads : {1, 2}) {
      for (const std::vector<int32_t>& chunks :
           {std::vector<int32_t>{70}, std::vector<int32_t>{5, 30, 1, 34},
            std::vector<int32_t>(70, 1)}) {
        PagedBatch batch(shape, {{n, n}}, 31);
        ThreadPool pool(threads);
        CpuOps ops(pool, isa);
        const Seq& sq = batch.seqs()[0];
        const int64_t cols = int64_t{shape.n_head_kv} * shape.head_dim;
        int32_t t0 = 0;
        for (int32_t len : chunks) {
          std::vector<float> k(sq.k.begin() + t0 * cols, sq.k.begin() + (t0 + len) * cols);
          std::vector<float> v(sq.v.begin() + t0 * cols, sq.v.begin() + (t0 + len) * cols);
          std::vector<int64_t> slots;
          for (int32_t j = t0; j < t0 + len; ++j) {
            slots.push_back(int64_t{sq.table[j / shape.block_size]} * shape.block_size +
                            j % shape.block_size);
          }
          ops.write_paged_kv(Tensor::contiguous(DType::F32, {len, cols}, k.data()),
                             Tensor::contiguous(DType::F32, {len, cols}, v.data()), slots,
                             batch.view());
          t0 += len;
        }
        const PagedKVView& kv = batch.view();
        std::vector<uint8_t> bytes(kv.k, kv.k + kv.k_block_stride() * kv.n_blocks);
        bytes.insert(bytes.end(), kv.v, kv.v + kv.v_block_stride() * kv.n_blocks);
        bytes.insert(bytes.end(), kv.k_scales,
                     kv.k_scales + kv.k_scale_block_stride() * kv.n_blocks);
        bytes.insert(bytes.end(), kv.v_scales,
                     kv.v_scales + kv.v_scale_block_stride() * kv.n_blocks);
        if (first.empty()) {
          first = bytes;
        } else {
          EXPECT_EQ(bytes, first) << isa_name(isa) << " " << threads << " threads, "
                                  << chunks.size() << " chunks";
        }
      }
    }
  }
}

// GQA groups of 3, 1 and 4; multi-query attention with a group wider than the kernel's
// (split into several calls); block sizes 16, 1, 4, 32; every KV dtype.
INSTANTIATE_TEST_SUITE_P(
    Shapes, PagedAttentionOpsTest,
    ::testing::Values(Shape{6, 2, 64, 16}, Shape{4, 4, 80, 1}, Shape{8, 2, 32, 4},
                      Shape{12, 1, 32, 32}, Shape{3, 1, 128, 16},
                      Shape{6, 2, 64, 16, KVDType::BF16}, Shape{4, 4, 80, 1, KVDType::F32},
                      Shape{6, 2, 64, 16, KVDType::Int8}, Shape{8, 2, 32, 4, KVDType::Int8},
                      Shape{6, 2, 64, 16, KVDType::Fp8}, Shape{12, 1, 32, 32, KVDType::Fp8},
                      Shape{6, 2, 64, 16, KVDType::Q4}, Shape{3, 1, 128, 1, KVDType::Q4},
                      Shape{6, 2, 64, 16, {KVDType::Int8, KVDType::Q4}}),
    [](const ::testing::TestParamInfo<Shape>& info) {
      const Shape& s = info.param;
      std::string d = kv_dtypes_name(s.dtype);
      std::replace(d.begin(), d.end(), ',', '_');
      return d + "_heads" + std::to_string(s.n_head) + "_kv" + std::to_string(s.n_head_kv) +
             "_dim" + std::to_string(s.head_dim) + "_block" + std::to_string(s.block_size);
    });

}  // namespace
}  // namespace tokamak::paged_attention_ops_test
