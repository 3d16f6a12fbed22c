#pragma once
// Errors of the chat-template engine. All are tokamak::Error (one line a user can act on).

#include <string>
#include <string_view>

#include "core/error.h"

namespace tokamak::jinja {

// Joins message pieces. (Also sidesteps GCC 12's false -Wrestrict warning on
// `"literal" + std::string&&`.)
template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::string out;
  (out.append(std::string_view(parts)), ...);
  return out;
}

// A template that cannot be parsed: unsupported or malformed syntax, with its location.
class SyntaxError : public Error {
 public:
  explicit SyntaxError(const std::string& message) : Error(message) {}
};

// Rendering failed (undefined used, wrong type, runaway limits). Thrown without a location
// from deep inside the engine; the interpreter adds the template line and column once.
class RenderError : public Error {
 public:
  explicit RenderError(const std::string& message, bool located = false)
      : Error(message), located_(located) {}
  bool located() const { return located_; }

 private:
  bool located_;
};

// The template itself called raise_exception(message): the message is the template
// author's, verbatim (e.g. "Conversation roles must alternate user/assistant/...").
class RaisedError : public Error {
 public:
  explicit RaisedError(const std::string& message) : Error(message) {}
};

}  // namespace tokamak::jinja
