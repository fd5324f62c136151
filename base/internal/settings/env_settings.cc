#include "base/internal/settings/env_settings.h"

#include <sys/stat.h>
#include <unistd.h>

#include <signal.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "base/internal/settings/log.h"

namespace strata {
namespace base_internal {
namespace {

// Names are arrays, not pointers, in these tables: a pointer costs the library a dynamic
// relocation (24 bytes) besides itself (libstrata_base.so's size budget, docs/sampling.md).
struct FeatureName {
  char name[18];
  uint32_t bit;
};
constexpr FeatureName kFeatureNames[] = {
    {"stackwalk", kFeatureStackWalk},
    {"threads", kFeatureThreads},
    {"cpu", kFeatureCpu},
    {"precise", kFeaturePrecise},
    {"framepointers", kFeatureFramePointers},
    {"rawaddresses", kFeatureRawAddresses},
    {"waitstacks", kFeatureWaitStacks},
    {"ownframes", kFeatureOwnFrames},
    {"nativeallocations", kFeatureNativeAllocations},
};
// Their meanings, in the same order, each followed by '\0' (one string: no relocations).
constexpr char kFeatureMeanings[] =
    "native stacks in samples (default on)" "\0"
    "register threads made with pthread_create (default on)" "\0"
    "thread CPU time with each sample (default on)" "\0"
    "wall-clock timers: the real rate, but sleeps of sampled threads may return early (EINTR)" "\0"
    "walk frame pointers instead of libunwind (cheaper; loses callers of frameless leaves)" "\0"
    "write raw addresses and libs instead of function names (symbolicate offline)" "\0"
    "exact stacks of threads blocked in wrapped libc calls, without a signal (default on)" "\0"
    "keep frames of Strata's own code in stacks (elided by default; for profiling Strata)" "\0"
    "sampled malloc/new/free with stacks (Native Allocations, Retained Memory); needs "
    "libstrata_alloc.so preloaded or linked" "\0";

// The accepted ranges, written once: as numbers for the checks and as text (compile-time
// string literals) for the help and the error messages.
#define STRATA_INTERVAL_RANGE_MIN 0.05
#define STRATA_INTERVAL_RANGE_MAX 1000
#define STRATA_BUFFER_RANGE_MIN 1
#define STRATA_BUFFER_RANGE_MAX 4096
#define STRATA_ALLOC_INTERVAL_RANGE "from 256 to 1073741824 bytes (suffixes K, M, G: KiB, MiB, GiB)"
#define STRATA_RANGE_TEXT_(x) #x
#define STRATA_RANGE_TEXT(x) STRATA_RANGE_TEXT_(x)
#define STRATA_INTERVAL_RANGE                           \
  "from " STRATA_RANGE_TEXT(STRATA_INTERVAL_RANGE_MIN) " to " \
      STRATA_RANGE_TEXT(STRATA_INTERVAL_RANGE_MAX)
#define STRATA_BUFFER_RANGE                           \
  "from " STRATA_RANGE_TEXT(STRATA_BUFFER_RANGE_MIN) " to " \
      STRATA_RANGE_TEXT(STRATA_BUFFER_RANGE_MAX)
constexpr double kMinIntervalMs = STRATA_INTERVAL_RANGE_MIN;
constexpr double kMaxIntervalMs = STRATA_INTERVAL_RANGE_MAX;
constexpr unsigned long kMinBufferMb = STRATA_BUFFER_RANGE_MIN;
constexpr unsigned long kMaxBufferMb = STRATA_BUFFER_RANGE_MAX;

// The variables and their help, in order: name, '\0', meaning, '\0' for each, and a final '\0'.
// One string, not a table of pointers: a pointer costs the library a dynamic relocation.
constexpr char kVariableHelp[] =
    "STRATA_HELP\0"
        "=1: print this help and exit." "\0"
    "STRATA_STARTUP\0"
        "=1: start profiling when the library loads. Default: off." "\0"
    "STRATA_STARTUP_INTERVAL\0"
        "=<ms>: sampling interval in milliseconds, a number " STRATA_INTERVAL_RANGE
        ". Default: 1. With "
        "CPU-clock timers (STRATA_SAMPLING_SOURCE) sampling is limited by the kernel tick (4 ms "
        "here); see 'precise'." "\0"
    "STRATA_STARTUP_BUFFER_MB\0"
        "=<MiB>: memory limit of the profile buffer, an integer " STRATA_BUFFER_RANGE
        ". Default: 64. The " "oldest data is dropped when it is full." "\0"
    "STRATA_STARTUP_FEATURES\0"
        "=<list>: comma-separated features added to the defaults; '-name' removes one. Default: "
        "stackwalk,threads,cpu,waitstacks." "\0"
    "STRATA_STARTUP_FILTERS\0"
        "=<list>: comma-separated thread-name substrings (case-insensitive); only matching threads "
        "are profiled. Default: every thread." "\0"
    "STRATA_SHUTDOWN\0"
        "=<path>: save the profile (Gecko JSON) there at exit; '%p' becomes the process id. "
        "Without '%p', processes started by a profiled process with the same path save to "
        "<path> with .<pid> before .json. Default: not saved." "\0"
    "STRATA_ALLOC_INTERVAL\0"
        "=<bytes>: with the feature nativeallocations, the mean number of allocated bytes between "
        "two sampled allocations, " STRATA_ALLOC_INTERVAL_RANGE ". Default: 64K (docs/memory.md)."
        "\0"
    "STRATA_LOGGING\0"
        "=1: log what the profiler does on stderr. Default: off." "\0"
    "STRATA_SAMPLING_SIGNAL\0"
        "=<signal>: the sampling signal (was STRATA_SIGNAL before): SIGRTMIN+n, SIGRTMAX-n or a number from SIGRTMIN to "
        "SIGRTMAX, or SIGPROF, SIGVTALRM, SIGUSR1, SIGUSR2. Default: the highest real-time signal "
        "from SIGRTMIN+4 with no handler (gdb: 'handle SIGnn nostop noprint pass')." "\0"
    "STRATA_SAMPLING_SOURCE\0"
        "=auto|perf|timer: what sends the sampling signal (not in precise mode): perf task-clock "
        "events (one sample per interval of a thread's CPU time) or CPU-clock timers (one per "
        "scheduler tick at most). Default: auto (perf events where the kernel allows them, else "
        "timers; the profile's meta says which and why)." "\0"
    "STRATA_SIGNAL\0"
        "=<signal>: a control signal for daemons (like gperftools' CPUPROFILESIGNAL): each one "
        "received starts a session, the next stops it and saves the profile to a new numbered "
        "file (<STRATA_SHUTDOWN or $TMPDIR/strata-%p.json with -N before .json>); with "
        "STRATA_STARTUP=1 the first one stops. SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, "
        "SIGPIPE, SIGALRM, SIGTERM, SIGPROF, SIGVTALRM or SIGRTMIN..SIGRTMAX, "
        "by name or number; not the sampling signal. Default: none." "\0"
    "STRATA_FLIGHT_RECORDER\0"
        "=<directory>: keep the profile buffer in a file there, strata-<pid>-<start>.flight, that "
        "survives a crash or a kill; `strata recover FILE` turns it into a profile "
        "(docs/flight-recorder.md). Must be an existing writable directory. Default: off." "\0"
    "STRATA_RECORD_NOTES\0"
        "=<directory>: set by `strata record`: each program this process starts (exec, "
        "posix_spawn) is noted there as <pid>.exec, so that record can name the ones Strata "
        "could not enter (docs/cli.md). Must be an existing writable directory. Default: off."
        "\0";

std::string Trim(std::string s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return s.substr(b, e - b);
}

std::vector<std::string> SplitList(const std::string& value) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= value.size()) {
    size_t comma = value.find(',', start);
    if (comma == std::string::npos) comma = value.size();
    std::string item = Trim(value.substr(start, comma - start));
    if (!item.empty()) items.push_back(item);
    start = comma + 1;
  }
  return items;
}

// At most 64 bytes of `text` for a message: a hostile 100 kB value must not become a 100 kB
// line on stderr. "xxxx...(100000 bytes)" when cut.
std::string Abbreviated(const std::string& text) {
  constexpr size_t kShown = 64;
  if (text.size() <= kShown) return text;
  return text.substr(0, kShown) + "...(" + std::to_string(text.size()) + " bytes)";
}

// A byte count: decimal digits and an optional K, M or G (KiB, MiB, GiB; "KiB"... too).
// False on anything else, and on overflow.
bool ParseByteCount(const char* text, uint64_t* out) {
  const std::string v = Trim(text);
  size_t i = 0;
  uint64_t value = 0;
  while (i < v.size() && v[i] >= '0' && v[i] <= '9') {
    if (value > (UINT64_MAX - 9) / 10) return false;
    value = value * 10 + static_cast<uint64_t>(v[i] - '0');
    ++i;
  }
  if (i == 0) return false;
  const std::string suffix = v.substr(i);
  int shift = 0;
  if (suffix.empty() || suffix == "B") {
    shift = 0;
  } else if (suffix == "K" || suffix == "KiB") {
    shift = 10;
  } else if (suffix == "M" || suffix == "MiB") {
    shift = 20;
  } else if (suffix == "G" || suffix == "GiB") {
    shift = 30;
  } else {
    return false;
  }
  if (shift != 0 && value > (UINT64_MAX >> shift)) return false;
  *out = value << shift;
  return true;
}

// "1"/"0" (and the usual spellings) only.
bool ParseBool(const char* text, bool* out) {
  const std::string v = Trim(text);
  if (v == "1" || v == "true" || v == "yes" || v == "on") {
    *out = true;
    return true;
  }
  if (v == "0" || v == "false" || v == "no" || v == "off" || v.empty()) {
    *out = false;
    return true;
  }
  return false;
}

// A signal by name or number: SIGRTMIN+n, SIGRTMAX-n, RTMIN, RTMAX, a number from 1 to
// SIGRTMAX, or one of the names of kNamedSignals (with or without "SIG", any case). 0 if none.
struct SignalName {
  char name[7];
  unsigned char number;
};
constexpr SignalName kNamedSignals[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},     {"ILL", SIGILL},
    {"TRAP", SIGTRAP}, {"ABRT", SIGABRT}, {"BUS", SIGBUS},       {"FPE", SIGFPE},
    {"KILL", SIGKILL}, {"USR1", SIGUSR1}, {"SEGV", SIGSEGV},     {"USR2", SIGUSR2},
    {"PIPE", SIGPIPE}, {"ALRM", SIGALRM}, {"TERM", SIGTERM},     {"CHLD", SIGCHLD},
    {"CONT", SIGCONT}, {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},     {"TTIN", SIGTTIN},
    {"TTOU", SIGTTOU}, {"URG", SIGURG},   {"XCPU", SIGXCPU},     {"XFSZ", SIGXFSZ},
    {"PROF", SIGPROF}, {"VTALRM", SIGVTALRM}, {"WINCH", SIGWINCH}, {"SYS", SIGSYS},
};

