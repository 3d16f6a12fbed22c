// clang-format off
#include <utility>  // before any Asio header: Boost 1.74's awaitable.hpp needs it
// clang-format on

#include "server/http_server.h"

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <cassert>
#include <cstdio>
#include <limits>
#include <optional>
#include <thread>
#include <vector>

#include "core/error.h"
#include "server/http_connection.h"
#include "server/http_wire.h"

namespace tokamak::server {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

thread_local bool t_on_io_thread = false;

void check_options(const HttpServerOptions& o) {
  auto require = [](bool ok, const char* what) {
    if (!ok) throw Error(std::string("invalid HTTP server options: ") + what);
  };
  require(o.io_threads >= 1, "io_threads must be at least 1");
  require(o.max_header_bytes > 0 && o.max_header_bytes <= std::numeric_limits<uint32_t>::max(),
          "max_header_bytes must be in 1..4294967295");
  require(o.max_body_bytes > 0, "max_body_bytes must be positive");
  require(o.read_timeout.count() > 0 && o.idle_timeout.count() > 0 && o.write_timeout.count() > 0,
          "timeouts must be positive");
  require(o.max_stream_buffer_bytes > 0, "max_stream_buffer_bytes must be positive");
  require(o.max_connections > 0, "max_connections must be positive");
}

std::string address_text(const std::string& host, uint16_t port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

}  // namespace

struct HttpServer::Impl {
  ServerContext ctx;
  std::mutex state_mu;  // start() and stop(): never taken on an I/O thread
  bool started = false;
  bool stopped = false;
  std::atomic<uint16_t> port{0};

  // Everything below exists from start() to the end of stop().
  std::unique_ptr<asio::io_context> ioc;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;

  // The listener: its calls are serialized by accept_mu (accepts run on the I/O threads,
  // stop_accepting() on any thread).
  std::mutex accept_mu;
  std::optional<tcp::acceptor> acceptor;
  std::optional<asio::steady_timer> accept_retry;  // after a failed accept (out of fds)
  bool accepting = false;

  tcp::endpoint resolve(const std::string& host, uint16_t port_wanted) {
    error_code ec;
    const auto address = asio::ip::make_address(host, ec);
    if (!ec) return {address, port_wanted};
    tcp::resolver resolver(*ioc);
    const auto results =
        resolver.resolve(host, std::to_string(port_wanted),
                         tcp::resolver::passive | tcp::resolver::numeric_service, ec);
    if (ec || results.empty()) {
      throw Error("cannot listen on " + address_text(host, port_wanted) + ": " +
                  (ec ? ec.message() : "the host name has no address"));
    }
    return results.begin()->endpoint();
  }

  void listen() {
    const tcp::endpoint endpoint = resolve(ctx.opts.host, ctx.opts.port);
    error_code ec;
    auto fail = [&](const char* step) {
      throw Error("cannot listen on " + address_text(ctx.opts.host, ctx.opts.port) + ": " +
                  ec.message() + " (" + step + ")");
    };
    acceptor.emplace(*ioc);
    acceptor->open(endpoint.protocol(), ec);
    if (ec) fail("socket");
    acceptor->set_option(asio::socket_base::reuse_address(true), ec);
    if (ec) fail("SO_REUSEADDR");
    acceptor->bind(endpoint, ec);
    if (ec) fail("bind");
    acceptor->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) fail("listen");
    port = acceptor->local_endpoint().port();
    accept_retry.emplace(*ioc);
    accepting = true;
  }

  // Under accept_mu.
  void accept_next() {
    // Each connection gets a strand of its own: its socket's completions run there.
    acceptor->async_accept(
        asio::any_io_executor(asio::make_strand(*ioc)),
        [this](error_code ec, tcp::socket socket) { on_accept(ec, std::move(socket)); });
  }

  void on_accept(error_code ec, tcp::socket socket) {
    std::lock_guard lock(accept_mu);
    if (!accepting) return;  // the socket closes as it goes out of scope
    if (ec) {
      // Out of file descriptors or the like: wait a little instead of spinning.
      std::fprintf(stderr, "tokamak http: accept failed: %s\n", ec.message().c_str());
      accept_retry->expires_after(std::chrono::milliseconds(100));
      accept_retry->async_wait([this](error_code wait_ec) {
        std::lock_guard lock(accept_mu);
        if (!wait_ec && accepting) accept_next();
      });
      return;
    }
    start_connection(std::move(socket), ctx);
    accept_next();
  }

