// HttpServer responses that a handler gives later or in pieces, from other threads:
// chunked streams, client disconnects (on_disconnect, write() false), exceptions, dropped
// writers, slow readers, and stop() while responses are pending.

#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "http_test_client.h"
#include "http_test_server.h"
#include "server/http_server.h"

namespace tokamak::server::http_streaming_test {
namespace {

using namespace testing;
using namespace std::chrono_literals;

// Hands the writers of a route's requests to the test thread, which then answers.
class WriterBox {
 public:
  Handler handler() {
    return [this](const HttpRequest&, std::shared_ptr<ResponseWriter> w) {
      std::lock_guard lock(mu_);
      writers_.push_back(std::move(w));
      cv_.notify_all();
    };
  }
  std::shared_ptr<ResponseWriter> take(Ms timeout = 3000ms) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return !writers_.empty(); })) return nullptr;
    auto w = std::move(writers_.front());
    writers_.pop_front();
    return w;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<ResponseWriter>> writers_;
};

// Threads started by handlers, joined by the test.
class Workers {
 public:
  template <class F>
  void spawn(F f) {
    std::lock_guard lock(mu_);
    threads_.emplace_back(std::move(f));
  }
  ~Workers() {
    std::lock_guard lock(mu_);
    for (auto& t : threads_) t.join();
  }

 private:
  std::mutex mu_;
  std::vector<std::thread> threads_;
};

struct Fixture {
  explicit Fixture(HttpServerOptions opts = test_options())
      : server(std::make_unique<HttpServer>(std::move(opts))) {
    server->route("GET", "/wait", box.handler());
    server->route("GET", "/hello", [](const HttpRequest&, std::shared_ptr<ResponseWriter> w) {
      w->send(text("hello"));
    });
  }
  uint16_t start() {
    server->start();
    return server->port();
  }
  WriterBox box;  // outlives the server: its handler refers to it
  std::unique_ptr<HttpServer> server;
};

TEST(HttpStreaming, ChunksArriveBeforeTheStreamEnds) {
  Fixture f;
  TestClient c(f.start());
  c.send(get_request("/wait"));
  auto w = f.box.take();
  ASSERT_TRUE(w);
  w->begin_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}});
  EXPECT_TRUE(w->write("data: 1\n\n"));
  auto head = c.read_head();
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->header("transfer-encoding"), "chunked");
  EXPECT_EQ(head->header("content-type"), "text/event-stream");
  EXPECT_EQ(head->header("cache-control"), "no-cache");
  // The first chunk is there while the writer is still held and the stream open.
  EXPECT_EQ(c.read_chunk(), "data: 1\n\n");

  EXPECT_TRUE(w->write("data: 2\n\n"));
  EXPECT_TRUE(w->write(""));  // nothing to send; must not end the chunked body
  EXPECT_TRUE(w->write("data: 3\n\n"));
  w->end();
  EXPECT_EQ(c.read_chunk(), "data: 2\n\n");
  EXPECT_EQ(c.read_chunk(), "data: 3\n\n");
  EXPECT_EQ(c.read_chunk(), "");
  EXPECT_FALSE(w->client_gone());
  EXPECT_FALSE(w->write("late"));
  w.reset();

  c.send(get_request("/hello"));  // the connection serves the next request
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "hello");
}

TEST(HttpStreaming, RequestSentWhileAResponseIsPendingIsServedAfterIt) {
  Fixture f;
  TestClient c(f.start());
  c.send(get_request("/wait"));
  auto w = f.box.take();
  ASSERT_TRUE(w);
  c.send(get_request("/hello"));  // read by the disconnect watch, kept for later
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(w->client_gone());
  w->begin_stream(200, "text/plain");
  w->write("first");
  w->end();
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "first");
  r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "hello");
}

TEST(HttpStreaming, LargeResponseArrivesWhole) {
  Fixture f;
  TestClient c(f.start());
  std::string big(8 << 20, 'q');
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = char('a' + (i / 4096) % 26);
  c.send(get_request("/wait"));
  auto w = f.box.take();
  ASSERT_TRUE(w);
  w->send(text(big));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->body == big);
  c.send(get_request("/hello"));
  r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "hello");
}

