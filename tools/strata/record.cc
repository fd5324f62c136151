#include "tools/strata/record.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "rapidjson/document.h"
#include "shared/symbols/dwarf_symbolizer.h"
#include "tools/strata/profile_io.h"
#include "tools/strata/profile_merge.h"
#include "tools/strata/profile_symbolication.h"
#include "tools/strata/program_check.h"
#include "tools/strata/progress.h"
#include "tools/strata/recover.h"
#include "tools/strata/version.h"
#include "tools/strata/view.h"

extern char** environ;

// The Debian multiarch directory name of this build's target (tools/make_deb.sh).
#if defined(__x86_64__)
#define STRATA_MULTIARCH "x86_64-linux-gnu"
#elif defined(__aarch64__)
#define STRATA_MULTIARCH "aarch64-linux-gnu"
#else
#define STRATA_MULTIARCH "unknown-linux-gnu"
#endif

namespace strata {
namespace cli {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

std::string ExecutableDirectory() {
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return ".";
  path[n] = '\0';
  std::string s(path);
  const size_t slash = s.rfind('/');
  return slash == std::string::npos ? "." : s.substr(0, slash);
}

bool IsFile(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string Absolute(const std::string& path) {
  char resolved[4096];
  return realpath(path.c_str(), resolved) != nullptr ? std::string(resolved) : path;
}

std::string FindHookLibrary(const std::string& explicit_path) {
  if (!explicit_path.empty()) return IsFile(explicit_path) ? Absolute(explicit_path) : "";
  if (const char* env = std::getenv("STRATA_RECORD_LIB")) return IsFile(env) ? Absolute(env) : "";
  const std::string dir = ExecutableDirectory();
  for (const std::string& candidate :
       {dir + "/libstrata_record.so", dir + "/../lib/libstrata_record.so", dir + "/../lib/strata/libstrata_record.so"}) {
    if (IsFile(candidate)) return Absolute(candidate);
  }
  return "";
}

// True when the comma-separated feature list turns `feature` on (the last mention wins).
bool FeatureRequested(const std::string& features, const std::string& feature) {
  bool on = false;
  std::istringstream items(features);
  std::string item;
  while (std::getline(items, item, ',')) {
    const size_t b = item.find_first_not_of(" \t");
    const size_t e = item.find_last_not_of(" \t");
    item = b == std::string::npos ? "" : item.substr(b, e - b + 1);
    if (item == feature) on = true;
    if (item == "-" + feature) on = false;
  }
  return on;
}

// libstrata_alloc.so (the allocation hooks of the feature nativeallocations): beside
// libstrata_base.so, as the build and the install put it, with the base library's version
// suffix when it has one (a Debian install preloads libstrata_base.so.0, and the unversioned
// names are the -dev package's links).
std::string FindAllocationHooksLibrary(const std::string& base) {
  const std::string directory = base.substr(0, base.rfind('/') + 1);
  const std::string file = base.substr(directory.size());
  const std::string prefix = "libstrata_base.so";
  if (file.compare(0, prefix.size(), prefix) == 0 && file.size() > prefix.size()) {
    const std::string versioned = directory + "libstrata_alloc.so" + file.substr(prefix.size());
    if (IsFile(versioned)) return versioned;
  }
  const std::string candidate = directory + "libstrata_alloc.so";
  return IsFile(candidate) ? candidate : "";
}

// /proc/<pid>/stat: the parent pid and the command name.
bool ReadProcStat(pid_t pid, pid_t* parent, std::string* name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return false;
  const size_t open = line.find('('), close = line.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 4 > line.size()) return false;
  *name = line.substr(open + 1, close - open - 1);
  std::istringstream rest(line.substr(close + 2));
  char state = 0;
  long ppid = 0;
  rest >> state >> ppid;
  *parent = static_cast<pid_t>(ppid);
  return true;
}

// Every live descendant of this process (with their names), found through /proc.
std::map<pid_t, std::string> Descendants() {
  std::map<pid_t, std::pair<pid_t, std::string>> all;
  if (DIR* proc = opendir("/proc")) {
    while (dirent* entry = readdir(proc)) {
      char* end = nullptr;
      const long pid = std::strtol(entry->d_name, &end, 10);
      if (end == entry->d_name || *end != '\0') continue;
      pid_t parent = 0;
      std::string name;
      if (ReadProcStat(static_cast<pid_t>(pid), &parent, &name)) all[static_cast<pid_t>(pid)] = {parent, name};
    }
    closedir(proc);
  }
  std::map<pid_t, std::string> result;
  std::set<pid_t> frontier = {getpid()};
  while (!frontier.empty()) {
    std::set<pid_t> next;
    for (const auto& [pid, info] : all) {
      if (frontier.count(info.first) != 0 && result.emplace(pid, info.second).second) next.insert(pid);
    }
    frontier = std::move(next);
  }
  return result;
}

void SignalTree(int signal_number) {
  for (const auto& [pid, name] : Descendants()) kill(pid, signal_number);
}

std::string SignalName(int signal_number) {
  const char* name = sigabbrev_np(signal_number);
  return name != nullptr ? std::string("SIG") + name : "signal " + std::to_string(signal_number);
}

std::string CommandText(const std::vector<std::string>& command) {
  std::string text;
  for (const std::string& word : command) {
    if (!text.empty()) text += ' ';
    text += word;
  }
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

// AddressSanitizer's runtime (libasan.so.N) named in LD_PRELOAD: it refuses to start unless it
// comes first in the initial library list.
bool IsAddressSanitizerRuntime(const std::string& path) {
  const std::string name = path.substr(path.rfind('/') + 1);  // The whole path without a '/'.
  return name.rfind("libasan.so", 0) == 0;
}

// The environment of the command: ours plus the profiler's variables.
std::vector<std::string> CommandEnvironment(const RecordOptions& options, const std::string& base,
                                            const std::string& hook, const std::string& directory) {
  std::map<std::string, std::string> set;
  const char* preload = std::getenv("LD_PRELOAD");
  const std::string original_preload = preload != nullptr ? preload : "";
  // LD_PRELOAD = base:hook:<the caller's>, except that the caller's ASan runtime stays first
  // (how an ASan build of libstrata_base.so is run; docs/reliability.md, "Sanitizers").
  std::string asan_runtimes;
  std::string others;
  std::string entry;
  std::istringstream entries(original_preload);
  while (std::getline(entries, entry, ':')) {
    std::istringstream words(entry);  // The loader also separates entries with spaces.
    std::string word;
    while (words >> word) (IsAddressSanitizerRuntime(word) ? asan_runtimes : others) += word + ":";
  }
  std::string ld_preload = asan_runtimes + base;
  // The allocation hooks right after base: before any allocator the caller preloads
  // (tcmalloc, jemalloc), whose functions they forward to.
  if (FeatureRequested(options.features, "nativeallocations")) {
    ld_preload += ":" + FindAllocationHooksLibrary(base);
  }
  if (!hook.empty()) ld_preload += ":" + hook;
  if (!others.empty()) ld_preload += ":" + others.substr(0, others.size() - 1);
  set["LD_PRELOAD"] = ld_preload;
  set["STRATA_STARTUP"] = "1";
  set["STRATA_SHUTDOWN"] = directory + "/%p.json";
  // Each process's buffer in a file there: a process that dies without saving is recovered
  // from it (docs/flight-recorder.md); one that saves removes its file.
  if (options.flight_recorder) set["STRATA_FLIGHT_RECORDER"] = directory;
  // Each process notes the programs it starts there: the ones Strata cannot enter are named.
  set["STRATA_RECORD_NOTES"] = directory;
  if (options.interval_ms > 0) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", options.interval_ms);
    set["STRATA_STARTUP_INTERVAL"] = text;
  }
  std::string features = options.features;
  if (options.symbolicate) features += std::string(features.empty() ? "" : ",") + "rawaddresses";
  if (!features.empty()) set["STRATA_STARTUP_FEATURES"] = features;
  if (!options.filters.empty()) set["STRATA_STARTUP_FILTERS"] = options.filters;
  if (options.buffer_mb > 0) set["STRATA_STARTUP_BUFFER_MB"] = std::to_string(options.buffer_mb);
  if (!hook.empty()) {
    set["STRATA_RECORD_HOOK"] = "1";
    set["STRATA_RECORD_PRELOAD"] = original_preload;
    if (!options.children) set["STRATA_RECORD_ROOT_ONLY"] = "1";
    // With exec_only, the child adds STRATA_RECORD_ROOT_PID=<its pid> before its exec (RunTree).
  }
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    // Our settings replace the caller's; a stray STRATA_STARTUP_* of the caller is dropped
    // too, so that the recording has the options it was given, and so is STRATA_SIGNAL (a
    // control signal would stop the recording's sessions and save numbered files of its own).
    if (set.count(key) != 0 || key.rfind("STRATA_STARTUP", 0) == 0 ||
        key == "STRATA_RECORD_ROOT_ONLY" || key == "STRATA_RECORD_ROOT_PID" || key == "STRATA_SIGNAL" ||
        key == "STRATA_FLIGHT_RECORDER") {
      continue;
    }
    environment.push_back(entry);
  }
  for (const auto& [key, value] : set) environment.push_back(key + "=" + value);
  return environment;
}

struct ProcessResult {
  bool started = false;
  int start_errno = 0;
  int status = 0;  // waitpid status of the command's own process.
  pid_t pid = 0;
  // The wait status of every process of the tree this process reaped (its children, and the
  // orphans it inherited as a subreaper).
  std::map<pid_t, int> reaped;
  bool stopped_at_duration = false;  // --duration passed: the command was sent SIGINT.
};

// Runs the command and waits for its whole process tree.
ProcessResult RunTree(const RecordOptions& options, const std::vector<std::string>& environment) {
  ProcessResult result;
  sigset_t waited, previous;
  sigemptyset(&waited);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&waited, s);
  signal(SIGCHLD, SIG_DFL);  // Not SIG_IGN: children must stay waitable.
  sigprocmask(SIG_BLOCK, &waited, &previous);
  prctl(PR_SET_CHILD_SUBREAPER, 1);

  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) {
    result.start_errno = errno;
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    return result;
  }
  std::vector<char*> argv, envp;
  for (const std::string& a : options.command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : environment) envp.push_back(const_cast<char*>(e.c_str()));
  // --follow exec: the command's own pid, written by the child itself before its exec (no
  // allocation after fork): libstrata_record.so tells the command's process from the ones
  // it starts by it.
  char root_pid_entry[64] = "STRATA_RECORD_ROOT_PID=";
  if (options.exec_only) envp.push_back(root_pid_entry);
  envp.push_back(nullptr);

  const pid_t child = fork();
  if (child < 0) {
    result.start_errno = errno;
    close(exec_pipe[0]);
    close(exec_pipe[1]);
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    return result;
  }
  if (child == 0) {
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    close(exec_pipe[0]);
    if (options.exec_only) {
      char digits[24];
      int n = 0;
      for (pid_t pid = getpid(); pid > 0 && n < 23; pid /= 10) digits[n++] = static_cast<char>('0' + pid % 10);
      char* end = root_pid_entry + strlen(root_pid_entry);
      while (n > 0) *end++ = digits[--n];
      *end = '\0';
    }
    environ = envp.data();
    execvp(argv[0], argv.data());
    const int e = errno;
    ssize_t ignored = write(exec_pipe[1], &e, sizeof(e));
    (void)ignored;
    _exit(127);
  }
  close(exec_pipe[1]);
  int exec_errno = 0;
  ssize_t n;
  do {
    n = read(exec_pipe[0], &exec_errno, sizeof(exec_errno));
  } while (n < 0 && errno == EINTR);
  close(exec_pipe[0]);
  result.pid = child;
  if (n == static_cast<ssize_t>(sizeof(exec_errno))) {
    result.start_errno = exec_errno;
    waitpid(child, nullptr, 0);
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    return result;
  }
  result.started = true;

  bool root_done = false;
  bool announced_wait = false;
  const Clock::time_point run_start = Clock::now();
  const bool show_progress = !options.quiet && Progress::Enabled();
  double next_progress_s = 5;
  int interrupts = 0;
  bool terminated = false;  // SIGTERM sent to the tree.
  Clock::time_point first_interrupt;
  for (;;) {
    // Reap everything that ended.
    bool none_left = false;
    for (;;) {
      int status = 0;
      const pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid > 0) {
        result.reaped[pid] = status;
        if (pid == child) {
          root_done = true;
          result.status = status;
        }
        continue;
      }
      if (pid < 0 && errno == EINTR) continue;
      none_left = pid < 0;  // ECHILD: the whole tree is gone.
      break;
    }
    if (none_left) break;
    if (root_done && !announced_wait && !options.quiet) {
      announced_wait = true;
      const auto rest = Descendants();
      std::string list;
      for (const auto& [pid, name] : rest) {
        if (list.size() > 200) {
          list += ", ...";
          break;
        }
        list += (list.empty() ? "" : ", ") + std::to_string(pid) + " (" + name + ")";
      }
      std::fprintf(stderr, "strata: %s exited; waiting for %zu process(es) it started: %s (Ctrl-C stops them)\n",
                   CommandText(options.command).c_str(), rest.size(), list.c_str());
    }
    // Once the command has ended after an interrupt, what it started and left running (a
    // shell's background jobs run with SIGINT ignored) gets SIGTERM, which the record hook
    // turns into a save and the same death, two seconds after the first interrupt. The
    // command itself is never sent more than what it was sent.
    if (interrupts > 0 && root_done && !terminated && Seconds(first_interrupt) > 2.0) {
      terminated = true;
      const auto rest = Descendants();
      if (!rest.empty()) {
        if (!options.quiet) {
          std::fprintf(stderr, "strata: %zu process(es) still running after the interrupt; sending SIGTERM\n",
                       rest.size());
        }
        for (const auto& [pid, name] : rest) kill(pid, SIGTERM);
      }
    }
    // A long run says it is still recording: whole lines (the command shares the terminal,
    // so nothing is redrawn in place), after 5 s and then every 30 s, only on a terminal.
    if (show_progress && !root_done && Seconds(run_start) >= next_progress_s) {
      std::fprintf(stderr, "strata record: %.0f s, %zu process(es) running (Ctrl-C stops and saves)\n",
                   Seconds(run_start), Descendants().size());
      next_progress_s += next_progress_s < 30 ? 25 : 30;
    }
    // --duration: stopped as Ctrl-C stops it, once.
    if (options.duration_seconds > 0 && !root_done && !result.stopped_at_duration &&
        Seconds(run_start) >= options.duration_seconds) {
      result.stopped_at_duration = true;
      if (!options.quiet) {
        std::fprintf(stderr, "strata record: %g s (--duration): stopping the program; its profiles are saved\n",
                     options.duration_seconds);
      }
      kill(child, SIGINT);
      if (++interrupts == 1) first_interrupt = Clock::now();
    }
    siginfo_t info;
    struct timespec timeout = {0, 250 * 1000 * 1000};
    if (options.duration_seconds > 0 && !result.stopped_at_duration) {
      const double left = options.duration_seconds - Seconds(run_start);
      if (left > 0 && left < 0.25) timeout.tv_nsec = static_cast<long>(left * 1e9) + 1000000;
    }
    const int signal_number = sigtimedwait(&waited, &info, &timeout);
    if (signal_number == SIGINT || signal_number == SIGTERM || signal_number == SIGHUP) {
      // From the terminal (si_code SI_KERNEL) the tree got the signal already; from another
      // process (kill, timeout, a supervisor; si_code <= 0) it is forwarded: to the command
      // alone while it runs (what it would get if it were signalled directly), else to what
      // is left of the tree.
      const bool from_process = info.si_code <= 0;
      if (++interrupts == 1) first_interrupt = Clock::now();
      if (interrupts >= 3) {
        if (!options.quiet) std::fprintf(stderr, "strata: killing the process tree (profiles not yet saved are lost)\n");
        SignalTree(SIGKILL);
      } else if (interrupts == 2) {
        if (!options.quiet) {
          std::fprintf(stderr, "strata: %s again: sending SIGTERM to the process tree (once more kills it)\n",
                       SignalName(signal_number).c_str());
        }
        terminated = true;
        if (!root_done && from_process) kill(child, signal_number);
        for (const auto& [pid, name] : Descendants()) {
          if (pid != child) kill(pid, SIGTERM);
        }
      } else {
        if (from_process) {
          if (!root_done) {
            kill(child, signal_number);
          } else {
            SignalTree(signal_number);
          }
        }
        if (!options.quiet) {
          std::fprintf(stderr, "strata: %s: stopping the program; its profiles are still saved\n",
                       SignalName(signal_number).c_str());
        }
      }
    }
  }
  prctl(PR_SET_CHILD_SUBREAPER, 0);
  sigprocmask(SIG_SETMASK, &previous, nullptr);
  return result;
}