  void run_io() {
    t_on_io_thread = true;
    for (;;) {
      try {
        ioc->run();
        return;
      } catch (const std::exception& e) {  // never take the process down: log, serve on
        std::fprintf(stderr, "tokamak http: unexpected exception on an I/O thread: %s\n", e.what());
      } catch (...) {
        std::fprintf(stderr, "tokamak http: unexpected exception on an I/O thread\n");
      }
    }
  }

  void stop_accepting() {
    std::lock_guard lock(accept_mu);
    if (!accepting) return;
    accepting = false;
    error_code ignored;
    acceptor->close(ignored);
    accept_retry->cancel();
  }

  std::vector<std::shared_ptr<ConnectionHandle>> live_connections() {
    std::vector<std::shared_ptr<ConnectionHandle>> out;
    std::lock_guard lock(ctx.live_mu);
    for (const auto& [key, weak] : ctx.live) {
      if (auto c = weak.lock()) out.push_back(std::move(c));
    }
    return out;
  }
};

HttpServer::HttpServer(HttpServerOptions opts, ErrorFormatter errors)
    : impl_(std::make_unique<Impl>()) {
  check_options(opts);
  ServerContext& ctx = impl_->ctx;
  auto config = std::make_shared<ChannelConfig>();
  config->common_headers.emplace_back("Server", "tokamak");
  if (!opts.cors_allow_origin.empty()) {
    config->common_headers.emplace_back("Access-Control-Allow-Origin", opts.cors_allow_origin);
    if (opts.cors_allow_origin != "*") config->common_headers.emplace_back("Vary", "Origin");
  }
  config->max_unsent_bytes = opts.max_stream_buffer_bytes;
  ctx.errors = errors ? std::move(errors) : ErrorFormatter(default_error_response);
  config->errors = ctx.errors;
  ctx.channel_config = std::move(config);
  ctx.opts = std::move(opts);
}

HttpServer::~HttpServer() {
  stop();
}

void HttpServer::route(std::string method, std::string path, Handler handler) {
  std::lock_guard lock(impl_->state_mu);
  assert(!impl_->started && "HttpServer::route must come before start()");
  if (impl_->started) throw Error("HTTP routes must be added before the server starts");
  impl_->ctx.router.add(std::move(method), std::move(path), std::move(handler));
}

void HttpServer::start() {
  Impl& s = *impl_;
  std::lock_guard lock(s.state_mu);
  if (s.started || s.stopped) throw Error("an HTTP server starts only once");
  s.ioc = std::make_unique<asio::io_context>(s.ctx.opts.io_threads);
  try {
    std::lock_guard accept_lock(s.accept_mu);
    s.listen();
    s.accept_next();
  } catch (...) {
    s.acceptor.reset();
    s.accept_retry.reset();
    s.ioc.reset();
    throw;
  }
  s.work.emplace(s.ioc->get_executor());
  for (int i = 0; i < s.ctx.opts.io_threads; ++i) s.threads.emplace_back([&s] { s.run_io(); });
  s.started = true;
}

uint16_t HttpServer::port() const {
  return impl_->port.load();
}

void HttpServer::stop_accepting() {
  impl_->stop_accepting();
}

void HttpServer::stop() {
  Impl& s = *impl_;
  std::lock_guard lock(s.state_mu);
  if (s.stopped) return;
  s.stopped = true;
  if (!s.started) return;
  assert(!t_on_io_thread && "HttpServer::stop must not run on one of its I/O threads");
  s.stop_accepting();
  // No connection can be added now (they are added under accept_mu, while accepting).
  for (const auto& c : s.live_connections()) c->close_async();
  s.work.reset();
  // The closes cancel every socket operation and timer; with no work left, run() returns.
  for (auto& t : s.threads) t.join();
  s.threads.clear();
  // Defensive: a connection whose close could not run must not leave a writer able to post
  // to the io_context that is destroyed next.
  for (const auto& c : s.live_connections()) c->detach();
  {
    std::lock_guard accept_lock(s.accept_mu);
    s.acceptor.reset();
    s.accept_retry.reset();
  }
  s.ioc.reset();  // destroys what is left: handlers never run, and their connections
}

size_t HttpServer::open_connections() const {
  return impl_->ctx.open_connections.load();
}

}  // namespace tokamak::server
