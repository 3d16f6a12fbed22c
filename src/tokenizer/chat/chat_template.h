#pragma once
// A model's own chat template (GGUF metadata `tokenizer.chat_template`, the Jinja2 text from
// the model's tokenizer_config.json), rendered exactly as Hugging Face transformers'
// apply_chat_template renders it: an ImmutableSandboxedEnvironment with trim_blocks and
// lstrip_blocks, the loopcontrols extension (break/continue), the {% generation %} block,
// raise_exception(), strftime_now() and a tojson that is json.dumps(ensure_ascii=False).
//
//   auto tmpl = ChatTemplate::parse(gguf.get_string("tokenizer.chat_template"));
//   std::string prompt = tmpl.apply({{"system", "Be brief."}, {"user", "Hi"}},
//                                   /*add_generation_prompt=*/true, "<s>", "</s>");
//
// A ChatTemplate is immutable after parse(): apply() and render() are const, keep no state
// between calls, and may run on many threads at once.

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat/jinja_ast.h"
#include "tokenizer/chat/jinja_error.h"
#include "tokenizer/chat/jinja_eval.h"

namespace tokamak {

struct ChatMessage {
  std::string role;
  std::string content;
};

// Limits against runaway templates and the clock strftime_now() reads.
using ChatTemplateOptions = jinja::RenderOptions;

// Thrown when the template itself calls raise_exception(message), e.g. "Conversation roles
// must alternate user/assistant/user/assistant/...": a problem with the request's
// messages, not with the server. what() is the template's message verbatim.
using ChatTemplateRaised = jinja::RaisedError;

class ChatTemplate {
 public:
  // Throws Error naming any unsupported construct with its line and column, e.g.
  // "chat template: unsupported tag 'filter' at line 3, column 1".
  static ChatTemplate parse(std::string_view source);

  // Renders with the variables transformers passes: messages (list of {role, content}),
  // add_generation_prompt, bos_token, eos_token, tools=None, documents=None, then every key
  // of `extra` (a JSON object; its keys may override the others).
  std::string apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                    const std::string& bos_token, const std::string& eos_token,
                    const nlohmann::json& extra = nlohmann::json::object(),
                    const ChatTemplateOptions& options = {}) const;
  // The same with extra variables whose object keys keep their order (tools schemas that
  // the template prints with tojson come out in the caller's key order, as in Python).
  std::string apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                    const std::string& bos_token, const std::string& eos_token,
                    const nlohmann::ordered_json& extra,
                    const ChatTemplateOptions& options = {}) const;

  // General form: each key of the JSON object `context` is a template variable. JSON maps
  // to template values as Python's json module maps it (object -> dict, array -> list,
  // null -> None). Use ordered_json where key order matters to the template (tojson,
  // dict iteration); nlohmann::json orders keys alphabetically.
  std::string render(const nlohmann::json& context, const ChatTemplateOptions& options = {}) const;
  std::string render(const nlohmann::ordered_json& context,
                     const ChatTemplateOptions& options = {}) const;

  const std::string& source() const { return *source_; }

 private:
  ChatTemplate(std::shared_ptr<const std::string> source, std::shared_ptr<const jinja::Body> body)
      : source_(std::move(source)), body_(std::move(body)) {}

  std::string run(std::vector<std::pair<std::string, jinja::Value>> context,
                  const ChatTemplateOptions& options) const;
  std::string apply_vars(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                         const std::string& bos_token, const std::string& eos_token,
                         std::vector<std::pair<std::string, jinja::Value>> extra,
                         const ChatTemplateOptions& options) const;

  std::shared_ptr<const std::string> source_;
  std::shared_ptr<const jinja::Body> body_;
};

}  // namespace tokamak
