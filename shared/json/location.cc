#include "shared/json/location.h"

#include <charconv>

namespace strata {
namespace {

constexpr std::string_view::size_type npos = std::string_view::npos;

// JavaScript's "." matches anything but a line terminator: \n, \r, U+2028, U+2029.
bool HasLineTerminator(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '\n' || c == '\r') return true;
    if (c == '\xE2' && i + 2 < s.size() && s[i + 1] == '\x80' &&
        (s[i + 2] == '\xA8' || s[i + 2] == '\xA9')) {
      return true;
    }
  }
  return false;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Number of ASCII digits at the end of s.
size_t TrailingDigits(std::string_view s) {
  size_t n = 0;
  while (n < s.size() && IsDigit(s[s.size() - 1 - n])) ++n;
  return n;
}

// `head` == A + " (in " + B + ")" with A free of line terminators and B free of ')'.
// (The tail shared by the three native patterns.)
bool MatchInLibrary(std::string_view head) {
  if (head.empty() || head.back() != ')') return false;
  std::string_view body = head.substr(0, head.size() - 1);
  // B may not contain ')', so " (in " must start after the last ')' of body; the earliest
  // such occurrence leaves the shortest A, the best chance for "A has no line terminator".
  size_t last_paren = body.rfind(')');
  size_t from = last_paren == npos ? 0 : last_paren + 1;
  size_t p = body.find(" (in ", from);
  if (p == npos) return false;
  return !HasLineTerminator(body.substr(0, p));
}

// /^(.*) \(in ([^)]*)\) (\+ [0-9]+)$/
bool MatchNativeWithOffset(std::string_view s) {
  size_t digits = TrailingDigits(s);
  if (digits == 0 || s.size() < digits + 3) return false;
  std::string_view rest = s.substr(0, s.size() - digits);
  if (rest.substr(rest.size() - 3) != " + ") return false;
  return MatchInLibrary(rest.substr(0, rest.size() - 3));
}

// /^(.*) \(in ([^)]*)\) (\(.*:.*\))$/
bool MatchNativeWithFileLine(std::string_view s) {
  if (s.empty() || s.back() != ')') return false;
  for (size_t p = s.find(" (in "); p != npos; p = s.find(" (in ", p + 1)) {
    size_t k = s.find(')', p + 5);  // B ends at the first ')'.
    if (k == npos) return false;
    if (s.compare(k, 3, ") (") != 0 || k + 3 > s.size() - 1) continue;
    std::string_view m = s.substr(k + 3, s.size() - 1 - (k + 3));
    if (m.find(':') == npos || HasLineTerminator(m)) continue;
    if (HasLineTerminator(s.substr(0, p))) return false;  // Only grows with p.
    return true;
  }
  return false;
}

// /^(.*) \(in ([^)]*)\)$/
bool MatchNativePlain(std::string_view s) { return MatchInLibrary(s); }

// Strips an optional "[digits]" suffix. Returns false when s ends with ']' but not with a
// well-formed "[digits]" (then no JS pattern can match).
bool StripSourceIndex(std::string_view* s, bool* had_index) {
  *had_index = false;
  if (s->empty() || s->back() != ']') return true;
  std::string_view body = s->substr(0, s->size() - 1);
  size_t digits = TrailingDigits(body);
  if (digits == 0 || body.size() < digits + 1 || body[body.size() - digits - 1] != '[') {
    return false;
  }
  *s = body.substr(0, body.size() - digits - 1);
  *had_index = true;
  return true;
}

// Strips ":digits" (required) from the end; the optional second ":digits" of the patterns
// is then part of the URL, which the patterns allow anyway. Returns the position of that
// ':' or npos.
size_t LineColonPosition(std::string_view s) {
  size_t digits = TrailingDigits(s);
  if (digits == 0 || s.size() < digits + 1 || s[s.size() - digits - 1] != ':') return npos;
  return s.size() - digits - 1;
}

// /^(.*) \((.+?):([0-9]+)(?::([0-9]+))?\)(?:\[(\d+)\])?$/
bool MatchJsWithName(std::string_view s, bool* had_index) {
  if (!StripSourceIndex(&s, had_index)) return false;
  if (s.empty() || s.back() != ')') return false;
  s.remove_suffix(1);
  size_t colon = LineColonPosition(s);
  if (colon == npos) return false;
  std::string_view prefix = s.substr(0, colon);  // A + " (" + URL, URL non-empty.
  if (HasLineTerminator(prefix)) return false;
  size_t p = prefix.find(" (");
  return p != npos && p + 2 < prefix.size();
}

// /^()(.+?):([0-9]+)(?::([0-9]+))?(?:\[(\d+)\])?$/
bool MatchJsBare(std::string_view s, bool* had_index) {
  if (!StripSourceIndex(&s, had_index)) return false;
  size_t colon = LineColonPosition(s);
  if (colon == npos || colon == 0) return false;
  return !HasLineTerminator(s.substr(0, colon));
}

bool IsJs(std::string_view s, bool* had_index) {
  return MatchJsWithName(s, had_index) || MatchJsBare(s, had_index);
}

// Line terminators would stop "." from matching the name part of our own patterns.
std::string WithoutLineTerminators(std::string_view s) {
  std::string out(s);
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == '\n' || out[i] == '\r') {
      out[i] = ' ';
    } else if (out[i] == '\xE2' && i + 2 < out.size() && out[i + 1] == '\x80' &&
               (out[i + 2] == '\xA8' || out[i + 2] == '\xA9')) {
      out.replace(i, 3, " ");
    }
  }
  return out;
}

}  // namespace