int ParseSignal(const std::string& text) {
  std::string v = Trim(text);
  for (char& c : v) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (v.rfind("SIG", 0) == 0) v = v.substr(3);
  auto parse_number = [](const std::string& digits, int* out) {
    if (digits.empty() || digits.size() > 3) return false;
    for (char c : digits) {
      if (c < '0' || c > '9') return false;
    }
    *out = std::atoi(digits.c_str());
    return true;
  };
  int number = 0;
  if (parse_number(v, &number)) return number >= 1 && number <= SIGRTMAX ? number : 0;
  for (const SignalName& named : kNamedSignals) {
    if (v == named.name) return named.number;
  }
  if (v == "RTMIN") return SIGRTMIN;
  if (v == "RTMAX") return SIGRTMAX;
  int offset = 0;
  if (v.rfind("RTMIN+", 0) == 0 && parse_number(v.substr(6), &offset)) {
    return SIGRTMIN + offset <= SIGRTMAX ? SIGRTMIN + offset : 0;
  }
  if (v.rfind("RTMAX-", 0) == 0 && parse_number(v.substr(6), &offset)) {
    return SIGRTMAX - offset >= SIGRTMIN ? SIGRTMAX - offset : 0;
  }
  return 0;
}

// A signal as STRATA_SAMPLING_SIGNAL takes it: a real-time one, or one of the named
// non-real-time signals a sampler may use. 0 if not one of those.
int ParseSamplingSignal(const std::string& text) {
  const int number = ParseSignal(text);
  if (number >= SIGRTMIN && number <= SIGRTMAX) return number;
  if (number == SIGPROF || number == SIGVTALRM || number == SIGUSR1 || number == SIGUSR2) {
    return number;
  }
  return 0;
}

}  // namespace

