#pragma once
// Helpers shared by the op tests: seeded random data and the kernel levels this CPU runs.

#include <cstdint>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "core/kv_dtype.h"
#include "core/paged_kv_view.h"

namespace tokamak::test {

inline std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Every kernel level this CPU supports, scalar first.
inline std::vector<Isa> supported_isas() {
  std::vector<Isa> out;
  for (Isa isa : kIsaLevels) {
    if (isa_supported(cpu_features(), isa)) out.push_back(isa);
  }
  return out;
}

// A zeroed pool of n_blocks blocks behind a PagedKVView (one layer; the same head dim for K
// and V): the buffers, comparable as a whole. Moving keeps the view valid (the buffers move);
// copying would not, so it is not allowed.
struct KVPool {
  PagedKVView view;
  std::vector<uint8_t> k, v, k_scales, v_scales;

  KVPool(KVDTypes dtypes, int32_t n_blocks, int32_t block_size, int32_t n_head_kv,
         int32_t head_dim) {
    view.dtypes = dtypes;
    view.n_blocks = n_blocks;
    view.block_size = block_size;
    view.n_head_kv = n_head_kv;
    view.head_dim_k = view.head_dim_v = head_dim;
    k.assign(view.k_block_stride() * n_blocks, 0);
    v.assign(view.v_block_stride() * n_blocks, 0);
    k_scales.assign(view.k_scale_block_stride() * n_blocks + 1, 0);
    v_scales.assign(view.v_scale_block_stride() * n_blocks + 1, 0);
    view.k = k.data();
    view.v = v.data();
    view.k_scales = k_scales.data();
    view.v_scales = v_scales.data();
  }
  KVPool(const KVPool&) = delete;
  KVPool& operator=(const KVPool&) = delete;
  KVPool(KVPool&&) = default;
  KVPool& operator=(KVPool&&) = default;

  bool operator==(const KVPool& o) const {
    return k == o.k && v == o.v && k_scales == o.k_scales && v_scales == o.v_scales;
  }
};

}  // namespace tokamak::test
