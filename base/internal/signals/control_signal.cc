// The control signal: handler, control thread, numbered files and the program's own action.
// See control_signal.h for the contract and docs/env-vars.md ("Daemons") for the behaviour.
#include "base/internal/signals/control_signal.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/internal/session/capture.h"
#include "base/internal/session/core.h"
#include "base/internal/settings/env_settings.h"
#include "base/internal/flight/flight_recorder.h"
#include "base/internal/settings/log.h"
#include "base/internal/signals/profiler_thread_signals.h"
#include "base/internal/session/shutdown_path.h"
#include "base/internal/process/thread_restrictions.h"
#include "platform/never_destroyed.h"
#include "platform/mutex.h"
#include "platform/next_definition.h"
#include "platform/sampling/sampling_signal.h"

namespace strata {
namespace base_internal {
namespace {

using SigactionFunction = int (*)(int, const struct sigaction*, struct sigaction*);

// Resolved at load (StartControlSignal), before anything else can call it.
std::atomic<SigactionFunction> g_real_sigaction{nullptr};

// The installed control signal, 0 when none (never installed, or given to the program).
std::atomic<int> g_control_signal{0};
// Futex words: requests counts the signals received; events is bumped with each request and
// when the program took the signal, and is what the control thread waits on.
uint32_t g_requests = 0;
uint32_t g_events = 0;
std::atomic<bool> g_program_took_signal{false};

// The control thread's state, under ControlMutex() (also taken by the exit handler). Never
// destroyed: a static destructor at exit would find it held by the control thread, or, in a
// forked child, by the copy of a lock the control thread held at the fork (fatal).
Mutex& ControlMutex() {
  static NeverDestroyed<Mutex> mutex("strata control signal");
  return mutex.get();
}
bool g_exiting = false;
ProfilerSettings* g_settings = nullptr;  // Leaked: the thread may run during exit.
std::string* g_path_template = nullptr;  // Expanded: the base of the numbered files.
int g_next_number = 1;

// SIG_DFL, also as a null SA_SIGINFO handler (the same storage, the same meaning).
bool IsDefaultAction(const struct sigaction& action) { return action.sa_handler == SIG_DFL; }

// What `oldact` says while the control is on: the program's SIG_DFL.
void ReportDefaultAction(struct sigaction* old_action) {
  if (old_action == nullptr) return;
  std::memset(old_action, 0, sizeof(*old_action));
  old_action->sa_handler = SIG_DFL;  // The mask: empty (zeroed).
}

// ---- Signal context begins: async-signal-safe only (no lock, no allocation). ----
// Also called by HandleProgramControlSignalAction, which a program's handler may reach.
void WakeControlThread() {
  __atomic_add_fetch(&g_events, 1, __ATOMIC_RELEASE);
  syscall(SYS_futex, &g_events, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

void ControlSignalHandler(int) {
  const int saved_errno = errno;
  __atomic_add_fetch(&g_requests, 1, __ATOMIC_RELEASE);
  // A thread under seccomp may make no system call: the request waits for the next wake.
  if (!CurrentThreadMustNotCallStrata()) WakeControlThread();
  errno = saved_errno;
}
// ---- Signal context ends. ----

// In a fork()ed child (no control thread there): the program's action, SIG_DFL, comes back.
// Async-signal-safe (pthread_atfork child handlers run in a copy of one thread).
void OnForkChild() {
  const int signal_number = g_control_signal.exchange(0);
  if (signal_number == 0) return;
  struct sigaction default_action;
  ReportDefaultAction(&default_action);
  g_real_sigaction.load(std::memory_order_acquire)(signal_number, &default_action, nullptr);
}

// The next numbered file that does not exist yet (its number is not consumed).
std::string NextFreePathLocked(int* number) {
  int n = g_next_number;
  std::string path = NumberedProfilePath(*g_path_template, n);
  struct stat status;
  while (stat(path.c_str(), &status) == 0 && n < 1000000) {
    path = NumberedProfilePath(*g_path_template, ++n);
  }
  *number = n;
  return path;
}

// A session running at exit is saved by the exit save (ProfilerShutdown) to the next file.
void AimExitSaveLocked() {
  int number = 0;
  SetShutdownPath(NextFreePathLocked(&number));
}

// A wrapper preloaded with its program (`LD_PRELOAD=... timeout 30 ./server`) gets the
// signal meant for the program, and profiles itself: said once, when it happens, with the fix.
void WarnIfSignalledInPlaceOfAChild(int signal_number) {
  static bool warned = false;
  pid_t child = 0;
  std::string child_name;
  if (warned || !FindProfiledChild(reinterpret_cast<const void*>(&WarnIfSignalledInPlaceOfAChild), &child,
                                   &child_name)) {
    return;
  }
  warned = true;
  LogError("STRATA_SIGNAL: signal %d started profiling '%s' (pid %d), which started '%s' (pid %d), profiled "
           "too: if the signal was meant for that program, send it there (kill -%d %d), or keep the preload "
           "off the wrapper (timeout 30 env LD_PRELOAD=... ./program); this profile is of '%s'",
           signal_number, program_invocation_short_name, static_cast<int>(getpid()), child_name.c_str(),
           static_cast<int>(child), signal_number, static_cast<int>(child), program_invocation_short_name);
}

void OnControlRequestLocked(int signal_number) {
  if (!ProfilerIsActive()) {
    ProfilerStart(*g_settings);
    AimExitSaveLocked();
    WarnIfSignalledInPlaceOfAChild(signal_number);
    LogInfo("STRATA_SIGNAL: signal %d: profiling started; the next one saves the profile",
            signal_number);
    return;
  }
  int number = 0;
  const std::string path = NextFreePathLocked(&number);
  std::string error;
  if (SaveSessionProfile(path, &error)) {
    g_next_number = number + 1;
    RemoveFlightRecorderFile();  // Saved: nothing to recover (as the exit save does).
    LogInfo("STRATA_SIGNAL: signal %d: profile saved to %s; profiling stopped", signal_number,
            path.c_str());
  } else {
    LogError("STRATA_SIGNAL: could not save the profile to %s: %s", path.c_str(),
             error.c_str());
  }
  ProfilerStop();
  AimExitSaveLocked();
}

void* ControlThreadMain(void* argument) {
  const int signal_number = static_cast<int>(reinterpret_cast<intptr_t>(argument));
  prctl(PR_SET_NAME, "StrataControl", 0, 0, 0);
  uint32_t handled = 0;
  bool told_program_took_signal = false;
  ThreadDirectedSignalCheck signal_check;
  for (;;) {
    const uint32_t events = __atomic_load_n(&g_events, __ATOMIC_ACQUIRE);
    const uint32_t requested = __atomic_load_n(&g_requests, __ATOMIC_ACQUIRE);
    if (g_program_took_signal.load() && !told_program_took_signal) {
      told_program_took_signal = true;
      LogError("STRATA_SIGNAL: the program set its own action for signal %d: it keeps it; "
               "no control signal from now on",
               signal_number);
    }
    // A signal the program sent to this thread is taken here (profiler_thread_signals.h):
    // the wait below ends every 10 ms for it.
    AnswerThreadDirectedSignals(&signal_check);
    if (requested == handled) {
      const timespec bound{0, 10 * 1000 * 1000};
      syscall(SYS_futex, &g_events, FUTEX_WAIT_PRIVATE, events, &bound, nullptr, 0);
      continue;
    }
    ++handled;
    // Under a seccomp filter for every thread the save's system calls could kill the program.
    if (CurrentThreadMustNotCallStrata() || IsForkedChild()) continue;
    AutoLock lock(ControlMutex());
    if (!g_exiting) OnControlRequestLocked(signal_number);
  }
  return nullptr;
}

// Runs before the library's exit save (registered after it): from here on the control thread
// does nothing; a session it started is saved by the exit save, to the next numbered file.
void OnExit() {
  // A forked child has no control thread, and its copy of the mutex may be locked for ever
  // (the control thread held it at the fork, in the middle of a start or a save). A child
  // sharing our memory (vfork, clone(CLONE_VM)) must not stop the parent's control thread.
  if (IsOtherProcess()) return;
  AutoLock lock(ControlMutex());
  g_exiting = true;
}

std::string DefaultPathTemplate() {
  const char* tmpdir = getenv("TMPDIR");
  std::string directory = tmpdir != nullptr && tmpdir[0] == '/' ? tmpdir : "/tmp";
  while (directory.size() > 1 && directory.back() == '/') directory.pop_back();
  return directory + "/strata-%p.json";
}

}  // namespace

std::string NumberedProfilePath(const std::string& path, int number) {
  const std::string suffix = ".json";
  const std::string tag = "-" + std::to_string(number);
  const size_t slash = path.rfind('/');
  const size_t name_start = slash == std::string::npos ? 0 : slash + 1;
  if (path.size() > name_start + suffix.size() &&
      path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return path.substr(0, path.size() - suffix.size()) + tag + suffix;
  }
  return path + tag;
}

int ControlSignal() { return g_control_signal.load(std::memory_order_acquire); }

bool HandleProgramControlSignalAction(int signal_number, const struct sigaction* action,
                                      struct sigaction* old_action, int* result) {
  int control = g_control_signal.load(std::memory_order_acquire);
  if (control == 0 || signal_number != control) return false;
  if (action == nullptr || IsDefaultAction(*action)) {
    ReportDefaultAction(old_action);  // The program's wish is the default: the control stays.
    *result = 0;
    return true;
  }
  // A handler or SIG_IGN: the program's signal from now on.
  if (!g_control_signal.compare_exchange_strong(control, 0)) return false;  // Already given.
  const SigactionFunction real = g_real_sigaction.load(std::memory_order_acquire);
  *result = real(signal_number, action, nullptr);
  if (*result != 0) {  // A bad action (errno set): nothing changed.
    g_control_signal.store(signal_number, std::memory_order_release);
    return true;
  }
  ReportDefaultAction(old_action);
  g_program_took_signal.store(true);
  WakeControlThread();
  return true;
}

void StartControlSignal(int signal_number, const ProfilerSettings& settings,
                        const std::string& shutdown_path) {
  if (signal_number == 0 || IsForkedChild()) return;
  SigactionFunction real = reinterpret_cast<SigactionFunction>(NextDefinition("sigaction"));
  if (real == nullptr) real = &::sigaction;  // Only when nothing interposes (never ours then).
  g_real_sigaction.store(real, std::memory_order_release);
  struct sigaction current;
  if (OwnSigaction(signal_number, nullptr, &current) != 0) {
    LogError("STRATA_SIGNAL: cannot read the action of signal %d: %s; no control signal",
             signal_number, strerror(errno));
    return;
  }
  if (!IsDefaultAction(current)) {
    LogError("STRATA_SIGNAL: signal %d is %s in this process: left to it; no control signal",
             signal_number,
             current.sa_handler == SIG_IGN ? "ignored (SIG_IGN)" : "handled by the program");
    return;
  }
  g_settings = new ProfilerSettings(settings);
  const std::string base = shutdown_path.empty() ? DefaultPathTemplate() : shutdown_path;
  g_path_template = new std::string(ExpandShutdownPath(base, getpid()));
  // Before the handler: a signal received from then on finds everything in place.
  pthread_atfork(nullptr, nullptr, &OnForkChild);
  pthread_t thread;
  const int rc = CreateProfilerThread(&thread, &ControlThreadMain,
                                      reinterpret_cast<void*>(static_cast<intptr_t>(signal_number)));
  if (rc != 0) {
    LogError("STRATA_SIGNAL: cannot start the control thread: %s; no control signal",
             strerror(rc));
    return;
  }
  pthread_detach(thread);
  struct sigaction ours;
  std::memset(&ours, 0, sizeof(ours));
  ours.sa_handler = &ControlSignalHandler;
  ours.sa_flags = SA_RESTART;  // Interrupted system calls resume where they can.
  sigemptyset(&ours.sa_mask);
  if (OwnSigaction(signal_number, &ours, nullptr) != 0) {
    LogError("STRATA_SIGNAL: cannot install a handler for signal %d: %s; no control signal",
             signal_number, strerror(errno));
    return;  // The thread waits for nothing, forever: harmless.
  }
  g_control_signal.store(signal_number, std::memory_order_release);
  {
    AutoLock lock(ControlMutex());
    AimExitSaveLocked();
  }
  atexit(&OnExit);
  int number = 0;
  std::string first;
  {
    AutoLock lock(ControlMutex());
    first = NextFreePathLocked(&number);
  }
  LogInfo("STRATA_SIGNAL: signal %d starts and stops the session; the next profile goes to %s",
          signal_number, first.c_str());
}

}  // namespace base_internal
}  // namespace strata
