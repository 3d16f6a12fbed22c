// Per-turn figures of a multi-turn run, from hand-made request figures: counts, TTFT, prompt
// sizes and the hit rate, which is unknown ("-", null) when the server reports no cached
// tokens, never 0.

#include "cli/bench_serve_turns.h"

#include <gtest/gtest.h>

namespace tokamak::cli {
namespace {

using nlohmann::json;

RequestFigures done(double ttft, int64_t prompt, std::optional<int64_t> cached) {
  RequestFigures r;
  r.ttft_ms = ttft;
  r.e2e_ms = ttft + 10;
  r.prompt_tokens = prompt;
  r.output_tokens = 4;
  r.cached_tokens = cached;
  return r;
}

RequestFigures failed() {
  RequestFigures r;
  r.failure = "HTTP 500";
  return r;
}

TEST(BenchServeTurnsTest, FiguresPerTurn) {
  const std::vector<RequestFigures> requests = {
      done(10, 40, 0),  done(30, 50, 16),  // turn 1
      done(5, 100, 64), done(7, 120, 96),  // turn 2
      failed(),                            // turn 3
  };
  const std::vector<int32_t> turn_of = {1, 1, 2, 2, 3};
  const auto turns = turn_figures(requests, turn_of, 3);
  ASSERT_EQ(turns.size(), 3u);
  EXPECT_EQ(turns[0].turn, 1);
  EXPECT_EQ(turns[0].completed, 2);
  EXPECT_DOUBLE_EQ(turns[0].ttft_ms->mean, 20);
  EXPECT_DOUBLE_EQ(turns[0].ttft_ms->p50, 20);
  EXPECT_DOUBLE_EQ(*turns[0].prompt_tokens_mean, 45);
  EXPECT_DOUBLE_EQ(*turns[0].cache_hits.rate(), 16.0 / 90);
  EXPECT_DOUBLE_EQ(*turns[1].cache_hits.rate(), 160.0 / 220);
  EXPECT_EQ(turns[2].completed, 0);
  EXPECT_EQ(turns[2].failed, 1);
  EXPECT_FALSE(turns[2].ttft_ms);
  EXPECT_FALSE(turns[2].cache_hits.rate());

  const json run = {{"turns", turns_json(turns)}};
  EXPECT_DOUBLE_EQ(run["turns"][1]["cached_tokens_mean"].get<double>(), 80);
  EXPECT_TRUE(run["turns"][2]["prefix_hit_rate"].is_null());
  EXPECT_TRUE(run["turns"][2]["ttft_ms"].is_null());
  const std::string table = format_turns(run);
  EXPECT_NE(table.find("72.7%"), std::string::npos) << table;  // turn 2: 160 / 220
  EXPECT_NE(table.find("17.8%"), std::string::npos) << table;  // turn 1: 16 / 90
}

TEST(BenchServeTurnsTest, UnreportedCachedTokensAreUnknownNotZero) {
  const std::vector<RequestFigures> requests = {done(10, 40, std::nullopt),
                                                done(12, 90, std::nullopt)};
  const std::vector<int32_t> turn_of = {1, 2};
  const json run = {{"turns", turns_json(turn_figures(requests, turn_of, 2))}};
  for (const json& t : run["turns"]) {
    EXPECT_TRUE(t["prefix_hit_rate"].is_null());
    EXPECT_TRUE(t["cached_tokens_mean"].is_null());
  }
  const std::string table = format_turns(run);
  const std::string row2 = table.substr(table.rfind("\n2 "));
  EXPECT_EQ(row2.substr(row2.size() - 2), "-\n") << table;
  EXPECT_EQ(row2.find('%'), std::string::npos) << table;
  EXPECT_EQ(format_turns(json{{"label", "x"}}), "");  // not a multi-turn run
}

}  // namespace
}  // namespace tokamak::cli
