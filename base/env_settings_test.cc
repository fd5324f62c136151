#include "base/internal/settings/env_settings.h"

#include <signal.h>

#include <map>
#include <string>
#include <vector>

#include "catch2/catch.hpp"

namespace strata {
namespace base_internal {
namespace {

struct Env {
  std::map<std::string, std::string> values;
  std::vector<std::string> reports;
  EnvironmentSettings Read() {
    return ReadEnvironment(
        [this](const char* name) -> const char* {
          auto it = values.find(name);
          return it == values.end() ? nullptr : it->second.c_str();
        },
        [this](const std::string& message) { reports.push_back(message); });
  }
};

TEST_CASE("No variables: defaults, no reports") {
  Env env;
  const EnvironmentSettings s = env.Read();
  CHECK_FALSE(s.startup);
  CHECK_FALSE(s.help);
  CHECK(s.settings.interval_ms == 1.0);
  CHECK(s.settings.buffer_megabytes == 64);
  CHECK(s.settings.features == kDefaultFeatures);
  CHECK(s.shutdown_path.empty());
  CHECK(env.reports.empty());
}

TEST_CASE("Good values are taken") {
  Env env;
  env.values = {{"STRATA_STARTUP", "1"},
                {"STRATA_STARTUP_INTERVAL", "0.5"},
                {"STRATA_STARTUP_BUFFER_MB", "8"},
                {"STRATA_STARTUP_FEATURES", "precise, -cpu,rawaddresses"},
                {"STRATA_STARTUP_FILTERS", "worker, IO ,"},
                {"STRATA_SHUTDOWN", "/tmp/p-%p.json"},
                {"STRATA_LOGGING", "1"}};
  const EnvironmentSettings s = env.Read();
  CHECK(env.reports.empty());
  CHECK(s.startup);
  CHECK(s.logging);
  CHECK(s.settings.interval_ms == 0.5);
  CHECK(s.settings.buffer_megabytes == 8);
  CHECK(s.settings.features ==
        ((kDefaultFeatures | kFeaturePrecise | kFeatureRawAddresses) & ~kFeatureCpu));
  CHECK(s.settings.thread_filters == std::vector<std::string>{"worker", "IO"});
  CHECK(ExpandShutdownPath(s.shutdown_path, 42) == "/tmp/p-42.json");
}

TEST_CASE("Bad values name the variable and range, and keep the default") {
  struct Case {
    const char* name;
    const char* value;
    const char* range_words;
  };
  const Case cases[] = {
      {"STRATA_STARTUP_INTERVAL", "abc", "0.05 to 1000"},
      {"STRATA_STARTUP_INTERVAL", "-5", "0.05 to 1000"},
      {"STRATA_STARTUP_INTERVAL", "1e9", "0.05 to 1000"},
      {"STRATA_STARTUP_INTERVAL", "", "0.05 to 1000"},
      {"STRATA_STARTUP_INTERVAL", "nan", "0.05 to 1000"},
      {"STRATA_STARTUP_INTERVAL", "2ms", "0.05 to 1000"},
      {"STRATA_STARTUP_BUFFER_MB", "0", "1 to 4096"},
      {"STRATA_STARTUP_BUFFER_MB", "99999999999999999999", "1 to 4096"},
      {"STRATA_STARTUP_BUFFER_MB", "1.5", "1 to 4096"},
      {"STRATA_STARTUP_FEATURES", "stackwalk,turbo", "unknown: turbo"},
      {"STRATA_STARTUP", "maybe", "1 or 0"},
      {"STRATA_SHUTDOWN", "", "a file path"},
  };
  for (const Case& c : cases) {
    Env env;
    env.values[c.name] = c.value;
    const EnvironmentSettings s = env.Read();
    INFO(c.name << "='" << c.value << "'");
    REQUIRE(env.reports.size() == 1);
    CHECK(env.reports[0].find(c.name) != std::string::npos);
    CHECK(env.reports[0].find(c.range_words) != std::string::npos);
    CHECK(env.reports[0].find("default") != std::string::npos);
    CHECK(s.errors == 1);
    CHECK(s.settings.interval_ms == 1.0);
    CHECK(s.settings.buffer_megabytes == 64);
    CHECK(s.settings.features == kDefaultFeatures);
  }
}

TEST_CASE("STRATA_ALLOC_INTERVAL: bytes with K, M or G; out of range or garbage keeps 64K") {
  {
    Env env;
    CHECK(env.Read().native_allocation_interval == 64 * 1024);
  }
  for (const auto& [text, bytes] : std::vector<std::pair<std::string, uint64_t>>{
           {"256", 256}, {"512K", 512 * 1024}, {"2M", 2u << 20}, {"1G", 1u << 30},
           {"131072", 131072}, {" 4KiB ", 4096}}) {
    Env env;
    env.values["STRATA_ALLOC_INTERVAL"] = text;
    CHECK(env.Read().native_allocation_interval == bytes);
    CHECK(env.reports.empty());
  }
  for (const std::string bad : {"0", "255", "2G", "12abc", "", "-1", "1.5M", "99999999999999999999K"}) {
    Env env;
    env.values["STRATA_ALLOC_INTERVAL"] = bad;
    const EnvironmentSettings s = env.Read();
    CHECK(s.native_allocation_interval == 64 * 1024);
    REQUIRE(env.reports.size() == 1);
    CHECK(env.reports[0].find("STRATA_ALLOC_INTERVAL") != std::string::npos);
    CHECK(env.reports[0].find("from 256 to 1073741824 bytes") != std::string::npos);
    CHECK(env.reports[0].find("using the default (64K)") != std::string::npos);
  }
}

TEST_CASE("The feature nativeallocations is known") {
  Env env;
  env.values["STRATA_STARTUP_FEATURES"] = "nativeallocations";
  CHECK(env.Read().settings.features == (kDefaultFeatures | kFeatureNativeAllocations));
  CHECK(env.reports.empty());
}

TEST_CASE("STRATA_SAMPLING_SIGNAL: real-time signals by name or number, a few others; the rest refused") {
  const struct {
    const char* value;
    int expected;  // 0: refused.
  } cases[] = {
      {"SIGRTMIN+5", SIGRTMIN + 5}, {"rtmax-2", SIGRTMAX - 2}, {"SIGRTMAX", SIGRTMAX},
      {"40", 40},                   {"SIGPROF", SIGPROF},      {"usr2", SIGUSR2},
      {"SIGSEGV", 0},               {"9", 0},                  {"SIGRTMIN+99", 0},
      {"SIGRTMAX-99", 0},           {"", 0},                   {"SIGRTMIN+", 0},
      {"65", 0},                    {"SIGRTMIN+-1", 0},
  };
  for (const auto& c : cases) {
    Env env;
    env.values = {{"STRATA_SAMPLING_SIGNAL", c.value}};
    const EnvironmentSettings s = env.Read();
    INFO(c.value);
    CHECK(s.settings.sampling_signal == c.expected);
    CHECK(s.control_signal == 0);
    if (c.expected == 0) {
      REQUIRE(env.reports.size() == 1);
      CHECK(env.reports[0].find("STRATA_SAMPLING_SIGNAL") != std::string::npos);
      CHECK(env.reports[0].find("SIGRTMIN+n") != std::string::npos);
      CHECK(env.reports[0].find(std::to_string(SIGRTMAX)) != std::string::npos);
    } else {
      CHECK(env.reports.empty());
    }
  }
}

TEST_CASE("STRATA_SIGNAL: the control signal by name or number; uncatchable, fault and system-sent signals refused") {
  const struct {
    const char* value;
    int expected;  // 0: refused.
  } cases[] = {
      {"SIGUSR2", SIGUSR2},         {"usr1", SIGUSR1},         {"12", SIGUSR2},
      {" Sighup ", SIGHUP},         {"SIGRTMIN+3", SIGRTMIN + 3}, {"rtmax", SIGRTMAX},
      {"SIGTERM", SIGTERM},         {"SIGPROF", SIGPROF},      {"64", 64},
      {"SIGWINCH", 0},              {"SIGURG", 0},             {"28", 0},
      {"SIGKILL", 0},               {"9", 0},                  {"SIGSTOP", 0},
      {"19", 0},                    {"SIGSEGV", 0},            {"11", 0},
      {"SIGBUS", 0},                {"SIGFPE", 0},             {"SIGILL", 0},
      {"SIGABRT", 0},               {"SIGTRAP", 0},            {"SIGSYS", 0},
      {"SIGCHLD", 0},               {"SIGCONT", 0},            {"SIGTSTP", 0},
      {"32", 0},                    {"33", 0},                 {"0", 0},
      {"65", 0},                    {"", 0},                   {"USR3", 0},
      {"SIGRTMIN+99", 0},           {"-12", 0},                {"12abc", 0},
  };
  for (const auto& c : cases) {
    Env env;
    env.values = {{"STRATA_SIGNAL", c.value}};
    const EnvironmentSettings s = env.Read();
    INFO("STRATA_SIGNAL='" << c.value << "'");
    CHECK(s.control_signal == c.expected);
    CHECK(ParseControlSignal(c.value) == c.expected);
    // Never taken as the sampling signal (it was, before the rename).
    CHECK(s.settings.sampling_signal == 0);
    if (c.expected == 0) {
      REQUIRE(env.reports.size() == 1);
      CHECK(s.errors == 1);
      CHECK(env.reports[0].find("STRATA_SIGNAL='") != std::string::npos);
      CHECK(env.reports[0].find("SIGUSR2") != std::string::npos);
      CHECK(env.reports[0].find(std::to_string(SIGRTMAX)) != std::string::npos);
      CHECK(env.reports[0].find("no control signal") != std::string::npos);
    } else {
      CHECK(env.reports.empty());
    }
  }
}

TEST_CASE("STRATA_SIGNAL equal to STRATA_SAMPLING_SIGNAL is refused; both may be set apart") {
  {
    Env env;
    env.values = {{"STRATA_SIGNAL", "SIGUSR2"}, {"STRATA_SAMPLING_SIGNAL", "12"}};
    const EnvironmentSettings s = env.Read();
    CHECK(s.settings.sampling_signal == SIGUSR2);
    CHECK(s.control_signal == 0);
    REQUIRE(env.reports.size() == 1);
    CHECK(env.reports[0].find("STRATA_SIGNAL='SIGUSR2'") != std::string::npos);
    CHECK(env.reports[0].find("STRATA_SAMPLING_SIGNAL") != std::string::npos);
  }
  {
    Env env;
    env.values = {{"STRATA_SIGNAL", "SIGUSR2"}, {"STRATA_SAMPLING_SIGNAL", "SIGRTMIN+5"}};
    const EnvironmentSettings s = env.Read();
    CHECK(env.reports.empty());
    CHECK(s.settings.sampling_signal == SIGRTMIN + 5);
    CHECK(s.control_signal == SIGUSR2);
  }
}

TEST_CASE("Help lists every variable and feature") {
  const std::string help = EnvironmentHelpText();
  for (const char* name :
       {"STRATA_HELP", "STRATA_STARTUP", "STRATA_STARTUP_INTERVAL", "STRATA_STARTUP_BUFFER_MB",
        "STRATA_STARTUP_FEATURES", "STRATA_STARTUP_FILTERS", "STRATA_SHUTDOWN", "STRATA_LOGGING",
        "STRATA_SIGNAL", "STRATA_SAMPLING_SIGNAL", "stackwalk", "threads", "cpu", "precise", "framepointers", "rawaddresses"}) {
    INFO(name);
    CHECK(help.find(name) != std::string::npos);
  }
  CHECK(FeatureNames(kDefaultFeatures) == "stackwalk,threads,cpu,waitstacks");
}

}  // namespace
}  // namespace base_internal
}  // namespace strata
