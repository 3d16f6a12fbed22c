#pragma once
// JSON to text for HTTP bodies. Token pieces can end inside a UTF-8 character (a logprob's
// token text, a byte-fallback token): invalid bytes become U+FFFD instead of throwing, so a
// response is never lost to one odd token.

#include <nlohmann/json.hpp>
#include <string>

namespace tokamak::server {

inline std::string to_json_text(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tokamak::server