int ExitStatusOf(const ProcessResult& result) {
  if (!result.started) return result.start_errno == ENOENT ? 127 : 126;
  if (WIFEXITED(result.status)) return WEXITSTATUS(result.status);
  if (WIFSIGNALED(result.status)) return 128 + WTERMSIG(result.status);
  return 1;
}

// Ends `strata` the way the command ended: killed by the same signal (so that whoever started
// `strata` sees WIFSIGNALED with it, as it would have running the command directly), else
// returns `exit_status` for main to return. No core file of `strata` itself: the command
// dumped its own where the limits allow.
int EndAsTheCommandDid(const ProcessResult& result, int exit_status) {
  if (!result.started || !WIFSIGNALED(result.status)) return exit_status;
  const int signal_number = WTERMSIG(result.status);
  std::fflush(nullptr);
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(signal_number, &default_action, nullptr);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, signal_number);
  sigprocmask(SIG_UNBLOCK, &only, nullptr);
  raise(signal_number);
  return exit_status;  // A signal that does not end a process (SIGCHLD...): its 128 + N.
}

void RemoveDirectory(const std::string& directory) {
  if (DIR* dir = opendir(directory.c_str())) {
    while (dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") unlink((directory + "/" + name).c_str());
    }
    closedir(dir);
  }
  rmdir(directory.c_str());
}

