// The ChatTemplate facade: the variables apply() passes, render() from JSON, errors,
// runaway protection, and rendering one template from many threads.

#include "tokenizer/chat/chat_template.h"

#include <gtest/gtest.h>

#include <thread>

#include "jinja_test_util.h"

namespace tokamak {
namespace {

using test::render_error;

constexpr const char* kChatML =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

TEST(ChatTemplate, AppliesMessagesAndGenerationPrompt) {
  const ChatTemplate tmpl = ChatTemplate::parse(kChatML);
  const std::vector<ChatMessage> messages = {{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(tmpl.apply(messages, true, "", ""),
            "<|im_start|>system\nBe "
            "brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(tmpl.apply(messages, false, "", ""),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplate, PassesTheVariablesTransformersPasses) {
  const ChatTemplate tmpl = ChatTemplate::parse(
      "{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|{{ tools is none }}|{{ "
      "documents is none }}|"
      "{{ messages|length }}|{{ messages[0]|tojson }}|{{ custom }}");
  EXPECT_EQ(tmpl.apply({{"user", "x"}}, true, "<s>", "</s>", nlohmann::json{{"custom", 7}}),
            "<s>|</s>|True|True|True|1|{\"role\": \"user\", \"content\": \"x\"}|7");
  // Extra variables override the defaults (e.g. tools).
  const ChatTemplate tools = ChatTemplate::parse("{{ tools|length if tools else 'none' }}");
  EXPECT_EQ(
      tools.apply({}, false, "", "", nlohmann::json{{"tools", nlohmann::json::array({1, 2})}}),
      "2");
  EXPECT_THROW(tmpl.apply({}, false, "", "", nlohmann::json::array()), Error);
}

TEST(ChatTemplate, OrderedExtrasKeepKeyOrderForTojson) {
  const ChatTemplate tmpl = ChatTemplate::parse("{{ tools[0]|tojson }}");
  const char* tools = R"({"tools": [{"name": "f", "description": "d", "parameters": {}}]})";
  EXPECT_EQ(tmpl.apply({}, false, "", "", nlohmann::ordered_json::parse(tools)),
            "{\"name\": \"f\", \"description\": \"d\", \"parameters\": {}}");
  EXPECT_EQ(tmpl.apply({}, false, "", "", nlohmann::json::parse(tools)),
            "{\"description\": \"d\", \"name\": \"f\", \"parameters\": {}}");
}

TEST(ChatTemplate, ContentIsDataNotTemplateCode) {
  const ChatTemplate tmpl = ChatTemplate::parse(kChatML);
  EXPECT_EQ(tmpl.apply({{"user", "{{ 7*7 }} {% if true %}x{% endif %}"}}, false, "", ""),
            "<|im_start|>user\n{{ 7*7 }} {% if true %}x{% endif %}<|im_end|>\n");
}

TEST(ChatTemplate, RenderMapsJsonToValues) {
  const ChatTemplate tmpl =
      ChatTemplate::parse("{{ a }} {{ b }} {{ c }} {{ d }} {{ e }} {{ f|tojson }}");
  EXPECT_EQ(tmpl.render(nlohmann::json::parse(
                R"({"a": null, "b": true, "c": 3, "d": 2.5, "e": "s", "f": {"y": 1, "x": [1]}})")),
            "None True 3 2.5 s {\"x\": [1], \"y\": 1}");  // nlohmann::json sorts keys
  EXPECT_EQ(tmpl.render(nlohmann::ordered_json::parse(
                R"({"a": null, "b": true, "c": 3, "d": 2.5, "e": "s", "f": {"y": 1, "x": [1]}})")),
            "None True 3 2.5 s {\"y\": 1, \"x\": [1]}");  // ordered_json keeps them
  EXPECT_THROW(tmpl.render(nlohmann::json::array()), Error);
}

TEST(ChatTemplate, RaiseExceptionIsDistinguishable) {
  const ChatTemplate tmpl = ChatTemplate::parse(
      "{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
      "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') "
      "}}{% endif %}{% endfor %}");
  try {
    tmpl.apply({{"user", "a"}, {"user", "b"}}, true, "", "");
    FAIL() << "expected ChatTemplateRaised";
  } catch (const ChatTemplateRaised& e) {
    EXPECT_STREQ(e.what(), "Conversation roles must alternate user/assistant/user/assistant/...");
  }
  EXPECT_NO_THROW(tmpl.apply({{"user", "a"}, {"assistant", "b"}}, true, "", ""));
}

TEST(ChatTemplateLimits, OutputSize) {
  ChatTemplateOptions options;
  options.limits.max_output_bytes = 1000;
  EXPECT_EQ(render_error("{% for i in range(2000) %}x{% endfor %}", "{}", options),
            "chat template: output exceeds the limit of 1000 bytes at line 1, column 27");
  EXPECT_NE(render_error("{% set s = 'x' * 20000000 %}").find("output exceeds the limit"),
            std::string::npos);
  EXPECT_EQ(test::render("{% for i in range(900) %}x{% endfor %}", "{}", options).size(), 900u);
}

TEST(ChatTemplateLimits, LoopIterations) {
  EXPECT_EQ(
      render_error("{% for x in range(100) %}{% for y in range(100) %}{% for z in range(200) %}"
                   "{% endfor %}{% endfor %}{% endfor %}"),
      "chat template: more than 1000000 loop iterations at line 1, column 68");
  ChatTemplateOptions options;
  options.limits.max_loop_iterations = 10;
  EXPECT_NE(render_error("{% for x in range(11) %}{% endfor %}", "{}", options)
                .find("more than 10 loop iterations"),
            std::string::npos);
}

TEST(ChatTemplateLimits, RecursionDepth) {
  EXPECT_EQ(render_error("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"),
            "chat template: macro calls nested deeper than 64 at line 1, column 20");
  EXPECT_NE(render_error("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = "
                         "[ns.x] %}{% endfor %}")
                .find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(render_error("{% set ns = namespace() %}{% set ns.me = [ns] %}")
                .find("a namespace cannot contain itself"),
            std::string::npos);
}

TEST(ChatTemplate, FreesReferenceCycles) {
  // A namespace reachable from a function stored in it, and a macro stored in a scope it
  // captures: both are cycles; the sanitizer build checks that nothing leaks.
  EXPECT_EQ(test::render("{% set ns = namespace() %}{% set d = {'n': ns} %}{% set ns.f = d.get "
                         "%}{{ ns.f('n') is defined }}"),
            "True");
  EXPECT_EQ(test::render("{% macro m() %}x{% endmacro %}{% set ns = namespace(m=m) %}{{ ns.m() }}"),
            "x");
}

TEST(ChatTemplate, RendersConcurrentlyFromManyThreads) {
  const ChatTemplate tmpl = ChatTemplate::parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
      "{{ m.role }}:{{ m.content|upper }};{% endfor %}{{ ns.n }}");
  std::vector<std::thread> threads;
  std::vector<std::string> results(8);
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      std::string last;
      for (int i = 0; i < 200; ++i) {
        std::string content = "t";
        content += std::to_string(t);
        last = tmpl.apply({{"user", content}, {"assistant", "ok"}}, false, "", "");
      }
      results[t] = last;
    });
  }
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < results.size(); ++t) {
    std::string want = "user:T";
    want += std::to_string(t);
    want += ";assistant:OK;2";
    EXPECT_EQ(results[t], want);
  }
}

TEST(ChatTemplate, KeepsItsSource) {
  const ChatTemplate tmpl = ChatTemplate::parse(kChatML);
  EXPECT_EQ(tmpl.source(), kChatML);
  const ChatTemplate copy = tmpl;  // cheap, shares the parsed tree
  EXPECT_EQ(copy.apply({{"user", "x"}}, false, "", ""), tmpl.apply({{"user", "x"}}, false, "", ""));
}

}  // namespace
}  // namespace tokamak
