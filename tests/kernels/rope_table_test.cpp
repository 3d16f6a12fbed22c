// RopeTable (kernels/cpu/rope_table.h): its rows are rope_cos_sin's, bit for bit, as it grows
// and when the configuration changes.

#include "kernels/cpu/rope_table.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/cpu/attention.h"  // kMaxHeadDim

namespace tokamak::cpu {
namespace {

void expect_rows(const RopeTable& table, const RopeConfig& cfg, int32_t end) {
  float want[kMaxHeadDim];
  for (int32_t pos = 0; pos < end; ++pos) {
    rope_cos_sin(cfg, pos, want);
    ASSERT_EQ(std::memcmp(table.row(pos), want, sizeof(float) * cfg.n_rot), 0)
        << "n_rot " << cfg.n_rot << " base " << cfg.freq_base << " pos " << pos;
  }
}

TEST(RopeTableTest, RowsAreRopeCosSinAsTheTableGrows) {
  RopeTable table;
  const RopeConfig cfg{64, 10000.0f, 1.0f};
  table.reserve(cfg, 5);
  expect_rows(table, cfg, 5);
  table.reserve(cfg, 3);  // smaller: nothing is lost
  expect_rows(table, cfg, 5);
  table.reserve(cfg, 3000);
  expect_rows(table, cfg, 3000);
}

TEST(RopeTableTest, AnotherConfigurationStartsOver) {
  RopeTable table;
  table.reserve({64, 10000.0f, 1.0f}, 100);
  for (const RopeConfig& cfg : {RopeConfig{64, 100000.0f, 1.0f}, RopeConfig{64, 100000.0f, 0.25f},
                                RopeConfig{32, 100000.0f, 0.25f}}) {
    table.reserve(cfg, 200);
    expect_rows(table, cfg, 200);
  }
}

}  // namespace
}  // namespace tokamak::cpu
