#include "cli/bench_report.h"

#include <gtest/gtest.h>

namespace tokamak::cli {
namespace {

TEST(BenchReportTest, TableAlignsFirstColumnLeftAndTheRestRight) {
  const std::string table = format_table(
      {{"", "mean", "p99"}, {"TTFT (ms)", "12.50", "130.00"}, {"ITL (ms)", "3.10", "4.00"}});
  EXPECT_EQ(table,
            "            mean     p99\n"
            "TTFT (ms)  12.50  130.00\n"
            "ITL (ms)    3.10    4.00\n");
}

TEST(BenchReportTest, ShortRowsKeepTheirCells) {
  EXPECT_EQ(format_table({{"requests", "8"}, {"a", "bb", "c"}}),
            "requests   8\n"
            "a         bb  c\n");
}

TEST(BenchReportTest, ValuesMayBeLeftAligned) {
  EXPECT_EQ(format_table({{"wall time", "1.5 s"}, {"requests/s", "12.25"}}, Align::Left),
            "wall time   1.5 s\n"
            "requests/s  12.25\n");
}

TEST(BenchReportTest, LatencyRowShowsDashesWithoutValues) {
  EXPECT_EQ(latency_row("TPOT (ms)", std::nullopt), (TableRow{"TPOT (ms)", "-", "-", "-", "-"}));
  const auto row = latency_row("E2E (ms)", summarize({1, 2, 3, 4}));
  EXPECT_EQ(row, (TableRow{"E2E (ms)", "2.50", "2.50", "3.97", "4.00"}));
}

TEST(BenchReportTest, SummaryJsonIsNullWithoutValues) {
  EXPECT_TRUE(to_json(std::nullopt).is_null());
  const auto j = to_json(summarize({2, 4}));
  EXPECT_EQ(j["count"], 2);
  EXPECT_DOUBLE_EQ(j["mean"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(j["max"].get<double>(), 4.0);
}

TEST(BenchReportTest, PeakResidentMemoryIsKnownOnLinux) {
  const auto bytes = peak_resident_bytes();
  ASSERT_TRUE(bytes.has_value());
  EXPECT_GT(*bytes, 0u);
}

}  // namespace
}  // namespace tokamak::cli
