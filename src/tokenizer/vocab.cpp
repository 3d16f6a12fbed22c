#include "tokenizer/vocab.h"

#include <algorithm>
#include <iterator>
#include <limits>

#include "core/error.h"
#include "format/gguf.h"

namespace tokamak {

namespace {

constexpr int64_t kNoToken = 0xFFFFFFFF;  // how GGUF files spell "none" for a u32 id

// Texts that end a turn or a generation (llama.cpp's list): such tokens are treated as
// control tokens and stop generation.
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
};

constexpr std::string_view kEndOfTurnTexts[] = {
    "<|eot_id|>",         "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>",    "<EOT>",      "_<EOT>",  "[EOT]",         "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
};

// Fill-in-the-middle padding, repository and file separators also end a generation.
constexpr std::string_view kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
                                             "[PAD]"};
constexpr std::string_view kFimRepTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                             "<REPO>", "<reponame>"};
constexpr std::string_view kFimSepTexts[] = {"<|file_sep|>"};

// gpt-oss structure markers are always rendered (llama.cpp makes them user-defined).
constexpr std::string_view kAlwaysRenderedTexts[] = {"<|channel|>", "<|message|>", "<|start|>",
                                                     "<|constrain|>"};

template <size_t N>
bool one_of(const std::string_view (&list)[N], std::string_view text) {
  return std::find(std::begin(list), std::end(list), text) != std::end(list);
}

class Loader {
 public:
  explicit Loader(const gguf::File& file) : file_(file) {}

  [[noreturn]] void fail(const std::string& problem) const {
    throw Error(file_.path() + ": " + problem);
  }

  const gguf::Value::Array& array(const char* key, bool required) const {
    static const gguf::Value::Array kEmpty;
    const gguf::Value::Array* a = file_.get_array(key);
    if (a == nullptr) {
      if (required) fail(std::string("missing metadata '") + key + "'");
      return kEmpty;
    }
    return *a;
  }

  // A special token id: nullopt when absent (then `fallback`) or "none"; Error when out of
  // range.
  std::optional<int32_t> token_id(const char* key, std::optional<int32_t> fallback,
                                  int32_t n_tokens) const {
    const std::optional<int64_t> v = file_.get_int(key);
    if (!v) return fallback && *fallback < n_tokens ? fallback : std::nullopt;
    if (*v == kNoToken || *v == -1) return std::nullopt;
    if (*v < 0 || *v >= n_tokens) {
      fail(std::string("metadata '") + key + "' = " + std::to_string(*v) +
           " is out of range (the vocabulary has " + std::to_string(n_tokens) + " tokens)");
    }
    return static_cast<int32_t>(*v);
  }

  const gguf::File& file_;
};

}  // namespace

