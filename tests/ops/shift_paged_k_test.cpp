// Ops::shift_paged_k: keys RoPE'd at p + delta and shifted by -delta equal keys RoPE'd at p,
// in every KV dtype, to its rounding; values and rows outside the range are untouched.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/paged_kv_view.h"
#include "core/thread_pool.h"
#include "kernels/cpu/kv_codec.h"
#include "ops/cpu_ops.h"
#include "ops_test_util.h"

namespace tokamak {
namespace {

TEST(ShiftPagedKTest, ShiftedKeysEqualKeysRotatedAtTheNewPositions) {
  const int32_t n_head_kv = 2, hd = 64, bs = 4, n_rows = 10, first = 3, delta = 37;
  const RopeParams rope{hd, 10000.0f, 1.0f};
  ThreadPool pool(2);
  CpuOps ops(pool, Isa::Scalar);
  const auto x = test::random_floats(size_t(n_rows + first) * n_head_kv * hd, 5, -2.0f, 2.0f);
  const std::vector<int32_t> blocks = {3, 0, 2, 5};  // 16 rows; rows 3 .. 12 shifted
  for (KVDType dtype :
       {KVDType::F32, KVDType::F16, KVDType::BF16, KVDType::Int8, KVDType::Fp8, KVDType::Q4}) {
    PagedKVView kv;
    kv.dtypes = dtype;
    kv.n_blocks = 6;
    kv.block_size = bs;
    kv.n_head_kv = n_head_kv;
    kv.head_dim_k = kv.head_dim_v = hd;
    std::vector<uint8_t> k(kv.k_block_stride() * 6), v(kv.v_block_stride() * 6, 0x5a);
    std::vector<uint8_t> ks(kv.k_scale_block_stride() * 6 + 1), vs(ks.size(), 0x5a);
    kv.k = k.data();
    kv.v = v.data();
    kv.k_scales = ks.data();
    kv.v_scales = vs.data();
    // Row r holds x_r rotated to position r + delta (rows before `first`: position r).
    const auto rotated = [&](int32_t r, int32_t pos) {
      std::vector<float> row(x.begin() + size_t(r) * n_head_kv * hd,
                             x.begin() + size_t(r + 1) * n_head_kv * hd);
      ops.rope(Tensor::contiguous(DType::F32, {1, n_head_kv, hd}, row.data()), {&pos, 1}, rope);
      return row;
    };
    for (int32_t r = 0; r < first + n_rows; ++r) {
      const auto row = rotated(r, r < first ? r : r + delta);
      for (int32_t h = 0; h < n_head_kv; ++h) {
        const int32_t b = blocks[size_t(r / bs)];
        cpu::kv_write_row(dtype, row.data() + h * hd, hd, kv.k_tile(b, h), kv.k_tile_scales(b, h),
                          r % bs);
      }
    }
    const std::vector<uint8_t> v_before = v;
    std::vector<float> untouched(hd);
    cpu::kv_decode_row(dtype, kv.k_tile(blocks[0], 1), kv.k_tile_scales(blocks[0], 1), hd, 1,
                       untouched.data());
    ops.shift_paged_k(kv, blocks, first, n_rows, -delta, rope);
    EXPECT_EQ(v, v_before) << "values moved";
    std::vector<float> got(hd);
    for (int32_t r = 0; r < first + n_rows; ++r) {
      const auto want = rotated(r, r);
      for (int32_t h = 0; h < n_head_kv; ++h) {
        const int32_t b = blocks[size_t(r / bs)];
        cpu::kv_decode_row(dtype, kv.k_tile(b, h), kv.k_tile_scales(b, h), hd, r % bs, got.data());
        float row_max = 0.0f;
        for (int32_t i = 0; i < hd; ++i) row_max = std::fmax(row_max, std::fabs(want[h * hd + i]));
        // Two encodings (before and after the turn) of the dtype's step, and float rounding.
        const float step = dtype == KVDType::F32    ? 1e-5f
                           : dtype == KVDType::F16  ? row_max * 0x1p-10f
                           : dtype == KVDType::BF16 ? row_max * 0x1p-7f
                           : dtype == KVDType::Int8 ? row_max / 127.0f
                           : dtype == KVDType::Fp8  ? row_max / 8.0f
                                                    : row_max / 4.0f;
        for (int32_t i = 0; i < hd; ++i) {
          ASSERT_NEAR(got[i], want[h * hd + i], 2.0f * step + 1e-5f)
              << kv_dtype_name(dtype) << " row " << r << " head " << h << " dim " << i;
        }
      }
    }
    std::vector<float> after(hd);
    cpu::kv_decode_row(dtype, kv.k_tile(blocks[0], 1), kv.k_tile_scales(blocks[0], 1), hd, 1,
                       after.data());
    EXPECT_EQ(after, untouched) << "a row before the range moved";
  }
}

}  // namespace
}  // namespace tokamak
