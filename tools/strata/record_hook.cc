// libstrata_record.so: preloaded by `strata record` after libstrata_base.so into the
// recorded command (and, unless --no-children, into every process it starts). Two jobs:
//
// 1. A process killed by SIGINT, SIGTERM or SIGHUP still saves its profile, and is still
//    killed by that signal. The base tier saves at exit(); a process killed by a signal never
//    gets there. For each of those signals whose disposition is the default (at load, or
//    later when the program sets SIG_DFL itself), a handler of ours is installed in the
//    kernel while the program keeps seeing the default:
//      - sigaction(), signal(), bsd_signal(), sysv_signal() and sigset() are interposed here:
//        a query reports the default disposition (with the flags and mask the kernel
//        reported for it when the program last set it, or at load), a handler or SIG_IGN the
//        program sets replaces ours in the kernel, and SIG_DFL goes to the kernel as asked
//        and is then taken over again (a signal in between acts as the default, as it would
//        without Strata). Python thus sees SIG_DFL for SIGINT and installs
//        its KeyboardInterrupt handler, exactly as it does without Strata.
//      - On the signal, the handler wakes a watcher thread (a futex: no descriptor in the
//        program's table) and holds the interrupted thread (no sleep cut short, no further
//        output) while the watcher calls the base tier's ProfilerShutdown() (save and stop)
//        in a normal thread, never inside the handler where the interrupted thread may hold
//        malloc's lock. The watcher then resets the disposition to SIG_DFL and raises the
//        signal: the process dies by it, its parent sees WIFSIGNALED with that signal, and
//        the program's atexit handlers and stdio buffers are left alone, as without Strata.
//      - The hold is bounded (kHandlerHoldNs): if the save needs a lock the held thread
//        owns, the thread goes on after that time and the save completes.
//      - A repeat of the signal within a second of the first is the same request (the
//        terminal and `strata record` may both deliver one Ctrl-C); a later one kills the
//        process at once, the default way (a stuck save can still be interrupted).
//    The watcher is created with libc's pthread_create (not base's wrapper), so it is not a
//    profiled thread, with every signal blocked, so no process-directed signal of the
//    program runs on it; one sent to it alone (tgkill) is taken there within 10 ms, by the
//    base tier's AnswerThreadDirectedSignals (base/internal/signals/profiler_thread_signals.h). A
//    forked child (no watcher there; the base tier is off in it anyway) gets the default
//    dispositions back in the kernel.
// 2. --no-children / --follow none (STRATA_RECORD_ROOT_ONLY=1): LD_PRELOAD is restored to
//    what it was before `strata record` (STRATA_RECORD_PRELOAD) in this process's
//    environment, so nothing it starts is preloaded.
// 3. --follow exec (STRATA_RECORD_ROOT_PID=<the command's pid>): the command's own process
//    keeps everything, so a program it execs is preloaded and profiled again; in any other
//    process (one it started) LD_PRELOAD is restored as in 2, and STRATA_STARTUP,
//    STRATA_SHUTDOWN and STRATA_FLIGHT_RECORDER are removed from its environment, so the base
//    tier does not start there when its constructor runs after this one (the loader runs
//    this later preload's constructor first), and saves nothing otherwise; `strata record`
//    leaves out any profile such a process saves all the same. No signal hook there.
//
// No dependency but libc (the base tier's ProfilerShutdown is found with dlsym). Nothing here
// acts unless STRATA_RECORD_HOOK=1; the interposers then just call the next definition.
// Limits: a program that reads dispositions with the raw rt_sigaction system call (Go's
// runtime, static code) sees our handler; two threads changing the disposition of the same
// signal at the same instant may leave the reported flags of either.
#include <dlfcn.h>
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
constexpr int kSignalCount = sizeof(kSignals) / sizeof(kSignals[0]);
constexpr int64_t kRepeatWindowNs = 1000000000;  // Repeats within this time are one request.
constexpr int64_t kHandlerHoldNs = 2000000000;   // Longest hold of the interrupted thread.

using SigactionFunction = int (*)(int, const struct sigaction*, struct sigaction*);
using SignalFunction = sighandler_t (*)(int, sighandler_t);
using ShutdownFunction = void (*)();