std::optional<int32_t> Vocab::find(std::string_view text) const {
  const auto it = ids_.find(text);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

bool Vocab::is_end_of_generation(int32_t id) const {
  return std::binary_search(end_of_generation_.begin(), end_of_generation_.end(), id);
}

void Vocab::set_default_add_bos(bool add_bos) {
  if (!add_bos_from_file_) add_bos_ = add_bos && special_.bos.has_value();
}

Vocab Vocab::from_gguf(const gguf::File& file) {
  const Loader in(file);
  Vocab v;
  v.source_ = file.path();

  const std::optional<std::string> model = file.get_string("tokenizer.ggml.model");
  if (!model) in.fail("missing metadata 'tokenizer.ggml.model' (the file has no tokenizer)");
  if (*model == "gpt2") {
    v.kind_ = TokenizerKind::BytePairGpt2;
  } else if (*model == "llama") {
    v.kind_ = TokenizerKind::SentencePiece;
  } else {
    in.fail("unsupported tokenizer.ggml.model '" + *model + "' (supported: gpt2, llama)");
  }
  v.pre_ = file.get_string("tokenizer.ggml.pre").value_or("");

  // Tokens.
  const gguf::Value::Array& tokens = in.array("tokenizer.ggml.tokens", true);
  if (tokens.empty()) in.fail("metadata 'tokenizer.ggml.tokens' is empty");
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    in.fail("metadata 'tokenizer.ggml.tokens' has too many entries");
  }
  const auto n = static_cast<int32_t>(tokens.size());
  v.texts_.reserve(tokens.size());
  v.ids_.reserve(tokens.size());
  for (int32_t id = 0; id < n; ++id) {
    const gguf::Value& t = tokens[static_cast<size_t>(id)];
    if (!t.is_string())
      in.fail("tokenizer.ggml.tokens[" + std::to_string(id) + "] is not a string");
    v.texts_.push_back(t.as_string());
    if (t.as_string().empty()) continue;  // never matched from text
    const auto [it, inserted] = v.ids_.emplace(t.as_string(), id);
    if (!inserted) {
      in.fail("tokens " + std::to_string(it->second) + " and " + std::to_string(id) +
              " have the same text '" + t.as_string() + "'");
    }
  }

  // Types.
  const gguf::Value::Array& types = in.array("tokenizer.ggml.token_type", false);
  if (!types.empty() && types.size() != tokens.size()) {
    in.fail("tokenizer.ggml.token_type has " + std::to_string(types.size()) + " entries for " +
            std::to_string(n) + " tokens");
  }
  v.types_.assign(tokens.size(), TokenType::Normal);
  for (size_t i = 0; i < types.size(); ++i) {
    const gguf::Value& t = types[i];
    const int64_t type = t.is_integer() ? t.as_i64() : -1;
    if (type < 0 || type > 6) {
      in.fail("tokenizer.ggml.token_type[" + std::to_string(i) + "] is not a token type (0..6)");
    }
    v.types_[i] = static_cast<TokenType>(type);
  }

  // Scores.
  const gguf::Value::Array& scores = in.array("tokenizer.ggml.scores", false);
  if (!scores.empty()) {
    if (scores.size() != tokens.size()) {
      in.fail("tokenizer.ggml.scores has " + std::to_string(scores.size()) + " entries for " +
              std::to_string(n) + " tokens");
    }
    v.scores_.reserve(scores.size());
    for (size_t i = 0; i < scores.size(); ++i) {
      if (!scores[i].is_float() && !scores[i].is_integer()) {
        in.fail("tokenizer.ggml.scores[" + std::to_string(i) + "] is not a number");
      }
      v.scores_.push_back(static_cast<float>(scores[i].as_f64()));
    }
  }

  // Merges.
  if (v.kind_ == TokenizerKind::BytePairGpt2) {
    const gguf::Value::Array& merges = in.array("tokenizer.ggml.merges", true);
    v.merges_.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      const gguf::Value& m = merges[i];
      if (!m.is_string())
        in.fail("tokenizer.ggml.merges[" + std::to_string(i) + "] is not a string");
      const std::string& s = m.as_string();
      const size_t space = s.find(' ', 1);
      if (space == std::string::npos || space + 1 >= s.size()) {
        in.fail("tokenizer.ggml.merges[" + std::to_string(i) + "] '" + s +
                "' is not of the form 'left right'");
      }
      v.merges_.push_back(s);
    }
  }

  // Special ids (SentencePiece files conventionally use unk 0, bos 1, eos 2).
  const bool spm = v.kind_ == TokenizerKind::SentencePiece;
  const auto id = [&](const char* key, std::optional<int32_t> fallback = std::nullopt) {
    return in.token_id(key, fallback, n);
  };
  SpecialTokenIds& s = v.special_;
  s.bos = id("tokenizer.ggml.bos_token_id", spm ? std::optional<int32_t>(1) : std::nullopt);
  s.eos = id("tokenizer.ggml.eos_token_id", spm ? std::optional<int32_t>(2) : std::nullopt);
  s.unk = id("tokenizer.ggml.unknown_token_id", spm ? std::optional<int32_t>(0) : std::nullopt);
  s.eot = id("tokenizer.ggml.eot_token_id");
  s.eom = id("tokenizer.ggml.eom_token_id");
  s.sep = id("tokenizer.ggml.seperator_token_id");  // sic: the GGUF key is misspelt
  s.pad = id("tokenizer.ggml.padding_token_id");
  s.mask = id("tokenizer.ggml.mask_token_id");
  s.fim_pre = id("tokenizer.ggml.fim_pre_token_id", id("tokenizer.ggml.prefix_token_id"));
  s.fim_suf = id("tokenizer.ggml.fim_suf_token_id", id("tokenizer.ggml.suffix_token_id"));
  s.fim_mid = id("tokenizer.ggml.fim_mid_token_id", id("tokenizer.ggml.middle_token_id"));
  s.fim_pad = id("tokenizer.ggml.fim_pad_token_id");
  s.fim_rep = id("tokenizer.ggml.fim_rep_token_id");
  s.fim_sep = id("tokenizer.ggml.fim_sep_token_id");

  // Flags.
  const std::optional<bool> add_bos = file.get_bool("tokenizer.ggml.add_bos_token");
  v.add_bos_from_file_ = add_bos.has_value();
  v.add_bos_ = add_bos.value_or(spm) && (add_bos.has_value() || s.bos.has_value());
  v.add_eos_ = file.get_bool("tokenizer.ggml.add_eos_token").value_or(false);
  v.add_space_prefix_ = spm && file.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);
  if (v.add_bos_ && !s.bos)
    in.fail("tokenizer.ggml.add_bos_token is true but there is no BOS token");
  if (v.add_eos_ && !s.eos)
    in.fail("tokenizer.ggml.add_eos_token is true but there is no EOS token");

  // Markers recognised by their text: the first (lowest id) match fills an unset id, and
  // every end-of-generation marker becomes a control token.
  const auto detect = [&](std::optional<int32_t>& slot, const auto& texts) {
    if (slot) return;
    for (int32_t i = 0; i < n && !slot; ++i) {
      if (one_of(texts, v.texts_[static_cast<size_t>(i)])) slot = i;
    }
    if (slot) v.types_[static_cast<size_t>(*slot)] = TokenType::Control;
  };
  detect(s.eot, kEndOfTurnTexts);
  detect(s.fim_pad, kFimPadTexts);
  detect(s.fim_rep, kFimRepTexts);
  detect(s.fim_sep, kFimSepTexts);
  for (int32_t i = 0; i < n; ++i) {
    const std::string& text = v.texts_[static_cast<size_t>(i)];
    if (one_of(kEndOfGenerationTexts, text)) {
      v.end_of_generation_.push_back(i);
      v.types_[static_cast<size_t>(i)] = TokenType::Control;
    } else if (one_of(kAlwaysRenderedTexts, text)) {
      v.types_[static_cast<size_t>(i)] = TokenType::UserDefined;
    }
  }
  for (const auto& eog : {s.eos, s.eot, s.eom, s.fim_pad, s.fim_rep, s.fim_sep}) {
    if (eog) v.end_of_generation_.push_back(*eog);
  }
  std::sort(v.end_of_generation_.begin(), v.end_of_generation_.end());
  v.end_of_generation_.erase(std::unique(v.end_of_generation_.begin(), v.end_of_generation_.end()),
                             v.end_of_generation_.end());
  return v;
}

}  // namespace tokamak