// Each program Strata could not enter, in the profile's log of its process (profilingLog,
// keyed by pid, as attach's notes are): {"notEntered": "PATH: REASON"}; `strata summary`
// lists it.
void NoteNotEnteredPrograms(const std::vector<NotEnteredProgram>& programs,
                            rapidjson::Document* root) {
  if (programs.empty()) return;
  auto& allocator = root->GetAllocator();
  if (!root->HasMember("profilingLog") || !(*root)["profilingLog"].IsObject()) {
    root->RemoveMember("profilingLog");
    root->AddMember("profilingLog", rapidjson::Value(rapidjson::kObjectType), allocator);
  }
  rapidjson::Value& log = (*root)["profilingLog"];
  for (const NotEnteredProgram& program : programs) {
    const std::string pid = std::to_string(program.pid);
    if (!log.HasMember(pid.c_str())) {
      log.AddMember(rapidjson::Value(pid.c_str(), allocator),
                    rapidjson::Value(rapidjson::kObjectType), allocator);
    }
    rapidjson::Value& process = log[pid.c_str()];
    if (!process.IsObject()) continue;
    const std::string text = program.path + ": " + program.reason;
    process.RemoveMember("notEntered");
    process.AddMember("notEntered", rapidjson::Value(text.c_str(), allocator), allocator);
  }
}

