#include "kernels/cpu/rope_table.h"

#include <cassert>

namespace tokamak::cpu {

void RopeTable::reserve(const RopeConfig& cfg, int32_t end) {
  assert(cfg.n_rot > 0 && end >= 0 && end <= kMaxPositions);
  if (cfg.n_rot != cfg_.n_rot || cfg.freq_base != cfg_.freq_base ||
      cfg.freq_scale != cfg_.freq_scale) {
    cfg_ = cfg;
    n_ = 0;
    rows_.clear();
  }
  if (end <= n_) return;
  rows_.resize(static_cast<size_t>(end) * static_cast<size_t>(cfg.n_rot));
  for (int32_t pos = n_; pos < end; ++pos) {
    rope_cos_sin(cfg, pos,
                 rows_.data() + static_cast<size_t>(pos) * static_cast<size_t>(cfg.n_rot));
  }
  n_ = end;
}

}  // namespace tokamak::cpu
