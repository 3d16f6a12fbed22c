#pragma once
// The JSON that answers /v1/completions and /v1/chat/completions, whole or as server-sent
// event chunks, from the engine's RequestOutputs. One builder per HTTP request, fed from one
// thread.
//
// Choices are numbered prompt_index * n + sample_index, as OpenAI numbers them for a list of
// prompts with n samples each.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "server/openai_request.h"

namespace tokamak::server {

struct ResponseIdentity {
  std::string id;       // "cmpl-..." / "chatcmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
};

// OpenAI's finish_reason for an engine one ("stop", "length"; cancelled -> "abort").
const char* openai_finish_reason(FinishReason reason);

class ResponseBuilder {
 public:
  ResponseBuilder(const GenerationRequest& request, const Tokenizer& tokenizer,
                  ResponseIdentity identity);

  // Streaming. The first events of every choice (chat: the assistant role; completions with
  // echo: the prompt text), each "data: {...}\n\n".
  std::string stream_start();
  // The event for one output of choice `choice` ("" when it carries nothing to send).
  std::string stream_event(const RequestOutput& output, int32_t choice);
  // With include_usage: the last chunk, empty choices and the usage. Then "data: [DONE]".
  std::string stream_usage();
  static std::string stream_done() { return "data: [DONE]\n\n"; }
  // An error in the middle of a stream: data: {"error": {...}}.
  static std::string stream_error(const std::string& message, const std::string& code);

  // Whole response: add() every output, then body().
  void add(const RequestOutput& output, int32_t choice);
  std::string body() const;

  int32_t n_choices() const { return static_cast<int32_t>(choices_.size()); }
  int32_t prompt_tokens() const { return prompt_tokens_; }
  int32_t completion_tokens() const;
  // usage.prompt_tokens_details.cached_tokens: the prompt tokens served from the prefix
  // cache, summed over the prompts, each counted once (from its first sample: the other
  // samples share its prompt blocks), as its first sample's final output reports them.
  int32_t cached_tokens() const { return cached_tokens_; }

 private:
  struct Choice {
    std::string text;
    std::optional<FinishReason> finish;
    int32_t tokens = 0;
    nlohmann::json logprobs;  // accumulated (whole response) in the endpoint's shape
    size_t text_offset = 0;   // completions logprobs' text_offset: characters of text so far
  };

  // The logprobs object of `output`'s tokens in the endpoint's shape; text_offset (characters
  // of the choice's text before them) advances past them.
  nlohmann::json logprobs_json(const RequestOutput& output, size_t& text_offset) const;
  void append_logprobs(Choice& choice, const nlohmann::json& part) const;
  nlohmann::json chunk_envelope() const;
  nlohmann::json usage() const;
  // Takes the cached prompt tokens from a prompt's first sample as it finishes.
  void count_cached(const RequestOutput& output);

  const GenerationRequest& request_;
  const Tokenizer& tokenizer_;
  ResponseIdentity identity_;
  std::vector<Choice> choices_;
  int32_t prompt_tokens_ = 0;
  int32_t cached_tokens_ = 0;
};

}  // namespace tokamak::server
