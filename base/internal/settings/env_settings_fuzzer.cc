// libFuzzer target: the STRATA_* environment-variable parsers (env_settings.h), which read
// whatever the user's environment holds.
//
// Input: the values of the variables, separated by NUL bytes (an environment string cannot
// hold one), in the order of kVariableNames below; a value consisting of the single byte
// 0x01 leaves that variable unset, and missing trailing values are unset too.
//
// Checked on every input (STRATA_CHECK aborts, which the fuzzer reports as a crash):
//  - every report names one of the variables and says what is expected and which default is
//    used; the error count equals the number of reports;
//  - the settings are always within the documented ranges (interval 0.05-1000 ms, buffer
//    1-4096 MiB, only known feature bits); a variable that was reported keeps its default;
//  - a variable that was not set leaves its setting at the default;
//  - a control signal (STRATA_SIGNAL) is one IsAllowedControlSignal accepts and never the
//    sampling signal;
//  - FeatureNames() of the features read back parses to the same features (plus defaults);
//  - ExpandShutdownPath() leaves no "%p" behind and only ever replaces "%p".
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/internal/settings/env_settings.h"
#include "platform/check.h"

namespace strata {
namespace base_internal {
namespace {

constexpr const char* kVariableNames[] = {
    "STRATA_STARTUP_INTERVAL", "STRATA_STARTUP_BUFFER_MB", "STRATA_STARTUP_FEATURES",
    "STRATA_STARTUP_FILTERS",  "STRATA_SHUTDOWN",          "STRATA_HELP",
    "STRATA_STARTUP",          "STRATA_LOGGING",           "STRATA_SAMPLING_SOURCE",
    // Appended (issue 20), so the corpus's earlier values keep their variables.
    "STRATA_SAMPLING_SIGNAL",  "STRATA_SIGNAL",
};
constexpr uint32_t kKnownFeatures = kFeatureStackWalk | kFeatureThreads | kFeatureCpu |
                                    kFeaturePrecise | kFeatureFramePointers |
                                    kFeatureRawAddresses | kFeatureWaitStacks;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

constexpr size_t kVariables = sizeof(kVariableNames) / sizeof(kVariableNames[0]);

// The value of each variable of kVariableNames, or null when unset.
using Values = std::array<const char*, kVariables>;

size_t IndexOf(const std::string& name) {
  for (size_t i = 0; i < kVariables; ++i) {
    if (name == kVariableNames[i]) return i;
  }
  return kVariables;
}

// Parses `values` and checks the invariants above; returns the settings.
EnvironmentSettings ReadAndCheck(const Values& values) {
  std::vector<std::string> reports;
  const EnvironmentSettings env = ReadEnvironment(
      [&values](const char* name) -> const char* {
        const size_t i = IndexOf(name);
        return i < kVariables ? values[i] : nullptr;
      },
      [&reports](const std::string& message) { reports.push_back(message); });

  STRATA_CHECK(env.errors == static_cast<int>(reports.size()),
               "the error count differs from the number of reports");
  std::array<bool, kVariables> reported{};
  for (const std::string& report : reports) {
    // "<NAME>='<value>' is not valid: expected ...; using the default (...)."
    const size_t equals = report.find("='");
    STRATA_CHECK(equals != std::string::npos, "a report does not start with NAME='value'");
    const size_t i = IndexOf(report.substr(0, equals));
    STRATA_CHECK(i < kVariables && values[i] != nullptr,
                 "a report names a variable that was not set");
    STRATA_CHECK(!reported[i], "a variable was reported twice");
    reported[i] = true;
    STRATA_CHECK(Contains(report, "expected ") && Contains(report, "using the default ("),
                 "a report does not say what is expected and which default is used");
  }

  const ProfilerSettings defaults;
  const ProfilerSettings& s = env.settings;
  STRATA_CHECK(s.interval_ms >= 0.05 && s.interval_ms <= 1000.0, "interval out of range");
  STRATA_CHECK(s.buffer_megabytes >= 1 && s.buffer_megabytes <= 4096, "buffer out of range");
  STRATA_CHECK((s.features & ~kKnownFeatures) == 0, "an unknown feature bit is set");
  auto kept_default = [&](const char* name, bool is_default) {
    const size_t i = IndexOf(name);
    if (values[i] == nullptr || reported[i]) {
      STRATA_CHECK(is_default, "an unset or refused variable changed its setting");
    }
  };
  kept_default("STRATA_STARTUP_INTERVAL", s.interval_ms == defaults.interval_ms);
  kept_default("STRATA_STARTUP_BUFFER_MB", s.buffer_megabytes == defaults.buffer_megabytes);
  kept_default("STRATA_STARTUP_FEATURES", s.features == defaults.features);
  kept_default("STRATA_STARTUP_FILTERS", s.thread_filters.empty());
  kept_default("STRATA_SHUTDOWN", env.shutdown_path.empty());
  kept_default("STRATA_HELP", !env.help);
  kept_default("STRATA_STARTUP", !env.startup);
  kept_default("STRATA_LOGGING", !env.logging);
  kept_default("STRATA_SAMPLING_SOURCE", s.sampling_source == defaults.sampling_source);
  kept_default("STRATA_SAMPLING_SIGNAL", s.sampling_signal == defaults.sampling_signal);
  kept_default("STRATA_SIGNAL", env.control_signal == 0);
  STRATA_CHECK(env.control_signal == 0 || (IsAllowedControlSignal(env.control_signal) &&
                                           env.control_signal != s.sampling_signal),
               "a control signal that is refused or is the sampling signal");
  for (const std::string& filter : s.thread_filters) {
    STRATA_CHECK(!filter.empty() && !Contains(filter, ","), "an empty or unsplit thread filter");
  }
  return env;
}

void CheckExpandShutdownPath(const std::string& path, int pid) {
  const std::string expanded = ExpandShutdownPath(path, pid);
  STRATA_CHECK(!Contains(expanded, "%p"), "a %p was left in the expanded path");
  size_t patterns = 0;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    if (path[i] == '%' && path[i + 1] == 'p') {
      ++patterns;
      ++i;
    }
  }
  const size_t expected = path.size() - 2 * patterns + patterns * std::to_string(pid).size();
  STRATA_CHECK(expanded.size() == expected, "the expanded path has the wrong length");
}

void Run(const uint8_t* data, size_t size) {
  std::array<std::string, kVariables> storage;
  Values values{};
  size_t index = 0;
  size_t start = 0;
  for (size_t i = 0; i <= size && index < kVariables; ++i) {
    if (i < size && data[i] != 0) continue;
    storage[index].assign(reinterpret_cast<const char*>(data) + start, i - start);
    if (storage[index] != "\x01") values[index] = storage[index].c_str();
    ++index;
    start = i + 1;
  }
  const EnvironmentSettings env = ReadAndCheck(values);

  // The feature names written into profiles parse back to the same features.
  if (env.settings.features != kDefaultFeatures) {
    const std::string names = FeatureNames(env.settings.features);
    Values features_only{};
    features_only[IndexOf("STRATA_STARTUP_FEATURES")] = names.c_str();
    const EnvironmentSettings again = ReadAndCheck(features_only);
    STRATA_CHECK(again.errors == 0, "FeatureNames() wrote a name the parser refuses");
    STRATA_CHECK(again.settings.features == (env.settings.features | kDefaultFeatures),
                 "FeatureNames() does not round-trip");
  }

  if (!env.shutdown_path.empty()) {
    uint32_t pid = 0;
    for (size_t i = 0; i < size && i < 4; ++i) pid = pid * 251 + data[i];
    CheckExpandShutdownPath(env.shutdown_path, static_cast<int>(pid & 0x3fffffff));
  }
}

}  // namespace
}  // namespace base_internal
}  // namespace strata

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  strata::base_internal::Run(data, size);
  return 0;
}
