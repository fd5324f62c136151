// A validator for Gecko profiles (format version 36), stricter than the front-end.
//
// The Firefox Profiler front-end imports many broken profiles without a word and then shows
// nonsense or hangs (shared/design/gecko-format.md, "[verified]" notes): out-of-range
// frame/category indexes, a stack prefix that points forward (the call tree never finishes),
// unsorted libs or samples, marker names given as literal strings, native names that it reads
// as JavaScript ("worker:12"), a category list without a grey default, sample times given as
// strings, ... CheckGeckoProfile() reports those as errors, and what would make the import
// throw as well, each message with a JSON path and a stable code in brackets:
//
//   threads[0].stackTable.data[5]: prefix 7 is not smaller than the stack's own index
//   (the front-end's call tree never finishes) [stack-prefix-order]
//
// Warnings are for things that load and show correctly but are probably unintended (an
// address outside every library, a counter in a process without a GeckoMain thread, ...).
//
// Thread safety: pure function.
#ifndef STRATA_TESTS_FORMAT_GECKO_PROFILE_CHECKER_H_
#define STRATA_TESTS_FORMAT_GECKO_PROFILE_CHECKER_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

struct CheckOptions {
  // Accept JavaScript-classified frame locations whose "URL" does not look like a script
  // (no "://", no .js/.mjs/... extension). Off: such a location in a C++ profile is almost
  // always a native or label name that the front-end misreads.
  bool allow_js_looking_locations = false;
  // Messages kept per code (the rest are counted).
  size_t max_messages_per_code = 10;
};

struct CheckMessage {
  std::string code;  // "stack-prefix-order", ...
  std::string text;  // Path and explanation, ending in " [code]".
};

struct CheckReport {
  std::vector<CheckMessage> errors;
  std::vector<CheckMessage> warnings;
  // What was seen, for summaries and tests.
  size_t processes = 0;  // Including the top level.
  size_t threads = 0;
  size_t samples = 0;
  size_t markers = 0;
  size_t frames = 0;

  bool ok() const { return errors.empty(); }
  bool HasError(std::string_view code) const;
  bool HasWarning(std::string_view code) const;
  // All messages, one per line, errors first.
  std::string ToString() const;
};

// `json` is the profile text (not gzip-compressed).
CheckReport CheckGeckoProfile(std::string_view json, const CheckOptions& options = {});

}  // namespace strata

#endif  // STRATA_TESTS_FORMAT_GECKO_PROFILE_CHECKER_H_
