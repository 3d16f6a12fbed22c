// HttpServer over real sockets on 127.0.0.1: routing, keep-alive, pipelining, HTTP/1.0,
// limits, timeouts, CORS, connection limits, start and stop. Streaming, disconnects and
// handlers answering late are in http_streaming_test.cpp.

#include "server/http_server.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "http_test_client.h"
#include "http_test_server.h"

namespace tokamak::server::http_server_test {
namespace {

using namespace testing;
using namespace std::chrono_literals;

// GET and POST /hello answer "hello <query>"; POST /echo answers the body.
void add_echo_routes(HttpServer& server) {
  auto hello = [](const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
    w->send(text("hello " + req.query));
  };
  server.route("GET", "/hello", hello);
  server.route("POST", "/hello", hello);
  server.route("POST", "/echo", [](const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
    w->send(text(req.body));
  });
}

struct Served {
  std::unique_ptr<HttpServer> server;
  uint16_t port() const { return server->port(); }
};

Served serve(HttpServerOptions opts = test_options(), ErrorFormatter errors = {}) {
  Served s{std::make_unique<HttpServer>(std::move(opts), std::move(errors))};
  add_echo_routes(*s.server);
  s.server->start();
  return s;
}

TEST(HttpServer, RoutesByExactPathAndMethod) {
  auto s = serve();
  TestClient c(s.port());
  ASSERT_TRUE(c.connected());

  c.send(get_request("/hello?x=1"));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello x=1");
  EXPECT_EQ(r->header("content-type"), "text/plain");
  EXPECT_EQ(r->header("content-length"), "9");
  EXPECT_EQ(r->header("server"), "tokamak");

  c.send(get_request("/hello/"));
  r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(r->header("content-type"), "application/json");
  EXPECT_EQ(r->body, R"({"error":{"message":"no route for /hello/"}})");

  c.send("DELETE /hello HTTP/1.1\r\nHost: test\r\n\r\n");
  r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->header("allow"), "GET, POST");
  EXPECT_NE(r->body.find("DELETE"), std::string::npos);
}

TEST(HttpServer, HandlerSeesTheParsedRequest) {
  HttpServer server(test_options());
  HttpRequest seen;
  server.route("POST", "/v1/x", [&](const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
    seen = req;
    w->send(text("ok"));
  });
  server.start();
  TestClient c(server.port());
  c.send(post_request("/v1/x?a=1&b=2", "{\"k\":1}", "X-Custom-Thing: Value 1\r\n"));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(seen.method, "POST");
  EXPECT_EQ(seen.target, "/v1/x?a=1&b=2");
  EXPECT_EQ(seen.path, "/v1/x");
  EXPECT_EQ(seen.query, "a=1&b=2");
  EXPECT_EQ(seen.header("x-custom-thing"), "Value 1");
  EXPECT_EQ(seen.header("host"), "test");
  EXPECT_EQ(seen.body, "{\"k\":1}");
  EXPECT_EQ(seen.remote.rfind("127.0.0.1:", 0), 0u) << seen.remote;
}

TEST(HttpServer, KeepAliveServesSeveralRequestsOnOneConnection) {
  auto s = serve();
  TestClient c(s.port());
  for (int i = 0; i < 3; ++i) {
    c.send(post_request("/echo", "body " + std::to_string(i)));
    auto r = c.read_response();
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->body, "body " + std::to_string(i));
    EXPECT_FALSE(r->header("connection"));
  }
  EXPECT_EQ(s.server->open_connections(), 1u);
}

TEST(HttpServer, PipelinedRequestsAreAnsweredInOrder) {
  HttpServer server(test_options());
  add_echo_routes(server);
  std::vector<std::thread> workers;
  std::mutex workers_mu;
  // The first request is answered late, from another thread: the two behind it wait.
  server.route("GET", "/slow", [&](const HttpRequest&, std::shared_ptr<ResponseWriter> w) {
    std::lock_guard lock(workers_mu);
    workers.emplace_back([w] {
      std::this_thread::sleep_for(30ms);
      w->send(text("slow"));
    });
  });
  server.start();
  TestClient c(server.port());
  c.send(get_request("/slow") + get_request("/hello?2") + post_request("/echo", "three") +
         get_request("/nope"));
  for (const std::string expected : {"slow", "hello 2", "three"}) {
    auto r = c.read_response();
    ASSERT_TRUE(r) << expected;
    EXPECT_EQ(r->body, expected);
  }
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  std::lock_guard lock(workers_mu);
  for (auto& t : workers) t.join();
}

TEST(HttpServer, ConnectionCloseIsHonoured) {
  auto s = serve();
  TestClient c(s.port());
  c.send(get_request("/hello", "Connection: close\r\n"));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->header("connection"), "close");
  EXPECT_TRUE(c.wait_closed());
  c.close();
  EXPECT_TRUE(eventually([&] { return s.server->open_connections() == 0; }));
}