ProfilerSettings ValidSessionSettings(const ProfilerSettings& settings, const char* caller) {
  ProfilerSettings valid = settings;
  const ProfilerSettings defaults;
  if (!(settings.interval_ms >= kMinIntervalMs && settings.interval_ms <= kMaxIntervalMs)) {
    LogError("%s: interval_ms %g is not " STRATA_INTERVAL_RANGE "; using %g", caller,
             settings.interval_ms, defaults.interval_ms);
    valid.interval_ms = defaults.interval_ms;
  }
  if (settings.buffer_megabytes < kMinBufferMb || settings.buffer_megabytes > kMaxBufferMb) {
    LogError("%s: buffer_megabytes %u is not " STRATA_BUFFER_RANGE "; using %u", caller,
             settings.buffer_megabytes, defaults.buffer_megabytes);
    valid.buffer_megabytes = defaults.buffer_megabytes;
  }
  return valid;
}

bool IsAllowedControlSignal(int number) {
  if (number >= SIGRTMIN && number <= SIGRTMAX) return true;
  switch (number) {
    case SIGHUP: case SIGINT: case SIGQUIT: case SIGUSR1: case SIGUSR2: case SIGPIPE:
    case SIGALRM: case SIGTERM: case SIGPROF: case SIGVTALRM:
      return true;
    default:
      // SIGURG and SIGWINCH are ignored by default and sent by the system (out-of-band data,
      // Go's preemption; every terminal resize): they would toggle the session unasked.
      // SIGKILL and SIGSTOP cannot be caught; faults (SEGV, BUS, FPE, ILL, TRAP, ABRT, SYS)
      // belong to crash handlers; job control and CHLD to the shell and wait(); 32 and 33
      // are glibc's own.
      return false;
  }
}

