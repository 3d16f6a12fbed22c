// ResponseChannel without sockets: the test plays the connection (take / written / finish /
// mark_gone) and counts the wakes it would have posted.

#include "server/http_response_channel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "http_test_server.h"
#include "server/http_wire.h"

namespace tokamak::server {
namespace {

using testing::text;

struct Harness {
  explicit Harness(RequestFraming framing = {}, size_t max_unsent = 1 << 20) {
    auto c = std::make_shared<ChannelConfig>();
    c->errors = default_error_response;
    c->common_headers = {{"Server", "tokamak"}};
    c->max_unsent_bytes = max_unsent;
    channel = std::make_shared<ResponseChannel>(c, framing, [this] { ++wakes; });
  }
  // Takes everything and reports it written, as the connection does.
  ResponseChannel::Output drain() {
    auto out = channel->take();
    channel->written(out.bytes.size());
    return out;
  }
  std::atomic<int> wakes = 0;
  std::shared_ptr<ResponseChannel> channel;
};

TEST(ResponseChannel, SendQueuesTheWholeResponse) {
  Harness h;
  h.channel->send(text("hello"));
  EXPECT_EQ(h.wakes.load(), 1);
  const auto out = h.drain();
  EXPECT_EQ(out.bytes,
            "HTTP/1.1 200 OK\r\nServer: tokamak\r\nContent-Type: text/plain\r\n"
            "Content-Length: 5\r\n\r\nhello");
  EXPECT_TRUE(out.complete);
  EXPECT_FALSE(out.close_after);
  EXPECT_FALSE(out.abort);
  h.channel->send(text("twice"));  // ignored
  EXPECT_TRUE(h.channel->take().bytes.empty());
}

TEST(ResponseChannel, ChunksQueuedBeforeATakeShareOneWake) {
  Harness h;
  h.channel->begin_stream(200, "text/event-stream", {});
  EXPECT_TRUE(h.channel->write("a"));
  EXPECT_TRUE(h.channel->write("bc"));
  EXPECT_EQ(h.wakes.load(), 1);
  auto out = h.drain();
  EXPECT_EQ(out.bytes.substr(out.bytes.find("\r\n\r\n") + 4), "1\r\na\r\n2\r\nbc\r\n");
  EXPECT_NE(out.bytes.find("Transfer-Encoding: chunked"), std::string::npos);
  EXPECT_FALSE(out.complete);
  EXPECT_TRUE(h.channel->write("d"));
  h.channel->end();
  EXPECT_EQ(h.wakes.load(), 2);
  out = h.drain();
  EXPECT_EQ(out.bytes, "1\r\nd\r\n0\r\n\r\n");
  EXPECT_TRUE(out.complete);
  EXPECT_FALSE(h.channel->write("e"));  // after end()
}

TEST(ResponseChannel, FramingFollowsTheRequest) {
  Harness close({.http10 = false, .keep_alive = false});
  close.channel->send(text("x"));
  auto out = close.drain();
  EXPECT_NE(out.bytes.find("Connection: close\r\n"), std::string::npos);
  EXPECT_TRUE(out.close_after);

  Harness keep10({.http10 = true, .keep_alive = true});
  keep10.channel->send(text("x"));
  out = keep10.drain();
  EXPECT_NE(out.bytes.find("Connection: keep-alive\r\n"), std::string::npos);
  EXPECT_FALSE(out.close_after);

  Harness stream10({.http10 = true, .keep_alive = true});
  stream10.channel->begin_stream(200, "text/plain", {});
  stream10.channel->write("raw");
  stream10.channel->end();
  out = stream10.drain();
  EXPECT_EQ(out.bytes.find("Transfer-Encoding"), std::string::npos);
  EXPECT_EQ(out.bytes.substr(out.bytes.size() - 3), "raw");  // no chunk framing
  EXPECT_TRUE(out.close_after);
  EXPECT_TRUE(out.complete);
}

TEST(ResponseChannel, UnsentBytesOverTheLimitMakeTheClientGone) {
  Harness h({}, /*max_unsent=*/100);
  h.channel->begin_stream(200, "text/plain", {});
  h.drain();                                             // the head is written
  EXPECT_TRUE(h.channel->write(std::string(300, 'a')));  // alone: goes out whatever its size
  h.drain();
  EXPECT_TRUE(h.channel->write(std::string(50, 'b')));
  EXPECT_FALSE(h.channel->write(std::string(60, 'c')));  // 50 + 60 waiting > 100
  EXPECT_TRUE(h.channel->client_gone());
  EXPECT_TRUE(h.channel->take().abort);
  EXPECT_FALSE(h.channel->write("d"));
}

TEST(ResponseChannel, OnDisconnectRunsOnceAndNeverAfterFinish) {
  Harness h;
  int calls = 0;
  h.channel->on_disconnect([&] { ++calls; });
  auto fn = h.channel->mark_gone();
  ASSERT_TRUE(fn);
  fn();
  EXPECT_FALSE(h.channel->mark_gone());
  EXPECT_TRUE(h.channel->client_gone());
  int late = 0;
  h.channel->on_disconnect([&] { ++late; });  // set after the client left: called at once
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(late, 1);

  Harness gone_first;
  EXPECT_FALSE(gone_first.channel->mark_gone());  // nothing set yet
  gone_first.channel->on_disconnect([&] { ++late; });
  EXPECT_EQ(late, 2);

  Harness done;
  done.channel->on_disconnect([&] { ++calls; });
  done.channel->send(text("ok"));
  done.drain();
  done.channel->finish();
  EXPECT_FALSE(done.channel->mark_gone());
  EXPECT_FALSE(done.channel->client_gone());
  EXPECT_EQ(calls, 1);
}

TEST(ResponseChannel, DroppedWriterAnswers500) {
  Harness h;
  auto writer = make_response_writer(h.channel);
  writer.reset();
  const auto out = h.drain();
  EXPECT_EQ(out.bytes.rfind("HTTP/1.1 500 Internal Server Error\r\n", 0), 0u);
  EXPECT_NE(out.bytes.find("without answering"), std::string::npos);
  EXPECT_TRUE(out.complete);

  Harness answered;
  writer = make_response_writer(answered.channel);
  writer->send(text("fine"));
  writer.reset();
  EXPECT_NE(answered.drain().bytes.find(" 200 OK"), std::string::npos);
}

TEST(ResponseChannel, FailureInAStreamAbortsIt) {
  Harness h;
  auto writer = make_response_writer(h.channel);
  writer->begin_stream(200, "text/plain");
  writer->write("part");
  writer.reset();  // dropped before end()
  EXPECT_TRUE(h.channel->take().abort);
}

TEST(ResponseChannel, DetachedChannelDropsWhatComesLater) {
  Harness h;
  EXPECT_FALSE(h.channel->mark_gone());
  h.channel->send(text("nobody listens"));
  h.channel->fail("nor here");
  EXPECT_TRUE(h.channel->take().bytes.empty());
  EXPECT_EQ(h.wakes.load(), 0);
}

TEST(ResponseChannel, WritersOnManyThreadsLoseNothing) {
  Harness h({}, /*max_unsent=*/size_t(1) << 30);
  h.channel->begin_stream(200, "text/plain", {});
  std::string taken = h.drain().bytes;
  std::atomic<bool> done = false;
  std::thread connection([&] {
    while (!done.load()) taken += h.drain().bytes;
    taken += h.drain().bytes;
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) ASSERT_TRUE(h.channel->write("0123456789"));
    });
  }
  for (auto& w : writers) w.join();
  done = true;
  connection.join();
  size_t chunks = 0;
  for (size_t pos = 0; (pos = taken.find("a\r\n0123456789\r\n", pos)) != std::string::npos; ++pos) {
    ++chunks;
  }
  EXPECT_EQ(chunks, 4000u);
}

}  // namespace
}  // namespace tokamak::server
