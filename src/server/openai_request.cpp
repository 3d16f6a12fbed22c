#include "server/openai_request.h"

#include <cmath>
#include <limits>

#include "engine/request.h"
#include "server/chat_prompt.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::server {
namespace {

using nlohmann::json;

[[noreturn]] void invalid(const std::string& param, const std::string& message,
                          const std::string& code = {}) {
  throw ApiError(400, message, param, code);
}

std::string type_name(const json& v) {
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

// Typed access to the optional fields of one JSON object; null counts as absent, as in
// OpenAI's API.
class Fields {
 public:
  explicit Fields(const json& object) : object_(object) {}

  const json* get(const char* name) const {
    auto it = object_.find(name);
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  std::optional<bool> boolean(const char* name) const {
    const json* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) invalid(name, quoted(name) + " must be a boolean, got " + type_name(*v));
    return v->get<bool>();
  }
  std::optional<double> number(const char* name) const {
    const json* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_number()) invalid(name, quoted(name) + " must be a number, got " + type_name(*v));
    return v->get<double>();
  }
  // An integer; 3.0 is accepted as 3, 3.5 is not.
  std::optional<int64_t> integer(const char* name, int64_t lo, int64_t hi) const {
    const json* v = get(name);
    if (!v) return std::nullopt;
    int64_t value = 0;
    if (v->is_number_integer()) {
      if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX)) {
        invalid(name, quoted(name) + " is out of range");
      }
      value = v->get<int64_t>();
    } else if (v->is_number_float() && std::isfinite(v->get<double>()) &&
               std::trunc(v->get<double>()) == v->get<double>() &&
               std::fabs(v->get<double>()) < 9e15) {
      value = static_cast<int64_t>(v->get<double>());
    } else {
      invalid(name, quoted(name) + " must be an integer, got " + type_name(*v));
    }
    if (value < lo || value > hi) {
      invalid(name, quoted(name) + " must be in [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "], got " + std::to_string(value));
    }
    return value;
  }
  std::optional<std::string> string(const char* name) const {
    const json* v = get(name);
    if (!v) return std::nullopt;
    if (!v->is_string()) invalid(name, quoted(name) + " must be a string, got " + type_name(*v));
    return v->get<std::string>();
  }

  static std::string quoted(const char* name) { return std::string("'") + name + "'"; }

 private:
  const json& object_;
};

void check_model(const Fields& f, const ModelContext& model) {
  if (auto name = f.string("model"); name && *name != model.model_id) {
    invalid("model",
            "The model '" + *name + "' does not exist; this server serves '" + model.model_id + "'",
            "model_not_found");
  }
}

void check_token_ids(const std::vector<int32_t>& ids, const ModelContext& model,
                     const char* param) {
  for (int32_t id : ids) {
    if (id < 0 || id >= model.tokenizer->n_vocab()) {
      invalid(param, "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                         std::to_string(model.tokenizer->n_vocab()) + ")");
    }
  }
}

std::vector<int32_t> token_array(const json& v, const ModelContext& model, const char* param) {
  std::vector<int32_t> ids;
  ids.reserve(v.size());
  for (const json& id : v) {
    if (!id.is_number_integer()) invalid(param, Fields::quoted(param) + " must hold integers");
    const int64_t value = id.get<int64_t>();
    if (value < 0 || value > INT32_MAX) {
      invalid(param, "token id " + std::to_string(value) + " is outside the vocabulary");
    }
    ids.push_back(static_cast<int32_t>(value));
  }
  check_token_ids(ids, model, param);
  return ids;
}

PromptInput text_prompt(const std::string& text, const ModelContext& model) {
  return {model.tokenizer->encode(text, /*add_special=*/true, /*parse_special=*/true), text};
}

PromptInput token_prompt(const json& v, const ModelContext& model) {
  PromptInput p;
  p.tokens = token_array(v, model, "prompt");
  p.text = model.tokenizer->decode(p.tokens);
  return p;
}

