// The program keeps its own signals while a session samples with signal S (InstalledSampling
// Signal(), platform/sampling/sampling_signal.h): libc's signal functions are wrapped, in the
// preload tier, like pthread_create in preload.cc (exported with C linkage, the real functions
// found with dlsym(RTLD_NEXT)).
//
//   sigaction, signal, bsd_signal, sysv_signal  for S: the program's wish is recorded as its
//       action (our handler stays the kernel disposition; S's instances that are not samples
//       go to that action), and the old action reported is the program's, never ours. glibc's
//       signal() does not go through the exported sigaction, hence its own wrappers.
//   sigset, sigignore, sighold, sigrelse (System V)  for S and C: carried out through the
//       wrappers above (glibc's own versions call its internal sigaction and sigprocmask, which
//       no wrapper sees: `sigset(S, SIG_DFL)` made S's next sample kill the program).
//   sigprocmask, pthread_sigmask  S is removed from the masks given to SIG_BLOCK and
//       SIG_SETMASK; whether the program asked for S to be blocked is remembered per thread, so
//       the old mask it reads back is the one it set. (A new thread starts with S unblocked in
//       that view, whatever its creator set.)
//   signalfd, sigwait, sigwaitinfo, sigtimedwait  S is removed from the set: the program never
//       reads a sample.
// The control signal C (STRATA_SIGNAL, control_signal.h) is not the sampling signal: its
// sigaction/signal calls go to HandleProgramControlSignalAction (SIG_DFL recorded, `oldact`
// SIG_DFL; a handler or SIG_IGN is given to the kernel and ends the control). Masks and
// sigwait-style calls for C are forwarded unchanged: a program that blocks C keeps it.
// Everything else, every other signal and every call while no session samples (S == 0) is
// forwarded unchanged. Calls made by libunwind (loaded by the profiler, or by the program: one
// object) are forwarded unchanged: it blocks every signal around its locks, which must then
// keep the sampling handler (which takes them) out. So are calls from inside the sampling
// handler.
//
// Thread safety: all thread-safe; all async-signal-safe where the wrapped function is (the
// real functions are resolved at load time, PrepareSignalInterposers at session start).
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/internal/control_signal.h"
#include "base/internal/core.h"
#include "platform/sampling/libunwind_loader.h"
#include "platform/next_definition.h"
#include "platform/tsan_startup.h"
#include "platform/sampling/sampling_signal.h"