TEST(HttpStreaming, Http10StreamEndsAtClose) {
  Fixture f;
  TestClient c(f.start());
  c.send("GET /wait HTTP/1.0\r\n\r\n");
  auto w = f.box.take();
  ASSERT_TRUE(w);
  w->begin_stream(200, "text/plain");
  w->write("ab");
  w->write("cd");
  w->end();
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->header("transfer-encoding"));
  EXPECT_EQ(r->header("connection"), "close");
  EXPECT_EQ(r->body, "abcd");
}

TEST(HttpStreaming, DisconnectDuringAStreamFiresOnDisconnectOnce) {
  Fixture f;
  TestClient c(f.start());
  c.send(get_request("/wait"));
  auto w = f.box.take();
  ASSERT_TRUE(w);
  std::atomic<int> calls = 0;
  Event gone;
  w->on_disconnect([&] {
    ++calls;
    gone.set();
  });
  w->begin_stream(200, "text/event-stream");
  EXPECT_TRUE(w->write("data: 1\n\n"));
  ASSERT_TRUE(c.read_head());
  ASSERT_EQ(c.read_chunk(), "data: 1\n\n");
  c.close();
  ASSERT_TRUE(gone.wait());
  EXPECT_TRUE(w->client_gone());
  EXPECT_FALSE(w->write("data: 2\n\n"));
  w->end();
  EXPECT_TRUE(eventually([&] { return f.server->open_connections() == 0; }));
  EXPECT_EQ(calls.load(), 1);
}

TEST(HttpStreaming, DisconnectWhileTheHandlerWorksFiresOnDisconnect) {
  Fixture f;
  TestClient c(f.start());
  c.send(get_request("/wait"));
  auto w = f.box.take();
  ASSERT_TRUE(w);
  Event gone;
  w->on_disconnect([&] { gone.set(); });
  EXPECT_FALSE(w->client_gone());
  c.close();
  ASSERT_TRUE(gone.wait());
  EXPECT_TRUE(w->client_gone());
  w->send(text("too late"));  // dropped, harmless

  // Set after the client left: runs at once.
  Event late;
  w->on_disconnect([&] { late.set(); });
  EXPECT_TRUE(late.is_set());
}

TEST(HttpStreaming, HandlerAnswersLaterFromAnotherThread) {
  Workers workers;
  HttpServer server(test_options());
  server.route("GET", "/later", [&](const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
    workers.spawn([w, query = req.query] {
      std::this_thread::sleep_for(20ms);
      w->send(text("later " + query));
    });
  });
  server.start();
  TestClient c(server.port());
  for (int i = 0; i < 2; ++i) {
    c.send(get_request("/later?" + std::to_string(i)));
    auto r = c.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "later " + std::to_string(i));
  }
}

