// The JSON of responses and stream events, built from hand-made engine outputs.

#include "server/openai_response.h"

#include <gtest/gtest.h>

#include "../engine/engine_test_util.h"

namespace tokamak::server {
namespace {

using nlohmann::json;

class OpenAIResponseTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = test::load_synthetic(test::small_spec()).release(); }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }

  static GenerationRequest request(Endpoint endpoint, int32_t n = 1, int32_t prompts = 1) {
    GenerationRequest r;
    r.endpoint = endpoint;
    r.n = n;
    for (int32_t i = 0; i < prompts; ++i) r.prompts.push_back({{1, 2, 3}, "abc"});
    return r;
  }
  static RequestOutput output(int32_t index, std::vector<int32_t> ids, std::string text,
                              std::optional<FinishReason> finish = std::nullopt) {
    RequestOutput o;
    o.index = index;
    o.token_ids = std::move(ids);
    o.text = std::move(text);
    o.finish = finish;
    return o;
  }
  // The JSON objects of "data: ...\n\n" events ([DONE] as the string "[DONE]").
  static std::vector<json> events(const std::string& sse) {
    std::vector<json> out;
    size_t pos = 0;
    while (pos < sse.size()) {
      EXPECT_EQ(sse.compare(pos, 6, "data: "), 0) << sse.substr(pos);
      const size_t end = sse.find("\n\n", pos);
      EXPECT_NE(end, std::string::npos);
      const std::string data = sse.substr(pos + 6, end - pos - 6);
      out.push_back(data == "[DONE]" ? json("[DONE]") : json::parse(data));
      pos = end + 2;
    }
    return out;
  }

  ResponseIdentity identity_{"cmpl-1", 1700000000, "tiny"};
  static test::TestModel* model_;
};

test::TestModel* OpenAIResponseTest::model_ = nullptr;

TEST_F(OpenAIResponseTest, WholeCompletion) {
  auto req = request(Endpoint::Completions, 2);
  ResponseBuilder b(req, *model_->tok, identity_);
  b.add(output(1, {10, 11}, "xy", FinishReason::Length), 1);
  b.add(output(0, {12}, "z"), 0);
  b.add(output(0, {13}, "w", FinishReason::Stop), 0);
  const json body = json::parse(b.body());
  EXPECT_EQ(body["id"], "cmpl-1");
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["created"], 1700000000);
  EXPECT_EQ(body["model"], "tiny");
  ASSERT_EQ(body["choices"].size(), 2u);
  EXPECT_EQ(body["choices"][0]["text"], "zw");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["choices"][1]["index"], 1);
  EXPECT_EQ(body["choices"][1]["finish_reason"], "length");
  EXPECT_TRUE(body["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(body["usage"], json({{"prompt_tokens", 3},
                                 {"completion_tokens", 4},
                                 {"total_tokens", 7},
                                 {"prompt_tokens_details", {{"cached_tokens", 0}}}}));
}

// usage.prompt_tokens_details.cached_tokens: each prompt's count once, from its first
// sample's final output (the other samples share its prompt blocks), whole and streamed.
TEST_F(OpenAIResponseTest, CachedTokensCountEachPromptOnce) {
  const auto finished = [](int32_t index, int32_t cached) {
    RequestOutput o = output(index, {7}, "x", FinishReason::Length);
    o.metrics = SampleMetrics{};
    o.metrics->cached_prompt_tokens = cached;
    return o;
  };
  auto req = request(Endpoint::Completions, 2, 2);
  ResponseBuilder whole(req, *model_->tok, identity_);
  whole.add(output(0, {5}, "y"), 0);
  whole.add(finished(0, 32), 0);
  whole.add(finished(1, 32), 1);
  whole.add(finished(1, 99), 3);  // the second prompt's sample 1: not counted
  whole.add(finished(0, 16), 2);
  EXPECT_EQ(whole.cached_tokens(), 48);
  EXPECT_EQ(json::parse(whole.body())["usage"]["prompt_tokens_details"]["cached_tokens"], 48);

  auto chat = request(Endpoint::Chat);
  chat.include_usage = true;
  ResponseBuilder streamed(chat, *model_->tok, identity_);
  streamed.stream_start();
  streamed.stream_event(output(0, {5}, "y"), 0);
  streamed.stream_event(finished(0, 2), 0);
  const auto usage = events(streamed.stream_usage());
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_EQ(usage[0]["usage"]["prompt_tokens_details"], json({{"cached_tokens", 2}}));
}

TEST_F(OpenAIResponseTest, PromptsTimesNChoicesCountPromptsOnce) {
  auto req = request(Endpoint::Completions, 2, 3);
  ResponseBuilder b(req, *model_->tok, identity_);
  EXPECT_EQ(b.n_choices(), 6);
  EXPECT_EQ(b.prompt_tokens(), 9);
}