// "prompt": a string, a list of strings, a list of token ids, or a list of such lists.
std::vector<PromptInput> parse_prompts(const Fields& f, const ModelContext& model) {
  const json* v = f.get("prompt");
  if (!v) invalid("prompt", "'prompt' is required");
  std::vector<PromptInput> prompts;
  if (v->is_string()) {
    prompts.push_back(text_prompt(v->get<std::string>(), model));
  } else if (v->is_array() && !v->empty()) {
    const json& first = v->front();
    if (first.is_number_integer()) {
      prompts.push_back(token_prompt(*v, model));
    } else {
      for (const json& item : *v) {
        if (item.is_string()) {
          prompts.push_back(text_prompt(item.get<std::string>(), model));
        } else if (item.is_array() && !item.empty()) {
          prompts.push_back(token_prompt(item, model));
        } else {
          invalid("prompt",
                  "'prompt' must be a string, a list of strings, a list of token ids or a list "
                  "of non-empty lists of token ids");
        }
      }
    }
  } else {
    invalid("prompt",
            "'prompt' must be a non-empty string, list of strings, list of token ids or list "
            "of lists of token ids");
  }
  for (const PromptInput& p : prompts) {
    if (p.tokens.empty()) invalid("prompt", "the prompt is empty");
  }
  return prompts;
}

std::vector<std::string> parse_stop(const Fields& f) {
  const json* v = f.get("stop");
  if (!v) return {};
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array()) invalid("stop", "'stop' must be a string or a list of strings");
  std::vector<std::string> stop;
  for (const json& s : *v) {
    if (!s.is_string()) invalid("stop", "'stop' must be a string or a list of strings");
    stop.push_back(s.get<std::string>());
  }
  return stop;
}

