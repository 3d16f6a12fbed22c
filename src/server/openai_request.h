#pragma once
// Parsing and validation of OpenAI API request bodies (/v1/completions,
// /v1/chat/completions) and of tokamak's /tokenize and /detokenize, into plain values the
// engine takes. Every problem is an ApiError(400) that names the field, e.g.
//   {"message": "'temperature' must be a number", "param": "temperature", ...}
// so nothing reaches the engine unchecked.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampling_params.h"
#include "server/api_error.h"

namespace tokamak {
class ChatPrompter;
class Tokenizer;
}  // namespace tokamak

namespace tokamak::server {

// What parsing needs to know of the served model.
struct ModelContext {
  const Tokenizer* tokenizer = nullptr;
  const ChatPrompter* chat = nullptr;  // null: the model has no chat template
  std::string model_id;                // the name clients use in "model"
  int32_t max_model_len = 0;           // prompt + generated tokens per sequence
  bool sliding_window = false;         // the engine's KV window lifts that limit
};

enum class Endpoint { Completions, Chat };

struct PromptInput {
  std::vector<int32_t> tokens;
  std::string text;  // what the prompt says (decoded when given as token ids), for echo
};

struct GenerationRequest {
  // Most choices (prompts x n) one request may ask for: each one is a sequence in the engine.
  static constexpr int32_t kMaxChoices = 128;

  Endpoint endpoint = Endpoint::Completions;
  std::vector<PromptInput> prompts;  // chat: exactly one
  SamplingParams params;             // logprobs set when any are asked for
  int32_t n = 1;                     // samples per prompt
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: the prompt text precedes each choice's text
  std::string user;
};

// The body as JSON; 400 when it is not a JSON object.
nlohmann::json parse_json_object(std::string_view body);

GenerationRequest parse_completion_request(const nlohmann::json& body, const ModelContext& model);
GenerationRequest parse_chat_request(const nlohmann::json& body, const ModelContext& model);

// /tokenize: {"prompt": "..."} or {"messages": [...]}, optional "add_special_tokens"
// (default true for a prompt; a chat prompt gets what the template writes).
std::vector<int32_t> parse_tokenize_request(const nlohmann::json& body, const ModelContext& model);
// /detokenize: {"tokens": [ids]}; every id inside the vocabulary.
std::vector<int32_t> parse_detokenize_request(const nlohmann::json& body,
                                              const ModelContext& model);

}  // namespace tokamak::server
