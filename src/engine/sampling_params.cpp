#include "engine/sampling_params.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>

namespace tokamak {
namespace {

// Shortest text that reads back as the same float: "0.1", "-1", "nan".
std::string show(float value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

std::string show(int32_t value) {
  return std::to_string(value);
}
std::string show(size_t value) {
  return std::to_string(value);
}

// Well-formed UTF-8 per RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF.
bool valid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      ++i;
      continue;
    }
    size_t length = 0;
    unsigned char low = 0x80;  // allowed range of the second byte
    unsigned char high = 0xBF;
    if (byte >= 0xC2 && byte <= 0xDF) {
      length = 2;
    } else if (byte >= 0xE0 && byte <= 0xEF) {
      length = 3;
      if (byte == 0xE0) low = 0xA0;   // overlong
      if (byte == 0xED) high = 0x9F;  // surrogates
    } else if (byte >= 0xF0 && byte <= 0xF4) {
      length = 4;
      if (byte == 0xF0) low = 0x90;   // overlong
      if (byte == 0xF4) high = 0x8F;  // above U+10FFFF
    } else {
      return false;
    }
    if (text.size() - i < length) return false;
    const auto second = static_cast<unsigned char>(text[i + 1]);
    if (second < low || second > high) return false;
    for (size_t k = 2; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if (next < 0x80 || next > 0xBF) return false;
    }
    i += length;
  }
  return true;
}

}  // namespace

size_t SamplingParams::longest_stop_bytes() const {
  size_t longest = 0;
  for (const std::string& s : stop) longest = std::max(longest, s.size());
  return longest;
}

std::optional<std::string> SamplingParams::validate(std::optional<int32_t> vocab_size) const {
  // Comparisons are written so that NaN fails them.
  if (!(temperature >= 0.0f) || !std::isfinite(temperature)) {
    return "temperature must be a finite number >= 0, got " + show(temperature);
  }
  if (top_k < -1) {
    return "top_k must be -1 or 0 (off) or >= 1, got " + show(top_k);
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return "top_p must be in (0, 1], got " + show(top_p);
  }
  if (!(min_p >= 0.0f && min_p <= 1.0f)) {
    return "min_p must be in [0, 1], got " + show(min_p);
  }
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty)) {
    return "repetition_penalty must be a finite number > 0, got " + show(repetition_penalty);
  }
  if (!(presence_penalty >= -kMaxPenalty && presence_penalty <= kMaxPenalty)) {
    return "presence_penalty must be in [-2, 2], got " + show(presence_penalty);
  }
  if (!(frequency_penalty >= -kMaxPenalty && frequency_penalty <= kMaxPenalty)) {
    return "frequency_penalty must be in [-2, 2], got " + show(frequency_penalty);
  }
  if (max_tokens && *max_tokens < 1) {
    return "max_tokens must be >= 1, got " + show(*max_tokens);
  }
  if (logprobs && (*logprobs < 0 || *logprobs > kMaxLogprobs)) {
    return "logprobs must be in [0, " + show(kMaxLogprobs) + "], got " + show(*logprobs);
  }
  if (stop.size() > kMaxStopStrings) {
    return "stop may hold at most " + show(kMaxStopStrings) + " strings, got " + show(stop.size());
  }
  for (size_t i = 0; i < stop.size(); ++i) {
    const std::string where = "stop[" + show(i) + "]";
    if (stop[i].empty()) return where + " must not be empty";
    if (stop[i].size() > kMaxStopStringBytes) {
      return where + " must be at most " + show(kMaxStopStringBytes) + " bytes long, got " +
             show(stop[i].size());
    }
    if (!valid_utf8(stop[i])) return where + " is not valid UTF-8";
  }
  if (stop_token_ids.size() > kMaxStopTokenIds) {
    return "stop_token_ids may hold at most " + show(kMaxStopTokenIds) + " ids, got " +
           show(stop_token_ids.size());
  }
  for (size_t i = 0; i < stop_token_ids.size(); ++i) {
    const int32_t id = stop_token_ids[i];
    if (id < 0 || (vocab_size && id >= *vocab_size)) {
      std::string message = "stop_token_ids[" + show(i) + "] must be ";
      message += vocab_size ? "in [0, " + show(*vocab_size) + ")" : std::string(">= 0");
      return message + ", got " + show(id);
    }
  }
  return std::nullopt;
}

}  // namespace tokamak