// Sampling fields common to both endpoints (and the stream fields).
void parse_common(const Fields& f, GenerationRequest& r) {
  SamplingParams& p = r.params;
  if (auto v = f.number("temperature")) p.temperature = static_cast<float>(*v);
  if (auto v = f.number("top_p")) p.top_p = static_cast<float>(*v);
  if (auto v = f.integer("top_k", -1, INT32_MAX)) p.top_k = static_cast<int32_t>(*v);
  if (auto v = f.number("min_p")) p.min_p = static_cast<float>(*v);
  if (auto v = f.number("presence_penalty")) p.presence_penalty = static_cast<float>(*v);
  if (auto v = f.number("frequency_penalty")) p.frequency_penalty = static_cast<float>(*v);
  if (auto v = f.number("repetition_penalty")) p.repetition_penalty = static_cast<float>(*v);
  if (auto v = f.integer("seed", INT64_MIN, INT64_MAX)) p.seed = static_cast<uint64_t>(*v);
  if (auto v = f.boolean("ignore_eos")) p.ignore_eos = *v;
  p.stop = parse_stop(f);
  if (const json* ids = f.get("stop_token_ids")) {
    if (!ids->is_array()) invalid("stop_token_ids", "'stop_token_ids' must be a list of integers");
    for (const json& id : *ids) {
      if (!id.is_number_integer()) {
        invalid("stop_token_ids", "'stop_token_ids' must be a list of integers");
      }
      // Out of int32 range: refused here, before a cast could wrap it onto a real token
      // (validate() checks the rest of the range against the vocabulary).
      const bool negative = !id.is_number_unsigned() && id.get<int64_t>() < 0;
      if (negative || id.get<uint64_t>() > uint64_t(INT32_MAX)) {
        invalid("stop_token_ids",
                "'stop_token_ids' holds " + id.dump() + ", outside the vocabulary");
      }
      p.stop_token_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  r.n = static_cast<int32_t>(f.integer("n", 1, Request::kMaxSamples).value_or(1));
  r.stream = f.boolean("stream").value_or(false);
  if (const json* opts = f.get("stream_options")) {
    if (!opts->is_object()) invalid("stream_options", "'stream_options' must be an object");
    if (!r.stream) {
      invalid("stream_options", "'stream_options' is only allowed when 'stream' is true");
    }
    r.include_usage = Fields(*opts).boolean("include_usage").value_or(false);
  }
  r.user = f.string("user").value_or("");
  if (const json* bias = f.get("logit_bias"); bias && !(bias->is_object() && bias->empty())) {
    invalid("logit_bias", "'logit_bias' is not supported");
  }
  if (auto best_of = f.integer("best_of", 1, Request::kMaxSamples); best_of && *best_of != r.n) {
    invalid("best_of", "'best_of' other than 'n' is not supported");
  }
}

void check_sizes(GenerationRequest& r, const ModelContext& model) {
  const int64_t choices = static_cast<int64_t>(r.prompts.size()) * r.n;
  if (choices > GenerationRequest::kMaxChoices) {
    invalid("n", "a request may ask for at most " + std::to_string(GenerationRequest::kMaxChoices) +
                     " choices (prompts x n), got " + std::to_string(choices));
  }
  if (auto error = r.params.validate(model.tokenizer->n_vocab())) {
    // validate() names the field first: "top_p must be in ..."
    const std::string param = error->substr(0, error->find(' '));
    invalid(param, *error);
  }
  for (const PromptInput& p : r.prompts) {
    if (model.sliding_window) break;  // no context limit: the KV window slides
    const int64_t len = static_cast<int64_t>(p.tokens.size());
    if (len >= model.max_model_len) {
      invalid("prompt",
              "This model's maximum context length is " + std::to_string(model.max_model_len) +
                  " tokens, but the prompt has " + std::to_string(len) + " tokens",
              "context_length_exceeded");
    }
    if (r.params.max_tokens && len + *r.params.max_tokens > model.max_model_len) {
      invalid("max_tokens",
              "This model's maximum context length is " + std::to_string(model.max_model_len) +
                  " tokens; the prompt has " + std::to_string(len) +
                  " tokens and max_tokens asks for " + std::to_string(*r.params.max_tokens) +
                  " more",
              "context_length_exceeded");
    }
  }
}

// "content": a string, or a list of {"type": "text", "text": ...} parts (joined).
std::string message_content(const json& message, size_t index, const std::string& role) {
  const std::string param = "messages[" + std::to_string(index) + "].content";
  auto it = message.find("content");
  if (it == message.end() || it->is_null()) {
    // OpenAI allows an assistant turn without content (it made tool calls), nothing else.
    if (role == "assistant") return {};
    invalid(param, "Missing required parameter: '" + param + "'");
  }
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) invalid(param, "'content' must be a string or a list of content parts");
  std::string text;
  for (const json& part : *it) {
    if (!part.is_object()) invalid(param, "each content part must be an object");
    const auto type = Fields(part).string("type");
    if (type != "text") {
      invalid(param,
              "only content parts of type 'text' are supported, got '" + type.value_or("") + "'");
    }
    const auto t = Fields(part).string("text");
    if (!t) invalid(param, "a text content part needs 'text'");
    text += *t;
  }
  return text;
}

std::vector<ChatMessage> parse_messages(const Fields& f) {
  const json* v = f.get("messages");
  if (!v) invalid("messages", "'messages' is required");
  if (!v->is_array() || v->empty()) {
    invalid("messages", "'messages' must be a non-empty list of messages");
  }
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) invalid(param, "each message must be an object");
    const auto role = Fields(m).string("role");
    if (!role) invalid(param + ".role", "each message needs a 'role'");
    if (*role != "system" && *role != "user" && *role != "assistant" && *role != "developer") {
      invalid(param + ".role", "unsupported role '" + *role +
                                   "' (system, developer, user and assistant are supported)");
    }
    // OpenAI's "developer" is the newer name of "system".
    messages.push_back({*role == "developer" ? "system" : *role, message_content(m, i, *role)});
  }
  return messages;
}