namespace strata {
namespace base_internal {
namespace {

using SigactionFunction = int (*)(int, const struct sigaction*, struct sigaction*);
using SignalFunction = sighandler_t (*)(int, sighandler_t);
using MaskFunction = int (*)(int, const sigset_t*, sigset_t*);
using SignalfdFunction = int (*)(int, const sigset_t*, int);
using SigwaitFunction = int (*)(const sigset_t*, int*);
using SigwaitinfoFunction = int (*)(const sigset_t*, siginfo_t*);
using SigtimedwaitFunction = int (*)(const sigset_t*, siginfo_t*, const struct timespec*);
using SigsetFunction = sighandler_t (*)(int, sighandler_t);
using SigOneFunction = int (*)(int);

template <typename Function>
Function Real(std::atomic<Function>& cache, const char* name) {
  Function real = cache.load(std::memory_order_acquire);
  if (real == nullptr) {
    real = reinterpret_cast<Function>(NextDefinition(name));
    cache.store(real, std::memory_order_release);
  }
  return real;
}

std::atomic<SigactionFunction> g_sigaction{nullptr};
std::atomic<SignalFunction> g_signal{nullptr};
std::atomic<SignalFunction> g_bsd_signal{nullptr};
std::atomic<SignalFunction> g_sysv_signal{nullptr};
std::atomic<MaskFunction> g_sigprocmask{nullptr};
std::atomic<MaskFunction> g_pthread_sigmask{nullptr};
std::atomic<SignalfdFunction> g_signalfd{nullptr};
std::atomic<SigwaitFunction> g_sigwait{nullptr};
std::atomic<SigwaitinfoFunction> g_sigwaitinfo{nullptr};
std::atomic<SigtimedwaitFunction> g_sigtimedwait{nullptr};
std::atomic<SigsetFunction> g_sigset{nullptr};
std::atomic<SigOneFunction> g_sigignore{nullptr};
std::atomic<SigOneFunction> g_sighold{nullptr};
std::atomic<SigOneFunction> g_sigrelse{nullptr};

void ResolveRealFunctions() {
  (void)Real(g_sigaction, "sigaction");
  (void)Real(g_signal, "signal");
  (void)Real(g_bsd_signal, "bsd_signal");
  (void)Real(g_sysv_signal, "sysv_signal");
  (void)Real(g_sigprocmask, "sigprocmask");
  (void)Real(g_pthread_sigmask, "pthread_sigmask");
  (void)Real(g_signalfd, "signalfd");
  (void)Real(g_sigwait, "sigwait");
  (void)Real(g_sigwaitinfo, "sigwaitinfo");
  (void)Real(g_sigtimedwait, "sigtimedwait");
  (void)Real(g_sigset, "sigset");
  (void)Real(g_sigignore, "sigignore");
  (void)Real(g_sighold, "sighold");
  (void)Real(g_sigrelse, "sigrelse");
}

// Blocks or unblocks one signal through the sigprocmask wrapper (for S: remembered, not
// applied).
int ChangeOneSignalMask(int how, int signal_number) {
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, signal_number);
  return ::sigprocmask(how, &one, nullptr);
}

// A System V one-signal call (sigignore, sighold, sigrelse) for any other signal: libc's own.
int CallRealOneSignal(std::atomic<SigOneFunction>& cache, const char* name, int signal_number) {
  const SigOneFunction real = Real(cache, name);
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return real(signal_number);
}

// The sampling or the control signal, whose System V calls go through the wrappers.
bool IsStrataSignal(int signal_number) {
  return signal_number > 0 && !IsInSamplingHandler() &&
         (signal_number == InstalledSamplingSignal() || signal_number == ControlSignal());
}

__attribute__((constructor)) void ResolveAtLoad() { ResolveRealFunctions(); }

int ProgramSigaction(int signal_number, const struct sigaction* action,
                     struct sigaction* old_action) {
  if (InOwnSigactionCall()) {  // Strata's own (ThreadSanitizer builds: OwnSigaction).
    return Real(g_sigaction, "sigaction")(signal_number, action, old_action);
  }
  if (!IsInSamplingHandler() && RecordProgramAction(signal_number, action, old_action)) return 0;
  int result = 0;
  if (HandleProgramControlSignalAction(signal_number, action, old_action, &result)) return result;
  const SigactionFunction real = Real(g_sigaction, "sigaction");
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return real(signal_number, action, old_action);
}

// libunwind's code, [begin, end): its callers are trusted (see the file comment).
std::atomic<uintptr_t> g_libunwind_begin{0};
std::atomic<uintptr_t> g_libunwind_end{0};

// Whether the program asked for the sampling signal to be blocked on this thread.
__attribute__((tls_model("initial-exec"))) thread_local bool t_program_blocks_sampling_signal =
    false;

bool CalledByLibunwind(const void* return_address) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(return_address);
  return address >= g_libunwind_begin.load(std::memory_order_relaxed) &&
         address < g_libunwind_end.load(std::memory_order_relaxed);
}

// The sampling signal when the call must be filtered, else 0.
int FilteredSignal(const void* return_address) {
  const int signal_number = InstalledSamplingSignal();
  if (signal_number == 0 || IsInSamplingHandler() || CalledByLibunwind(return_address)) return 0;
  return signal_number;
}

int ChangeMask(MaskFunction real, int how, const sigset_t* set, sigset_t* old,
               int signal_number) {
  if (signal_number == 0) return real(how, set, old);
  const bool program_blocked = t_program_blocks_sampling_signal;
  sigset_t filtered;
  const sigset_t* effective = set;
  if (set != nullptr) {
    const bool named = sigismember(set, signal_number) == 1;
    if (how == SIG_BLOCK || how == SIG_SETMASK) {
      filtered = *set;
      sigdelset(&filtered, signal_number);
      effective = &filtered;
    }
    int result = real(how, effective, old);
    if (result == 0) {
      if (how == SIG_SETMASK) t_program_blocks_sampling_signal = named;
      if (how == SIG_BLOCK && named) t_program_blocks_sampling_signal = true;
      if (how == SIG_UNBLOCK && named) t_program_blocks_sampling_signal = false;
      if (old != nullptr && program_blocked) sigaddset(old, signal_number);
    }
    return result;
  }
  const int result = real(how, nullptr, old);
  if (result == 0 && old != nullptr && program_blocked) sigaddset(old, signal_number);
  return result;
}

// `set` without the sampling signal, in `storage`.
const sigset_t* WithoutSignal(const sigset_t* set, int signal_number, sigset_t* storage) {
  if (set == nullptr || signal_number == 0 || sigismember(set, signal_number) != 1) return set;
  *storage = *set;
  sigdelset(storage, signal_number);
  return storage;
}

// The old handler as signal() reports it.
// (glibc: sa_handler and sa_sigaction share their storage, so this is also the address of
// an SA_SIGINFO handler, as glibc's signal() returns it.)
sighandler_t HandlerOf(const struct sigaction& action) { return action.sa_handler; }

// signal() and its variants for the sampling or the control signal: true if handled
// (result in *old).
bool RecordSignalCall(int signal_number, sighandler_t handler, int flags, bool mask_itself,
                      sighandler_t* old) {
  if (signal_number == 0 || (signal_number != InstalledSamplingSignal() &&
                             signal_number != ControlSignal())) {
    return false;
  }
  if (handler == SIG_ERR) {
    errno = EINVAL;
    *old = SIG_ERR;
    return true;
  }
  struct sigaction action, previous;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = handler;
  action.sa_flags = flags;
  sigemptyset(&action.sa_mask);
  if (mask_itself) sigaddset(&action.sa_mask, signal_number);
  int result = 0;
  if (RecordProgramAction(signal_number, &action, &previous)) {
    *old = HandlerOf(previous);
    return true;
  }
  if (HandleProgramControlSignalAction(signal_number, &action, &previous, &result)) {
    *old = result == 0 ? HandlerOf(previous) : SIG_ERR;
    return true;
  }
  return false;
}

// The [begin, end) of the loaded object whose code contains `address` (its PT_LOAD segments).
bool CodeRangeOf(const void* address, uintptr_t* begin, uintptr_t* end) {
  Dl_info info{};
  link_map* map = nullptr;
  if (dladdr1(address, &info, reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0 ||
      map == nullptr || info.dli_fbase == nullptr) {
    return false;
  }
  const auto* header = static_cast<const ElfW(Ehdr)*>(info.dli_fbase);
  const auto* segments = reinterpret_cast<const ElfW(Phdr)*>(
      static_cast<const char*>(info.dli_fbase) + header->e_phoff);
  uintptr_t low = UINTPTR_MAX, high = 0;
  for (int i = 0; i < header->e_phnum; ++i) {
    if (segments[i].p_type != PT_LOAD || (segments[i].p_flags & PF_X) == 0) continue;
    low = std::min<uintptr_t>(low, map->l_addr + segments[i].p_vaddr);
    high = std::max<uintptr_t>(high, map->l_addr + segments[i].p_vaddr + segments[i].p_memsz);
  }
  if (low >= high) return false;
  *begin = low;
  *end = high;
  return true;
}

}  // namespace

void PrepareSignalInterposers() {
  ResolveRealFunctions();
  const LibunwindFunctions* unwind = LoadedLibunwind();
  uintptr_t begin = 0, end = 0;
  if (unwind != nullptr && unwind->step != nullptr &&
      CodeRangeOf(reinterpret_cast<const void*>(unwind->step), &begin, &end)) {
    g_libunwind_end.store(0, std::memory_order_relaxed);
    g_libunwind_begin.store(begin, std::memory_order_relaxed);
    g_libunwind_end.store(end, std::memory_order_relaxed);
  }
}

}  // namespace base_internal
}  // namespace strata