// True once the watcher runs and our handlers may be installed (never in a forked child).
std::atomic<bool> g_enabled{false};
// The signal number of the first request; 0 before. The watcher's futex word.
std::atomic<int> g_requested{0};
std::atomic<int64_t> g_first_request_ns{0};
// 0 while the save runs; 1 when the watcher could not end the process (handlers let go).
// The holding handlers' futex word.
std::atomic<int> g_watcher_gave_up{0};
// What the program sees for each signal while our handler is installed: the default
// disposition, with the flags and mask it last set (or had at load). Written by the
// interposers (ordinary context), read by them.
struct sigaction g_visible[kSignalCount];
ShutdownFunction g_profiler_shutdown = nullptr;
// strata::base_internal::AnswerThreadDirectedSignals and its state (the same layout as
// base/internal/signals/profiler_thread_signals.h's ThreadDirectedSignalCheck), found with dlsym.
struct ThreadDirectedSignalCheck {
  uint64_t last_pending = 0;
};
using AnswerSignalsFunction = int (*)(ThreadDirectedSignalCheck*);
AnswerSignalsFunction g_answer_thread_directed_signals = nullptr;
std::atomic<int> g_watcher_tid{0};

int IndexOf(int signal_number) {
  for (int i = 0; i < kSignalCount; ++i) {
    if (kSignals[i] == signal_number) return i;
  }
  return -1;
}