TEST(HttpServer, Http10ClosesUnlessAskedToKeepAlive) {
  auto s = serve();
  {
    TestClient c(s.port());
    c.send("GET /hello?a HTTP/1.0\r\n\r\n");
    auto r = c.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "hello a");
    EXPECT_TRUE(c.wait_closed());
  }
  TestClient c(s.port());
  for (int i = 0; i < 2; ++i) {
    c.send("GET /hello?b HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    auto r = c.read_response();
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->body, "hello b");
    EXPECT_EQ(r->header("connection"), "keep-alive");
  }
}

TEST(HttpServer, BodyOverTheLimitGets413FromContentLength) {
  auto opts = test_options();
  opts.max_body_bytes = 1000;
  auto s = serve(opts);
  TestClient c(s.port());
  // Only the headers: the answer must not wait for a body it will refuse.
  c.send("POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 5000\r\n\r\n");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(r->header("connection"), "close");
  EXPECT_NE(r->body.find("1000"), std::string::npos);
  EXPECT_TRUE(c.wait_closed());

  TestClient ok(s.port());
  ok.send(post_request("/echo", std::string(1000, 'x')));
  r = ok.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body.size(), 1000u);
}

TEST(HttpServer, ChunkedBodyOverTheLimitGets413) {
  auto opts = test_options();
  opts.max_body_bytes = 1000;
  auto s = serve(opts);
  TestClient c(s.port());
  const std::string chunk = "320\r\n" + std::string(800, 'y') + "\r\n";  // 800 bytes
  c.send("POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk + chunk);
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
}

TEST(HttpServer, ChunkedRequestBodyIsAssembled) {
  auto s = serve();
  TestClient c(s.port());
  c.send(
      "POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "abcdefg");
}

TEST(HttpServer, ExpectContinueGets100BeforeTheBody) {
  auto s = serve();
  TestClient c(s.port());
  c.send("POST /echo HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
  auto interim = c.read_head();
  ASSERT_TRUE(interim);
  EXPECT_EQ(interim->status, 100);
  c.send("hello");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello");
}

TEST(HttpServer, HeadersOverTheLimitGet431) {
  auto opts = test_options();
  opts.max_header_bytes = 1024;
  auto s = serve(opts);
  TestClient c(s.port());
  c.send(get_request("/hello", "X-Big: " + std::string(2000, 'h') + "\r\n"));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 431);
  EXPECT_TRUE(c.wait_closed());
}

TEST(HttpServer, MalformedRequestGets400) {
  auto s = serve();
  for (const std::string bad :
       {"NOT HTTP AT ALL\r\n\r\n", "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: x\r\n\r\n"}) {
    TestClient c(s.port());
    c.send(bad);
    auto r = c.read_response();
    ASSERT_TRUE(r) << bad;
    EXPECT_EQ(r->status, 400) << bad;
    EXPECT_TRUE(c.wait_closed()) << bad;
  }
}

TEST(HttpServer, ErrorFormatterShapesTheServersOwnErrors) {
  auto opts = test_options();
  opts.max_body_bytes = 10;
  auto s = serve(opts, [](int status, const std::string& message) {
    HttpResponse r;
    r.status = status;
    r.content_type = "text/x-error";
    r.body = std::to_string(status) + ":" + message;
    return r;
  });
  TestClient c(s.port());
  c.send(get_request("/missing"));
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(r->header("content-type"), "text/x-error");
  EXPECT_EQ(r->body, "404:no route for /missing");
  c.send(post_request("/echo", "more than ten bytes"));
  r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(r->body.rfind("413:", 0), 0u);
}

TEST(HttpServer, SlowRequestGets408ThenClose) {
  auto opts = test_options();
  opts.read_timeout = 200ms;
  auto s = serve(opts);
  TestClient c(s.port());
  const auto t0 = std::chrono::steady_clock::now();
  c.send("GET /hello HTTP/1.1\r\nHost: te");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 408);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 150ms);
  EXPECT_TRUE(c.wait_closed());
}

TEST(HttpServer, IdleConnectionIsClosedSilently) {
  auto opts = test_options();
  opts.idle_timeout = 200ms;
  auto s = serve(opts);
  TestClient used(s.port());
  used.send(get_request("/hello"));
  ASSERT_TRUE(used.read_response());
  TestClient never_used(s.port());
  EXPECT_TRUE(used.wait_closed());
  EXPECT_TRUE(never_used.wait_closed());
  EXPECT_TRUE(eventually([&] { return s.server->open_connections() == 0; }));
}

