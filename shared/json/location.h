// How the Firefox Profiler front-end classifies a frame's location string, and how to build
// location strings that it classifies the way we mean them.
//
// The front-end (src/profile-logic/process-profile.ts; the same code ships in profiler-cli
// 0.10.0) decides what a frame *is* from its location string alone, first match wins:
//   1. starts with "0x"                       -> native address, to symbolicate
//   2. "name (in lib)", "name (in lib) + 12", "name (in lib) (file:line)"
//                                             -> native function in library `lib`
//   3. "name (url:line[:col])[n]" or a bare "something:line[:col][n]"
//                                             -> JavaScript function
//   4. anything else                          -> label
// ClassifyLocation() reproduces those regular expressions exactly (including that "." does
// not match line terminators). Used by the writer to keep label and native-name frames out of
// the JS class, and by the profile checker.
//
// Thread safety: pure functions.
#ifndef STRATA_SHARED_JSON_LOCATION_H_
#define STRATA_SHARED_JSON_LOCATION_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace strata {

enum class LocationKind : uint8_t {
  kAddress,  // "0x..."
  kNative,   // "name (in lib)..."
  kJs,       // "name (url:line)", "x:12", ...
  kLabel,    // anything else
};

const char* LocationKindName(LocationKind kind);

LocationKind ClassifyLocation(std::string_view location);

// True when a JS location carries a "[n]" source-index suffix (then the profile needs a
// top-level `sources` table, or the import crashes).
bool JsLocationHasSourceIndex(std::string_view location);

// "0x" + lower-case hex, no leading zeros: AddressLocation(0x1230) == "0x1230".
std::string AddressLocation(uint64_t address);

// A label (or a symbol name without a library) that the front-end will classify as a label:
// returned unchanged when it already is one; otherwise made one by appending a space (which
// defeats every end-anchored pattern above) or, for a leading "0x", prefixing a space.
std::string LabelLocation(std::string_view label);

// "name (in library)": a native function; `library` is normally the file's base name and
// must not contain ')' (replaced by ']' if it does). With an empty library this falls back to
// LabelLocation(name).
std::string NativeSymbolLocation(std::string_view name, std::string_view library);

// "name (url:line:column)" (column omitted when 0): a JavaScript function. An empty name is
// shown by the front-end as "(root scope) url".
std::string JsLocation(std::string_view name, std::string_view url, uint32_t line,
                       uint32_t column);

}  // namespace strata

#endif  // STRATA_SHARED_JSON_LOCATION_H_
