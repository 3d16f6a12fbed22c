#include "server/openai_response.h"

#include <cmath>

#include "server/json_text.h"
#include "tokenizer/tokenizer.h"

namespace tokamak::server {
namespace {

using nlohmann::json;

// JSON has no -inf: OpenAI reports -9999.0 for a token that cannot be sampled.
double finite_logprob(float lp) {
  return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0;
}

json utf8_bytes(std::string_view piece) {
  json bytes = json::array();
  for (unsigned char c : piece) bytes.push_back(static_cast<int>(c));
  return bytes;
}

// Characters (code points) of UTF-8 text: OpenAI's text offsets count characters, as Python
// strings do. A piece that ends inside a character counts that character where it starts.
size_t utf8_chars(std::string_view text) {
  size_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

std::string event(const json& data) {
  return "data: " + to_json_text(data) + "\n\n";
}

}  // namespace

const char* openai_finish_reason(FinishReason reason) {
  switch (reason) {
    case FinishReason::Stop:
      return "stop";
    case FinishReason::Length:
      return "length";
    case FinishReason::Cancelled:
      return "abort";
    case FinishReason::Error:
      return "error";
  }
  return "error";
}

ResponseBuilder::ResponseBuilder(const GenerationRequest& request, const Tokenizer& tokenizer,
                                 ResponseIdentity identity)
    : request_(request), tokenizer_(tokenizer), identity_(std::move(identity)) {
  choices_.resize(request.prompts.size() * static_cast<size_t>(request.n));
  for (const PromptInput& p : request.prompts) {
    prompt_tokens_ += static_cast<int32_t>(p.tokens.size());
  }
  if (request.echo) {
    for (size_t i = 0; i < choices_.size(); ++i) {
      choices_[i].text = request.prompts[i / static_cast<size_t>(request.n)].text;
      choices_[i].text_offset = utf8_chars(choices_[i].text);
    }
  }
}

int32_t ResponseBuilder::completion_tokens() const {
  int32_t total = 0;
  for (const Choice& c : choices_) total += c.tokens;
  return total;
}

json ResponseBuilder::usage() const {
  // OpenAI's shape (vLLM's too): clients compute a prefix-cache hit rate from it.
  return {{"prompt_tokens", prompt_tokens_},
          {"completion_tokens", completion_tokens()},
          {"total_tokens", prompt_tokens_ + completion_tokens()},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens_}}}};
}

void ResponseBuilder::count_cached(const RequestOutput& output) {
  if (output.index == 0 && output.finish && output.metrics) {
    cached_tokens_ += output.metrics->cached_prompt_tokens;
  }
}