// CLOCK_MONOTONIC by the system call itself, never the vDSO: this runs in the handler, on
// whatever thread the signal interrupted, which may have forbidden rdtsc (PR_SET_TSC), where
// the vDSO's clock_gettime faults (issue 33). A Ctrl-C path: ~0.1 us more does not matter.
int64_t MonotonicNs() {
  struct timespec now = {0, 0};
  long rc;
  __asm__ volatile("syscall"
                   : "=a"(rc)
                   : "0"(static_cast<long>(SYS_clock_gettime)),
                     "D"(static_cast<long>(CLOCK_MONOTONIC)), "S"(&now)
                   : "rcx", "r11", "memory");
  (void)rc;
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

// Raw futex calls: system calls, async-signal-safe.
void FutexWait(std::atomic<int>* word, int expected, const struct timespec* timeout) {
  syscall(SYS_futex, reinterpret_cast<int*>(word), FUTEX_WAIT_PRIVATE, expected, timeout, nullptr,
          0);
}

void FutexWakeAll(std::atomic<int>* word) {
  syscall(SYS_futex, reinterpret_cast<int*>(word), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr,
          0);
}

// The next definitions in the lookup order (libc's, or a later preload's). Resolved in the
// constructor; the lazy path only serves calls made before it ran.
template <typename Function>
Function Next(std::atomic<Function>* cache, const char* name) {
  Function function = cache->load(std::memory_order_acquire);
  if (function == nullptr) {
    function = reinterpret_cast<Function>(dlsym(RTLD_NEXT, name));
    cache->store(function, std::memory_order_release);
  }
  return function;
}

std::atomic<SigactionFunction> g_next_sigaction{nullptr};

int NextSigaction(int signal_number, const struct sigaction* action, struct sigaction* previous) {
  const SigactionFunction next = Next(&g_next_sigaction, "sigaction");
  if (next == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return next(signal_number, action, previous);
}

void OnSignal(int signal_number);

bool IsOurs(const struct sigaction& action) {
  return reinterpret_cast<void*>(action.sa_handler) == reinterpret_cast<void*>(&OnSignal);
}

struct sigaction OurAction() {
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_handler = OnSignal;
  // SA_NODEFER: a repeat reaches the holding thread too (to end a stuck save). SA_RESTART:
  // when the hold ends early, interrupted calls go on as if nothing happened.
  action.sa_flags = SA_RESTART | SA_NODEFER;
  sigemptyset(&action.sa_mask);
  return action;
}

// Puts the default disposition back in the kernel and raises the signal: the process dies by
// it. Async-signal-safe. Returns only when the signal did not end the process.
void DieBySignal(int signal_number) {
  struct sigaction default_action;
  memset(&default_action, 0, sizeof(default_action));
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  NextSigaction(signal_number, &default_action, nullptr);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, signal_number);
  pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
  raise(signal_number);
}

// --- Signal handler: async-signal-safe only (atomics, clock_gettime, futex, sigaction,
// --- pthread_sigmask, raise); no lock, no allocation.
void OnSignal(int signal_number) {
  const int saved_errno = errno;
  int expected = 0;
  if (!g_enabled.load(std::memory_order_acquire)) {
    DieBySignal(signal_number);  // No watcher (a forked child before its reset): the default.
  } else if (g_requested.compare_exchange_strong(expected, signal_number)) {
    const int64_t start = MonotonicNs();
    g_first_request_ns.store(start);
    FutexWakeAll(&g_requested);
    // Hold this thread while the watcher saves; the watcher ends the process. (Not the
    // watcher itself, which takes a signal sent to it alone: it saves when this returns.)
    const bool on_watcher = static_cast<int>(syscall(SYS_gettid)) == g_watcher_tid.load();
    for (;;) {
      if (on_watcher) break;
      const int64_t left = start + kHandlerHoldNs - MonotonicNs();
      if (left <= 0 || g_watcher_gave_up.load() != 0) break;
      const struct timespec timeout = {static_cast<time_t>(left / 1000000000),
                                       static_cast<long>(left % 1000000000)};
      FutexWait(&g_watcher_gave_up, 0, &timeout);
    }
  } else if (MonotonicNs() - g_first_request_ns.load() > kRepeatWindowNs) {
    DieBySignal(signal_number);  // Asked again: stop now, without the profile.
  }
  errno = saved_errno;
}
// --- End of the signal handler.

void* Watcher(void*) {
  int signal_number;
  // The program may signal this thread alone (tgkill over /proc/self/task) and wait for its
  // handler to answer: the base tier's check delivers such signals here, as on a thread of the
  // program (base/internal/signals/profiler_thread_signals.h); the wait ends every 10 ms for it.
  g_watcher_tid.store(static_cast<int>(syscall(SYS_gettid)));
  ThreadDirectedSignalCheck check;
  const struct timespec bound = {0, 10 * 1000 * 1000};
  while ((signal_number = g_requested.load()) == 0) {
    if (g_answer_thread_directed_signals != nullptr) g_answer_thread_directed_signals(&check);
    FutexWait(&g_requested, 0, g_answer_thread_directed_signals != nullptr ? &bound : nullptr);
  }
  if (g_profiler_shutdown != nullptr) g_profiler_shutdown();  // Saves to STRATA_SHUTDOWN.
  DieBySignal(signal_number);
  // Still alive (the signal was caught or ignored meanwhile by another path): let go.
  g_watcher_gave_up.store(1);
  FutexWakeAll(&g_watcher_gave_up);
  return nullptr;
}

// Installs our handler for signal `index` when the kernel's disposition is the default, and
// remembers that default as what the program sees.
void ArmIfDefault(int index) {
  struct sigaction current;
  if (NextSigaction(kSignals[index], nullptr, &current) != 0) return;
  if (current.sa_handler != SIG_DFL) return;
  g_visible[index] = current;
  const struct sigaction ours = OurAction();
  NextSigaction(kSignals[index], &ours, nullptr);
}

// In a forked child: no watcher, so the kernel gets the default dispositions back.
void DisarmInChild() {
  g_enabled.store(false);
  g_requested.store(0);
  for (int i = 0; i < kSignalCount; ++i) {
    struct sigaction current;
    if (NextSigaction(kSignals[i], nullptr, &current) == 0 && IsOurs(current)) {
      NextSigaction(kSignals[i], &g_visible[i], nullptr);
    }
  }
}

void StartWatcher() {
  using PthreadCreate = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  auto create = reinterpret_cast<PthreadCreate>(dlsym(RTLD_NEXT, "pthread_create"));
  if (create == nullptr) create = &pthread_create;
  g_profiler_shutdown =
      reinterpret_cast<ShutdownFunction>(dlsym(RTLD_DEFAULT, "_ZN6strata16ProfilerShutdownEv"));
  g_answer_thread_directed_signals = reinterpret_cast<AnswerSignalsFunction>(dlsym(
      RTLD_DEFAULT,
      "_ZN6strata13base_internal27AnswerThreadDirectedSignalsEPNS0_25ThreadDirectedSignalCheckE"));
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setstacksize(&attributes, 2 * 1024 * 1024);  // The save runs here.
  pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);  // Inherited by the watcher.
  pthread_t thread;
  const int status = create(&thread, &attributes, Watcher, nullptr);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  pthread_attr_destroy(&attributes);
  if (status != 0) return;
  g_enabled.store(true, std::memory_order_release);
  for (int i = 0; i < kSignalCount; ++i) ArmIfDefault(i);
  pthread_atfork(nullptr, nullptr, DisarmInChild);
}

