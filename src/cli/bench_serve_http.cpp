// clang-format off
#include <utility>  // before any Asio header: Boost 1.74's awaitable.hpp needs it
// clang-format on
// The same Beast configuration as src/server (one definition of its inline code per binary).
#define BOOST_ASIO_NO_DEPRECATED
#define BOOST_BEAST_USE_STD_STRING_VIEW

#include "cli/bench_serve_http.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cassert>
#include <charconv>
#include <exception>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace tokamak::cli {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using asio::awaitable;
using boost::system::error_code;

constexpr size_t kMaxErrorBody = 64 * 1024;  // of a non-200 answer, kept for its message

auto with(error_code& ec) {
  return asio::redirect_error(asio::use_awaitable, ec);
}

// The reason of an answer that is not 200: OpenAI's {"error": {"message"}}, else the text.
std::string http_failure(int status, const std::string& body) {
  const auto doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  std::string message = body.substr(0, 200);
  if (doc.is_object() && doc.contains("error")) {
    const auto& e = doc["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) {
      message = e["message"].get<std::string>();
    } else if (e.is_string()) {
      message = e.get<std::string>();
    }
  }
  while (!message.empty() && (message.back() == '\n' || message.back() == '\r')) {
    message.pop_back();
  }
  return message.empty() ? fmt::format("HTTP {}", status)
                         : fmt::format("HTTP {}: {}", status, message);
}

bool is_disconnect(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == http::error::partial_message ||
         ec == asio::error::eof || ec == asio::error::connection_reset ||
         ec == asio::error::broken_pipe;
}

// One HTTP exchange on a fresh connection (closed at the end: requests are independent and
// a server sees the same connection pattern from every client run).
class Exchange {
 public:
  Exchange(asio::io_context& io, const ClientOptions& client, const tcp::resolver::results_type& at)
      : client_(client), at_(at), stream_(io) {}

  // Sends the request and reads the response head; false (with `failure` set) when it fails.
  awaitable<bool> start(http::verb verb, const std::string& target, const std::string& body) {
    error_code ec;
    stream_.expires_after(client_.timeout);
    co_await stream_.async_connect(at_, with(ec));
    if (ec) co_return fail(fmt::format("connect to {}: {}", client_.url.origin(), ec.message()));
    http::request<http::string_body> req{verb, client_.url.prefix + target, 11};
    req.set(http::field::host, client_.url.origin().substr(7));  // past "http://"
    req.set(http::field::user_agent, "tokamak-bench");
    if (!client_.api_key.empty()) req.set(http::field::authorization, "Bearer " + client_.api_key);
    if (verb == http::verb::post) {
      req.set(http::field::content_type, "application/json");
      req.set(http::field::accept, "text/event-stream, application/json");
      req.body() = body;
    }
    req.keep_alive(false);
    req.prepare_payload();
    co_await http::async_write(stream_, req, with(ec));
    if (ec) co_return fail("sending the request: " + ec.message());
    // No limit. (Not boost::none: Boost 1.74 compares a Content-Length with it as "greater".)
    parser_.body_limit(std::numeric_limits<std::uint64_t>::max());
    co_await http::async_read_header(stream_, buffer_, parser_, with(ec));
    if (ec) co_return fail("reading the response head: " + describe(ec));
    status_ = parser_.get().result_int();
    co_return true;
  }

  // Reads the body, handing each piece to `sink(bytes)` as it arrives, until the message
  // ends; false (with `failure` set) when it breaks off.
  template <typename Sink>
  awaitable<bool> read_body(Sink sink) {
    char piece[16 * 1024];
    while (!parser_.is_done()) {
      parser_.get().body().data = piece;
      parser_.get().body().size = sizeof piece;
      error_code ec;
      stream_.expires_after(client_.timeout);
      co_await http::async_read_some(stream_, buffer_, parser_, with(ec));
      if (ec == http::error::need_buffer) ec = {};
      const size_t got = sizeof piece - parser_.get().body().size;
      if (got > 0) sink(std::string_view(piece, got));
      if (ec) co_return fail(describe(ec));
    }
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    co_return true;
  }

  int status() const { return status_; }
  const std::string& failure() const { return failure_; }

