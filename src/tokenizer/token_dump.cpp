#include "tokenizer/token_dump.h"

#include <cstdio>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace tokamak {

std::string escape_piece(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + 8);
  size_t i = 0;
  while (i < bytes.size()) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    if (b >= 0x80) {
      const int n = utf8::sequence_at(bytes.substr(i));
      // U+0080..U+009F are C1 controls: escape them like C0 ones.
      const bool c1 = n == 2 && b == 0xC2 && static_cast<uint8_t>(bytes[i + 1]) < 0xA0;
      if (n > 0 && !c1) {
        out.append(bytes.substr(i, static_cast<size_t>(n)));
        i += static_cast<size_t>(n);
        continue;
      }
    }
    switch (b) {
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\'':
        out += "\\'";
        break;
      default:
        if (b < 0x20 || b >= 0x7F) {
          char hex[5];
          std::snprintf(hex, sizeof(hex), "\\x%02X", b);
          out += hex;
        } else {
          out.push_back(static_cast<char>(b));
        }
    }
    ++i;
  }
  return out;
}

std::string format_tokens(const Tokenizer& tok, std::span<const int32_t> ids, bool ids_only) {
  std::string out;
  if (ids_only) {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) out.push_back(' ');
      out += std::to_string(ids[i]);
    }
    out.push_back('\n');
    return out;
  }
  for (const int32_t id : ids) {
    out += std::to_string(id);
    out += "\t'";
    out += escape_piece(tok.piece(id));
    out += "'\n";
  }
  return out;
}

}  // namespace tokamak