__attribute__((constructor)) void StrataRecordHookInit() {
  Next(&g_next_sigaction, "sigaction");
  const char* enabled = getenv("STRATA_RECORD_HOOK");
  if (enabled == nullptr || strcmp(enabled, "1") != 0) return;
  const char* root_only = getenv("STRATA_RECORD_ROOT_ONLY");
  const char* root_pid = getenv("STRATA_RECORD_ROOT_PID");
  const bool not_followed = root_pid != nullptr && atol(root_pid) != static_cast<long>(getpid());
  if (not_followed) {
    static const char* const kProfilerVariables[] = {"STRATA_STARTUP", "STRATA_SHUTDOWN", "STRATA_FLIGHT_RECORDER",
                                                     "STRATA_RECORD_ROOT_PID"};
    for (const char* name : kProfilerVariables) unsetenv(name);
  }
  if (not_followed || (root_only != nullptr && strcmp(root_only, "1") == 0)) {
    const char* original = getenv("STRATA_RECORD_PRELOAD");
    if (original != nullptr && original[0] != '\0') {
      setenv("LD_PRELOAD", original, 1);
    } else {
      unsetenv("LD_PRELOAD");
    }
    unsetenv("STRATA_RECORD_ROOT_ONLY");
    unsetenv("STRATA_RECORD_HOOK");
  }
  if (not_followed) return;
  StartWatcher();
}

// What the program sees as the previous handler of a signal-style call: ours reads as the
// default it believes is there.
sighandler_t VisibleHandler(int index, sighandler_t handler) {
  return reinterpret_cast<void*>(handler) == reinterpret_cast<void*>(&OnSignal)
             ? g_visible[index].sa_handler
             : handler;
}

// signal(), bsd_signal(), sysv_signal(), sigset(): libc's install through its internal
// sigaction (not ours), so the next definition runs as is, its answer is translated, and a
// SIG_DFL it set is taken over again.
sighandler_t SignalStyleCall(std::atomic<SignalFunction>* cache, const char* name,
                             int signal_number, sighandler_t handler) {
  const SignalFunction next = Next(cache, name);
  if (next == nullptr) {
    errno = ENOSYS;
    return SIG_ERR;
  }
  const sighandler_t previous = next(signal_number, handler);
  const int index = IndexOf(signal_number);
  if (index < 0 || previous == SIG_ERR || !g_enabled.load(std::memory_order_acquire)) {
    return previous;
  }
  const sighandler_t visible = VisibleHandler(index, previous);
  if (handler == SIG_DFL) ArmIfDefault(index);
  return visible;
}

std::atomic<SignalFunction> g_next_signal{nullptr};
std::atomic<SignalFunction> g_next_bsd_signal{nullptr};
std::atomic<SignalFunction> g_next_sysv_signal{nullptr};
std::atomic<SignalFunction> g_next_internal_sysv_signal{nullptr};
std::atomic<SignalFunction> g_next_sigset{nullptr};

}  // namespace

// The interposers (C linkage, default visibility). Async-signal-safe as sigaction is, once
// the constructor has run.
extern "C" {

int sigaction(int signal_number, const struct sigaction* action, struct sigaction* previous) {
  const int index = IndexOf(signal_number);
  if (index < 0 || !g_enabled.load(std::memory_order_acquire)) {
    return NextSigaction(signal_number, action, previous);
  }
  const struct sigaction visible_before = g_visible[index];
  struct sigaction kernel_previous;
  // The program's action goes to the kernel as it is (so that what the kernel reports back
  // is exactly what it would without Strata); a default is then taken over again.
  const int status = NextSigaction(signal_number, action, &kernel_previous);
  if (status != 0) return status;
  if (action != nullptr && action->sa_handler == SIG_DFL) ArmIfDefault(index);
  if (previous != nullptr) *previous = IsOurs(kernel_previous) ? visible_before : kernel_previous;
  return 0;
}

sighandler_t signal(int signal_number, sighandler_t handler) {
  return SignalStyleCall(&g_next_signal, "signal", signal_number, handler);
}

sighandler_t bsd_signal(int signal_number, sighandler_t handler) {
  return SignalStyleCall(&g_next_bsd_signal, "bsd_signal", signal_number, handler);
}

sighandler_t sysv_signal(int signal_number, sighandler_t handler) {
  return SignalStyleCall(&g_next_sysv_signal, "sysv_signal", signal_number, handler);
}

// What `signal` is under strict ISO C (-std=c11 without _DEFAULT_SOURCE).
sighandler_t __sysv_signal(int signal_number, sighandler_t handler) {
  return SignalStyleCall(&g_next_internal_sysv_signal, "__sysv_signal", signal_number, handler);
}

sighandler_t sigset(int signal_number, sighandler_t handler) {
  return SignalStyleCall(&g_next_sigset, "sigset", signal_number, handler);
}

}  // extern "C"
