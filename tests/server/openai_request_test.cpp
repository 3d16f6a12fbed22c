// Parsing of OpenAI request bodies: what is accepted, and that every bad field is a 400
// naming it.

#include "server/openai_request.h"

#include <gtest/gtest.h>

#include "../engine/engine_test_util.h"
#include "server/chat_prompt.h"

namespace tokamak::server {
namespace {

using nlohmann::json;

class OpenAIRequestTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = test::load_synthetic(test::small_spec()).release(); }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }

  OpenAIRequestTest()
      : prompter_(ChatTemplate::parse("{% for m in messages %}[{{ m.role }}]{{ m.content }}"
                                      "{% endfor %}[assistant]"),
                  *model_->tok) {
    ctx_ = {.tokenizer = model_->tok.get(),
            .chat = &prompter_,
            .model_id = "tiny",
            .max_model_len = 256};
  }

  // The ApiError that parsing `body` throws.
  ApiError completion_error(const json& body) {
    try {
      parse_completion_request(body, ctx_);
    } catch (const ApiError& e) {
      return e;
    }
    ADD_FAILURE() << "no error for " << body.dump();
    return ApiError(200, "none");
  }
  ApiError chat_error(const json& body) {
    try {
      parse_chat_request(body, ctx_);
    } catch (const ApiError& e) {
      return e;
    }
    ADD_FAILURE() << "no error for " << body.dump();
    return ApiError(200, "none");
  }

  static test::TestModel* model_;
  ChatPrompter prompter_;
  ModelContext ctx_;
};

test::TestModel* OpenAIRequestTest::model_ = nullptr;

TEST_F(OpenAIRequestTest, CompletionDefaultsAndFields) {
  const auto r = parse_completion_request({{"model", "tiny"},
                                           {"prompt", "hello"},
                                           {"temperature", 0.5},
                                           {"top_p", 0.9},
                                           {"top_k", 40},
                                           {"min_p", 0.05},
                                           {"seed", 42},
                                           {"stop", "x"},
                                           {"n", 2},
                                           {"presence_penalty", 0.5},
                                           {"frequency_penalty", -0.5},
                                           {"repetition_penalty", 1.1},
                                           {"logprobs", 3},
                                           {"ignore_eos", true},
                                           {"user", "u1"}},
                                          ctx_);
  EXPECT_EQ(r.endpoint, Endpoint::Completions);
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].tokens, model_->tok->encode("hello", true, true));
  EXPECT_EQ(r.prompts[0].text, "hello");
  EXPECT_FLOAT_EQ(r.params.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.params.top_p, 0.9f);
  EXPECT_EQ(r.params.top_k, 40);
  EXPECT_EQ(r.params.seed, 42u);
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.params.logprobs, 3);
  EXPECT_TRUE(r.params.ignore_eos);
  EXPECT_EQ(r.params.max_tokens, 16);  // OpenAI's default for completions
  EXPECT_EQ(r.user, "u1");
  EXPECT_FALSE(r.stream);
}

TEST_F(OpenAIRequestTest, PromptForms) {
  const std::vector<int32_t> ids = {5, 6, 7};
  EXPECT_EQ(parse_completion_request({{"prompt", ids}}, ctx_).prompts[0].tokens, ids);
  const auto two = parse_completion_request({{"prompt", {"a", "b"}}}, ctx_);
  ASSERT_EQ(two.prompts.size(), 2u);
  EXPECT_EQ(two.prompts[1].text, "b");
  const auto lists = parse_completion_request({{"prompt", {ids, {8, 9}}}}, ctx_);
  ASSERT_EQ(lists.prompts.size(), 2u);
  EXPECT_EQ(lists.prompts[1].tokens, (std::vector<int32_t>{8, 9}));
  EXPECT_FALSE(lists.prompts[1].text.empty());
}

TEST_F(OpenAIRequestTest, BadFieldsAreNamed) {
  struct Case {
    json body;
    std::string param;
  };
  const std::vector<Case> cases = {
      {{{"prompt", "a"}, {"max_tokens", "x"}}, "max_tokens"},
      {{{"prompt", "a"}, {"max_tokens", 0}}, "max_tokens"},
      {{{"prompt", "a"}, {"max_tokens", 2.5}}, "max_tokens"},
      {{{"prompt", "a"}, {"temperature", -1}}, "temperature"},
      {{{"prompt", "a"}, {"temperature", "hot"}}, "temperature"},
      {{{"prompt", "a"}, {"top_p", 2}}, "top_p"},
      {{{"prompt", "a"}, {"n", 0}}, "n"},
      {{{"prompt", "a"}, {"n", 1000}}, "n"},
      {{{"prompt", "a"}, {"logprobs", 50}}, "logprobs"},
      {{{"prompt", "a"}, {"stop", 5}}, "stop"},
      {{{"prompt", "a"}, {"stream", "yes"}}, "stream"},
      {{{"prompt", "a"}, {"stream_options", {{"include_usage", true}}}}, "stream_options"},
      {{{"prompt", "a"}, {"model", "gpt-4"}}, "model"},
      {{{"prompt", "a"}, {"presence_penalty", 3}}, "presence_penalty"},
      {{{"prompt", "a"}, {"logit_bias", {{"5", 1}}}}, "logit_bias"},
      {{{"prompt", "a"}, {"echo", true}, {"logprobs", 1}}, "echo"},
      {{{"prompt", json::array()}}, "prompt"},
      {{{"prompt", 5}}, "prompt"},
      {{{"prompt", {1, 100000}}}, "prompt"},
      {{{"prompt", {-1}}}, "prompt"},
      {{{"max_tokens", 5}}, "prompt"},
      {{{"prompt", "a"}, {"max_tokens", 1000}}, "max_tokens"},  // beyond max_model_len
      // 2^32 + 28 must not wrap onto token 28.
      {{{"prompt", "a"}, {"stop_token_ids", {4294967324LL}}}, "stop_token_ids"},
      {{{"prompt", "a"}, {"stop_token_ids", {-1}}}, "stop_token_ids"},
      {{{"prompt", "a"}, {"stop_token_ids", {600}}}, "stop_token_ids[0]"},
  };
  for (const Case& c : cases) {
    const ApiError e = completion_error(c.body);
    EXPECT_EQ(e.status(), 400) << c.body.dump();
    EXPECT_EQ(e.param(), c.param) << c.body.dump() << ": " << e.what();
    EXPECT_EQ(e.type(), "invalid_request_error");
  }
  EXPECT_EQ(completion_error({{"prompt", "a"}, {"model", "gpt-4"}}).code(), "model_not_found");
  EXPECT_EQ(completion_error({{"prompt", "a"}, {"max_tokens", 1000}}).code(),
            "context_length_exceeded");
}

