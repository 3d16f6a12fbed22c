#include "cli/bench_serve_sse.h"

#include <nlohmann/json.hpp>

namespace tokamak::cli {
namespace {

using nlohmann::json;

std::string clip(std::string_view s, size_t n = 200) {
  return s.size() <= n ? std::string(s) : std::string(s.substr(0, n)) + "...";
}

// The message of an OpenAI error object ({"message": ...}), a plain string, or the JSON.
std::string error_message(const json& error) {
  if (error.is_string()) return error.get<std::string>();
  if (error.is_object() && error.contains("message") && error["message"].is_string()) {
    return error["message"].get<std::string>();
  }
  return clip(error.dump());
}

std::optional<int64_t> count_field(const json& obj, const char* key) {
  if (!obj.contains(key) || !obj[key].is_number_integer()) return std::nullopt;
  return obj[key].get<int64_t>();
}

}  // namespace

std::vector<SseEvent> SseParser::feed(std::string_view bytes) {
  std::vector<SseEvent> events;
  size_t start = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (c != '\n' && c != '\r') {
      after_cr_ = false;
      continue;
    }
    const bool lf_after_cr = c == '\n' && after_cr_ && i == start && partial_.empty();
    after_cr_ = c == '\r';
    if (lf_after_cr) {  // the second half of a CRLF: the line has been taken already
      start = i + 1;
      continue;
    }
    partial_.append(bytes.substr(start, i - start));
    line(partial_, events);
    partial_.clear();
    start = i + 1;
  }
  partial_.append(bytes.substr(start));
  return events;
}

void SseParser::line(std::string_view text, std::vector<SseEvent>& events) {
  if (text.empty()) {  // the end of an event
    if (has_data_) {
      if (event_.name.empty()) event_.name = "message";
      events.push_back(std::move(event_));
    }
    event_ = {};
    has_data_ = false;
    return;
  }
  if (text.front() == ':') return;  // a comment (keep-alive)
  const size_t colon = text.find(':');
  const std::string_view field = text.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? "" : text.substr(colon + 1);
  if (value.starts_with(' ')) value.remove_prefix(1);
  if (field == "data" || field == "error") {
    if (has_data_) event_.data += '\n';
    event_.data.append(value);
    has_data_ = true;
    if (field == "error") event_.name = "error";
  } else if (field == "event") {
    event_.name = std::string(value);
  }
}

void StreamReader::feed(std::string_view bytes, BenchClock::time_point t) {
  for (const SseEvent& e : parser_.feed(bytes)) event(e, t);
}

void StreamReader::event(const SseEvent& e, BenchClock::time_point t) {
  ++trace_.events;
  if (e.data == "[DONE]") {
    trace_.done = true;
    return;
  }
  const json chunk = json::parse(e.data, nullptr, /*allow_exceptions=*/false);
  if (e.name == "error") {
    if (!trace_.error) {
      trace_.error = chunk.is_discarded()      ? clip(e.data)
                     : chunk.contains("error") ? error_message(chunk["error"])
                                               : error_message(chunk);
    }
    return;
  }
  if (!chunk.is_object()) {
    if (!trace_.error) trace_.error = "an event that is not a JSON object: " + clip(e.data);
    return;
  }
  if (chunk.contains("error") && !chunk["error"].is_null()) {
    if (!trace_.error) trace_.error = error_message(chunk["error"]);
    return;
  }
  if (chunk.contains("usage") && chunk["usage"].is_object()) {
    const json& usage = chunk["usage"];
    if (auto n = count_field(usage, "prompt_tokens")) trace_.prompt_tokens = n;
    if (auto n = count_field(usage, "completion_tokens")) trace_.completion_tokens = n;
    if (usage.contains("prompt_tokens_details") && usage["prompt_tokens_details"].is_object()) {
      const json& details = usage["prompt_tokens_details"];
      if (auto n = count_field(details, "cached_tokens")) trace_.cached_tokens = n;
    }
  }
  if (!chunk.contains("choices") || !chunk["choices"].is_array() || chunk["choices"].empty()) {
    return;
  }
  const json& choice = chunk["choices"][0];
  if (!choice.is_object()) return;
  const json* text = nullptr;
  if (choice.contains("text")) {
    text = &choice["text"];
  } else if (choice.contains("delta") && choice["delta"].is_object() &&
             choice["delta"].contains("content")) {
    text = &choice["delta"]["content"];
  }
  if (text && text->is_string() && !text->get_ref<const std::string&>().empty()) {
    trace_.content_times.push_back(t);
    trace_.text += text->get_ref<const std::string&>();
  }
  if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
    trace_.finish_reason = choice["finish_reason"].get<std::string>();
  }
}

}  // namespace tokamak::cli