// Profiles the processes saved: pid -> path; also counts unfinished temporary files.
std::map<pid_t, std::string> SavedProfiles(const std::string& directory, size_t* unfinished) {
  std::map<pid_t, std::string> profiles;
  *unfinished = 0;
  if (DIR* dir = opendir(directory.c_str())) {
    while (dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0 && name[0] != '.') {
        profiles[static_cast<pid_t>(std::atol(name.c_str()))] = directory + "/" + name;
      } else if (name.rfind(".", 0) == 0 && name.find(".tmp-") != std::string::npos) {
        ++*unfinished;
      }
    }
    closedir(dir);
  }
  return profiles;
}

// Where the private directory of the processes' profiles and flight recorder files goes:
// $TMPDIR when set (the caller's choice), else /dev/shm when it is a tmpfs this user can
// write with kMinimumShmBytes free, else /tmp. On a disk file system every recorded process
// pays for creating, faulting in (the flight recorder reserves each chunk's blocks before
// writing it) and removing its files through the journal, and for the fsync of its profile:
// measured 12-20 ms per short process on ext4 against ~1 ms on tmpfs (issue 38,
// docs/benchmarks.md). The files only live until the merge, and tmpfs pages are the memory
// the buffers would take anyway (a process's flight recorder file grows with what it wrote).
constexpr unsigned long long kMinimumShmBytes = 1ull << 30;