const char* LocationKindName(LocationKind kind) {
  switch (kind) {
    case LocationKind::kAddress: return "address";
    case LocationKind::kNative: return "native";
    case LocationKind::kJs: return "JS";
    case LocationKind::kLabel: return "label";
  }
  return "?";
}

LocationKind ClassifyLocation(std::string_view s) {
  if (s.substr(0, 2) == "0x") return LocationKind::kAddress;
  if (MatchNativeWithOffset(s) || MatchNativeWithFileLine(s) || MatchNativePlain(s)) {
    return LocationKind::kNative;
  }
  bool had_index;
  if (IsJs(s, &had_index)) return LocationKind::kJs;
  return LocationKind::kLabel;
}

bool JsLocationHasSourceIndex(std::string_view s) {
  if (ClassifyLocation(s) != LocationKind::kJs) return false;
  bool had_index = false;
  return IsJs(s, &had_index) && had_index;
}

std::string AddressLocation(uint64_t address) {
  char buffer[2 + 16];
  buffer[0] = '0';
  buffer[1] = 'x';
  auto result = std::to_chars(buffer + 2, buffer + sizeof(buffer), address, 16);
  return std::string(buffer, static_cast<size_t>(result.ptr - buffer));
}

std::string LabelLocation(std::string_view label) {
  std::string out(label);
  if (out.compare(0, 2, "0x") == 0) out.insert(out.begin(), ' ');
  if (ClassifyLocation(out) != LocationKind::kLabel) out.push_back(' ');
  return out;
}

std::string NativeSymbolLocation(std::string_view name, std::string_view library) {
  if (library.empty()) return LabelLocation(name);
  std::string out = WithoutLineTerminators(name);
  if (out.compare(0, 2, "0x") == 0) out.insert(out.begin(), ' ');
  out += " (in ";
  for (char c : library) out.push_back(c == ')' ? ']' : c);
  out += ')';
  return out;
}

std::string JsLocation(std::string_view name, std::string_view url, uint32_t line,
                       uint32_t column) {
  std::string out = WithoutLineTerminators(name);
  if (out.compare(0, 2, "0x") == 0) out.insert(out.begin(), ' ');
  out += " (";
  out += url.empty() ? std::string("<unknown>") : WithoutLineTerminators(url);
  out += ':';
  out += std::to_string(line);
  if (column != 0) {
    out += ':';
    out += std::to_string(column);
  }
  out += ')';
  return out;
}

}  // namespace strata
