#include "tokenizer/tokenizer.h"

#include <cstdio>

#include "core/error.h"
#include "format/gguf.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/spm.h"
#include "tokenizer/utf8.h"

namespace tokamak {

namespace {

// "<0xNN>" -> NN
std::optional<uint8_t> parse_byte_token(std::string_view text) {
  if (text.size() != 6 || !text.starts_with("<0x") || text.back() != '>') return std::nullopt;
  unsigned value = 0;
  for (const char c : text.substr(3, 2)) {
    value <<= 4;
    if (c >= '0' && c <= '9') {
      value |= static_cast<unsigned>(c - '0');
    } else if (c >= 'A' && c <= 'F') {
      value |= static_cast<unsigned>(c - 'A' + 10);
    } else if (c >= 'a' && c <= 'f') {
      value |= static_cast<unsigned>(c - 'a' + 10);
    } else {
      return std::nullopt;
    }
  }
  return static_cast<uint8_t>(value);
}

// Undoes the GPT-2 byte mapping; code points outside it are kept as their UTF-8 bytes.
std::string gpt2_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const int n = utf8::sequence_at(text.substr(i));
    if (n <= 0) {  // malformed vocabulary string: keep the byte as it is
      out.push_back(text[i]);
      ++i;
      continue;
    }
    const std::string_view seq = text.substr(i, static_cast<size_t>(n));
    std::optional<uint8_t> byte;  // mapped code points are below U+0144: 1 or 2 bytes
    if (n == 1) byte = gpt2_codepoint_to_byte(static_cast<uint8_t>(seq[0]));
    if (n == 2) {
      byte = gpt2_codepoint_to_byte(((static_cast<uint8_t>(seq[0]) & 0x1Fu) << 6) |
                                    (static_cast<uint8_t>(seq[1]) & 0x3Fu));
    }
    if (byte) {
      out.push_back(static_cast<char>(*byte));
    } else {
      out.append(seq);
    }
    i += static_cast<size_t>(n);
  }
  return out;
}

std::string make_piece(const Vocab& vocab, int32_t id) {
  const std::string& text = vocab.text(id);
  switch (vocab.type(id)) {
    case TokenType::Control:
    case TokenType::Unknown:
    case TokenType::UserDefined:
      return text;
    case TokenType::Unused:
    case TokenType::Undefined:
      return {};
    case TokenType::Byte:
      if (const std::optional<uint8_t> b = parse_byte_token(text))
        return std::string(1, static_cast<char>(*b));
      [[fallthrough]];  // a byte token not spelt <0xNN>: read it as a normal one
    case TokenType::Normal:
      break;
  }
  if (vocab.kind() == TokenizerKind::BytePairGpt2) return gpt2_decode(text);
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 3, "\xE2\x96\x81") == 0) {
      out.push_back(' ');
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

}  // namespace

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& file) {
  std::unique_ptr<Tokenizer> tok(new Tokenizer(Vocab::from_gguf(file)));
  Vocab& vocab = tok->vocab_;

  if (vocab.kind() == TokenizerKind::BytePairGpt2) {
    std::optional<PreTokenizerSpec> spec = find_pre_tokenizer(vocab.pre_tokenizer());
    if (vocab.pre_tokenizer().empty()) {
      std::fprintf(stderr,
                   "tokamak: warning: %s: no tokenizer.ggml.pre; using llama.cpp's 'default' "
                   "pre-tokenizer (tokens may differ from the model's own)\n",
                   file.path().c_str());
    } else if (!spec) {
      std::fprintf(stderr,
                   "tokamak: warning: %s: unknown pre-tokenizer '%s'; using the GPT-2 one "
                   "(tokens may differ from the model's own)\n",
                   file.path().c_str(), vocab.pre_tokenizer().c_str());
      spec = find_pre_tokenizer("gpt-2");
    }
    vocab.set_default_add_bos(spec->add_bos);
    try {
      tok->pre_ = std::make_unique<PreTokenizer>(spec->patterns);
    } catch (const Error& e) {
      throw Error(file.path() + ": " + e.what());
    }
    tok->bpe_ = std::make_unique<BpeModel>(vocab, spec->ignore_merges);
    if (tok->bpe_->skipped_merges() > 0) {
      std::fprintf(stderr,
                   "tokamak: warning: %s: %zu of %zu merges name strings that are not tokens; "
                   "they are ignored\n",
                   file.path().c_str(), tok->bpe_->skipped_merges(), vocab.merges().size());
    }
  } else {
    tok->spm_ = std::make_unique<SpmModel>(vocab);
  }
  tok->specials_ = std::make_unique<SpecialTokenSplitter>(vocab);
  tok->pieces_.reserve(static_cast<size_t>(vocab.size()));
  for (int32_t id = 0; id < vocab.size(); ++id) tok->pieces_.push_back(make_piece(vocab, id));
  return tok;
}

void Tokenizer::check_id(int32_t id) const {
  if (!vocab_.contains(id)) {
    throw Error("token id " + std::to_string(id) + " is out of range (the vocabulary has " +
                std::to_string(vocab_.size()) + " tokens)");
  }
}

std::string_view Tokenizer::piece(int32_t id) const {
  check_id(id);
  return pieces_[static_cast<size_t>(id)];
}

const std::string& Tokenizer::token_text(int32_t id) const {
  check_id(id);
  return vocab_.text(id);
}

bool Tokenizer::is_end_of_generation(int32_t id) const {
  return vocab_.contains(id) && vocab_.is_end_of_generation(id);
}

bool Tokenizer::is_control(int32_t id) const {
  return vocab_.contains(id) && vocab_.type(id) == TokenType::Control;
}

bool Tokenizer::is_special(int32_t id) const {
  return vocab_.contains(id) &&
         (vocab_.type(id) == TokenType::Control || vocab_.type(id) == TokenType::Unknown);
}

void Tokenizer::encode_raw(std::string_view text, bool after_special,
                           std::vector<int32_t>& out) const {
  if (spm_) {
    const bool prefix = vocab_.add_space_prefix() && after_special;
    spm_->encode(spm_escape_spaces(text, prefix), out);
    return;
  }
  std::string repaired, for_regex;
  const bool changed = utf8::canonicalize_lenient(text, repaired, for_regex);
  const std::string_view bytes = changed ? std::string_view(repaired) : text;
  std::vector<PreTokenizer::Word> words;
  pre_->split(changed ? std::string_view(for_regex) : text, words);
  BpeModel::Scratch scratch;
  for (const PreTokenizer::Word& w : words) {
    bpe_->encode_word(bytes.substr(w.offset, w.length), out, scratch);
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && vocab_.add_bos()) out.push_back(*vocab_.special().bos);
  bool after_special = true;  // the start of the text counts as following a special token
  for (const SpecialTokenSplitter::Fragment& f : specials_->split(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
    } else {
      encode_raw(text.substr(f.offset, f.length), after_special, out);
      after_special = false;
    }
  }
  if (add_special && vocab_.add_eos()) out.push_back(*vocab_.special().eos);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string_view p = piece(ids[i]);
    if (skip_special && is_special(ids[i])) continue;
    if (i == 0 && vocab_.add_space_prefix() && p.starts_with(' ')) p.remove_prefix(1);
    out.append(p);
  }
  return out;
}

}  // namespace tokamak
