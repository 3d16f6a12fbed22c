#pragma once
// HttpServer: HTTP/1.1 over TCP for `tokamak serve` (Boost.Beast inside, none of it here).
//
//   HttpServer server({.host = "127.0.0.1", .port = 0}, errors);
//   server.route("GET", "/health", [](const HttpRequest& req, std::shared_ptr<ResponseWriter> w) {
//     w->send(health_response());          // now, or later from another thread
//   });
//   server.start();                        // throws tokamak::Error if it cannot listen
//   ... server.port() ...
//   server.stop();                         // or the destructor
//
// `io_threads` threads run the connections; each connection is served on one strand, one
// request at a time (pipelined requests wait their turn). Handlers run on an I/O thread and
// must not block it: long work answers later, from any thread, through the ResponseWriter.
// While a response is pending the connection keeps reading, so that a client that goes away
// is noticed at once (ResponseWriter::on_disconnect).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "server/http_types.h"

namespace tokamak::server {

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // an address or a name that resolves to one
  uint16_t port = 8080;            // 0 = any free port; port() tells which
  int io_threads = 1;
  size_t max_header_bytes = 16 * 1024;       // request line + headers; over: 431
  size_t max_body_bytes = 16 * 1024 * 1024;  // over: 413, from Content-Length before the body
  // A request (headers + body) must arrive within this once its first byte came: else 408.
  std::chrono::milliseconds read_timeout{30000};
  // A keep-alive connection with no request for this long is closed (silently).
  std::chrono::milliseconds idle_timeout{60000};
  // A client that takes no bytes for this long while we write is dropped (counts as gone).
  std::chrono::milliseconds write_timeout{30000};
  // Queued but unsent response bytes over this: the client is treated as gone.
  size_t max_stream_buffer_bytes = 4 * 1024 * 1024;
  // Empty: no CORS headers. Else the Access-Control-Allow-Origin value of every response,
  // and OPTIONS on a known path is a preflight answered 204.
  std::string cors_allow_origin;
  size_t max_connections = 1024;  // over: a new connection gets 503 and is closed
};

class HttpServer {
 public:
  // `errors` formats the server's own error responses; empty: {"error":{"message":...}}.
  // Throws tokamak::Error for options that cannot work (io_threads < 1, a zero limit).
  explicit HttpServer(HttpServerOptions opts, ErrorFormatter errors = {});
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Exact path match. Only before start().
  void route(std::string method, std::string path, Handler handler);

  // Binds (SO_REUSEADDR) and listens, then runs the I/O threads in the background. Throws
  // tokamak::Error naming the address when it cannot (in use, not an address of this host).
  void start();
  uint16_t port() const;  // the bound port (after start())

  // Closes the listener; open connections go on being served.
  void stop_accepting();
  // Closes every connection (pending responses see client_gone() and on_disconnect) and
  // joins the I/O threads. Idempotent; not from a handler (an I/O thread).
  void stop();

  size_t open_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tokamak::server
