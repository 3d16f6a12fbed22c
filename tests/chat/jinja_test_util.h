#pragma once
// Helpers for the engine's unit tests: render a template string with a JSON context.

#include <string>

#include "tokenizer/chat/chat_template.h"

namespace tokamak::test {

// Renders `source` with the variables of the JSON object `context` (key order kept).
inline std::string render(const std::string& source, const std::string& context = "{}",
                          const ChatTemplateOptions& options = {}) {
  return ChatTemplate::parse(source).render(nlohmann::ordered_json::parse(context), options);
}

// The message of the Error that rendering (or parsing) `source` throws; "" if none.
inline std::string render_error(const std::string& source, const std::string& context = "{}",
                                const ChatTemplateOptions& options = {}) {
  try {
    render(source, context, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace tokamak::test