 private:
  bool fail(std::string why) {
    failure_ = std::move(why);
    return false;
  }
  std::string describe(const error_code& ec) const {
    if (ec == beast::error::timeout) {
      return fmt::format("no data from the server for {} s (timeout)",
                         std::chrono::duration<double>(client_.timeout).count());
    }
    if (is_disconnect(ec)) return "the server closed the connection before the response ended";
    return ec.message();
  }

  const ClientOptions& client_;
  const tcp::resolver::results_type& at_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::response_parser<http::buffer_body> parser_;
  int status_ = 0;
  std::string failure_;
};

// Reads a whole non-streamed body (up to kMaxErrorBody bytes kept).
awaitable<std::string> read_all(Exchange& x) {
  std::string body;
  co_await x.read_body([&](std::string_view bytes) {
    body.append(bytes.substr(0, kMaxErrorBody - std::min(kMaxErrorBody, body.size())));
  });
  co_return body;
}

tcp::resolver::results_type resolve(asio::io_context& io, const ServerUrl& url) {
  tcp::resolver resolver(io);
  error_code ec;
  auto results = resolver.resolve(url.host, std::to_string(url.port), ec);
  if (ec) throw Error(fmt::format("cannot resolve host \"{}\": {}", url.host, ec.message()));
  return results;
}

void rethrow(std::exception_ptr e) {
  if (e) std::rethrow_exception(e);
}

class ChainRun {
 public:
  ChainRun(const ClientOptions& client, const ChainPlan& plan)
      : client_(client), plan_(plan), at_(resolve(io_, client.url)), slot_freed_(io_) {
    result_.chains.resize(plan.arrival_s.size());
  }

  ChainResult run() {
    asio::co_spawn(io_, dispatch(), rethrow);
    io_.run();
    return std::move(result_);
  }

 private:
  awaitable<void> dispatch() {
    asio::steady_timer timer(io_);
    result_.start = BenchClock::now();
    result_.end = result_.start;
    const size_t n = plan_.arrival_s.size();
    const size_t cap = plan_.max_concurrency ? static_cast<size_t>(*plan_.max_concurrency) : n;
    for (size_t c = 0; c < n; ++c) {
      error_code ec;
      const auto due = result_.start + std::chrono::duration_cast<BenchClock::duration>(
                                           std::chrono::duration<double>(plan_.arrival_s[c]));
      if (due > BenchClock::now()) {
        timer.expires_at(due);
        co_await timer.async_wait(with(ec));
      }
      while (in_flight_ >= cap) {  // woken (cancelled) by every chain that ends
        slot_freed_.expires_at(BenchClock::time_point::max());
        co_await slot_freed_.async_wait(with(ec));
      }
      ++in_flight_;
      result_.peak_in_flight = std::max(result_.peak_in_flight, static_cast<int32_t>(in_flight_));
      asio::co_spawn(io_, chain(c), rethrow);
    }
  }

  awaitable<void> chain(size_t c) {
    // Only this coroutine touches the chain's records; the outer vector never grows.
    std::vector<RequestRecord>& records = result_.chains[c];
    while (std::optional<std::string> body = plan_.next(c, records)) {
      RequestRecord r;
      r.sent = BenchClock::now();
      try {
        co_await exchange(r, *body);
      } catch (const std::exception& e) {
        r.failure = std::string("client error: ") + e.what();
      }
      r.ended = BenchClock::now();
      result_.end = std::max(result_.end, r.ended);
      records.push_back(std::move(r));
      if (!records.back().ok()) break;
    }
    --in_flight_;
    slot_freed_.cancel();
  }

  awaitable<void> exchange(RequestRecord& r, const std::string& body) {
    Exchange x(io_, client_, at_);
    if (!co_await x.start(http::verb::post, plan_.target, body)) {
      r.failure = x.failure();
      co_return;
    }
    r.http_status = x.status();
    if (x.status() != 200) {
      r.failure = http_failure(x.status(), co_await read_all(x));
      co_return;
    }
    StreamReader reader;
    const bool whole = co_await x.read_body(
        [&](std::string_view bytes) { reader.feed(bytes, BenchClock::now()); });
    r.trace = reader.take();
    if (r.trace.error) {
      r.failure = "error event: " + *r.trace.error;
    } else if (!whole && !r.trace.done) {
      r.failure = "during the stream: " + x.failure();  // no counts: equal reasons group
    } else if (r.trace.content_times.empty()) {
      r.failure = "the response carried no streamed text";
    }
  }