std::string RecordingTemporaryRoot() {
  const char* tmp = std::getenv("TMPDIR");
  if (tmp != nullptr && tmp[0] != '\0') return tmp;
  struct statfs fs {};
  struct statvfs space {};
  constexpr long kTmpfsMagic = 0x01021994;  // TMPFS_MAGIC, <linux/magic.h>
  if (statfs("/dev/shm", &fs) == 0 && fs.f_type == kTmpfsMagic && access("/dev/shm", W_OK | X_OK) == 0 &&
      statvfs("/dev/shm", &space) == 0 &&
      static_cast<unsigned long long>(space.f_bavail) * space.f_frsize >= kMinimumShmBytes) {
    return "/dev/shm";
  }
  return "/tmp";
}

}  // namespace

std::string FindBaseLibrary(const std::string& explicit_path) {
  if (!explicit_path.empty()) return IsFile(explicit_path) ? Absolute(explicit_path) : "";
  if (const char* env = std::getenv("STRATA_BASE_LIB")) return IsFile(env) ? Absolute(env) : "";
  const std::string dir = ExecutableDirectory();
  // The Debian packages: the runtime library by its SONAME in the multiarch directory
  // (libstrata-base0; the unversioned name is libstrata-dev's).
  const std::string soname = "libstrata_base.so." + std::string(STRATA_VERSION).substr(0, std::string(STRATA_VERSION).find('.'));
  for (const std::string& candidate : {dir + "/../../base/libstrata_base.so", dir + "/libstrata_base.so",
                                       dir + "/../lib/libstrata_base.so", dir + "/../lib/strata/libstrata_base.so",
                                       dir + "/../lib/" STRATA_MULTIARCH "/" + soname}) {
    if (IsFile(candidate)) return Absolute(candidate);
  }
  return "";
}

