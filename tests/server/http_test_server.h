#pragma once
// The server side of the HTTP server's tests: options for a server on an ephemeral port, and
// a plain-text response.

#include <string>
#include <utility>

#include "server/http_server.h"

namespace tokamak::server::testing {

// Port 0 (the OS picks one) and two I/O threads, so that a handler blocking one thread does
// not stall the other connections.
inline HttpServerOptions test_options() {
  HttpServerOptions o;
  o.port = 0;
  o.io_threads = 2;
  return o;
}

inline HttpResponse text(std::string body) {
  HttpResponse r;
  r.content_type = "text/plain";
  r.body = std::move(body);
  return r;
}

}  // namespace tokamak::server::testing