  const ClientOptions& client_;
  const ChainPlan& plan_;
  asio::io_context io_;
  tcp::resolver::results_type at_;
  asio::steady_timer slot_freed_;
  size_t in_flight_ = 0;
  ChainResult result_;
};

}  // namespace

std::string ServerUrl::origin() const {
  return fmt::format("http://{}:{}", host.find(':') != std::string::npos ? "[" + host + "]" : host,
                     port);
}

ServerUrl parse_url(const std::string& url) {
  const auto bad = [&](const std::string& why) {
    return Error(fmt::format("--url \"{}\": {}", url, why));
  };
  const std::string_view scheme = "http://";
  if (url.starts_with("https://")) throw bad("https is not supported; use http://");
  if (!url.starts_with(scheme)) throw bad("expected http://HOST[:PORT][/PATH]");
  std::string_view rest = std::string_view(url).substr(scheme.size());
  if (rest.find_first_of("?#") != std::string_view::npos) {
    throw bad("a query or fragment is not expected");
  }
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  ServerUrl out;
  out.prefix = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  std::string_view port_text;
  if (authority.starts_with('[')) {  // [v6 address]:port
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) throw bad("unclosed [ in the host");
    out.host = std::string(authority.substr(1, close - 1));
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty() && !after.starts_with(':')) throw bad("unexpected text after ]");
    if (!after.empty()) port_text = after.substr(1);
  } else {
    const size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
  }
  if (out.host.empty()) throw bad("no host");
  if (authority.find('@') != std::string_view::npos) throw bad("user information is not supported");
  if (!port_text.empty() || authority.ends_with(':')) {
    unsigned port = 0;
    const auto [end, ec] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 ||
        port > 65535) {
      throw bad("the port must be a number in 1..65535");
    }
    out.port = static_cast<uint16_t>(port);
  }
  while (out.prefix.ends_with('/')) out.prefix.pop_back();
  if (out.prefix.ends_with("/v1")) out.prefix.resize(out.prefix.size() - 3);
  return out;
}

void check_resolvable(const ServerUrl& url) {
  asio::io_context io;
  resolve(io, url);
}

LoadResult run_load(const ClientOptions& client, const LoadPlan& plan) {
  if (plan.arrival_s.size() != plan.bodies.size()) {
    throw Error("run_load: one arrival time per request is needed");
  }
  ChainPlan chains;
  chains.target = plan.target;
  chains.arrival_s = plan.arrival_s;
  chains.max_concurrency = plan.max_concurrency;
  // Chains of one request each.
  chains.next = [&plan](size_t c, std::span<const RequestRecord> done) {
    return done.empty() ? std::optional<std::string>(plan.bodies[c]) : std::nullopt;
  };
  ChainResult run = run_chains(client, chains);
  LoadResult result;
  result.records.reserve(run.chains.size());
  for (std::vector<RequestRecord>& chain : run.chains) {
    assert(chain.size() == 1);
    result.records.push_back(std::move(chain.front()));
  }
  result.start = run.start;
  result.end = run.end;
  result.peak_in_flight = run.peak_in_flight;
  return result;
}

ChainResult run_chains(const ClientOptions& client, const ChainPlan& plan) {
  if (plan.max_concurrency && *plan.max_concurrency < 1) {
    throw Error("run_chains: max_concurrency must be at least 1");
  }
  assert(plan.next);
  ChainRun run(client, plan);
  return run.run();
}

HttpReply http_get(const ClientOptions& client, const std::string& target) {
  asio::io_context io;
  const auto at = resolve(io, client.url);
  HttpReply reply;
  std::string failure;
  auto get = [&]() -> awaitable<void> {
    Exchange x(io, client, at);
    if (!co_await x.start(http::verb::get, target, "")) {
      failure = x.failure();
      co_return;
    }
    reply.status = x.status();
    reply.body = co_await read_all(x);
    if (!x.failure().empty()) failure = x.failure();
  };
  asio::co_spawn(io, get(), rethrow);
  io.run();
  if (!failure.empty()) {
    throw Error(
        fmt::format("GET {}{}{}: {}", client.url.origin(), client.url.prefix, target, failure));
  }
  return reply;
}

}  // namespace tokamak::cli
