#include "tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace tokamak {

namespace {

// The patterns below are the published split regexes of each family (llama.cpp's
// llama-vocab.cpp and the models' tokenizer.json). Case-insensitive contractions are spelt
// with explicit classes ('[sS]) as llama.cpp does, because PCRE2's Unicode case folding would
// also accept U+017F for 's'.

// GPT-2. llama.cpp's version omits the final \s+, but its hand-written matcher behaves as if
// it were there (an unmatched whitespace character becomes a word of its own either way).
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr const char* kQwen35 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr const char* kSeedCoder =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr const char* kBailing =
    R"('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";

// Tekken and GPT-4o (o200k): words split before an upper-case run, as in tokenizer.json.
constexpr const char* kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr const char* kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// DeepSeek LLM: letters of the Latin, Greek, Cyrillic, Armenian, Georgian, ... blocks.
constexpr const char* kDeepseekLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})"
    R"(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A})"
    R"(\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556})"
    R"(\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
    R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})"
    R"(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D})"
    R"(\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3})"
    R"(\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107})"
    R"(\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D})"
    R"(\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184})"
    R"(\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D})"
    R"(\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF})"
    R"(\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F})"
    R"(\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2})"
    R"(\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";
// The two below list ranges that contain whitespace (U+2000..U+200A, U+3000, ...). llama.cpp
// turns non-ASCII whitespace into U+000B before matching them, so whitespace is kept out.
constexpr const char* kDeepseekPunct =
    R"(\s?(?:(?!\s)[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}])+)";
constexpr const char* kDeepseekCjk =
    R"((?:(?!\s)[\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}])+)";
constexpr const char* kDeepseekV3Cjk = R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)";
constexpr const char* kDeepseekV3Main =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// BLOOM and relatives: anything up to a space or one of these punctuation marks.
constexpr const char* kBloom =
    R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)";

struct Family {
  std::vector<const char*> names;
  std::vector<const char*> patterns;
  bool ignore_merges = false;
  bool add_bos = false;
};

const std::vector<Family>& families() {
  static const std::vector<Family> kFamilies = {
      {{"default", ""}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", R"([0-9][0-9][0-9])"}},
      {{"gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4",
        "gigachat", "a.x-4.0", "mellum", "modern-bert", "roberta-bpe"},
       {kGpt2}},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
        "jina-v5-nano"},
       {kLlama3},
       true,
       true},
      {{"dbrx", "smaug-bpe", "chatglm-bpe"}, {kLlama3}},
      {{"glm4", "glm5"}, {kLlama3}, true},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b",
        "mellum2"},
       {R"(\p{N})", kGpt2}},
      {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "stablelm2", "megrez", "hunyuan",
        "solar-open", "grok-2"},
       {kQwen2}},
      {{"qwen35"}, {kQwen35}},
      {{"deepseek-llm"},
       {R"([\r\n])", kDeepseekLetters, kDeepseekPunct, R"(\s+\z)", kDeepseekCjk, R"(\p{N}+)"}},
      {{"deepseek-coder"}, {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepseekCjk, R"(\p{N})"}},
      {{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"},
       {R"(\p{N}{1,3})", kDeepseekV3Cjk, kDeepseekV3Main}},
      {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, R"([0-9][0-9][0-9])"}},
      {{"poro-chat", "bloom", "gpt3-finnish"}, {kBloom}},
      {{"viking"}, {kBloom, R"(\p{N})"}},
      {{"tekken"}, {kTekken}, true, true},
      {{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, {kGpt4o}},
      {{"seed-coder"}, {kSeedCoder}},
      {{"bailingmoe", "bailingmoe2", "llada-moe"}, {kBailing}},
  };
  return kFamilies;
}

PreTokenizerSpec to_spec(const Family& family) {
  PreTokenizerSpec spec;
  for (const char* p : family.patterns) spec.patterns.emplace_back(p);
  spec.ignore_merges = family.ignore_merges;
  spec.add_bos = family.add_bos;
  return spec;
}

}  // namespace

std::optional<PreTokenizerSpec> find_pre_tokenizer(std::string_view name) {
  for (const Family& family : families()) {
    for (const char* n : family.names) {
      if (name == n) return to_spec(family);
    }
  }
  // The Jina embedding models (jina-es, jina-v2-de, jina-v2-code, ...) split like GPT-2.
  if (name.starts_with("jina-")) return find_pre_tokenizer("gpt-2");
  return std::nullopt;
}

