#include "engine/kv_heavy.h"

#include <algorithm>
#include <cassert>
#include <numeric>

namespace tokamak {

std::vector<int32_t> heavy_hitter_drops(std::span<const float> mass, int32_t first, int32_t end,
                                        int32_t n_drop) {
  assert(0 <= first && first <= end && 0 <= n_drop && n_drop <= end - first);
  const auto mass_of = [&](int32_t i) {
    return static_cast<size_t>(i) < mass.size() ? mass[static_cast<size_t>(i)] : 0.0f;
  };
  std::vector<int32_t> order(static_cast<size_t>(end - first));
  std::iota(order.begin(), order.end(), first);
  // Lightest first; stable, so equal masses keep index order (the older goes first).
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return mass_of(a) < mass_of(b); });
  order.resize(static_cast<size_t>(n_drop));
  std::sort(order.begin(), order.end());
  return order;
}

}  // namespace tokamak