TEST_F(OpenAIResponseTest, EchoPrecedesTheText) {
  auto req = request(Endpoint::Completions);
  req.echo = true;
  ResponseBuilder whole(req, *model_->tok, identity_);
  whole.add(output(0, {10}, "!", FinishReason::Stop), 0);
  EXPECT_EQ(json::parse(whole.body())["choices"][0]["text"], "abc!");
  ResponseBuilder streamed(req, *model_->tok, identity_);
  const auto start = events(streamed.stream_start());
  ASSERT_EQ(start.size(), 1u);
  EXPECT_EQ(start[0]["choices"][0]["text"], "abc");
}

TEST_F(OpenAIResponseTest, CompletionLogprobs) {
  auto req = request(Endpoint::Completions);
  req.params.logprobs = 1;
  ResponseBuilder b(req, *model_->tok, identity_);
  RequestOutput o = output(0, {300, 301}, "ab", FinishReason::Length);
  for (int32_t id : o.token_ids) {
    SampleLogprobs lp;
    lp.sampled = {id, -0.5f};
    lp.top_storage[0] = {id, -0.5f};
    lp.num_top = 1;
    o.logprobs.push_back(lp);
  }
  o.logprobs[1].sampled.logprob = -std::numeric_limits<float>::infinity();
  b.add(o, 0);
  const json lp = json::parse(b.body())["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 2u);
  EXPECT_EQ(lp["tokens"][0], model_->tok->token_to_piece(300));
  EXPECT_EQ(lp["token_logprobs"][0], -0.5);
  EXPECT_EQ(lp["token_logprobs"][1], -9999.0);  // -inf has no JSON form
  EXPECT_EQ(lp["top_logprobs"][0].size(), 1u);
  EXPECT_EQ(lp["text_offset"][0], 0);
  // Offsets count characters, as OpenAI's (Python) do.
  const std::string piece = model_->tok->token_to_piece(300);
  size_t chars = 0;
  for (unsigned char c : piece) chars += (c & 0xC0) != 0x80;
  EXPECT_EQ(lp["text_offset"][1], chars);
}

TEST_F(OpenAIResponseTest, ChatStream) {
  auto req = request(Endpoint::Chat);
  req.stream = true;
  req.include_usage = true;
  req.params.logprobs = 0;
  ResponseBuilder b(req, *model_->tok, {"chatcmpl-1", 1700000000, "tiny"});
  std::string sse = b.stream_start();
  RequestOutput first = output(0, {300}, "Par");
  first.logprobs.push_back({.sampled = {300, -0.25f}});
  sse += b.stream_event(first, 0);
  sse += b.stream_event(output(0, {301}, "", FinishReason::Stop), 0);
  sse += b.stream_usage();
  sse += ResponseBuilder::stream_done();
  const auto ev = events(sse);
  ASSERT_EQ(ev.size(), 5u);
  EXPECT_EQ(ev[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(ev[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(ev[1]["choices"][0]["delta"]["content"], "Par");
  EXPECT_TRUE(ev[1]["choices"][0]["finish_reason"].is_null());
  const json& content = ev[1]["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 1u);
  EXPECT_EQ(content[0]["logprob"], -0.25);
  EXPECT_TRUE(content[0]["bytes"].is_array());
  EXPECT_EQ(ev[2]["choices"][0]["delta"], json::object());
  EXPECT_EQ(ev[2]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(ev[3]["choices"], json::array());
  EXPECT_EQ(ev[3]["usage"]["completion_tokens"], 2);
  EXPECT_EQ(ev[4], "[DONE]");
}

TEST_F(OpenAIResponseTest, EmptyEventsAreSkipped) {
  auto req = request(Endpoint::Completions);
  ResponseBuilder b(req, *model_->tok, identity_);
  // A token whose text the detokenizer still holds back: nothing to send yet.
  EXPECT_EQ(b.stream_event(output(0, {10}, ""), 0), "");
  EXPECT_EQ(b.completion_tokens(), 1);
}

TEST_F(OpenAIResponseTest, InvalidUtf8BecomesReplacement) {
  auto req = request(Endpoint::Completions);
  ResponseBuilder b(req, *model_->tok, identity_);
  b.add(output(0, {10}, std::string("a\xe2\x82", 3), FinishReason::Stop), 0);
  const json body = json::parse(b.body());
  EXPECT_EQ(body["choices"][0]["text"], "a\xEF\xBF\xBD");
}

TEST_F(OpenAIResponseTest, StreamError) {
  const auto ev = events(ResponseBuilder::stream_error("boom", "server_shutdown"));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0]["error"]["message"], "boom");
  EXPECT_EQ(ev[0]["error"]["code"], "server_shutdown");
}

}  // namespace
}  // namespace tokamak::server
