#include "tools/strata/terminal_text.h"

#include <cstdint>
#include <cstdio>

namespace strata {
namespace cli {
namespace {

void AppendEscape(const char* format, unsigned value, std::string* out) {
  char text[16];
  std::snprintf(text, sizeof(text), format, value);
  *out += text;
}

// The length of the valid UTF-8 sequence starting at text[i] (2-4), or 0 when the bytes there
// are not one (overlong forms, surrogates and values above U+10FFFF are not valid).
size_t ValidUtf8Length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t lead = byte(i);
  size_t length = 0;
  uint32_t min = 0;
  uint32_t value = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, min = 0x80, value = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, min = 0x800, value = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, min = 0x10000, value = lead & 0x07;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    value = (value << 6) | (byte(i + k) & 0x3F);
  }
  if (value < min || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return 0;
  return length;
}

}  // namespace

std::string TerminalSafe(std::string_view text, bool keep_newlines) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const uint8_t c = static_cast<uint8_t>(text[i]);
    if (c < 0x80) {
      if ((c < 0x20 && !(keep_newlines && c == '\n')) || c == 0x7F) {
        AppendEscape("\\x%02x", c, &out);
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    const size_t length = ValidUtf8Length(text, i);
    if (length == 0) {
      AppendEscape("\\x%02x", c, &out);  // Not UTF-8: a legacy terminal's C1 control, maybe.
      ++i;
      continue;
    }
    if (length == 2 && c == 0xC2 && static_cast<uint8_t>(text[i + 1]) <= 0x9F) {
      AppendEscape("\\u%04x", static_cast<uint8_t>(text[i + 1]), &out);  // C1 control U+0080-U+009F.
    } else {
      out.append(text.substr(i, length));
    }
    i += length;
  }
  return out;
}

}  // namespace cli
}  // namespace strata
