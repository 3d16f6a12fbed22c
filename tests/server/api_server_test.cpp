// ApiServer end to end on a tiny synthetic model: real sockets, the HTTP layer, the engine
// thread and the output pump together (the pytest suite does the same with the default
// model and the openai client; these also run under the sanitizers).

#include "server/api_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "../engine/engine_test_util.h"

namespace tokamak::server {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// A blocking HTTP/1.1 client over one connection: enough to read whole responses and
// streams in tests.
class Client {
 public:
  explicit Client(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    timeval tv{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~Client() { close(); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  void send_request(const std::string& method, const std::string& path, const std::string& body,
                    const std::string& extra_headers = "") {
    const std::string req =
        method + " " + path + " HTTP/1.1\r\nHost: test\r\n" + extra_headers +
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
        "\r\n\r\n" + body;
    ASSERT_EQ(::send(fd_, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  }
  // Reads until `needle` has arrived (or the peer closes / times out); returns all so far.
  std::string read_until(const std::string& needle) {
    while (buffer_.find(needle) == std::string::npos) {
      char chunk[4096];
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) break;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
    return buffer_;
  }
  // One whole response with Content-Length: {status, body}.
  std::pair<int, std::string> response() {
    read_until("\r\n\r\n");
    const size_t head_end = buffer_.find("\r\n\r\n");
    if (head_end == std::string::npos) return {0, ""};
    const int status = std::stoi(buffer_.substr(9, 3));
    size_t length = 0;
    const size_t cl = buffer_.find("Content-Length: ");
    if (cl != std::string::npos && cl < head_end) length = std::stoul(buffer_.substr(cl + 16));
    while (buffer_.size() < head_end + 4 + length) {
      char chunk[4096];
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) break;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
    std::string body = buffer_.substr(head_end + 4, length);
    buffer_.erase(0, head_end + 4 + length);
    return {status, body};
  }
  std::pair<int, json> call(const std::string& method, const std::string& path,
                            const json& body = nullptr, const std::string& headers = "") {
    send_request(method, path, body.is_null() ? "" : body.dump(), headers);
    auto [status, text] = response();
    return {status, text.empty() ? json() : json::parse(text, nullptr, false)};
  }

 private:
  int fd_ = -1;
  std::string buffer_;
};

class ApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A long context, so that a request can outlast a short shutdown timeout.
    SyntheticModelSpec spec = test::small_spec();
    spec.n_ctx = 4096;
    auto m = test::load_synthetic(spec);
    served_.file = m->gguf;
    served_.model = std::move(m->model);
    served_.tokenizer = std::move(m->tok);
    served_.engine.kv_budget = KVBudget::tokens(8192);
    file_ = std::move(m->file);  // the mapped GGUF must outlive the server
  }

  std::unique_ptr<ApiServer> start(ApiServerOptions opts = {}, bool attach = true) {
    opts.http.port = 0;
    opts.model_id = "tiny";
    if (opts.shutdown_timeout == std::chrono::milliseconds(30000)) opts.shutdown_timeout = 2s;
    auto server = std::make_unique<ApiServer>(opts);
    server->start();
    if (attach) server->attach(std::move(served_));
    return server;
  }

  // Polls the engine until every KV block is free again.
  static bool wait_all_free(const ApiServer& server) {
    for (int i = 0; i < 500; ++i) {
      const EngineStats s = server.engine()->stats();
      if (s.kv_blocks_used == 0 && s.running == 0 && s.waiting == 0) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  std::unique_ptr<test::TempFile> file_;
  ServedModel served_;
};

TEST_F(ApiServerTest, HealthBeforeAndAfterTheModel) {
  auto server = start({}, /*attach=*/false);
  Client c(server->port());
  EXPECT_EQ(c.call("GET", "/health").first, 503);
  EXPECT_EQ(c.call("POST", "/v1/completions", {{"prompt", "a"}}).first, 503);
  server->attach(std::move(served_));
  EXPECT_EQ(c.call("GET", "/health").first, 200);
  const auto [status, models] = c.call("GET", "/v1/models");
  EXPECT_EQ(status, 200);
  EXPECT_EQ(models["data"][0]["id"], "tiny");
}

TEST_F(ApiServerTest, CompletionWholeAndStreamed) {
  auto server = start();
  Client c(server->port());
  const json req = {
      {"prompt", "hello"}, {"max_tokens", 5}, {"temperature", 0}, {"ignore_eos", true}};
  const auto [status, body] = c.call("POST", "/v1/completions", req);
  ASSERT_EQ(status, 200) << body.dump();
  EXPECT_EQ(body["usage"]["completion_tokens"], 5);
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");

  json streamed = req;
  streamed["stream"] = true;
  c.send_request("POST", "/v1/completions", streamed.dump());
  const std::string sse = c.read_until("data: [DONE]\n\n");
  EXPECT_NE(sse.find("Transfer-Encoding: chunked"), std::string::npos);
  EXPECT_NE(sse.find("\"finish_reason\":\"length\""), std::string::npos);
  // Greedy: the streamed text is the whole response's text.
  std::string text;
  for (size_t pos = sse.find("data: {"); pos != std::string::npos;
       pos = sse.find("data: {", pos + 1)) {
    const json ev = json::parse(sse.substr(pos + 6, sse.find('\n', pos) - pos - 6));
    text += ev["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, body["choices"][0]["text"]);
  EXPECT_TRUE(wait_all_free(*server));
}

TEST_F(ApiServerTest, ErrorsInOpenAIShape) {
  auto server = start();
  Client c(server->port());
  c.send_request("POST", "/v1/completions", "{not json");
  auto [status, text] = c.response();
  EXPECT_EQ(status, 400);
  const json e = json::parse(text);
  EXPECT_TRUE(e["error"].contains("message"));
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(
      c.call("POST", "/v1/completions", {{"prompt", "a"}, {"top_p", 5}}).second["error"]["param"],
      "top_p");
  EXPECT_EQ(c.call("GET", "/v1/nothing").first, 404);
  EXPECT_EQ(c.call("GET", "/v1/completions").first, 405);
}

TEST_F(ApiServerTest, ApiKeys) {
  ApiServerOptions opts;
  opts.api_keys = {"k1", "k2"};
  auto server = start(opts);
  Client c(server->port());
  const auto [status, body] = c.call("GET", "/v1/models");
  EXPECT_EQ(status, 401);
  EXPECT_EQ(body["error"]["code"], "invalid_api_key");
  EXPECT_EQ(c.call("GET", "/v1/models", nullptr, "Authorization: Bearer k3\r\n").first, 401);
  EXPECT_EQ(c.call("GET", "/v1/models", nullptr, "Authorization: Bearer k2\r\n").first, 200);
  EXPECT_EQ(c.call("GET", "/health").first, 200);
}

TEST_F(ApiServerTest, DisconnectCancelsAndFreesBlocks) {
  auto server = start();
  {
    Client c(server->port());
    c.send_request(
        "POST", "/v1/completions",
        json{{"prompt", "hello"}, {"max_tokens", 200}, {"ignore_eos", true}, {"stream", true}}
            .dump());
    c.read_until("\"text\"");  // generating
  }                            // closed mid-stream
  EXPECT_TRUE(wait_all_free(*server));
  {
    Client c(server->port());
    c.send_request("POST", "/v1/completions",
                   json{{"prompt", "hello"}, {"max_tokens", 200}, {"ignore_eos", true}}.dump());
    std::this_thread::sleep_for(50ms);
  }  // closed while the whole response was being made
  EXPECT_TRUE(wait_all_free(*server));
  Client c(server->port());
  EXPECT_EQ(c.call("POST", "/v1/completions", {{"prompt", "a"}, {"max_tokens", 2}}).first, 200);
}

TEST_F(ApiServerTest, QueueFullIs429) {
  served_.engine.max_waiting = 1;
  served_.engine.max_seqs = 1;
  auto server = start();
  std::vector<std::unique_ptr<Client>> clients;
  int too_many = 0;
  // One runs, one waits, the others find the queue full.
  for (int i = 0; i < 6; ++i) {
    clients.push_back(std::make_unique<Client>(server->port()));
    clients.back()->send_request(
        "POST", "/v1/completions",
        json{{"prompt", "hello"}, {"max_tokens", 3000}, {"ignore_eos", true}}.dump());
  }
  for (auto& c : clients) {
    const std::string head = c->read_until("\r\n\r\n");
    if (head.find("HTTP/1.1 429") == 0) {
      ++too_many;
      EXPECT_NE(head.find("Retry-After: 1"), std::string::npos);
    }
  }
  EXPECT_GE(too_many, 1);
  clients.clear();
  EXPECT_TRUE(wait_all_free(*server));
}

TEST_F(ApiServerTest, ShutdownEndsStreamsWithAnError) {
  ApiServerOptions opts;
  opts.shutdown_timeout = 20ms;  // far shorter than 4000 tokens take
  auto server = start(opts);
  Client c(server->port());
  c.send_request(
      "POST", "/v1/completions",
      json{{"prompt", "hi"}, {"max_tokens", 4000}, {"ignore_eos", true}, {"stream", true}}.dump());
  const std::string started = c.read_until("\"text\"");
  ASSERT_NE(started.find("200 OK"), std::string::npos) << started;
  const auto t0 = std::chrono::steady_clock::now();
  server->shutdown();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  const std::string sse = c.read_until("data: [DONE]");
  EXPECT_NE(sse.find("server_shutdown"), std::string::npos);
  EXPECT_NE(sse.find("data: [DONE]"), std::string::npos);
}

TEST_F(ApiServerTest, MetricsAndDashboard) {
  auto server = start();
  Client c(server->port());
  ASSERT_EQ(c.call("POST", "/v1/completions", {{"prompt", "a"}, {"max_tokens", 3}}).first, 200);
  c.send_request("GET", "/metrics", "");
  const auto [status, text] = c.response();
  EXPECT_EQ(status, 200);
  EXPECT_NE(text.find("tokamak:generation_tokens_total"), std::string::npos);
  EXPECT_NE(text.find("tokamak:kv_cache_usage_perc"), std::string::npos);
  const auto [dstatus, dash] = c.call("GET", "/dashboard/data");
  EXPECT_EQ(dstatus, 200);
  EXPECT_EQ(dash["kv"]["blocks_total"], 512);  // 8192 tokens / 16
  EXPECT_EQ(dash["kv"]["cells"].get<std::string>().size(), 512u);
}

// The same 40-token prompt twice: the second reuses its two full blocks (32 tokens), and
// /metrics counts the prefix cache in tokens.
TEST_F(ApiServerTest, PrefixCacheCountersAtMetrics) {
  auto server = start();
  Client c(server->port());
  json prompt = json::array();
  for (int i = 0; i < 40; ++i) prompt.push_back(10 + i);
  const auto counter = [&](const std::string& name) {
    c.send_request("GET", "/metrics", "");
    const auto [status, text] = c.response();
    EXPECT_EQ(status, 200);
    const std::string key = name + "{model_name=\"tiny\"} ";
    const size_t at = text.find(key);
    if (at == std::string::npos) {
      ADD_FAILURE() << name << " missing";
      return -1.0;
    }
    return std::stod(text.substr(at + key.size()));
  };
  ASSERT_EQ(c.call("POST", "/v1/completions", {{"prompt", prompt}, {"max_tokens", 2}}).first, 200);
  EXPECT_EQ(counter("tokamak:prefix_cache_queries_total"), 40);
  EXPECT_EQ(counter("tokamak:prefix_cache_hits_total"), 0);
  ASSERT_TRUE(wait_all_free(*server));
  ASSERT_EQ(c.call("POST", "/v1/completions", {{"prompt", prompt}, {"max_tokens", 2}}).first, 200);
  EXPECT_EQ(counter("tokamak:prefix_cache_queries_total"), 80);
  EXPECT_EQ(counter("tokamak:prefix_cache_hits_total"), 32);
  const auto [dstatus, dash] = c.call("GET", "/dashboard/data");
  EXPECT_EQ(dstatus, 200);
  EXPECT_GE(dash["kv"]["blocks_cached"].get<int>(), 2);
  EXPECT_DOUBLE_EQ(dash["kv"]["prefix_cache_hit_rate"].get<double>(), 32.0 / 80.0);
  EXPECT_NE(dash["kv"]["cells"].get<std::string>().find('c'), std::string::npos);
}

}  // namespace
}  // namespace tokamak::server
