#pragma once
// What `tokamak bench serve` reads from a streamed OpenAI response, independent of the
// socket: server-sent events cut from bytes however they arrive, and the OpenAI chunks they
// carry (text or delta.content, usage, error events, "[DONE]"), each content chunk stamped
// with the time its bytes arrived.
//
//   bytes ──SseParser──▶ event data ──StreamReader──▶ StreamTrace
//   "data: {...}\n\n"     "{...}"                      content_times, text, usage, error

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tokamak::cli {

using BenchClock = std::chrono::steady_clock;

struct SseEvent {
  std::string name;  // the "event:" field; "message" when there is none
  std::string data;
};

// Splits a text/event-stream into events (W3C EventSource rules: lines end in \n, \r\n or
// \r; "data:" lines of one event are joined with \n; a blank line ends the event; comments
// and unknown fields are ignored). One addition: an "error:" line, which llama.cpp's server
// sends instead of "event: error" + "data:", makes an event named "error". Bytes may be cut
// anywhere, even inside a CRLF.
class SseParser {
 public:
  // Every event that `bytes` completes, in order.
  std::vector<SseEvent> feed(std::string_view bytes);

 private:
  void line(std::string_view text, std::vector<SseEvent>& events);

  std::string partial_;    // an unfinished line
  bool after_cr_ = false;  // the last byte was \r: a following \n belongs to it
  SseEvent event_;
  bool has_data_ = false;
};

// One streamed completion as the client saw it.
struct StreamTrace {
  std::vector<BenchClock::time_point> content_times;  // one per chunk with non-empty text
  std::string text;                                   // all text, concatenated
  std::optional<int64_t> prompt_tokens;               // from the usage chunk
  std::optional<int64_t> completion_tokens;
  // usage.prompt_tokens_details.cached_tokens (OpenAI, vLLM, tokamak): prompt tokens the
  // server took from its prefix cache; nullopt when the server does not say.
  std::optional<int64_t> cached_tokens;
  std::optional<std::string> error;  // an error event, or an event that is not OpenAI's shape
  std::optional<std::string> finish_reason;
  bool done = false;  // "data: [DONE]" arrived
  int64_t events = 0;
};

// Reads OpenAI streaming chunks of /v1/completions (choices[0].text) or
// /v1/chat/completions (choices[0].delta.content); either is accepted from either endpoint.
class StreamReader {
 public:
  // `bytes` of the response body, arrived at `t`.
  void feed(std::string_view bytes, BenchClock::time_point t);
  const StreamTrace& trace() const { return trace_; }
  StreamTrace take() { return std::move(trace_); }

 private:
  void event(const SseEvent& e, BenchClock::time_point t);

  SseParser parser_;
  StreamTrace trace_;
};

}  // namespace tokamak::cli
