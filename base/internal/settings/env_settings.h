// The STRATA_* environment variables: parsing, validation and STRATA_HELP.
//
// Every variable is described once (kEnvironmentVariables in env_settings.cc), and that table
// drives both the help text and the error messages. A bad value is reported on stderr with
// the variable's name and accepted range, and the default is kept: the program runs as it
// would have, only with default settings.
//
// Thread safety: ReadEnvironment() reads the environment (getenv): call it at load time,
// before the program starts threads that call setenv. Async-signal safety: no.
#ifndef STRATA_BASE_INTERNAL_ENV_SETTINGS_H_
#define STRATA_BASE_INTERNAL_ENV_SETTINGS_H_

#include <functional>
#include <string>

#include "base/profiler.h"

namespace strata {
namespace base_internal {

struct EnvironmentSettings {
  bool help = false;       // STRATA_HELP
  bool startup = false;    // STRATA_STARTUP
  bool logging = false;    // STRATA_LOGGING
  std::string shutdown_path;  // STRATA_SHUTDOWN, with %p not yet replaced
  int control_signal = 0;     // STRATA_SIGNAL (control_signal.h); 0: none.
  std::string flight_recorder_directory;  // STRATA_FLIGHT_RECORDER, checked to be a writable dir
  std::string record_notes_directory;    // STRATA_RECORD_NOTES, checked the same way
  ProfilerSettings settings;  // STRATA_STARTUP_INTERVAL, _BUFFER_MB, _FEATURES, _FILTERS
  // STRATA_ALLOC_INTERVAL: mean bytes between sampled allocations (native_allocations.h).
  uint64_t native_allocation_interval = 64 * 1024;
  int errors = 0;             // Bad values reported (defaults used instead).
};

// Reads the variables through `getenv_function` (getenv in production; tests pass a map).
// Bad values are reported through `report` (LogError in production).
EnvironmentSettings ReadEnvironment(
    const std::function<const char*(const char*)>& getenv_function,
    const std::function<void(const std::string&)>& report);

// The STRATA_HELP text: every variable with its meaning, accepted values and default.
std::string EnvironmentHelpText();

// `path` with every "%p" replaced by `pid`.
std::string ExpandShutdownPath(const std::string& path, int pid);

// Whether STRATA_SIGNAL accepts `signal_number` as the control signal: SIGHUP, SIGINT,
// SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGALRM, SIGTERM, SIGPROF, SIGVTALRM and
// SIGRTMIN..SIGRTMAX; never SIGKILL/SIGSTOP, fault signals, job control, SIGCHLD, nor
// SIGURG/SIGWINCH (ignored by default and sent by the system).
bool IsAllowedControlSignal(int signal_number);

// A STRATA_SIGNAL value (name with or without "SIG", any case, SIGRTMIN+n, SIGRTMAX-n, or a
// number) as a signal number, or 0 when it is not one IsAllowedControlSignal accepts.
int ParseControlSignal(const std::string& text);

// `settings` with an interval or a buffer size outside the ranges STRATA_STARTUP_INTERVAL and
// STRATA_STARTUP_BUFFER_MB accept (0.05-1000 ms, 1-4096 MiB) replaced by the default, each
// replacement logged as an error naming `caller`. Every session starts with these.
ProfilerSettings ValidSessionSettings(const ProfilerSettings& settings, const char* caller);

// Feature names as STRATA_STARTUP_FEATURES takes them, for help and for the profile.
std::string FeatureNames(uint32_t features);

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_ENV_SETTINGS_H_