int ParseControlSignal(const std::string& text) {
  const int number = ParseSignal(text);
  return IsAllowedControlSignal(number) ? number : 0;
}

EnvironmentSettings ReadEnvironment(
    const std::function<const char*(const char*)>& getenv_function,
    const std::function<void(const std::string&)>& report) {
  EnvironmentSettings env;
  auto bad = [&](const char* name, const char* value, const std::string& accepted,
                 const std::string& default_text) {
    ++env.errors;
    report(std::string(name) + "='" + Abbreviated(value) + "' is not valid: expected " + accepted +
           "; using the default (" + default_text + ").");
  };

  auto read_bool = [&](const char* name, bool* out) {
    const char* value = getenv_function(name);
    if (!value) return;
    if (!ParseBool(value, out)) bad(name, value, "1 or 0", *out ? "1" : "0");
  };
  read_bool("STRATA_HELP", &env.help);
  read_bool("STRATA_STARTUP", &env.startup);
  read_bool("STRATA_LOGGING", &env.logging);

  if (const char* value = getenv_function("STRATA_STARTUP_INTERVAL")) {
    char* end = nullptr;
    errno = 0;
    const double ms = std::strtod(value, &end);
    const bool parsed = end != value && *end == '\0' && errno == 0 && std::isfinite(ms);
    if (!parsed || ms < kMinIntervalMs || ms > kMaxIntervalMs) {
      bad("STRATA_STARTUP_INTERVAL", value, "a number of milliseconds " STRATA_INTERVAL_RANGE, "1");
    } else {
      env.settings.interval_ms = ms;
    }
  }

  if (const char* value = getenv_function("STRATA_STARTUP_BUFFER_MB")) {
    char* end = nullptr;
    errno = 0;
    const long long mb = std::strtoll(value, &end, 10);
    const bool parsed = end != value && *end == '\0' && errno == 0;
    if (!parsed || mb < static_cast<long long>(kMinBufferMb) ||
        mb > static_cast<long long>(kMaxBufferMb)) {
      bad("STRATA_STARTUP_BUFFER_MB", value, "an integer number of MiB " STRATA_BUFFER_RANGE, "64");
    } else {
      env.settings.buffer_megabytes = static_cast<uint32_t>(mb);
    }
  }

  if (const char* value = getenv_function("STRATA_ALLOC_INTERVAL")) {
    uint64_t bytes = 0;
    if (!ParseByteCount(value, &bytes) || bytes < 256 || bytes > (uint64_t{1} << 30)) {
      bad("STRATA_ALLOC_INTERVAL", value, "a number of bytes " STRATA_ALLOC_INTERVAL_RANGE, "64K");
    } else {
      env.native_allocation_interval = bytes;
    }
  }

  if (const char* value = getenv_function("STRATA_STARTUP_FEATURES")) {
    uint32_t features = kDefaultFeatures;
    std::string unknown;
    for (const std::string& item : SplitList(value)) {
      const bool remove = item[0] == '-';
      const std::string name = remove ? item.substr(1) : item;
      bool found = false;
      for (const FeatureName& f : kFeatureNames) {
        if (name == f.name) {
          features = remove ? (features & ~f.bit) : (features | f.bit);
          found = true;
        }
      }
      if (!found) unknown += (unknown.empty() ? "" : ", ") + name;
    }
    if (!unknown.empty()) {
      std::string accepted = "a comma-separated list of";
      for (const FeatureName& f : kFeatureNames) accepted += std::string(" ") + f.name;
      accepted += " (each optionally prefixed with '-'); unknown: " + Abbreviated(unknown);
      bad("STRATA_STARTUP_FEATURES", value, accepted, "stackwalk,threads,cpu,waitstacks");
    } else {
      env.settings.features = features;
    }
  }

  if (const char* value = getenv_function("STRATA_STARTUP_FILTERS")) {
    env.settings.thread_filters = SplitList(value);
  }

  if (const char* value = getenv_function("STRATA_SAMPLING_SIGNAL")) {
    const int signal_number = ParseSamplingSignal(value);
    if (signal_number == 0) {
      bad("STRATA_SAMPLING_SIGNAL", value,
          "SIGRTMIN+n or SIGRTMAX-n (SIGRTMIN=" + std::to_string(SIGRTMIN) +
              ", SIGRTMAX=" + std::to_string(SIGRTMAX) + "), a number from " +
              std::to_string(SIGRTMIN) + " to " + std::to_string(SIGRTMAX) +
              ", or SIGPROF, SIGVTALRM, SIGUSR1, SIGUSR2",
          "a free real-time signal chosen at start");
    } else {
      env.settings.sampling_signal = signal_number;
    }
  }

  // The control signal (daemons): never a fallback for the sampling signal.
  if (const char* value = getenv_function("STRATA_SIGNAL")) {
    const int signal_number = ParseControlSignal(value);
    const std::string accepted =
        "SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGALRM, SIGTERM, SIGPROF, "
        "SIGVTALRM, or SIGRTMIN+n / SIGRTMAX-n / a number from " +
        std::to_string(SIGRTMIN) + " to " + std::to_string(SIGRTMAX) +
        " (by name or number; not the sampling signal; STRATA_SIGNAL no longer names the "
        "sampling signal: that is STRATA_SAMPLING_SIGNAL)";
    if (signal_number == 0) {
      bad("STRATA_SIGNAL", value, accepted, "no control signal");
    } else if (signal_number == env.settings.sampling_signal) {
      bad("STRATA_SIGNAL", value, accepted + "; it is STRATA_SAMPLING_SIGNAL's",
          "no control signal");
    } else {
      env.control_signal = signal_number;
    }
  }

  if (const char* value = getenv_function("STRATA_SAMPLING_SOURCE")) {
    std::string lowered;
    for (const char* c = value; *c != '\0'; ++c) {
      lowered += static_cast<char>(std::tolower(static_cast<unsigned char>(*c)));
    }
    if (lowered == "auto") {
      env.settings.sampling_source = SamplingSourceRequest::kAuto;
    } else if (lowered == "perf") {
      env.settings.sampling_source = SamplingSourceRequest::kPerfEvents;
    } else if (lowered == "timer") {
      env.settings.sampling_source = SamplingSourceRequest::kTimers;
    } else {
      bad("STRATA_SAMPLING_SOURCE", value, "auto, perf or timer",
          "auto: perf task-clock events where allowed, else CPU-clock timers");
    }
  }

  if (const char* value = getenv_function("STRATA_SHUTDOWN")) {
    if (value[0] == '\0') {
      bad("STRATA_SHUTDOWN", value, "a file path", "no profile saved");
    } else {
      env.shutdown_path = value;
    }
  }

  // A directory variable: kept when it names an existing directory this process can write to.
  auto writable_directory = [&](const char* name, const char* otherwise, std::string* into) {
    const char* value = getenv_function(name);
    if (value == nullptr) return;
    struct stat st {};
    if (value[0] == '\0' || stat(value, &st) != 0 || !S_ISDIR(st.st_mode) ||
        access(value, W_OK | X_OK) != 0) {
      bad(name, value, "an existing directory this process can write to", otherwise);
    } else {
      *into = value;
    }
  };
  writable_directory("STRATA_FLIGHT_RECORDER", "no flight recorder",
                     &env.flight_recorder_directory);
  writable_directory("STRATA_RECORD_NOTES", "no notes", &env.record_notes_directory);
  return env;
}

