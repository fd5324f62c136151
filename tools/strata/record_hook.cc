// libstrata_record.so: preloaded by `strata record` after libstrata_base.so into the
// recorded command (and, unless --no-children, into every process it starts). Two jobs, both
// decided once when the library loads:
//
// 1. Ctrl-C still saves the profile. The base tier saves at exit(); a process killed by
//    SIGINT, SIGTERM or SIGHUP never gets there. For each of those signals whose disposition
//    is the default when the library loads (a program that sets its own handler later keeps
//    it), a handler is installed that wakes a watcher thread through a pipe; the watcher calls
//    exit(128 + signal), so atexit handlers (the profile save) run in a normal thread, never
//    inside a signal handler where the interrupted thread may hold malloc's lock. A second
//    such signal more than a second after the first kills the process the default way (so a
//    stuck save can still be interrupted); repeats within that second are one request (the
//    terminal and `strata record` forwarding may both deliver the same Ctrl-C). The watcher
//    is created with libc's pthread_create (not base's wrapper) so that it is not a profiled
//    thread. A forked child (no watcher there; the base tier is off in it anyway) gets the
//    default dispositions back.
// 2. --no-children (STRATA_RECORD_ROOT_ONLY=1): LD_PRELOAD is restored to what it was
//    before `strata record` (STRATA_RECORD_PRELOAD) in this process's environment, so
//    nothing it starts is preloaded.
//
// No dependency but libc; nothing here runs unless STRATA_RECORD_HOOK=1.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

int g_pipe[2] = {-1, -1};
volatile sig_atomic_t g_requested = 0;  // Signal number of the first request; 0 before.
struct timespec g_first_request;
bool g_installed[3] = {false, false, false};

int64_t MonotonicNs() {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

void OnSignal(int signal_number) {
  const int saved_errno = errno;
  if (g_requested == 0) {
    clock_gettime(CLOCK_MONOTONIC, &g_first_request);
    g_requested = signal_number;
    const unsigned char byte = static_cast<unsigned char>(signal_number);
    ssize_t ignored = write(g_pipe[1], &byte, 1);
    (void)ignored;
  } else {
    const int64_t first =
        static_cast<int64_t>(g_first_request.tv_sec) * 1000000000 + g_first_request.tv_nsec;
    if (MonotonicNs() - first > 1000000000) {
      // Asked again: stop now, the default way (delivered when this handler returns).
      struct sigaction action;
      memset(&action, 0, sizeof(action));
      action.sa_handler = SIG_DFL;
      sigaction(signal_number, &action, nullptr);
      kill(getpid(), signal_number);
    }
  }
  errno = saved_errno;
}

void* Watcher(void*) {
  unsigned char byte = 0;
  for (;;) {
    const ssize_t n = read(g_pipe[0], &byte, 1);
    if (n == 1) break;
    if (n == 0 || errno != EINTR) return nullptr;
  }
  exit(128 + byte);  // Runs the atexit handlers: the base tier saves the profile.
}

void RestoreDefaultsInChild() {
  for (size_t i = 0; i < sizeof(kSignals) / sizeof(kSignals[0]); ++i) {
    if (!g_installed[i]) continue;
    struct sigaction current;
    if (sigaction(kSignals[i], nullptr, &current) == 0 && current.sa_handler == OnSignal) {
      struct sigaction action;
      memset(&action, 0, sizeof(action));
      action.sa_handler = SIG_DFL;
      sigaction(kSignals[i], &action, nullptr);
    }
  }
}

void InstallSignalHandlers() {
  using PthreadCreate = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  auto create = reinterpret_cast<PthreadCreate>(dlsym(RTLD_NEXT, "pthread_create"));
  if (create == nullptr) create = &pthread_create;
  if (pipe2(g_pipe, O_CLOEXEC) != 0) return;
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setstacksize(&attributes, 64 * 1024);
  pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
  // The watcher blocks every signal (it inherits this mask): a signal sent to the process must
  // reach one of the program's threads, as without us (issue 16: a program that blocks
  // SIGUSR1 everywhere and sigwaits for it was killed by it on the watcher).
  sigset_t every_signal, previous;
  sigfillset(&every_signal);
  pthread_sigmask(SIG_BLOCK, &every_signal, &previous);
  pthread_t thread;
  const int status = create(&thread, &attributes, Watcher, nullptr);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  pthread_attr_destroy(&attributes);
  if (status != 0) return;
  for (size_t i = 0; i < sizeof(kSignals) / sizeof(kSignals[0]); ++i) {
    struct sigaction current;
    if (sigaction(kSignals[i], nullptr, &current) != 0 || current.sa_handler != SIG_DFL) continue;
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_handler = OnSignal;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    g_installed[i] = sigaction(kSignals[i], &action, nullptr) == 0;
  }
  pthread_atfork(nullptr, nullptr, RestoreDefaultsInChild);
}

__attribute__((constructor)) void StrataRecordHookInit() {
  const char* enabled = getenv("STRATA_RECORD_HOOK");
  if (enabled == nullptr || strcmp(enabled, "1") != 0) return;
  const char* root_only = getenv("STRATA_RECORD_ROOT_ONLY");
  if (root_only != nullptr && strcmp(root_only, "1") == 0) {
    const char* original = getenv("STRATA_RECORD_PRELOAD");
    if (original != nullptr && original[0] != '\0') {
      setenv("LD_PRELOAD", original, 1);
    } else {
      unsetenv("LD_PRELOAD");
    }
    unsetenv("STRATA_RECORD_ROOT_ONLY");
    unsetenv("STRATA_RECORD_HOOK");
  }
  InstallSignalHandlers();
}

}  // namespace
