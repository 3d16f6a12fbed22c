#pragma once
// Internal to the HTTP server (http_server.cpp and http_connection.cpp, the two Asio TUs):
// what all connections of one server share, and how the server starts and stops a
// connection. Beast stays in http_connection.cpp.
//
// A connection serves its requests one at a time on a strand of its own:
//
//   Reading ──request──> Responding ──response written, keep-alive──> Reading
//      │                    │  └──written, Connection: close / server error──> Lingering
//      │ idle timeout       │ EOF, reset, write timeout, stream buffer full ──> Closed
//      └─> Closed           (on_disconnect fires)        Lingering ──EOF/1 s──> Closed

// clang-format off
#include <utility>  // before any Asio header: Boost 1.74's awaitable.hpp needs it
// clang-format on

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "server/http_response_channel.h"
#include "server/http_router.h"
#include "server/http_server.h"

namespace tokamak::server {

// The server's side of one connection (thread-safe).
class ConnectionHandle {
 public:
  virtual ~ConnectionHandle() = default;
  // Closes the connection on its strand: a pending response sees the client gone.
  virtual void close_async() = 0;
  // Only once the I/O threads stopped: detaches the pending response (if any), so that its
  // writer never touches the connection again.
  virtual void detach() = 0;
};

struct ServerContext {
  HttpServerOptions opts;
  Router router;
  ErrorFormatter errors;  // never empty
  std::shared_ptr<const ChannelConfig> channel_config;

  std::atomic<size_t> open_connections{0};  // served ones; rejected (503) ones not counted

  // Every connection not closed yet, for stop().
  std::mutex live_mu;
  std::unordered_map<const ConnectionHandle*, std::weak_ptr<ConnectionHandle>> live;
};

// Serves `socket`, whose executor must be a strand of its own. Over
// ctx.opts.max_connections, answers 503 and closes instead. The connection registers in
// ctx.live until it closes.
void start_connection(boost::asio::ip::tcp::socket socket, ServerContext& ctx);

}  // namespace tokamak::server