TEST(HttpStreaming, HandlerExceptionGets500AndTheConnectionLivesOn) {
  Fixture f;
  f.server->route("GET", "/throw", [](const HttpRequest&, std::shared_ptr<ResponseWriter>) {
    throw std::runtime_error("boom");
  });
  f.server->route("GET", "/throw-int",
                  [](const HttpRequest&, std::shared_ptr<ResponseWriter>) { throw 42; });
  f.server->route("GET", "/send-then-throw",
                  [](const HttpRequest&, std::shared_ptr<ResponseWriter> w) {
                    w->send(text("sent"));
                    throw std::runtime_error("after the answer");
                  });
  TestClient c(f.start());
  c.send(get_request("/throw"));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  EXPECT_NE(r->body.find("boom"), std::string::npos) << r->body;

  c.send(get_request("/throw-int"));
  r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);

  c.send(get_request("/send-then-throw"));
  r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "sent");

  c.send(get_request("/hello"));
  r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST(HttpStreaming, ExceptionInTheMiddleOfAStreamCutsTheConnection) {
  Fixture f;
  f.server->route("GET", "/half", [](const HttpRequest&, std::shared_ptr<ResponseWriter> w) {
    w->begin_stream(200, "text/plain");
    w->write("first");
    throw std::runtime_error("lost the engine");
  });
  const uint16_t port = f.start();
  TestClient c(port);
  c.send(get_request("/half"));
  EXPECT_FALSE(c.read_response());  // never a complete response: the connection closes
  TestClient next(port);
  next.send(get_request("/hello"));
  auto r = next.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST(HttpStreaming, DroppedWriterGets500) {
  Workers workers;
  Fixture f;
  f.server->route("GET", "/drop", [](const HttpRequest&, std::shared_ptr<ResponseWriter>) {});
  f.server->route("GET", "/drop-later", [&](const HttpRequest&, std::shared_ptr<ResponseWriter> w) {
    workers.spawn([w = std::move(w)]() mutable {
      std::this_thread::sleep_for(10ms);
      w.reset();
    });
  });
  TestClient c(f.start());
  for (const std::string target : {"/drop", "/drop-later", "/drop"}) {
    c.send(get_request(target));
    auto r = c.read_response();
    ASSERT_TRUE(r) << target;
    EXPECT_EQ(r->status, 500) << target;
  }
}

TEST(HttpStreaming, SlowReaderOverTheStreamBufferCountsAsGone) {
  auto opts = test_options();
  opts.max_stream_buffer_bytes = 64 * 1024;
  Fixture f(opts);
  TestClient c(f.start(), /*rcvbuf=*/4096);
  c.send(get_request("/wait"));  // and never reads
  auto w = f.box.take();
  ASSERT_TRUE(w);
  Event gone;
  w->on_disconnect([&] { gone.set(); });
  w->begin_stream(200, "text/plain");
  const std::string chunk(16 * 1024, 'z');
  size_t sent = 0;
  while (w->write(chunk)) {
    sent += chunk.size();
    ASSERT_LT(sent, size_t(1) << 30) << "the buffer limit never applied";
  }
  EXPECT_TRUE(w->client_gone());
  EXPECT_TRUE(gone.wait());
}

TEST(HttpStreaming, ClientThatReadsNothingIsDroppedAfterTheWriteTimeout) {
  auto opts = test_options();
  opts.write_timeout = 200ms;
  Fixture f(opts);
  TestClient c(f.start(), /*rcvbuf=*/4096);
  c.send(get_request("/wait"));  // and never reads
  auto w = f.box.take();
  ASSERT_TRUE(w);
  Event gone;
  w->on_disconnect([&] { gone.set(); });
  w->send(text(std::string(32 << 20, 'z')));  // far more than the socket buffers hold
  EXPECT_TRUE(gone.wait());
  EXPECT_TRUE(w->client_gone());
}

TEST(HttpStreaming, StopWithPendingResponsesReturnsPromptly) {
  Fixture f;
  const uint16_t port = f.start();
  TestClient waiting(port);
  waiting.send(get_request("/wait"));
  auto pending = f.box.take();
  ASSERT_TRUE(pending);
  TestClient streaming(port);
  streaming.send(get_request("/wait"));
  auto stream = f.box.take();
  ASSERT_TRUE(stream);
  stream->begin_stream(200, "text/plain");
  stream->write("x");
  ASSERT_TRUE(streaming.read_head());
  ASSERT_EQ(streaming.read_chunk(), "x");
  std::atomic<int> disconnects = 0;
  pending->on_disconnect([&] { ++disconnects; });
  stream->on_disconnect([&] { ++disconnects; });

  const auto t0 = std::chrono::steady_clock::now();
  f.server->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  EXPECT_EQ(disconnects.load(), 2);
  EXPECT_TRUE(pending->client_gone());
  EXPECT_FALSE(stream->write("y"));
  EXPECT_TRUE(waiting.wait_closed());
  EXPECT_TRUE(streaming.wait_closed());

  // The writers outlive the server: using and dropping them is harmless.
  f.server.reset();
  pending->send(text("after the end"));
  stream->end();
  pending.reset();
  stream.reset();
}

TEST(HttpStreaming, ManyClientsStreamConcurrently) {
  auto opts = test_options();
  opts.io_threads = 4;
  Workers workers;
  HttpServer server(opts);
  server.route("GET", "/count", [&](const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
    const int n = std::stoi(req.query);
    workers.spawn([w, n] {
      w->begin_stream(200, "text/plain");
      for (int i = 0; i < n; ++i) w->write(std::to_string(i) + ",");
      w->end();
    });
  });
  server.start();
  std::vector<std::thread> clients;
  std::atomic<int> ok = 0;
  for (int k = 0; k < 8; ++k) {
    clients.emplace_back([&, k] {
      TestClient c(server.port());
      for (int j = 0; j < 5; ++j) {
        const int n = 10 + k + j;
        c.send(get_request("/count?" + std::to_string(n)));
        auto r = c.read_response();
        std::string expected;
        for (int i = 0; i < n; ++i) expected += std::to_string(i) + ",";
        if (r && r->body == expected) ++ok;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 40);
}

}  // namespace
}  // namespace tokamak::server::http_streaming_test