std::vector<int32_t> chat_tokens(const std::vector<ChatMessage>& messages,
                                 const ModelContext& model) {
  if (!model.chat) {
    invalid("messages", "this model has no chat template; use /v1/completions");
  }
  try {
    return model.chat->tokens(messages);
  } catch (const ChatTemplateRaised& e) {
    invalid("messages", e.what());
  } catch (const Error& e) {
    invalid("messages",
            std::string("the chat template could not render these messages: ") + e.what());
  }
}

}  // namespace

json parse_json_object(std::string_view body) {
  json value = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    throw ApiError(400, "the request body is not valid JSON", {}, "invalid_json");
  }
  if (!value.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return value;
}

GenerationRequest parse_completion_request(const json& body, const ModelContext& model) {
  const Fields f(body);
  check_model(f, model);
  GenerationRequest r;
  r.endpoint = Endpoint::Completions;
  r.prompts = parse_prompts(f, model);
  parse_common(f, r);
  // OpenAI's default for completions is 16 tokens.
  r.params.max_tokens = static_cast<int32_t>(f.integer("max_tokens", 1, INT32_MAX).value_or(16));
  if (auto v = f.integer("logprobs", 0, SamplingParams::kMaxLogprobs)) {
    r.params.logprobs = static_cast<int32_t>(*v);
  }
  r.echo = f.boolean("echo").value_or(false);
  if (r.echo && r.params.logprobs) {
    invalid("echo",
            "'echo' together with 'logprobs' (log-probabilities of the prompt) is not "
            "supported");
  }
  if (f.get("suffix")) invalid("suffix", "'suffix' is not supported");
  check_sizes(r, model);
  return r;
}

GenerationRequest parse_chat_request(const json& body, const ModelContext& model) {
  const Fields f(body);
  check_model(f, model);
  GenerationRequest r;
  r.endpoint = Endpoint::Chat;
  const auto messages = parse_messages(f);
  parse_common(f, r);
  auto max_tokens = f.integer("max_completion_tokens", 1, INT32_MAX);
  if (!max_tokens) max_tokens = f.integer("max_tokens", 1, INT32_MAX);
  if (max_tokens) r.params.max_tokens = static_cast<int32_t>(*max_tokens);
  const bool logprobs = f.boolean("logprobs").value_or(false);
  const auto top = f.integer("top_logprobs", 0, SamplingParams::kMaxLogprobs);
  if (top && !logprobs) invalid("top_logprobs", "'top_logprobs' needs 'logprobs' set to true");
  if (logprobs) r.params.logprobs = static_cast<int32_t>(top.value_or(0));
  if (const json* tools = f.get("tools"); tools && !(tools->is_array() && tools->empty())) {
    invalid("tools", "tool calling is not supported");
  }
  if (const json* format = f.get("response_format")) {
    const auto type = format->is_object() ? Fields(*format).string("type") : std::nullopt;
    if (type != "text") invalid("response_format", "only response_format type 'text' is supported");
  }
  PromptInput prompt;
  prompt.tokens = chat_tokens(messages, model);
  r.prompts.push_back(std::move(prompt));
  check_sizes(r, model);
  return r;
}

std::vector<int32_t> parse_tokenize_request(const json& body, const ModelContext& model) {
  const Fields f(body);
  check_model(f, model);
  if (f.get("messages")) return chat_tokens(parse_messages(f), model);
  const auto prompt = f.string("prompt");
  if (!prompt) invalid("prompt", "'prompt' (a string) or 'messages' is required");
  const bool add_special = f.boolean("add_special_tokens").value_or(true);
  return model.tokenizer->encode(*prompt, add_special, /*parse_special=*/true);
}

std::vector<int32_t> parse_detokenize_request(const json& body, const ModelContext& model) {
  const Fields f(body);
  check_model(f, model);
  const json* tokens = f.get("tokens");
  if (!tokens || !tokens->is_array())
    invalid("tokens", "'tokens' (a list of token ids) is required");
  return token_array(*tokens, model, "tokens");
}

}  // namespace tokamak::server
