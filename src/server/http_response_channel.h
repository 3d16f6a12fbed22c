#pragma once
// ResponseChannel: one request's response on its way from a handler to the connection.
//
//   handler side (any thread)                    connection side (its strand)
//   send / begin_stream / write / end  --bytes-->  take() -> socket writes -> written(n)
//        (mutex; serialize; wake)      --wake--->  (posted; one wake outstanding at most)
//   client_gone / on_disconnect       <--------  mark_gone() (EOF, reset, timeouts, stop)
//                                                finish() once the last byte went out
//
// The handler side never blocks and never touches the socket: it serializes the response
// under the mutex and asks the connection, through `wake`, to come and take it. Chunks
// queued before the connection comes go out in one socket write. The connection detaches
// the channel when the response is complete or the client is gone; a detached channel
// drops what the handler still sends, and write() answers false.

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "server/http_types.h"

namespace tokamak::server {

// What every channel of one server shares (immutable).
struct ChannelConfig {
  ErrorFormatter errors;       // formats the 500 when a handler throws or drops its writer
  HttpHeaders common_headers;  // on every response: Server, CORS
  size_t max_unsent_bytes = 4 * 1024 * 1024;  // queued, unwritten bytes over this: gone
};

// What the request implies for the response's framing.
struct RequestFraming {
  bool http10 = false;     // an HTTP/1.0 client: no chunked encoding, a stream ends at close
  bool keep_alive = true;  // the connection may serve another request after this one
};

class ResponseChannel {
 public:
  // `wake` is called with the channel's mutex held and must only post the connection's
  // flush to its strand (never run it inline).
  ResponseChannel(std::shared_ptr<const ChannelConfig> config, RequestFraming framing,
                  std::function<void()> wake);
  ResponseChannel(const ResponseChannel&) = delete;
  ResponseChannel& operator=(const ResponseChannel&) = delete;

  // --- Handler side: ResponseWriter's methods, from any thread. Calls out of order (a
  // second send, write before begin_stream) are ignored; write() then answers false.
  void send(HttpResponse response);
  void begin_stream(int status, std::string content_type, HttpHeaders headers);
  bool write(std::string_view chunk);
  void end();
  bool client_gone() const;
  void on_disconnect(std::function<void()> fn);
  // The handler failed (threw, or dropped its writer unanswered): a 500 with `message` if
  // nothing was sent yet; an unfinished stream is cut off (the connection closes).
  void fail(const std::string& message);

  // --- Connection side, on its strand.
  struct Output {
    std::string bytes;         // to write after everything taken before
    bool complete = false;     // the response ends with these bytes
    bool abort = false;        // the response cannot complete: close the connection now
    bool close_after = false;  // close the connection once the response is written
  };
  Output take();
  void written(size_t n);  // n taken bytes reached the socket
  void finish();           // the whole response was written: detach
  // The client is gone (or the server closes the connection) before the response was
  // written: detach, and return on_disconnect for the caller to call, outside any lock
  // (empty when unset or already called).
  [[nodiscard]] std::function<void()> mark_gone();

 private:
  enum class Phase { Idle, Sent, Streaming, Ended, Aborted };

  void queue_locked(std::string bytes);  // appends and wakes the connection
  void send_locked(HttpResponse response);
  bool attached_locked() const { return static_cast<bool>(wake_); }

  const std::shared_ptr<const ChannelConfig> config_;
  const RequestFraming framing_;

  mutable std::mutex mu_;
  Phase phase_ = Phase::Idle;
  bool chunked_ = false;       // the stream uses chunked encoding (else it ends at close)
  bool close_after_ = false;   // set from the framing and the kind of response
  std::string out_;            // serialized, not yet taken
  size_t unsent_ = 0;          // queued or taken, not yet written
  bool wake_pending_ = false;  // a wake was posted and take() has not run since
  bool gone_ = false;
  std::function<void()> wake_;  // empty once detached
  std::function<void()> on_disconnect_;
  bool disconnect_called_ = false;
};

// The handler's ResponseWriter over a channel. When the handler drops the last reference
// without having answered, the channel fails with a 500 (so the client never hangs).
std::shared_ptr<ResponseWriter> make_response_writer(std::shared_ptr<ResponseChannel> channel);

}  // namespace tokamak::server