std::string EnvironmentHelpText() {
  std::string text =
      "Strata base profiler (libstrata_base.so): environment variables\n"
      "\n";
  for (const char* help = kVariableHelp; *help != '\0';) {
    const char* name = help;
    const char* meaning = name + std::strlen(name) + 1;
    help = meaning + std::strlen(meaning) + 1;
    text += "  ";
    text += name;
    text += meaning;
    text += "\n";
  }
  text += "\nFeatures (STRATA_STARTUP_FEATURES):\n";
  const char* meaning = kFeatureMeanings;
  for (const FeatureName& f : kFeatureNames) {
    text += "  ";
    text += f.name;
    text += ": ";
    text += meaning;
    text += "\n";
    meaning += std::strlen(meaning) + 1;
  }
  text +=
      "\nExample:\n"
      "  LD_PRELOAD=libstrata_base.so STRATA_STARTUP=1 STRATA_SHUTDOWN=/tmp/profile-%p.json "
      "./program\n"
      "then open the file at https://profiler.firefox.com (Load a profile from file).\n";
  return text;
}

std::string ExpandShutdownPath(const std::string& path, int pid) {
  std::string out;
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '%' && i + 1 < path.size() && path[i + 1] == 'p') {
      out += std::to_string(pid);
      ++i;
    } else {
      out += path[i];
    }
  }
  return out;
}

std::string FeatureNames(uint32_t features) {
  std::string out;
  for (const FeatureName& f : kFeatureNames) {
    if (features & f.bit) out += (out.empty() ? "" : ",") + std::string(f.name);
  }
  return out;
}

}  // namespace base_internal
}  // namespace strata
