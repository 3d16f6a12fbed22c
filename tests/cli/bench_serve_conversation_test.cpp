// The multi-turn workload of `tokamak bench serve`: seeded conversations of exact lengths,
// each turn's messages carrying the whole history with the replies as received.

#include "cli/bench_serve_conversation.h"

#include <gtest/gtest.h>

#include "../engine/engine_test_util.h"
#include "core/error.h"

namespace tokamak::cli {
namespace {

using nlohmann::json;

class BenchConversationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = test::load_synthetic(test::small_spec()).release(); }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  const Tokenizer& tok() const { return *model_->tok; }

  static DatasetSpec spec(int32_t conversations, int32_t turns, int32_t system_len = 0) {
    DatasetSpec s;
    s.kind = DatasetKind::MultiTurn;
    s.conversations = conversations;
    s.turns = turns;
    s.system_len = system_len;
    s.input_len = 12;
    s.output_len = 5;
    s.seed = 7;
    return s;
  }

  static test::TestModel* model_;
};
test::TestModel* BenchConversationTest::model_ = nullptr;

TEST_F(BenchConversationTest, ConversationsAreSeededWithExactLengths) {
  const auto a = make_conversations(spec(3, 4, 20), tok());
  ASSERT_EQ(a.size(), 3u);
  for (const BenchConversation& c : a) {
    ASSERT_EQ(c.turns(), 4u);
    EXPECT_EQ(c.system, a[0].system);  // one system prompt for all
    EXPECT_EQ(c.system_tokens, 20);
    for (size_t t = 0; t < c.turns(); ++t) {
      EXPECT_EQ(c.user_tokens[t], 12);
      EXPECT_EQ(static_cast<int32_t>(tok().encode(c.users[t], false, true).size()), 12);
      EXPECT_EQ(c.output_len[t], 5);
    }
  }
  EXPECT_NE(a[0].users[0], a[1].users[0]);  // conversations do not share a first message
  EXPECT_NE(a[0].users[0], a[0].users[1]);
  const auto again = make_conversations(spec(3, 4, 20), tok());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(again[i].users, a[i].users);
  // The system prompt has its own stream: adding one leaves the user messages as they were.
  const auto bare = make_conversations(spec(3, 4), tok());
  EXPECT_TRUE(bare[0].system.empty());
  EXPECT_EQ(bare[0].system_tokens, 0);
  EXPECT_EQ(bare[2].users, a[2].users);
  DatasetSpec other = spec(3, 4);
  other.seed = 8;
  EXPECT_NE(make_conversations(other, tok())[0].users, bare[0].users);
}

TEST_F(BenchConversationTest, EachTurnCarriesTheWholeHistory) {
  const BenchConversation c = make_conversations(spec(1, 3, 10), tok()).front();
  const std::vector<std::string> replies = {"first reply", "second reply"};
  const json first = turn_messages(c, 0, {});
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0], json({{"role", "system"}, {"content", c.system}}));
  EXPECT_EQ(first[1], json({{"role", "user"}, {"content", c.users[0]}}));

  const json third = turn_messages(c, 2, replies);
  ASSERT_EQ(third.size(), 6u);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"system", c.system}, {"user", c.users[0]},          {"assistant", "first reply"},
      {"user", c.users[1]}, {"assistant", "second reply"}, {"user", c.users[2]}};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(third[i]["role"], expected[i].first) << i;
    EXPECT_EQ(third[i]["content"], expected[i].second) << i;
  }
  // Without a system prompt the history starts with the first user message.
  const BenchConversation bare = make_conversations(spec(1, 2), tok()).front();
  const json second = turn_messages(bare, 1, std::span(replies).first(1));
  ASSERT_EQ(second.size(), 3u);
  EXPECT_EQ(second[0]["role"], "user");
  EXPECT_EQ(second[1], json({{"role", "assistant"}, {"content", "first reply"}}));
}

TEST_F(BenchConversationTest, ContentTokensGrowByTheTurnAndItsReply) {
  const BenchConversation c = make_conversations(spec(1, 3, 10), tok()).front();
  EXPECT_EQ(turn_content_tokens(c, 0), 10 + 12);
  EXPECT_EQ(turn_content_tokens(c, 1), 10 + 12 + 5 + 12);
  EXPECT_EQ(turn_content_tokens(c, 2), 10 + 3 * 12 + 2 * 5);
}

TEST_F(BenchConversationTest, SettingsOutOfRangeAreRejected) {
  DatasetSpec s = spec(0, 2);
  EXPECT_THROW(make_conversations(s, tok()), Error);
  s = spec(1, 0);
  EXPECT_THROW(make_conversations(s, tok()), Error);
  s = spec(1, 1, -1);
  EXPECT_THROW(make_conversations(s, tok()), Error);
  EXPECT_THROW(make_dataset(spec(1, 1), tok()), Error);  // made turn by turn instead
}

}  // namespace
}  // namespace tokamak::cli