int Record(const RecordOptions& options) {
  const std::string base = FindBaseLibrary(options.base_library);
  if (base.empty()) {
    std::fprintf(stderr, "strata record: cannot find libstrata_base.so%s (give it with --lib PATH or STRATA_BASE_LIB)\n",
                 options.base_library.empty() ? " next to the strata binary" : (" at " + options.base_library).c_str());
    return 2;
  }
  if (FeatureRequested(options.features, "nativeallocations") &&
      FindAllocationHooksLibrary(base).empty()) {
    std::fprintf(stderr, "strata record: --features nativeallocations needs libstrata_alloc.so next to %s\n",
                 base.c_str());
    return 2;
  }
  const std::string hook = FindHookLibrary(options.hook_library);
  if (hook.empty()) {
    if (!options.children || options.exec_only) {
      std::fprintf(stderr, "strata record: %s needs libstrata_record.so (next to the strata binary)\n",
                   options.exec_only ? "--follow exec" : "--follow none (--no-children)");
      return 2;
    }
    if (!options.quiet) {
      std::fprintf(stderr, "strata record: warning: libstrata_record.so not found next to the strata binary; "
                           "a program stopped by Ctrl-C will not save its profile\n");
    }
  }
  // The output must be writable before the program runs for minutes.
  {
    OutputFile probe(options.output, false);
    if (!probe.ok()) {
      std::fprintf(stderr, "strata record: %s\n", probe.error().c_str());
      return 2;
    }
  }

  std::string directory = RecordingTemporaryRoot() + "/strata-record.XXXXXX";
  if (mkdtemp(&directory[0]) == nullptr) {
    std::fprintf(stderr, "strata record: cannot create a temporary directory %s: %s\n", directory.c_str(),
                 std::strerror(errno));
    return 2;
  }

  // A program that cannot load the library would run unprofiled: refuse it, with the reason.
  if (const std::string program = ResolveCommand(options.command[0]); !program.empty()) {
    if (const std::string why = WhyStrataCannotEnter(program); !why.empty()) {
      const bool set_id = why.find("set-") != std::string::npos;
      std::fprintf(stderr,
                   "strata record: cannot profile '%s': %s. Strata enters a program through "
                   "LD_PRELOAD; use `perf record` for this one, or %s\n",
                   program.c_str(), why.c_str(),
                   set_id ? "run a copy of it without the set-ID bit"
                          : "build it dynamically linked");
      RemoveDirectory(directory);
      return 2;
    }
  }

  const auto run_start = Clock::now();
  ProcessResult run = RunTree(options, CommandEnvironment(options, base, hook, directory));
  // Stopped by --duration: the SIGINT it died of was ours, not a failure.
  if (run.stopped_at_duration && WIFSIGNALED(run.status) && WTERMSIG(run.status) == SIGINT) {
    run.status = 0;
  }
  const double run_seconds = Seconds(run_start);
  int exit_status = ExitStatusOf(run);
  if (!run.started) {
    std::fprintf(stderr, "strata record: cannot run '%s': %s\n", options.command[0].c_str(),
                 std::strerror(run.start_errno));
    RemoveDirectory(directory);
    return exit_status;
  }
  if (!options.quiet && WIFSIGNALED(run.status)) {
    std::fprintf(stderr, "strata record: %s was killed by %s\n", CommandText(options.command).c_str(),
                 SignalName(WTERMSIG(run.status)).c_str());
  }

  // Processes that died without saving: their flight recorder files.
  const size_t recovered =
      RecoverUnsavedProcesses(directory, run.reaped, !options.symbolicate, options.quiet);

  // Merge.
  const auto merge_start = Clock::now();
  size_t unfinished = 0;
  std::map<pid_t, std::string> saved = SavedProfiles(directory, &unfinished);
  if (options.exec_only) {
    // A process the command started may have saved a profile all the same (its base tier
    // started before libstrata_record.so could stop it): left out.
    for (auto it = saved.begin(); it != saved.end();) it = it->first == run.pid ? std::next(it) : saved.erase(it);
  }
  // Programs started in the tree that Strata could not enter: said, and in the profile.
  std::set<int> saved_pids;
  for (const auto& entry : saved) saved_pids.insert(entry.first);
  const std::vector<NotEnteredProgram> not_entered = NotEnteredPrograms(directory, saved_pids);
  if (!options.quiet || saved.empty()) {
    for (const NotEnteredProgram& program : not_entered) {
      std::fprintf(stderr,
                   "strata record: note: process %d ran %s, which Strata cannot enter (%s): it is "
                   "not in the profile\n",
                   program.pid, program.path.c_str(), program.reason.c_str());
    }
  }
  if (saved.empty()) {
    // Never a silent empty result: the command's own failure status, or 3 when it succeeded
    // but no process of it was profiled (it cleared LD_PRELOAD, or ran only static or
    // set-user-ID programs).
    std::fprintf(stderr,
                 "strata record: error: no process saved a profile, nothing written to %s (did "
                 "'%s' clear LD_PRELOAD, or run only statically linked or set-user-ID "
                 "programs?)\n",
                 options.output.c_str(), options.command[0].c_str());
    RemoveDirectory(directory);
    if (WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) return 3;
    return EndAsTheCommandDid(run, exit_status);
  }
  rapidjson::MemoryPoolAllocator<> allocator;
  std::vector<rapidjson::Document> documents;
  std::vector<pid_t> pids;
  for (const auto& [pid, path] : saved) {
    rapidjson::Document document(&allocator);
    std::string error;
    if (!LoadProfileDocument(path, &document, &error)) {
      std::fprintf(stderr, "strata record: skipping the profile of process %d: %s\n", pid, error.c_str());
      continue;
    }
    documents.push_back(std::move(document));
    pids.push_back(pid);
  }
  RemoveDirectory(directory);
  if (documents.empty()) {
    std::fprintf(stderr, "strata record: no readable profile\n");
    return EndAsTheCommandDid(run, exit_status);
  }
  size_t parent = documents.size();
  for (size_t i = 0; i < pids.size(); ++i) {
    if (pids[i] == run.pid) parent = i;
  }
  if (parent == documents.size()) {
    parent = 0;
    for (size_t i = 1; i < documents.size(); ++i) {
      if (documents[i]["meta"]["startTime"].GetDouble() < documents[parent]["meta"]["startTime"].GetDouble()) parent = i;
    }
    if (!options.quiet) {
      const std::string why = WIFSIGNALED(run.status)
                                  ? "it was killed by " + SignalName(WTERMSIG(run.status))
                                  : "it ends with _exit, as shells do, or is not dynamically linked";
      std::fprintf(stderr,
                   "strata record: note: the command's own process (pid %d) saved no profile (%s); the parent "
                   "in the profile is the earliest process, pid %d\n",
                   run.pid, why.c_str(), pids[parent]);
    }
  }
  rapidjson::Document root = std::move(documents[parent]);
  std::vector<rapidjson::Document> children;
  for (size_t i = 0; i < documents.size(); ++i) {
    if (i != parent) children.push_back(std::move(documents[i]));
  }
  MergeProfiles(&root, &children);
  NoteNotEnteredPrograms(not_entered, &root);
  const double merge_seconds = Seconds(merge_start);

  // Symbolicate.
  double symbolicate_seconds = 0;
  SymbolicateStats stats;
  if (options.symbolicate && !options.view && HasAddressesToSymbolicate(root)) {
    const auto start = Clock::now();
    auto cache = std::make_shared<DwarfModuleCache>();
    SymbolicateProfile(&root, [&](std::vector<SharedLibrary> libs) -> std::unique_ptr<Symbolizer> {
      return std::make_unique<DwarfSymbolizer>(std::move(libs), cache);
    }, &stats);
    symbolicate_seconds = Seconds(start);
  }

  // Write.
  const auto write_start = Clock::now();
  uint64_t bytes = 0;
  std::string error;
  // An existing profile is kept as FILE.old (as perf keeps perf.data.old), never silently
  // replaced: a hard link keeps it while the new one is renamed over the name.
  std::string kept_old;
  {
    struct stat existing;
    if (options.output != "-" && stat(options.output.c_str(), &existing) == 0 && S_ISREG(existing.st_mode)) {
      const std::string old_path = options.output + ".old";
      unlink(old_path.c_str());
      if (link(options.output.c_str(), old_path.c_str()) == 0 || rename(options.output.c_str(), old_path.c_str()) == 0) {
        kept_old = old_path;
      }
    }
  }
  if (!WriteJsonAtomically(options.output, root, &bytes, &error)) {
    std::fprintf(stderr, "strata record: %s\n", error.c_str());
    return EndAsTheCommandDid(run, exit_status);
  }
  const double write_seconds = Seconds(write_start);
  if (!options.quiet) {
    // The size printed is the file's (compressed, for .gz).
    struct stat written;
    const uint64_t file_bytes =
        stat(options.output.c_str(), &written) == 0 ? static_cast<uint64_t>(written.st_size) : bytes;
    std::fprintf(stderr, "strata record: saved %s: %zu process(es), %zu thread(s), %zu samples, %s\n",
                 options.output.c_str(), documents.size(), CountThreads(root), CountSamples(root),
                 HumanBytes(file_bytes).c_str());
    if (!kept_old.empty()) {
      std::fprintf(stderr, "strata record: the previous %s is kept as %s\n", options.output.c_str(),
                   kept_old.c_str());
    }
    std::fprintf(stderr,
                 "strata record: run %.2f s, merge %.2f s, symbolicate %.2f s (%zu addresses, %zu named, %zu inline "
                 "frames), write %.2f s\n",
                 run_seconds, merge_seconds, symbolicate_seconds, stats.lookups, stats.named, stats.inline_frames,
                 write_seconds);
    if (unfinished > 0) {
      std::fprintf(stderr, "strata record: %zu process(es) were stopped while saving; their profiles are missing\n",
                   unfinished);
    }
    if (recovered > 0) {
      std::fprintf(stderr, "strata record: %zu process(es) died without saving; recovered from their flight "
                   "recorder files (marked \"Process crashed\")\n", recovered);
    }
  }
  if (!options.quiet && !options.view) {
    std::fprintf(stderr,
                 "strata record: next: strata view %s   (the Firefox Profiler)\n"
                 "               strata summary %s | strata report %s -o report.html\n",
                 options.output.c_str(), options.output.c_str(), options.output.c_str());
  }
  if (options.view) {
    if (options.symbolicate && HasRawAddresses(root)) {
      std::fprintf(stderr, "strata record: %s keeps raw addresses for the viewer; `strata symbolicate %s` names "
                   "them in the file\n", options.output.c_str(), options.output.c_str());
    }
    ViewOptions view;
    view.profile = options.output;
    view.port = options.view_port;
    view.open_browser = options.view_open_browser;
    RunView(view);
  }
  return EndAsTheCommandDid(run, exit_status);
}

}  // namespace cli
}  // namespace strata