std::vector<std::string> known_pre_tokenizers() {
  std::vector<std::string> names;
  for (const Family& family : families()) {
    for (const char* n : family.names) {
      if (*n != '\0') names.emplace_back(n);
    }
  }
  names.emplace_back("jina-*");
  return names;
}

// ---------------------------------------------------------------------------------------

struct PreTokenizer::Pattern {
  pcre2_code* code = nullptr;
  std::string source;

  ~Pattern() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(const std::vector<std::string>& patterns) {
  for (const std::string& source : patterns) {
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(),
                                     PCRE2_UTF | PCRE2_UCP, &error, &error_offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      throw Error("pre-tokenizer pattern does not compile at offset " +
                  std::to_string(error_offset) + ": " + reinterpret_cast<const char*>(message) +
                  ": " + source);
    }
    // Without JIT (not built in, or refused by the system) matching still works, slower.
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    auto pattern = std::make_unique<Pattern>();
    pattern->code = code;
    pattern->source = source;
    patterns_.push_back(std::move(pattern));
  }
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

namespace {

// Per-call matching state: match data per pattern, and a JIT stack made only when the
// default 32 KiB one runs out (deep backtracking on very long words).
class Matcher {
 public:
  ~Matcher() {
    pcre2_match_data_free(data_);
    pcre2_match_context_free(context_);
    pcre2_jit_stack_free(stack_);
  }

  // Finds the next match of `code` in subject[start, size): true with [begin, end) set.
  bool next(const pcre2_code* code, std::string_view subject, size_t start, size_t& begin,
            size_t& end, const std::string& source) {
    if (data_ == nullptr || data_code_ != code) {
      pcre2_match_data_free(data_);
      data_ = pcre2_match_data_create_from_pattern(code, nullptr);
      data_code_ = code;
      if (data_ == nullptr) throw std::bad_alloc();
    }
    for (;;) {
      const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(),
                                 start, PCRE2_NO_UTF_CHECK, data_, context_);
      if (rc == PCRE2_ERROR_NOMATCH) return false;
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT && grow_stack()) continue;
      if (rc < 0) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(rc, message, sizeof(message));
        throw Error(std::string("pre-tokenizer pattern failed on the input: ") +
                    reinterpret_cast<const char*>(message) + ": " + source);
      }
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data_);
      begin = ovector[0];
      end = ovector[1];
      return true;
    }
  }

 private:
  bool grow_stack() {
    static constexpr size_t kMaxStack = size_t{256} << 20;
    if (stack_size_ >= kMaxStack) return false;
    stack_size_ = stack_size_ == 0 ? size_t{1} << 20 : stack_size_ * 8;
    pcre2_jit_stack_free(stack_);
    stack_ = pcre2_jit_stack_create(32 * 1024, stack_size_, nullptr);
    if (context_ == nullptr) context_ = pcre2_match_context_create(nullptr);
    if (stack_ == nullptr || context_ == nullptr) throw std::bad_alloc();
    pcre2_jit_stack_assign(context_, nullptr, stack_);
    return true;
  }

  pcre2_match_data* data_ = nullptr;
  const pcre2_code* data_code_ = nullptr;
  pcre2_match_context* context_ = nullptr;
  pcre2_jit_stack* stack_ = nullptr;
  size_t stack_size_ = 0;
};

}  // namespace

void PreTokenizer::split(std::string_view text, std::vector<Word>& words) const {
  words.clear();
  if (text.empty()) return;
  words.push_back({0, text.size()});
  std::vector<Word> next;
  Matcher matcher;
  for (const auto& pattern : patterns_) {
    next.clear();
    next.reserve(words.size() + words.size() / 2 + 16);
    for (const Word& piece : words) {
      // Each piece is matched as a subject of its own: lookarounds stop at its edges.
      const std::string_view subject = text.substr(piece.offset, piece.length);
      size_t start = 0;  // where the next search begins
      size_t taken = 0;  // end of the last piece emitted
      size_t begin = 0, end = 0;
      while (start < subject.size() &&
             matcher.next(pattern->code, subject, start, begin, end, pattern->source)) {
        if (begin > taken) {
          next.push_back({piece.offset + taken, begin - taken});
          taken = begin;
        }
        if (end > begin) {
          next.push_back({piece.offset + begin, end - begin});
          start = taken = end;
        } else {  // an empty match: step over one character
          if (end >= subject.size()) break;
          start = end + utf8::claimed_length(static_cast<uint8_t>(subject[end]));
        }
      }
      if (taken < subject.size()) next.push_back({piece.offset + taken, subject.size() - taken});
    }
    words.swap(next);
  }
}

}  // namespace tokamak
