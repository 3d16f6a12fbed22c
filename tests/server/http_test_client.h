#pragma once
// A blocking HTTP/1.1 client over plain POSIX sockets for the HTTP server's tests: it sends
// raw bytes (so a test can send half a request, pipeline, or misbehave) and reads responses
// chunk by chunk. Every read has a deadline, so a broken server fails a test, never hangs it.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace tokamak::server::testing {

using namespace std::chrono_literals;
using Ms = std::chrono::milliseconds;

struct TestResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;

  std::optional<std::string> header(std::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (n == name) return v;
    }
    return std::nullopt;
  }
};

class TestClient {
 public:
  // `rcvbuf` > 0 shrinks the receive buffer (a client that reads nothing then stalls the
  // server sooner).
  explicit TestClient(uint16_t port, int rcvbuf = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~TestClient() { close(); }
  TestClient(const TestClient&) = delete;
  TestClient& operator=(const TestClient&) = delete;

  bool connected() const { return connected_; }

  bool send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(size_t(n));
    }
    return true;
  }

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // The status line and headers; the body is left to read_body() / read_chunk().
  std::optional<TestResponse> read_head(Ms timeout = 3000ms) {
    const auto deadline = Clock::now() + timeout;
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill(deadline)) return std::nullopt;
    }
    const std::string head = buf_.substr(0, end + 2);
    buf_.erase(0, end + 4);
    TestResponse r;
    size_t line_end = head.find("\r\n");
    const std::string status_line = head.substr(0, line_end);
    if (status_line.rfind("HTTP/1.", 0) != 0 || status_line.size() < 12) return std::nullopt;
    r.status = std::stoi(status_line.substr(9, 3));
    size_t pos = line_end + 2;
    while (pos < head.size()) {
      line_end = head.find("\r\n", pos);
      const std::string line = head.substr(pos, line_end - pos);
      pos = line_end + 2;
      const size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return char(std::tolower(c)); });
      size_t v = colon + 1;
      while (v < line.size() && line[v] == ' ') ++v;
      r.headers.emplace_back(std::move(name), line.substr(v));
    }
    return r;
  }

  // One whole response: its body by Content-Length, chunks, or (without either) until close.
  std::optional<TestResponse> read_response(Ms timeout = 3000ms) {
    auto r = read_head(timeout);
    if (!r) return std::nullopt;
    if (r->status == 204 || r->status == 304 || r->status / 100 == 1) return r;
    if (auto te = r->header("transfer-encoding"); te && *te == "chunked") {
      for (;;) {
        auto chunk = read_chunk(timeout);
        if (!chunk) return std::nullopt;
        if (chunk->empty()) return r;
        r->body += *chunk;
      }
    }
    const auto deadline = Clock::now() + timeout;
    if (auto cl = r->header("content-length")) {
      const size_t n = std::stoul(*cl);
      while (buf_.size() < n) {
        if (!fill(deadline)) return std::nullopt;
      }
      r->body = buf_.substr(0, n);
      buf_.erase(0, n);
      return r;
    }
    while (fill(deadline)) {
    }
    r->body = std::exchange(buf_, {});
    return r;
  }

  // The data of the next chunk of a chunked body; "" for the last one.
  std::optional<std::string> read_chunk(Ms timeout = 3000ms) {
    const auto deadline = Clock::now() + timeout;
    size_t eol;
    while ((eol = buf_.find("\r\n")) == std::string::npos) {
      if (!fill(deadline)) return std::nullopt;
    }
    const size_t size = std::stoul(buf_.substr(0, eol), nullptr, 16);
    while (buf_.size() < eol + 2 + size + 2) {
      if (!fill(deadline)) return std::nullopt;
    }
    std::string data = buf_.substr(eol + 2, size);
    buf_.erase(0, eol + 2 + size + 2);
    return data;
  }

  // Raw bytes: at least `n` of them.
  std::optional<std::string> read_exactly(size_t n, Ms timeout = 3000ms) {
    const auto deadline = Clock::now() + timeout;
    while (buf_.size() < n) {
      if (!fill(deadline)) return std::nullopt;
    }
    std::string out = buf_.substr(0, n);
    buf_.erase(0, n);
    return out;
  }

  // True when the server closes the connection (EOF or reset) within `timeout` and sent
  // nothing more before that.
  bool wait_closed(Ms timeout = 3000ms) {
    const auto deadline = Clock::now() + timeout;
    while (fill(deadline)) {
    }
    return closed_ && buf_.empty();
  }

 private:
  using Clock = std::chrono::steady_clock;

  // Reads what is there (waiting until `deadline`); false at EOF, error or the deadline.
  bool fill(Clock::time_point deadline) {
    if (fd_ < 0 || closed_) return false;
    const auto left = std::chrono::duration_cast<Ms>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
    if (::poll(&p, 1, int(left)) <= 0) return false;
    char tmp[16384];
    const ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) {
      closed_ = true;
      return false;
    }
    buf_.append(tmp, size_t(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
  std::string buf_;
};

// A one-shot event that a test waits for with a generous deadline.
class Event {
 public:
  void set() {
    std::lock_guard lock(mu_);
    set_ = true;
    cv_.notify_all();
  }
  bool wait(Ms timeout = 3000ms) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return set_; });
  }
  bool is_set() {
    std::lock_guard lock(mu_);
    return set_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool set_ = false;
};

// Polls `pred` until it holds or `timeout` passes (for state with nothing to wait on).
template <class Pred>
bool eventually(Pred pred, Ms timeout = 3000ms) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

inline std::string get_request(std::string_view target, std::string_view extra_headers = "") {
  return "GET " + std::string(target) + " HTTP/1.1\r\nHost: test\r\n" + std::string(extra_headers) +
         "\r\n";
}

inline std::string post_request(std::string_view target, std::string_view body,
                                std::string_view extra_headers = "") {
  return "POST " + std::string(target) +
         " HTTP/1.1\r\nHost: test\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
         std::string(extra_headers) + "\r\n" + std::string(body);
}

}  // namespace tokamak::server::testing