using namespace strata;
using namespace strata::base_internal;

extern "C" {

#if STRATA_TSAN_BUILD
int __sigaction(int, const struct sigaction*, struct sigaction*);  // glibc's (GLIBC_2.2.5)

// libtsan's start-up calls it (platform/tsan_startup.h): libc's own until TSan has started.
__attribute__((no_sanitize("thread"))) int sigaction(int signal_number,
                                                     const struct sigaction* action,
                                                     struct sigaction* old_action) {
  if (StrataBeforeTsanStart()) return __sigaction(signal_number, action, old_action);
  return ProgramSigaction(signal_number, action, old_action);
}
#else
int sigaction(int signal_number, const struct sigaction* action, struct sigaction* old_action) {
  return ProgramSigaction(signal_number, action, old_action);
}
#endif

sighandler_t signal(int signal_number, sighandler_t handler) {
  sighandler_t old;
  // glibc: BSD semantics, SA_RESTART, the signal blocked in its handler.
  if (RecordSignalCall(signal_number, handler, SA_RESTART, true, &old)) return old;
  const SignalFunction real = Real(g_signal, "signal");
  return real != nullptr ? real(signal_number, handler) : SIG_ERR;
}

sighandler_t bsd_signal(int signal_number, sighandler_t handler) {
  sighandler_t old;
  if (RecordSignalCall(signal_number, handler, SA_RESTART, true, &old)) return old;
  const SignalFunction real = Real(g_bsd_signal, "bsd_signal");
  return real != nullptr ? real(signal_number, handler) : SIG_ERR;
}

sighandler_t sysv_signal(int signal_number, sighandler_t handler) {
  sighandler_t old;
  // glibc: SA_RESETHAND | SA_NODEFER, nothing blocked.
  if (RecordSignalCall(signal_number, handler, SA_RESETHAND | SA_NODEFER, false, &old)) return old;
  const SignalFunction real = Real(g_sysv_signal, "sysv_signal");
  return real != nullptr ? real(signal_number, handler) : SIG_ERR;
}

int sigprocmask(int how, const sigset_t* set, sigset_t* old) {
  const MaskFunction real = Real(g_sigprocmask, "sigprocmask");
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return ChangeMask(real, how, set, old, FilteredSignal(__builtin_return_address(0)));
}

int pthread_sigmask(int how, const sigset_t* set, sigset_t* old) {
  const MaskFunction real = Real(g_pthread_sigmask, "pthread_sigmask");
  if (real == nullptr) return ENOSYS;
  return ChangeMask(real, how, set, old, FilteredSignal(__builtin_return_address(0)));
}

int signalfd(int fd, const sigset_t* mask, int flags) {
  const SignalfdFunction real = Real(g_signalfd, "signalfd");
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  sigset_t storage;
  return real(fd, WithoutSignal(mask, FilteredSignal(__builtin_return_address(0)), &storage),
              flags);
}

int sigwait(const sigset_t* set, int* signal_number) {
  const SigwaitFunction real = Real(g_sigwait, "sigwait");
  if (real == nullptr) return ENOSYS;
  sigset_t storage;
  return real(WithoutSignal(set, FilteredSignal(__builtin_return_address(0)), &storage),
              signal_number);
}

int sigwaitinfo(const sigset_t* set, siginfo_t* info) {
  const SigwaitinfoFunction real = Real(g_sigwaitinfo, "sigwaitinfo");
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  sigset_t storage;
  return real(WithoutSignal(set, FilteredSignal(__builtin_return_address(0)), &storage), info);
}

int sigtimedwait(const sigset_t* set, siginfo_t* info, const struct timespec* timeout) {
  const SigtimedwaitFunction real = Real(g_sigtimedwait, "sigtimedwait");
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  sigset_t storage;
  return real(WithoutSignal(set, FilteredSignal(__builtin_return_address(0)), &storage), info,
              timeout);
}

// System V signal functions (glibc implements them with its internal sigaction and
// sigprocmask): for S and C, the same operations through the wrappers above.
sighandler_t sigset(int signal_number, sighandler_t disposition) {
  if (!IsStrataSignal(signal_number)) {
    const SigsetFunction real = Real(g_sigset, "sigset");
    return real != nullptr ? real(signal_number, disposition) : SIG_ERR;
  }
  sigset_t one, old_mask;
  sigemptyset(&one);
  sigaddset(&one, signal_number);
  struct sigaction previous;
  if (disposition == SIG_HOLD) {
    if (sigaction(signal_number, nullptr, &previous) != 0 ||
        sigprocmask(SIG_BLOCK, &one, &old_mask) != 0) {
      return SIG_ERR;
    }
    return sigismember(&old_mask, signal_number) == 1 ? SIG_HOLD : HandlerOf(previous);
  }
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = disposition;
  sigemptyset(&action.sa_mask);
  if (sigaction(signal_number, &action, &previous) != 0 ||
      sigprocmask(SIG_UNBLOCK, &one, &old_mask) != 0) {
    return SIG_ERR;
  }
  return sigismember(&old_mask, signal_number) == 1 ? SIG_HOLD : HandlerOf(previous);
}

int sigignore(int signal_number) {
  if (!IsStrataSignal(signal_number)) {
    return CallRealOneSignal(g_sigignore, "sigignore", signal_number);
  }
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = SIG_IGN;
  sigemptyset(&action.sa_mask);
  return sigaction(signal_number, &action, nullptr);
}

int sighold(int signal_number) {
  if (!IsStrataSignal(signal_number)) {
    return CallRealOneSignal(g_sighold, "sighold", signal_number);
  }
  return ChangeOneSignalMask(SIG_BLOCK, signal_number);
}

int sigrelse(int signal_number) {
  if (!IsStrataSignal(signal_number)) {
    return CallRealOneSignal(g_sigrelse, "sigrelse", signal_number);
  }
  return ChangeOneSignalMask(SIG_UNBLOCK, signal_number);
}

}  // extern "C"
