// Profiles for the whole-system format checks: one small but realistic profile written with
// the real writer (shared/json), and "broken" variants of it, each breaking one rule of
// shared/design/gecko-format.md.
//
// The realistic profile (deterministic, fixed addresses and times):
//   parent process 1000 ("strata-demo"), meta.startTime 1700000000000.25 ms:
//     GeckoMain (tid 1000): 20 samples, 1 ms apart from 1 ms; label, native-symbol and
//       raw-address frames; idle samples; CPU deltas; markers: instant "Startup", interval
//       "ReadConfig" (FileRead payload with a unique-string field and a backtrace),
//       "Frame" start/end pair; counter "malloc" (Memory).
//     "Worker 1" (tid 1001): 15 samples, native frames with line numbers.
//     "Worker 2" (tid 1002): registered at 5 ms, unregistered at 15 ms, 8 samples.
//   sub-process 2000 (process type "tab"), started 5 ms after the parent:
//     GeckoMain (tid 2000): 5 samples.
#ifndef STRATA_TESTS_FORMAT_TEST_PROFILES_H_
#define STRATA_TESTS_FORMAT_TEST_PROFILES_H_

#include <string>
#include <string_view>
#include <vector>

namespace strata {

std::string MakeRealisticProfile();

struct BrokenVariant {
  const char* name;           // "frame-category-out-of-range", ...
  const char* checker_code;   // The error code our checker must report.
  // True when the front-end's importer (profiler-cli) loads it without any error.
  bool importer_accepts_silently;
  // True when the importer never finishes on it (do not feed it to profiler-cli).
  bool importer_hangs;
  const char* description;
};

const std::vector<BrokenVariant>& BrokenVariants();

// `profile` with the variant's change applied; "" for an unknown variant name.
std::string MakeBrokenVariant(const std::string& profile, std::string_view variant);

}  // namespace strata

#endif  // STRATA_TESTS_FORMAT_TEST_PROFILES_H_
