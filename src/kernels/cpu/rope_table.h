#pragma once
// rope_cos_sin's rows for positions [0, n) of one RopeConfig, computed once and kept. A row is
// n_rot / 2 std::cos and std::sin calls, ~300 ns for n_rot = 64 on the Zen 4 guest, and every
// layer needed each token's row twice (queries, then keys): 1,920 rows a 32-sequence decode
// step of the default model. Rows are rope_cos_sin's own output, so results do not change by
// a bit.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/rope.h"

namespace tokamak::cpu {

class RopeTable {
 public:
  // Positions from this on are computed per call instead (a row is n_rot floats: 16 MiB at
  // n_rot = 64).
  static constexpr int32_t kMaxPositions = 1 << 16;

  // Makes the rows of positions [0, end) ready for cfg (computing those not yet there; a
  // different cfg starts over), end <= kMaxPositions. Not thread-safe: call it before
  // threads read rows.
  void reserve(const RopeConfig& cfg, int32_t end);

  // What rope_cos_sin(cfg, pos) writes, pos in [0, end) of the last reserve.
  const float* row(int32_t pos) const {
    return rows_.data() + static_cast<size_t>(pos) * static_cast<size_t>(cfg_.n_rot);
  }

 private:
  RopeConfig cfg_;
  int32_t n_ = 0;
  std::vector<float> rows_;
};

}  // namespace tokamak::cpu
