// Server-sent events cut anywhere, and the OpenAI chunks they carry.

#include "cli/bench_serve_sse.h"

#include <gtest/gtest.h>

namespace tokamak::cli {
namespace {

using namespace std::chrono_literals;

std::vector<std::string> data_of(const std::vector<SseEvent>& events) {
  std::vector<std::string> out;
  for (const SseEvent& e : events) out.push_back(e.data);
  return out;
}

// Feeds `stream` cut at `cut` (and at 2 * cut, ...) and returns every event's data.
std::vector<std::string> feed_in_pieces(const std::string& stream, size_t cut) {
  SseParser parser;
  std::vector<std::string> out;
  for (size_t at = 0; at < stream.size(); at += cut) {
    for (const std::string& d : data_of(parser.feed(std::string_view(stream).substr(at, cut)))) {
      out.push_back(d);
    }
  }
  return out;
}

TEST(SseParserTest, EventsEndAtABlankLine) {
  SseParser p;
  EXPECT_EQ(data_of(p.feed("data: {\"a\":1}\n\ndata: [DONE]\n\n")),
            (std::vector<std::string>{"{\"a\":1}", "[DONE]"}));
  EXPECT_TRUE(p.feed("data: half").empty());
  EXPECT_TRUE(p.feed(" way\n").empty());
  EXPECT_EQ(data_of(p.feed("\n")), (std::vector<std::string>{"half way"}));
}

TEST(SseParserTest, EveryCutGivesTheSameEvents) {
  const std::string lf =
      "data: one\n\n: keep-alive\n\ndata: two\ndata: lines\n\nevent: x\ndata:three\n\n";
  std::string crlf;
  for (char c : lf) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  const std::vector<std::string> expected = {"one", "two\nlines", "three"};
  for (const std::string& stream : {lf, crlf}) {
    for (size_t cut = 1; cut <= stream.size(); ++cut) {
      EXPECT_EQ(feed_in_pieces(stream, cut), expected) << "cut " << cut;
    }
  }
}

TEST(SseParserTest, LoneCarriageReturnsEndLines) {
  SseParser p;
  EXPECT_EQ(data_of(p.feed("data: a\r\rdata: b\r\r")), (std::vector<std::string>{"a", "b"}));
}

TEST(SseParserTest, EventNamesAndLlamaCppErrorLines) {
  SseParser p;
  const auto events =
      p.feed("event: ping\ndata: {}\n\nerror: {\"message\":\"boom\"}\n\ndata: x\n\n");
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].name, "ping");
  EXPECT_EQ(events[1].name, "error");
  EXPECT_EQ(events[1].data, "{\"message\":\"boom\"}");
  EXPECT_EQ(events[2].name, "message");
}

TEST(StreamReaderTest, CompletionChunksUsageAndDone) {
  const auto t0 = BenchClock::time_point{} + 1s;
  StreamReader r;
  r.feed("data: {\"choices\":[{\"index\":0,\"text\":\"Hel\",\"finish_reason\":null}]}\n\n", t0);
  r.feed("data: {\"choices\":[{\"index\":0,\"text\":\"\"}]}\n\ndata: {\"choices\":[{\"te",
         t0 + 5ms);
  r.feed("xt\":\"lo\",\"finish_reason\":\"length\"}]}\n\n", t0 + 9ms);
  r.feed(
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":2}}\n\n"
      "data: [DONE]\n\n",
      t0 + 10ms);
  const StreamTrace& t = r.trace();
  EXPECT_EQ(t.text, "Hello");
  // The empty chunk carries no text; the split one counts when its last byte arrived.
  EXPECT_EQ(t.content_times, (std::vector<BenchClock::time_point>{t0, t0 + 9ms}));
  EXPECT_EQ(t.prompt_tokens, 12);
  EXPECT_EQ(t.completion_tokens, 2);
  EXPECT_FALSE(t.cached_tokens);  // the server did not say: unknown, not 0
  EXPECT_EQ(t.finish_reason, "length");
  EXPECT_TRUE(t.done);
  EXPECT_FALSE(t.error);
  EXPECT_EQ(t.events, 5);
}

TEST(StreamReaderTest, CachedTokensFromPromptTokensDetails) {
  const auto t0 = BenchClock::time_point{} + 1s;
  StreamReader r;
  r.feed(
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":2,"
      "\"prompt_tokens_details\":{\"cached_tokens\":32}}}\n\n",
      t0);
  EXPECT_EQ(r.trace().cached_tokens, 32);
  StreamReader null_details;  // vLLM without --enable-prompt-tokens-details
  null_details.feed(
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"prompt_tokens_details\":null}}"
      "\n\n",
      t0);
  EXPECT_EQ(null_details.trace().prompt_tokens, 40);
  EXPECT_FALSE(null_details.trace().cached_tokens);
}

TEST(StreamReaderTest, ChatDeltas) {
  const auto t0 = BenchClock::time_point{} + 1s;
  StreamReader r;
  r.feed("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n", t0);
  r.feed("data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}],\"usage\":null}\n\n", t0 + 3ms);
  r.feed("data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n", t0 + 4ms);
  EXPECT_EQ(r.trace().text, "Hi");
  EXPECT_EQ(r.trace().content_times, (std::vector<BenchClock::time_point>{t0 + 3ms}));
  EXPECT_FALSE(r.trace().completion_tokens);
  EXPECT_EQ(r.trace().finish_reason, "stop");
}

TEST(StreamReaderTest, ErrorsInTheStream) {
  const auto t = BenchClock::now();
  StreamReader openai;
  openai.feed("data: {\"error\":{\"message\":\"server is stopping\",\"type\":\"x\"}}\n\n", t);
  EXPECT_EQ(openai.trace().error, "server is stopping");
  StreamReader llama;
  llama.feed("error: {\"code\":500,\"message\":\"slot lost\"}\n\n", t);
  EXPECT_EQ(llama.trace().error, "slot lost");
  StreamReader garbage;
  garbage.feed("data: <html>\n\n", t);
  EXPECT_EQ(garbage.trace().error, "an event that is not a JSON object: <html>");
}

}  // namespace
}  // namespace tokamak::cli
