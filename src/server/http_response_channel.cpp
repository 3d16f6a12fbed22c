#include "server/http_response_channel.h"

#include <algorithm>
#include <utility>

#include "server/http_wire.h"

namespace tokamak::server {
namespace {

ConnectionHeader connection_header(bool close, bool http10) {
  if (close) return ConnectionHeader::Close;
  return http10 ? ConnectionHeader::KeepAlive : ConnectionHeader::None;
}

class ChannelWriter final : public ResponseWriter {
 public:
  explicit ChannelWriter(std::shared_ptr<ResponseChannel> channel) : channel_(std::move(channel)) {}
  ~ChannelWriter() override {
    try {
      channel_->fail("the request handler ended without answering");
    } catch (...) {  // a destructor must not throw; the connection still times out or closes
    }
  }

  void send(HttpResponse response) override { channel_->send(std::move(response)); }
  void begin_stream(int status, std::string content_type, HttpHeaders headers) override {
    channel_->begin_stream(status, std::move(content_type), std::move(headers));
  }
  bool write(std::string chunk) override { return channel_->write(chunk); }
  void end() override { channel_->end(); }
  bool client_gone() const override { return channel_->client_gone(); }
  void on_disconnect(std::function<void()> fn) override { channel_->on_disconnect(std::move(fn)); }

 private:
  std::shared_ptr<ResponseChannel> channel_;
};

}  // namespace

ResponseChannel::ResponseChannel(std::shared_ptr<const ChannelConfig> config,
                                 RequestFraming framing, std::function<void()> wake)
    : config_(std::move(config)), framing_(framing), wake_(std::move(wake)) {}

void ResponseChannel::queue_locked(std::string bytes) {
  unsent_ += bytes.size();
  if (out_.empty()) {
    out_ = std::move(bytes);
  } else {
    out_ += bytes;
  }
  if (!wake_pending_ && wake_) {
    wake_pending_ = true;
    wake_();
  }
}

void ResponseChannel::send_locked(HttpResponse response) {
  if (phase_ != Phase::Idle || !attached_locked()) return;
  close_after_ = !framing_.keep_alive;
  const bool has_body = !status_has_no_body(response.status);
  std::string bytes;
  bytes.reserve(256 + (has_body ? response.body.size() : 0));
  append_head(bytes,
              {.status = response.status,
               .content_type = response.content_type,
               .framing = BodyFraming::ContentLength,
               .content_length = response.body.size(),
               .connection = connection_header(close_after_, framing_.http10)},
              config_->common_headers, response.headers);
  if (has_body) bytes += response.body;
  phase_ = Phase::Sent;
  queue_locked(std::move(bytes));
}

void ResponseChannel::send(HttpResponse response) {
  std::lock_guard lock(mu_);
  send_locked(std::move(response));
}

void ResponseChannel::begin_stream(int status, std::string content_type, HttpHeaders headers) {
  std::lock_guard lock(mu_);
  if (phase_ != Phase::Idle || !attached_locked()) return;
  // HTTP/1.0 has no chunked encoding: the stream is the rest of the connection.
  chunked_ = !framing_.http10;
  close_after_ = !framing_.keep_alive || !chunked_;
  std::string bytes;
  append_head(bytes,
              {.status = status,
               .content_type = content_type,
               .framing = chunked_ ? BodyFraming::Chunked : BodyFraming::UntilClose,
               .connection = connection_header(close_after_, framing_.http10)},
              config_->common_headers, headers);
  phase_ = Phase::Streaming;
  queue_locked(std::move(bytes));
}

bool ResponseChannel::write(std::string_view chunk) {
  std::lock_guard lock(mu_);
  if (!attached_locked() || gone_ || phase_ != Phase::Streaming) return false;
  if (chunk.empty()) return true;
  // A chunk larger than the limit still goes out when nothing else is waiting.
  if (unsent_ > 0 && unsent_ + chunk.size() > config_->max_unsent_bytes) {
    gone_ = true;
    phase_ = Phase::Aborted;
    close_after_ = true;
    queue_locked({});
    return false;
  }
  std::string bytes;
  if (chunked_) {
    append_chunk(bytes, chunk);
  } else {
    bytes.assign(chunk);
  }
  queue_locked(std::move(bytes));
  return true;
}

void ResponseChannel::end() {
  std::lock_guard lock(mu_);
  if (phase_ != Phase::Streaming || !attached_locked()) return;
  phase_ = Phase::Ended;
  queue_locked(chunked_ ? std::string(kLastChunk) : std::string());
}

bool ResponseChannel::client_gone() const {
  std::lock_guard lock(mu_);
  return gone_;
}

void ResponseChannel::on_disconnect(std::function<void()> fn) {
  std::function<void()> dropped;  // destroyed outside the lock: it may own this channel's writer
  {
    std::lock_guard lock(mu_);
    if (!gone_) {
      if (attached_locked()) {
        dropped = std::exchange(on_disconnect_, std::move(fn));
      } else {
        dropped = std::move(fn);  // the response completed: it will never be needed
      }
      return;
    }
    // Replaces one the connection has not called yet (the stream buffer overflowed).
    dropped = std::exchange(on_disconnect_, nullptr);
    disconnect_called_ = true;
  }
  fn();  // already gone: right away, on this thread
}

void ResponseChannel::fail(const std::string& message) {
  std::lock_guard lock(mu_);
  if (!attached_locked()) return;
  if (phase_ == Phase::Streaming) {
    phase_ = Phase::Aborted;
    close_after_ = true;
    queue_locked({});
    return;
  }
  if (phase_ != Phase::Idle) return;
  // The formatter runs under the lock, so only while the channel is attached (the server,
  // and what the formatter refers to, still alive). It must not turn one failure into two.
  HttpResponse response;
  try {
    response = config_->errors(500, message);
  } catch (...) {
    response = default_error_response(500, message);
  }
  send_locked(std::move(response));
}

ResponseChannel::Output ResponseChannel::take() {
  std::lock_guard lock(mu_);
  Output out;
  out.bytes = std::exchange(out_, {});
  out.complete = phase_ == Phase::Sent || phase_ == Phase::Ended;
  out.abort = phase_ == Phase::Aborted;
  out.close_after = close_after_;
  wake_pending_ = false;
  return out;
}

void ResponseChannel::written(size_t n) {
  std::lock_guard lock(mu_);
  unsent_ -= std::min(n, unsent_);
}

void ResponseChannel::finish() {
  std::function<void()> dropped;
  std::lock_guard lock(mu_);
  wake_ = nullptr;
  dropped = std::exchange(on_disconnect_, nullptr);
  // `dropped` is declared before the lock, so it is destroyed after the unlock.
}

std::function<void()> ResponseChannel::mark_gone() {
  std::lock_guard lock(mu_);
  if (!attached_locked()) return {};
  gone_ = true;
  wake_ = nullptr;
  out_.clear();
  if (disconnect_called_ || !on_disconnect_) return {};
  disconnect_called_ = true;
  return std::exchange(on_disconnect_, nullptr);
}

std::shared_ptr<ResponseWriter> make_response_writer(std::shared_ptr<ResponseChannel> channel) {
  return std::make_shared<ChannelWriter>(std::move(channel));
}

}  // namespace tokamak::server