TEST(HttpServer, CorsHeadersGoOnEveryResponse) {
  auto opts = test_options();
  opts.cors_allow_origin = "*";
  auto s = serve(opts);
  TestClient c(s.port());
  for (const std::string target : {"/hello", "/missing"}) {
    c.send(get_request(target));
    auto r = c.read_response();
    ASSERT_TRUE(r) << target;
    EXPECT_EQ(r->header("access-control-allow-origin"), "*") << target;
    EXPECT_FALSE(r->header("vary")) << target;
  }

  opts.cors_allow_origin = "http://app.example";
  auto s2 = serve(opts);
  TestClient c2(s2.port());
  c2.send(get_request("/hello"));
  auto r = c2.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->header("access-control-allow-origin"), "http://app.example");
  EXPECT_EQ(r->header("vary"), "Origin");
}

TEST(HttpServer, CorsPreflightGets204OnKnownPaths) {
  auto opts = test_options();
  opts.cors_allow_origin = "*";
  auto s = serve(opts);
  TestClient c(s.port());
  c.send(
      "OPTIONS /hello HTTP/1.1\r\nHost: test\r\nOrigin: http://x\r\n"
      "Access-Control-Request-Method: POST\r\n\r\n");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 204);
  EXPECT_EQ(r->header("access-control-allow-origin"), "*");
  EXPECT_EQ(r->header("access-control-allow-methods"), "GET, POST, OPTIONS");
  EXPECT_EQ(r->header("access-control-allow-headers"), "Authorization, Content-Type");
  EXPECT_TRUE(r->header("access-control-max-age"));
  EXPECT_FALSE(r->header("content-length"));

  c.send("OPTIONS /missing HTTP/1.1\r\nHost: test\r\n\r\n");
  r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  c.send("PUT /hello HTTP/1.1\r\nHost: test\r\n\r\n");  // still usable after a 204
  r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->header("allow"), "GET, POST, OPTIONS");
}

TEST(HttpServer, WithoutCorsNoHeadersAndOptionsIs405) {
  auto s = serve();
  TestClient c(s.port());
  c.send("OPTIONS /hello HTTP/1.1\r\nHost: test\r\n\r\n");
  auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->header("allow"), "GET, POST");
  EXPECT_FALSE(r->header("access-control-allow-origin"));
}

TEST(HttpServer, ConnectionsOverTheLimitGet503) {
  auto opts = test_options();
  opts.max_connections = 1;
  auto s = serve(opts);
  auto first = std::make_unique<TestClient>(s.port());
  first->send(get_request("/hello"));  // accepted and counted once it answers
  ASSERT_TRUE(first->read_response());
  EXPECT_EQ(s.server->open_connections(), 1u);

  TestClient second(s.port());
  second.send(get_request("/hello"));
  auto r = second.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_TRUE(second.wait_closed());

  first.reset();
  ASSERT_TRUE(eventually([&] { return s.server->open_connections() == 0; }));
  TestClient third(s.port());
  third.send(get_request("/hello"));
  r = third.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST(HttpServer, StartThrowsWhenItCannotListen) {
  auto s = serve();
  auto opts = test_options();
  opts.port = s.port();
  HttpServer taken(opts);
  try {
    taken.start();
    FAIL() << "bound a port in use";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(s.port())),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("in use"), std::string::npos) << e.what();
  }
  opts.host = "10.255.255.254";  // an address, but not one of this machine's
  opts.port = 0;
  HttpServer foreign(opts);
  EXPECT_THROW(foreign.start(), Error);
  opts.io_threads = 0;
  EXPECT_THROW(HttpServer{opts}, Error);
}

TEST(HttpServer, StopAcceptingKeepsOpenConnectionsServed) {
  auto s = serve();
  TestClient open(s.port());
  open.send(get_request("/hello"));
  ASSERT_TRUE(open.read_response());
  s.server->stop_accepting();
  TestClient late(s.port());
  EXPECT_FALSE(late.connected());
  open.send(get_request("/hello?again"));
  auto r = open.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "hello again");
}

TEST(HttpServer, StopClosesOpenConnectionsPromptly) {
  auto s = serve();  // idle timeout: a minute
  std::vector<std::unique_ptr<TestClient>> clients;
  for (int i = 0; i < 4; ++i) {
    clients.push_back(std::make_unique<TestClient>(s.port()));
    clients.back()->send(get_request("/hello"));
    ASSERT_TRUE(clients.back()->read_response());
  }
  clients.push_back(std::make_unique<TestClient>(s.port()));
  clients.back()->send("GET /hel");  // half a request
  const auto t0 = std::chrono::steady_clock::now();
  s.server->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
  for (auto& c : clients) EXPECT_TRUE(c->wait_closed());
  EXPECT_EQ(s.server->open_connections(), 0u);
  s.server->stop();  // idempotent
}

}  // namespace
}  // namespace tokamak::server::http_server_test