TEST_F(OpenAIRequestTest, TooManyChoices) {
  const ApiError e = completion_error({{"prompt", std::vector<std::string>(20, "a")}, {"n", 16}});
  EXPECT_EQ(e.param(), "n");
}

TEST_F(OpenAIRequestTest, PromptAtTheContextLimit) {
  const ApiError e = completion_error({{"prompt", std::vector<int32_t>(256, 5)}});
  EXPECT_EQ(e.code(), "context_length_exceeded");
  EXPECT_EQ(e.param(), "prompt");
}

TEST_F(OpenAIRequestTest, ChatMessagesAndContentParts) {
  const auto r = parse_chat_request(
      {{"messages",
        {{{"role", "system"}, {"content", "be brief"}},
         {{"role", "user"},
          {"content",
           {{{"type", "text"}, {"text", "hi "}}, {{"type", "text"}, {"text", "you"}}}}}}},
       {"max_completion_tokens", 7},
       {"logprobs", true},
       {"top_logprobs", 2},
       {"stream", true},
       {"stream_options", {{"include_usage", true}}}},
      ctx_);
  EXPECT_EQ(r.endpoint, Endpoint::Chat);
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].tokens, prompter_.tokens({{"system", "be brief"}, {"user", "hi you"}}));
  EXPECT_EQ(r.params.max_tokens, 7);
  EXPECT_EQ(r.params.logprobs, 2);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  // No max tokens: until the context is full.
  EXPECT_FALSE(parse_chat_request({{"messages", {{{"role", "user"}, {"content", "x"}}}}}, ctx_)
                   .params.max_tokens);
}

TEST_F(OpenAIRequestTest, BadChatBodies) {
  EXPECT_EQ(chat_error({{"messages", 5}}).param(), "messages");
  EXPECT_EQ(chat_error({{"messages", {{{"role", "user"}}}}}).param(), "messages[0].content");
  // An assistant turn may come without content.
  EXPECT_NO_THROW(parse_chat_request(
      {{"messages", {{{"role", "user"}, {"content", "x"}}, {{"role", "assistant"}}}}}, ctx_));
  EXPECT_EQ(chat_error(json::object()).param(), "messages");
  EXPECT_EQ(chat_error({{"messages", json::array()}}).param(), "messages");
  EXPECT_EQ(chat_error({{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}).param(),
            "messages[0].role");
  EXPECT_EQ(chat_error({{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}})
                .param(),
            "messages[0].content");
  EXPECT_EQ(chat_error({{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"top_logprobs", 2}})
                .param(),
            "top_logprobs");
  EXPECT_EQ(chat_error({{"messages", {{{"role", "user"}, {"content", "x"}}}},
                        {"tools", {{{"type", "function"}}}}})
                .param(),
            "tools");
}

TEST_F(OpenAIRequestTest, ChatWithoutTemplate) {
  ctx_.chat = nullptr;
  EXPECT_EQ(chat_error({{"messages", {{{"role", "user"}, {"content", "x"}}}}}).param(), "messages");
}

TEST_F(OpenAIRequestTest, TemplateExceptionsAreClientErrors) {
  ChatPrompter strict(ChatTemplate::parse("{% if messages[0].role != 'user' %}"
                                          "{{ raise_exception('first must be user') }}"
                                          "{% endif %}x"),
                      *model_->tok);
  ctx_.chat = &strict;
  const ApiError e = chat_error({{"messages", {{{"role", "assistant"}, {"content", "x"}}}}});
  EXPECT_EQ(e.status(), 400);
  EXPECT_NE(std::string(e.what()).find("first must be user"), std::string::npos);
}

TEST_F(OpenAIRequestTest, JsonBodies) {
  EXPECT_EQ(parse_json_object(R"({"a": 1})")["a"], 1);
  for (const char* bad : {"", "{", "[1, 2]", "\"x\"", "{\"a\": }"}) {
    try {
      parse_json_object(bad);
      ADD_FAILURE() << bad;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
    }
  }
}

TEST_F(OpenAIRequestTest, TokenizeAndDetokenize) {
  const auto ids = parse_tokenize_request({{"prompt", "hello"}}, ctx_);
  EXPECT_EQ(ids, model_->tok->encode("hello", true, true));
  EXPECT_EQ(parse_tokenize_request({{"prompt", "hello"}, {"add_special_tokens", false}}, ctx_),
            model_->tok->encode("hello", false, true));
  EXPECT_EQ(parse_detokenize_request({{"tokens", ids}}, ctx_), ids);
  EXPECT_THROW(parse_detokenize_request({{"tokens", {99999}}}, ctx_), ApiError);
  EXPECT_THROW(parse_tokenize_request(json::object(), ctx_), ApiError);
}

}  // namespace
}  // namespace tokamak::server
