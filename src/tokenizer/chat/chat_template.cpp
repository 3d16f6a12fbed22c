#include "tokenizer/chat/chat_template.h"

#include <algorithm>

#include "tokenizer/chat/jinja_parser.h"

namespace tokamak {

namespace {

// JSON nested deeper than this is rejected rather than recursed into.
constexpr int kMaxJsonDepth = 256;

template <typename Json>
jinja::Value from_json(const Json& j, int depth) {
  using jinja::Value;
  if (depth > kMaxJsonDepth) throw Error("chat template: context JSON nested too deeply");
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value::none();
    case nlohmann::json::value_t::boolean:
      return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float:
      return Value(j.template get<double>());
    case nlohmann::json::value_t::string:
      return Value(j.template get_ref<const std::string&>());
    case nlohmann::json::value_t::array: {
      jinja::List items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(from_json(item, depth + 1));
      return Value(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      jinja::Dict dict;
      dict.items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        dict.items.emplace_back(Value(it.key()), from_json(it.value(), depth + 1));
      }
      return Value(std::move(dict));
    }
    default:
      throw Error("chat template: context JSON holds a value of unsupported type");
  }
}

template <typename Json>
std::vector<std::pair<std::string, jinja::Value>> context_from_json(const Json& context) {
  if (!context.is_object()) throw Error("chat template: the render context must be a JSON object");
  std::vector<std::pair<std::string, jinja::Value>> vars;
  for (auto it = context.begin(); it != context.end(); ++it) {
    vars.emplace_back(it.key(), from_json(it.value(), 1));
  }
  return vars;
}

}  // namespace

ChatTemplate ChatTemplate::parse(std::string_view source) {
  auto body = std::make_shared<const jinja::Body>(jinja::parse_template(source));
  return ChatTemplate(std::make_shared<const std::string>(source), std::move(body));
}

std::string ChatTemplate::apply(const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt, const std::string& bos_token,
                                const std::string& eos_token, const nlohmann::json& extra,
                                const ChatTemplateOptions& options) const {
  if (!extra.is_object()) throw Error("chat template: extra variables must be a JSON object");
  return apply_vars(messages, add_generation_prompt, bos_token, eos_token, context_from_json(extra),
                    options);
}

std::string ChatTemplate::apply(const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt, const std::string& bos_token,
                                const std::string& eos_token, const nlohmann::ordered_json& extra,
                                const ChatTemplateOptions& options) const {
  if (!extra.is_object()) throw Error("chat template: extra variables must be a JSON object");
  return apply_vars(messages, add_generation_prompt, bos_token, eos_token, context_from_json(extra),
                    options);
}

std::string ChatTemplate::apply_vars(const std::vector<ChatMessage>& messages,
                                     bool add_generation_prompt, const std::string& bos_token,
                                     const std::string& eos_token,
                                     std::vector<std::pair<std::string, jinja::Value>> extra,
                                     const ChatTemplateOptions& options) const {
  using jinja::Value;
  jinja::List list;
  list.reserve(messages.size());
  for (const ChatMessage& m : messages) {
    jinja::Dict dict;
    dict.items.emplace_back(Value("role"), Value(m.role));
    dict.items.emplace_back(Value("content"), Value(m.content));
    list.emplace_back(std::move(dict));
  }
  // What transformers' apply_chat_template passes to render(); extra variables override.
  std::vector<std::pair<std::string, Value>> vars;
  vars.emplace_back("messages", Value(std::move(list)));
  vars.emplace_back("tools", Value::none());
  vars.emplace_back("documents", Value::none());
  vars.emplace_back("add_generation_prompt", Value(add_generation_prompt));
  vars.emplace_back("bos_token", Value(bos_token));
  vars.emplace_back("eos_token", Value(eos_token));
  for (auto& [name, value] : extra) {
    auto it =
        std::find_if(vars.begin(), vars.end(), [&](const auto& var) { return var.first == name; });
    if (it != vars.end()) {
      it->second = std::move(value);
    } else {
      vars.emplace_back(std::move(name), std::move(value));
    }
  }
  return run(std::move(vars), options);
}

std::string ChatTemplate::render(const nlohmann::json& context,
                                 const ChatTemplateOptions& options) const {
  return run(context_from_json(context), options);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context,
                                 const ChatTemplateOptions& options) const {
  return run(context_from_json(context), options);
}

std::string ChatTemplate::run(std::vector<std::pair<std::string, jinja::Value>> context,
                              const ChatTemplateOptions& options) const {
  jinja::Interpreter interpreter(options);
  try {
    return interpreter.render(*body_, std::move(context));
  } catch (const jinja::RenderError& err) {
    if (err.located()) throw;
    throw jinja::RenderError("chat template: " + std::string(err.what()), true);
  }
}

}  // namespace tokamak
