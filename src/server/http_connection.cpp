// clang-format off
#include <utility>  // before any Asio header: Boost 1.74's awaitable.hpp needs it
// clang-format on

#include "server/http_connection.h"

#include <algorithm>
#include <array>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "server/http_wire.h"

namespace tokamak::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

constexpr size_t kReadChunk = 16 * 1024;
// After the last response of a connection, how long it still reads (and drops) what the
// client sends before closing: closing with unread bytes would reset the connection and
// could destroy the response (a 413 to a client still uploading) before the client reads it.
constexpr std::chrono::milliseconds kLingerTime{1000};
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string endpoint_text(const tcp::socket& socket) {
  error_code ec;
  const tcp::endpoint ep = socket.remote_endpoint(ec);
  if (ec) return {};
  const std::string address = ep.address().to_string();
  const std::string port = std::to_string(ep.port());
  return ep.address().is_v6() ? "[" + address + "]:" + port : address + ":" + port;
}

// Calls an application callback on an I/O thread, which must survive whatever it throws.
void call_safely(const std::function<void()>& fn) noexcept {
  if (!fn) return;
  try {
    fn();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tokamak http: on_disconnect callback threw: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "tokamak http: on_disconnect callback threw\n");
  }
}

class Connection final : public ConnectionHandle, public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, ServerContext& ctx, bool counted)
      : ctx_(ctx),
        counted_(counted),
        strand_(socket.get_executor()),
        socket_(std::move(socket)),
        read_timer_(strand_),
        write_timer_(strand_),
        remote_(endpoint_text(socket_)) {}

  void start(bool reject) {
    asio::post(strand_, [self = shared_from_this(), reject] {
      error_code ignored;
      self->socket_.set_option(tcp::no_delay(true), ignored);  // chunks go out at once
      if (reject) {
        self->respond_error(503, "too many open connections, try again later");
      } else {
        self->start_request();
      }
    });
  }

  void close_async() override {
    asio::post(strand_, [self = shared_from_this()] { self->close(); });
  }

  void detach() override {
    if (!channel_) return;
    const auto on_disconnect = channel_->mark_gone();
    channel_.reset();
    call_safely(on_disconnect);
  }

 private:
  enum class State { Reading, Responding, Lingering, Closed };

  // --- Reading a request ----------------------------------------------------------------

  void start_request() {
    state_ = State::Reading;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(ctx_.opts.max_header_bytes));
    parser_->body_limit(ctx_.opts.max_body_bytes);
    parser_->eager(true);
    request_started_ = false;
    continue_sent_ = false;
    arm_read_deadline(ctx_.opts.idle_timeout);  // until its first byte
    parse();
  }

  void read_more() {
    if (reading_ || state_ == State::Closed) return;
    // While a response is pending, a pipelined request waits here; past this much of it,
    // stop reading (and so stop noticing a disconnect) until the response is done.
    const size_t pipeline_cap = std::max<size_t>(64 * 1024, ctx_.opts.max_header_bytes);
    if (state_ == State::Responding && in_.size() >= pipeline_cap) return;
    reading_ = true;
    socket_.async_read_some(
        asio::buffer(read_buf_),
        [self = shared_from_this()](error_code ec, size_t n) { self->on_read(ec, n); });
  }

  void on_read(error_code ec, size_t n) {
    reading_ = false;
    if (state_ == State::Closed) return;
    if (ec) return close();  // EOF or reset; a pending response sees the client gone
    // Bytes after the last request of the connection are dropped.
    if (state_ == State::Reading || (state_ == State::Responding && !close_after_)) {
      in_.commit(asio::buffer_copy(in_.prepare(n), asio::buffer(read_buf_.data(), n)));
    }
    if (state_ == State::Reading) {
      parse();
    } else {
      read_more();
    }
  }

  void parse() {
    if (!parser_->got_some()) skip_blank_lines();
    if (in_.size() > 0 && !request_started_) {
      request_started_ = true;
      arm_read_deadline(ctx_.opts.read_timeout);  // the whole request from now on
    }
    while (in_.size() > 0 && !parser_->is_done()) {
      beast::error_code ec;
      const size_t used = parser_->put(in_.data(), ec);
      in_.consume(used);
      if (ec == http::error::need_more) break;
      if (ec) return reject_request(ec);
      if (used == 0) break;
    }
    if (parser_->is_done()) return on_request();
    maybe_send_continue();
    read_more();
  }

  // RFC 9112 2.2: a server should ignore empty lines received before a request line.
  void skip_blank_lines() {
    const auto data = in_.data();
    const char* p = static_cast<const char*>(data.data());
    size_t k = 0;
    while (k < data.size() && (p[k] == '\r' || p[k] == '\n')) ++k;
    in_.consume(k);
  }

  // A client that sent "Expect: 100-continue" waits for this before sending the body.
  void maybe_send_continue() {
    if (continue_sent_ || !parser_->is_header_done() || writing_) return;
    const auto& msg = parser_->get();
    const auto expect = msg.find(http::field::expect);
    if (msg.version() < 11 || expect == msg.end() || !iequals(expect->value(), "100-continue")) {
      return;
    }
    continue_sent_ = true;
    out_.assign(kContinue);
    out_pos_ = 0;
    out_is_interim_ = true;
    write_some();
  }

  void reject_request(const beast::error_code& ec) {
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
      respond_error(431, "the request line and headers are over " +
                             std::to_string(ctx_.opts.max_header_bytes) + " bytes");
    } else if (ec == http::error::body_limit) {
      respond_error(
          413, "the request body is over " + std::to_string(ctx_.opts.max_body_bytes) + " bytes");
    } else {
      respond_error(400, "malformed HTTP request: " + ec.message());
    }
  }

  // --- Responding -----------------------------------------------------------------------

  std::function<void()> make_wake() {
    // Runs on a handler's thread with the channel's lock held: only posts. Holding the
    // connection weakly lets it close and go away while a handler still keeps its writer.
    return [weak = weak_from_this(), strand = strand_] {
      if (auto self = weak.lock()) asio::post(strand, [self = std::move(self)] { self->flush(); });
    };
  }

  HttpResponse format_error(int status, const std::string& message) {
    try {
      return ctx_.errors(status, message);
    } catch (...) {
      return default_error_response(status, message);
    }
  }

  HttpRequest take_request() {
    auto& msg = parser_->get();
    HttpRequest req;
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    const size_t q = req.target.find('?');
    req.path = req.target.substr(0, q);
    if (q != std::string::npos) req.query = req.target.substr(q + 1);
    for (const auto& field : msg) {
      req.headers.emplace_back(lower(field.name_string()), std::string(field.value()));
    }
    req.body = std::move(msg.body());
    req.remote = remote_;
    return req;
  }

  void on_request() {
    cancel_read_deadline();
    state_ = State::Responding;
    const RequestFraming framing{.http10 = parser_->get().version() < 11,
                                 .keep_alive = parser_->get().keep_alive()};
    close_after_ = !framing.keep_alive;
    const HttpRequest req = take_request();
    parser_.reset();
    channel_ = std::make_shared<ResponseChannel>(ctx_.channel_config, framing, make_wake());

    const bool cors = !ctx_.opts.cors_allow_origin.empty();
    const Router::Match match = ctx_.router.find(req.method, req.path, cors);
    if (match.handler) {
      // Our own reference outlives the call, so that a handler that throws gets the 500
      // with its message (rather than the one for a writer dropped unanswered).
      auto writer = make_response_writer(channel_);
      try {
        (*match.handler)(req, writer);
      } catch (const std::exception& e) {
        channel_->fail(std::string("internal server error: ") + e.what());
      } catch (...) {
        channel_->fail("internal server error");
      }
    } else if (match.status == 204) {  // CORS preflight
      HttpResponse preflight;
      preflight.status = 204;
      preflight.content_type.clear();
      preflight.headers = {{"Access-Control-Allow-Methods", match.allow},
                           {"Access-Control-Allow-Headers", "Authorization, Content-Type"},
                           {"Access-Control-Max-Age", "86400"}};
      channel_->send(std::move(preflight));
    } else if (match.status == 405) {
      HttpResponse r =
          format_error(405, "method " + req.method + " is not allowed for " + req.path);
      r.headers.emplace_back("Allow", match.allow);
      channel_->send(std::move(r));
    } else {
      channel_->send(format_error(404, "no route for " + req.path));
    }
    read_more();  // notices a disconnect while the response is pending
  }

  // A response the server makes itself, after which the connection closes.
  void respond_error(int status, const std::string& message) {
    cancel_read_deadline();
    const bool http10 = parser_ && parser_->is_header_done() && parser_->get().version() < 11;
    parser_.reset();
    state_ = State::Responding;
    close_after_ = true;
    in_.clear();
    channel_ = std::make_shared<ResponseChannel>(
        ctx_.channel_config, RequestFraming{.http10 = http10, .keep_alive = false}, make_wake());
    channel_->send(format_error(status, message));
    read_more();
  }

  void flush() {
    if (state_ == State::Closed || writing_) return;
    if (out_pos_ == out_.size()) {
      if (!channel_) return;
      ResponseChannel::Output o = channel_->take();
      if (o.abort) return close();  // stream buffer full, or the handler cut it off: gone
      close_after_ = close_after_ || o.close_after;
      out_ = std::move(o.bytes);
      out_pos_ = 0;
      out_is_interim_ = false;
      if (out_.empty()) {
        if (o.complete) finish_response();
        return;
      }
    }
    write_some();
  }

  // One socket write at a time; the write timeout restarts with each one, so it measures
  // a client that takes nothing, not a long response.
  void write_some() {
    writing_ = true;
    arm_write_deadline();
    socket_.async_write_some(
        asio::buffer(out_.data() + out_pos_, out_.size() - out_pos_),
        [self = shared_from_this()](error_code ec, size_t n) { self->on_written(ec, n); });
  }

  void on_written(error_code ec, size_t n) {
    writing_ = false;
    cancel_write_deadline();
    if (state_ == State::Closed) return;
    if (ec) return close();
    out_pos_ += n;
    if (channel_ && !out_is_interim_) channel_->written(n);
    if (out_pos_ == out_.size()) {
      out_.clear();
      out_pos_ = 0;
    }
    if (state_ == State::Reading) return;  // a 100 Continue went out
    flush();
  }

  void finish_response() {
    channel_->finish();
    channel_.reset();
    if (close_after_) return linger();
    start_request();  // parses a pipelined request at once
  }

  // --- Deadlines ------------------------------------------------------------------------
  // A timer's wait that completes after its deadline was cancelled or replaced is stale:
  // the generation tells.

  void arm_read_deadline(std::chrono::milliseconds timeout) {
    const uint64_t gen = ++read_deadline_gen_;
    read_timer_.expires_after(timeout);
    read_timer_.async_wait([self = shared_from_this(), gen](error_code ec) {
      if (!ec && gen == self->read_deadline_gen_) self->on_read_deadline();
    });
  }

  void cancel_read_deadline() {
    ++read_deadline_gen_;
    read_timer_.cancel();
  }

  void on_read_deadline() {
    if (state_ == State::Reading && request_started_) {
      respond_error(408, "the request did not arrive within " +
                             std::to_string(ctx_.opts.read_timeout.count()) + " ms");
    } else if (state_ == State::Reading || state_ == State::Lingering) {
      close();  // idle keep-alive connection, or done lingering
    }
  }

  void arm_write_deadline() {
    const uint64_t gen = ++write_deadline_gen_;
    write_timer_.expires_after(ctx_.opts.write_timeout);
    write_timer_.async_wait([self = shared_from_this(), gen](error_code ec) {
      if (!ec && gen == self->write_deadline_gen_ && self->writing_) self->close();
    });
  }

  void cancel_write_deadline() {
    ++write_deadline_gen_;
    write_timer_.cancel();
  }

  // --- Ending ---------------------------------------------------------------------------

  // The last response is written: stop sending, drain what the client still sends.
  void linger() {
    state_ = State::Lingering;
    in_.clear();
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    arm_read_deadline(std::min<std::chrono::milliseconds>(kLingerTime, ctx_.opts.read_timeout));
    read_more();
  }

  void close() {
    if (state_ == State::Closed) return;
    state_ = State::Closed;
    std::function<void()> on_disconnect;
    if (channel_) {  // the response did not complete: the client counts as gone
      on_disconnect = channel_->mark_gone();
      channel_.reset();
    }
    cancel_read_deadline();
    cancel_write_deadline();
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    parser_.reset();
    in_.clear();
    out_.clear();
    out_pos_ = 0;
    {
      std::lock_guard lock(ctx_.live_mu);
      ctx_.live.erase(this);
    }
    if (counted_) --ctx_.open_connections;
    call_safely(on_disconnect);
  }

  ServerContext& ctx_;
  const bool counted_;  // counts in ctx_.open_connections
  const asio::any_io_executor strand_;
  tcp::socket socket_;
  asio::steady_timer read_timer_;   // idle, request and linger deadlines
  asio::steady_timer write_timer_;  // the pending socket write's deadline
  uint64_t read_deadline_gen_ = 0;
  uint64_t write_deadline_gen_ = 0;
  const std::string remote_;
  State state_ = State::Reading;

  // Input. A read lands in read_buf_ and is then appended to in_, so that in_ may be parsed
  // and consumed while a read is pending.
  std::array<char, kReadChunk> read_buf_;
  beast::flat_buffer in_;  // received, not parsed yet (a pipelined request waits here)
  std::optional<http::request_parser<http::string_body>> parser_;
  bool reading_ = false;
  bool request_started_ = false;  // a byte of the request came: the read timeout runs
  bool continue_sent_ = false;

  // Output.
  std::shared_ptr<ResponseChannel> channel_;  // the pending response
  std::string out_;                           // taken from the channel, being written
  size_t out_pos_ = 0;
  bool out_is_interim_ = false;  // out_ is a 100 Continue, not the channel's bytes
  bool writing_ = false;
  bool close_after_ = false;  // the pending response is the connection's last
};

}  // namespace

void start_connection(tcp::socket socket, ServerContext& ctx) {
  const bool reject = ctx.open_connections.load() >= ctx.opts.max_connections;
  if (!reject) ++ctx.open_connections;
  auto connection = std::make_shared<Connection>(std::move(socket), ctx, !reject);
  {
    std::lock_guard lock(ctx.live_mu);
    ctx.live.emplace(connection.get(), connection);
  }
  connection->start(reject);
}

}  // namespace tokamak::server