json ResponseBuilder::logprobs_json(const RequestOutput& output, size_t& text_offset) const {
  if (request_.endpoint == Endpoint::Chat) {
    json content = json::array();
    for (size_t i = 0; i < output.logprobs.size(); ++i) {
      const SampleLogprobs& lp = output.logprobs[i];
      const std::string_view piece = tokenizer_.piece(lp.sampled.token);
      json top = json::array();
      for (const TokenLogprob& t : lp.top()) {
        const std::string_view p = tokenizer_.piece(t.token);
        top.push_back(
            {{"token", p}, {"logprob", finite_logprob(t.logprob)}, {"bytes", utf8_bytes(p)}});
      }
      content.push_back({{"token", piece},
                         {"logprob", finite_logprob(lp.sampled.logprob)},
                         {"bytes", utf8_bytes(piece)},
                         {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const SampleLogprobs& lp : output.logprobs) {
    const std::string_view piece = tokenizer_.piece(lp.sampled.token);
    tokens.push_back(piece);
    token_logprobs.push_back(finite_logprob(lp.sampled.logprob));
    json alternatives = json::object();
    for (const TokenLogprob& t : lp.top()) {
      alternatives[std::string(tokenizer_.piece(t.token))] = finite_logprob(t.logprob);
    }
    top.push_back(std::move(alternatives));
    offsets.push_back(text_offset);
    text_offset += utf8_chars(piece);
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top)},
          {"text_offset", std::move(offsets)}};
}

void ResponseBuilder::append_logprobs(Choice& choice, const json& part) const {
  if (choice.logprobs.is_null()) {
    choice.logprobs = part;
    return;
  }
  for (auto& [key, values] : part.items()) {
    for (const json& v : values) choice.logprobs[key].push_back(v);
  }
}

json ResponseBuilder::chunk_envelope() const {
  return {
      {"id", identity_.id},
      {"object", request_.endpoint == Endpoint::Chat ? "chat.completion.chunk" : "text_completion"},
      {"created", identity_.created},
      {"model", identity_.model}};
}

std::string ResponseBuilder::stream_start() {
  std::string out;
  for (size_t i = 0; i < choices_.size(); ++i) {
    json choice;
    if (request_.endpoint == Endpoint::Chat) {
      choice = {{"index", i},
                {"delta", {{"role", "assistant"}, {"content", ""}}},
                {"logprobs", nullptr},
                {"finish_reason", nullptr}};
    } else if (request_.echo) {
      choice = {{"index", i},
                {"text", choices_[i].text},
                {"logprobs", nullptr},
                {"finish_reason", nullptr}};
    } else {
      continue;
    }
    json chunk = chunk_envelope();
    chunk["choices"] = json::array({std::move(choice)});
    out += event(chunk);
  }
  return out;
}

std::string ResponseBuilder::stream_event(const RequestOutput& output, int32_t index) {
  Choice& c = choices_.at(static_cast<size_t>(index));
  c.tokens += static_cast<int32_t>(output.token_ids.size());
  if (output.finish) c.finish = output.finish;
  count_cached(output);
  if (output.text.empty() && output.logprobs.empty() && !output.finish) return {};
  json choice = {{"index", index}};
  if (request_.endpoint == Endpoint::Chat) {
    choice["delta"] =
        output.text.empty() && output.finish ? json::object() : json{{"content", output.text}};
  } else {
    choice["text"] = output.text;
  }
  choice["logprobs"] = request_.params.logprobs ? logprobs_json(output, c.text_offset) : json();
  choice["finish_reason"] = output.finish ? json(openai_finish_reason(*output.finish)) : json();
  json chunk = chunk_envelope();
  chunk["choices"] = json::array({std::move(choice)});
  return event(chunk);
}

std::string ResponseBuilder::stream_usage() {
  json chunk = chunk_envelope();
  chunk["choices"] = json::array();
  chunk["usage"] = usage();
  return event(chunk);
}

std::string ResponseBuilder::stream_error(const std::string& message, const std::string& code) {
  json error = {{"message", message},
                {"type", "server_error"},
                {"param", nullptr},
                {"code", code.empty() ? json() : json(code)}};
  return event(json{{"error", std::move(error)}});
}

void ResponseBuilder::add(const RequestOutput& output, int32_t index) {
  Choice& c = choices_.at(static_cast<size_t>(index));
  c.tokens += static_cast<int32_t>(output.token_ids.size());
  if (request_.params.logprobs) append_logprobs(c, logprobs_json(output, c.text_offset));
  c.text += output.text;
  if (output.finish) c.finish = output.finish;
  count_cached(output);
}

std::string ResponseBuilder::body() const {
  json choices = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    json logprobs = json();
    if (request_.params.logprobs) {
      size_t offset = 0;
      logprobs = c.logprobs.is_null() ? logprobs_json(RequestOutput{}, offset) : c.logprobs;
    }
    const json finish = c.finish ? json(openai_finish_reason(*c.finish)) : json();
    if (request_.endpoint == Endpoint::Chat) {
      choices.push_back({{"index", i},
                         {"message", {{"role", "assistant"}, {"content", c.text}}},
                         {"logprobs", std::move(logprobs)},
                         {"finish_reason", finish}});
    } else {
      choices.push_back({{"index", i},
                         {"text", c.text},
                         {"logprobs", std::move(logprobs)},
                         {"finish_reason", finish}});
    }
  }
  json body = {
      {"id", identity_.id},
      {"object", request_.endpoint == Endpoint::Chat ? "chat.completion" : "text_completion"},
      {"created", identity_.created},
      {"model", identity_.model},
      {"choices", std::move(choices)},
      {"usage", usage()}};
  return to_json_text(body);
}

}  // namespace tokamak::server
