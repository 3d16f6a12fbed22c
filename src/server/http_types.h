#pragma once
// The HTTP layer's plain types, shared by the server (http_server.h, Beast inside) and the
// application that routes requests to the engine (api_server.h). No Boost here: a handler
// sees a parsed request and answers through a ResponseWriter, now or later, from any thread.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tokamak::server {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;   // "GET", "POST", ...
  std::string target;   // as sent: "/v1/models?x=1"
  std::string path;     // target without the query: "/v1/models"
  std::string query;    // after '?', may be empty
  HttpHeaders headers;  // names lower-cased
  std::string body;
  std::string remote;  // "127.0.0.1:53412"

  // The first header of that (lower-case) name.
  std::optional<std::string_view> header(std::string_view lower_name) const {
    for (const auto& [name, value] : headers) {
      if (name == lower_name) return std::string_view(value);
    }
    return std::nullopt;
  }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  HttpHeaders headers;  // extra ones, e.g. Retry-After
  std::string body;
};

// How a handler answers one request, now or later, from any thread (every method is
// thread-safe and non-blocking).
class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  // A whole response (with Content-Length). At most once, and not after begin_stream().
  virtual void send(HttpResponse response) = 0;
  // A chunked response (Transfer-Encoding: chunked): the headers now, then write() chunks,
  // then end().
  virtual void begin_stream(int status, std::string content_type, HttpHeaders headers = {}) = 0;
  // Queues one chunk. Returns false once the client is gone (the caller then drops its work).
  virtual bool write(std::string chunk) = 0;
  // The final zero-length chunk; the connection may then serve its next request.
  virtual void end() = 0;
  // True once the client went away before the response completed: EOF or reset while the
  // handler worked or streamed, a failed write, or the write timeout.
  virtual bool client_gone() const = 0;
  // Called once, on an I/O thread, when the client goes away before the response completed;
  // never after send() or end() finished. Set it at once in the handler; keep it cheap. If
  // the client is already gone when it is set, it is called right away.
  virtual void on_disconnect(std::function<void()> fn) = 0;
};

using Handler = std::function<void(const HttpRequest&, std::shared_ptr<ResponseWriter>)>;

// Makes the server's own error responses (400 malformed HTTP, 404, 405, 408, 413, 431, 503
// too many connections) in the application's shape: tokamak answers OpenAI error objects.
using ErrorFormatter = std::function<HttpResponse(int status, const std::string& message)>;

}  // namespace tokamak::server
