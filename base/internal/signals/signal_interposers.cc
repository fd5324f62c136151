// The program keeps its own signals while a session samples with signal S (InstalledSampling
// Signal(), platform/sampling/sampling_signal.h): libc's signal functions are wrapped, in the
// preload tier, like pthread_create in preload.cc (exported with C linkage, the real functions
// found with dlsym(RTLD_NEXT)).
//
//   sigaction, signal, bsd_signal, sysv_signal  for S: the program's wish is recorded as its
//       action (our handler stays the kernel disposition; S's instances that are not samples
//       go to that action), and the old action reported is the program's, never ours. glibc's
//       signal() does not go through the exported sigaction, hence its own wrappers.
//   syscall(SYS_rt_sigaction, ...)  (the syscall() wrapper, thread_restrictions.cc) the same
//       work as sigaction's, installing with rt_sigaction as given (ProgramRawSigaction); and
//       syscall() of rt_sigprocmask, rt_sigtimedwait, signalfd, signalfd4 the same work as
//       their wrappers' below (ProgramRawSignalCall).
//   sigset, sigignore, sighold, sigrelse (System V)  for S and C: carried out through the
//       wrappers above (glibc's own versions call its internal sigaction and sigprocmask, which
//       no wrapper sees: `sigset(S, SIG_DFL)` made S's next sample kill the program).
//   sigprocmask, pthread_sigmask  S is removed from the masks given to SIG_BLOCK and
//       SIG_SETMASK; whether the program asked for S to be blocked is remembered per thread
//       (the program's view, platform/sampling/held_sampling_signals.h), so the old mask it
//       reads back is the one it set. A new thread made by our pthread_create starts with its
//       creator's view (preload.cc). An unblock of S in that view delivers the foreign
//       instances of S held meanwhile, before the call returns, as the kernel would.
//   sigwait, sigwaitinfo, sigtimedwait  for a set naming S, the kernel is given S too, with S
//       blocked for real on the thread for the length of the call: a foreign S (kill,
//       sigqueue, tgkill: not a sample) sent or handed to the waiting thread is read with its
//       siginfo, after the held ones; Strata's own samples the wait dequeues are never
//       returned (queued back to the thread, taken by the handler as samples of the wait) and
//       the wait goes on for what is left of its timeout.
//   sigpending  reports S while a foreign instance is held for the thread or the process.
//   signalfd  S is removed from the set: the program never reads a sample there (nor a held
//       foreign S: docs/host-contract.md, "Signals").
// A foreign S taken by the handler on a thread whose program view blocks S is held
// (held_sampling_signals.h): handed to a thread waiting for S, or kept for the next wait,
// sigpending or unblock; never given to the program's action while the program blocks it.
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
// real functions are resolved at load time, PrepareSignalInterposers at session start; what
// they add is atomics and raw system calls: gettid, getpid, rt_sigprocmask, rt_sigtimedwait,
// rt_tgsigqueueinfo, clock_gettime). A wait that is cancelled unwinds through the RAII that
// restores its mask and its waiter slot.
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/internal/process/thread_restrictions.h"
#include "base/internal/signals/control_signal.h"
#include "base/internal/signals/kernel_signal_actions.h"
#include "base/internal/signals/signal_interposers.h"
#include "base/internal/wait/scoped_wait_mark.h"
#include "base/internal/session/core.h"
#include "platform/checked_read.h"
#include "platform/kernel_signal_set.h"
#include "platform/next_definition.h"
#include "platform/raw_syscall.h"
#include "platform/sampling/held_sampling_signals.h"
#include "platform/sampling/libunwind_loader.h"
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
using SigtimedwaitFunction = int (*)(const sigset_t*, siginfo_t*, const struct timespec*);
using SigsetFunction = sighandler_t (*)(int, sighandler_t);
using SigOneFunction = int (*)(int);
using SigpendingFunction = int (*)(sigset_t*);
using SigsuspendFunction = int (*)(const sigset_t*);

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
std::atomic<SignalFunction> g_sysv_signal{nullptr};
std::atomic<MaskFunction> g_sigprocmask{nullptr};
std::atomic<MaskFunction> g_pthread_sigmask{nullptr};
std::atomic<SignalfdFunction> g_signalfd{nullptr};
std::atomic<SigwaitFunction> g_sigwait{nullptr};
std::atomic<SigtimedwaitFunction> g_sigtimedwait{nullptr};
std::atomic<SigsetFunction> g_sigset{nullptr};
std::atomic<SigOneFunction> g_sigignore{nullptr};
std::atomic<SigOneFunction> g_sighold{nullptr};
std::atomic<SigOneFunction> g_sigrelse{nullptr};
std::atomic<SigpendingFunction> g_sigpending{nullptr};
std::atomic<SigsuspendFunction> g_sigsuspend{nullptr};
// sigpause: only the leaf a wait in it shows (it is carried out through sigsuspend below, as
// glibc's own is through its internal one).
std::atomic<void*> g_xpg_sigpause{nullptr};
// sigwaitinfo: only the leaf a wait in it shows (carried out through sigtimedwait).
std::atomic<void*> g_sigwaitinfo_leaf{nullptr};

void ResolveRealFunctions() {
  (void)Real(g_sigaction, "sigaction");
  (void)Real(g_signal, "signal");
  (void)Real(g_sysv_signal, "sysv_signal");
  (void)Real(g_sigprocmask, "sigprocmask");
  (void)Real(g_pthread_sigmask, "pthread_sigmask");
  (void)Real(g_signalfd, "signalfd");
  (void)Real(g_sigwait, "sigwait");
  (void)Real(g_sigtimedwait, "sigtimedwait");
  (void)Real(g_sigset, "sigset");
  (void)Real(g_sigignore, "sigignore");
  (void)Real(g_sighold, "sighold");
  (void)Real(g_sigrelse, "sigrelse");
  (void)Real(g_sigpending, "sigpending");
  (void)Real(g_sigsuspend, "sigsuspend");
  (void)Real(g_xpg_sigpause, "__xpg_sigpause");
  (void)Real(g_sigwaitinfo_leaf, "sigwaitinfo");
}

// Blocks or unblocks one signal through the sigprocmask wrapper (for S: remembered, not
// applied).
int ChangeOneSignalMask(int how, int signal_number) {
  sigset_t one;
  EmptySignalSet(&one);
  AddSignal(&one, signal_number);
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

// The sigaction wrapper's work, installing through libc's sigaction, or through
// KernelSigaction for a raw rt_sigaction (`raw`).
__attribute__((noinline)) int ProgramSigactionThrough(bool raw, int signal_number,
                                                      const struct sigaction* action,
                                                      struct sigaction* old_action) {
  const SigactionFunction real = raw ? &KernelSigaction : Real(g_sigaction, "sigaction");
  if (InOwnSigactionCall()) {  // Strata's own (ThreadSanitizer builds: OwnSigaction).
    return real(signal_number, action, old_action);
  }
  if (!IsInSamplingHandler() && RecordProgramAction(signal_number, action, old_action)) return 0;
  int result = 0;
  if (HandleProgramControlSignalAction(signal_number, action, old_action, &result)) return result;
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  if (signal_number <= 0 || signal_number > 64) return real(signal_number, action, old_action);
  // A program handler on an alternate stack runs with S blocked: S's instances meanwhile
  // stay pending until it returns (docs/host-contract.md, "Stack").
  const int sampling = InstalledSamplingSignal();
  struct sigaction adjusted;
  const bool mask_now =
      action != nullptr && MasksSamplingSignalIn(signal_number, *action, sampling);
  if (mask_now) {
    adjusted = *action;
    AddSignal(&adjusted.sa_mask, sampling);
    action = &adjusted;
  }
  KernelAction recorded{};
  const int masked_before = MaskedActionOf(signal_number, &recorded);
  const int rc = real(signal_number, action, old_action);
  if (rc != 0) return rc;
  // The old action is the program's own mask unless it is still the one Strata masked.
  if (old_action != nullptr && masked_before != 0 &&
      SameAction(KernelFormOf(*old_action), recorded)) {
    RemoveSignal(&old_action->sa_mask, masked_before);
  }
  if (action != nullptr) {
    // What the kernel holds now (libc adds its restorer), when it is still the action given.
    KernelAction installed;
#if STRATA_TSAN_BUILD
    // Under TSan the kernel holds TSan's own handler: the action as installed is the one
    // TSan keeps for the program, read back through TSan's sigaction (without this the
    // program read its SA_ONSTACK handler's mask back with S in it: signals_stack_test).
    struct sigaction kept;
    const bool read_back = real(signal_number, nullptr, &kept) == 0;
    if (read_back) installed = KernelFormOf(kept);
#else
    const bool read_back = ReadKernelAction(signal_number, &installed);
#endif
    if (mask_now && read_back &&
        installed.handler == reinterpret_cast<uintptr_t>(action->sa_handler) &&
        (installed.mask & SignalBit(sampling)) != 0) {
      RecordMaskedAction(signal_number, installed, sampling);
    } else {
      ForgetMaskedAction(signal_number);
    }
  }
  return rc;
}

int ProgramSigaction(int signal_number, const struct sigaction* action,
                     struct sigaction* old_action) {
  return ProgramSigactionThrough(false, signal_number, action, old_action);
}

// libunwind's code, [begin, end): its callers are trusted (see the file comment).
std::atomic<uintptr_t> g_libunwind_begin{0};
std::atomic<uintptr_t> g_libunwind_end{0};

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
  // The program's view of S on this thread (held_sampling_signals.h).
  const bool program_blocked = ProgramBlocksSamplingSignal();
  sigset_t filtered;
  const sigset_t* effective = set;
  if (set != nullptr) {
    const bool named = HasSignal(*set, signal_number);
    if (how == SIG_BLOCK || how == SIG_SETMASK) {
      filtered = *set;
      RemoveSignal(&filtered, signal_number);
      effective = &filtered;
    }
    int result = real(how, effective, old);
    if (result == 0) {
      bool blocked = program_blocked;
      if (how == SIG_SETMASK) blocked = named;
      if (how == SIG_BLOCK && named) blocked = true;
      if (how == SIG_UNBLOCK && named) blocked = false;
      SetProgramBlocksSamplingSignal(blocked);
      if (old != nullptr && program_blocked) AddSignal(old, signal_number);
      // Unblocked: the foreign instances held meanwhile are delivered now, before the call
      // returns, as the kernel delivers pending signals at an unblock.
      if (program_blocked && !blocked) DeliverHeldSamplingSignals(signal_number);
    }
    return result;
  }
  const int result = real(how, nullptr, old);
  if (result == 0 && old != nullptr && program_blocked) AddSignal(old, signal_number);
  return result;
}

// The calling thread waits for S: registered as a waiter (the handler may hand it a
// process-directed S), and S blocked for real on it meanwhile, so that an S handed to it
// before it is inside the kernel's wait stays pending for that wait instead of reaching the
// handler here (which would hold it, unseen by this wait). Undone however the wait ends (a
// cancellation unwinds through it): an S that arrives after the wait returned is then taken
// by the handler and held for the next wait. Raw system calls: not the interposed masks.
class WaiterRegistration {
 public:
  explicit WaiterRegistration(int signal_number) {
    sigset_t one;
    EmptySignalSet(&one);
    AddSignal(&one, signal_number);
    RawSyscall(SYS_rt_sigprocmask, SIG_BLOCK, reinterpret_cast<long>(&one),
               reinterpret_cast<long>(&previous_), _NSIG / 8);
    slot_ = RegisterSamplingSignalWaiter();
  }
  ~WaiterRegistration() {
    UnregisterSamplingSignalWaiter(slot_);
    RawSyscall(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&previous_), 0,
               _NSIG / 8);
  }
  WaiterRegistration(const WaiterRegistration&) = delete;
  WaiterRegistration& operator=(const WaiterRegistration&) = delete;

 private:
  sigset_t previous_;
  int slot_ = -1;
};

int64_t MonotonicNs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec * int64_t{1000000000} + now.tv_nsec;
}

// sigtimedwait (timeout null: sigwaitinfo) for the program's `set`. When the set names S, the
// kernel is given S too, so that a foreign S sent to this thread, or handed to it by the
// handler while it waits, is read with its siginfo as plain; Strata's own samples the wait
// dequeues are given back to the thread (GiveSampleBack) and the wait goes on for what is
// left of the timeout. The
// instances held before the wait (held_sampling_signals.h) are read first, after any other
// signal of the set already pending (the kernel gives the lowest number first, and S is the
// highest the program can be waiting for in practice). Returns as sigtimedwait; `real`
// (glibc's, or the kernel's for a raw call) waits. errno is the program's on success.
int WaitForSignal(const sigset_t* set, siginfo_t* info, const struct timespec* timeout,
                  int signal_number, SigtimedwaitFunction real) {
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  const int saved_errno = errno;
  if (signal_number == 0 || set == nullptr || !HasSignal(*set, signal_number) ||
      (timeout != nullptr &&
       (timeout->tv_sec < 0 || timeout->tv_nsec < 0 || timeout->tv_nsec >= 1000000000))) {
    return real(set, info, timeout);  // The kernel's own answer (EINVAL for a bad timeout).
  }
  siginfo_t local;
  siginfo_t* const out = info != nullptr ? info : &local;
  const int64_t deadline_ns =
      timeout != nullptr
          ? MonotonicNs() + timeout->tv_sec * int64_t{1000000000} + timeout->tv_nsec
          : 0;
  for (;;) {
    WaiterRegistration waiter(signal_number);  // Before the held ones are looked at.
    if (HasHeldSamplingSignal()) {
      sigset_t others = *set;
      RemoveSignal(&others, signal_number);
      const struct timespec zero {};
      const int other = real(&others, out, &zero);
      errno = saved_errno;  // EAGAIN from the look, not the program's.
      if (other > 0) return other;
      // The kernel would answer EFAULT for an `info` it cannot write (a query that writes 8
      // bytes there, before the held instance is taken).
      if (info != nullptr &&
          RawSyscall(SYS_rt_sigpending, reinterpret_cast<long>(info), sizeof(uint64_t)) != 0) {
        errno = EFAULT;
        return -1;
      }
      if (TakeHeldSamplingSignal(out)) return signal_number;
    }
    struct timespec left {};
    if (timeout != nullptr) {
      const int64_t left_ns = std::max<int64_t>(0, deadline_ns - MonotonicNs());
      left.tv_sec = static_cast<time_t>(left_ns / 1000000000);
      left.tv_nsec = static_cast<long>(left_ns % 1000000000);
    }
    const int result = real(set, out, timeout != nullptr ? &left : nullptr);
    if (result != signal_number || !IsStrataSamplingSignal(*out)) return result;
    // One of Strata's, not the program's to read: given back to this thread, it reaches the
    // handler when this turn ends and S is unblocked again (a sample of this wait).
    GiveSampleBack(signal_number, *out);
    if (timeout != nullptr && MonotonicNs() >= deadline_ns) {
      errno = EAGAIN;
      return -1;
    }
  }
}

// Whether `set` (which may be null, whatever the prototype it came through says) names the
// signal.
bool Names(const sigset_t* set, int signal_number) {
  return set != nullptr && signal_number != 0 && HasSignal(*set, signal_number);
}

// `set` without the sampling signal, in `storage`.
const sigset_t* WithoutSignal(const sigset_t* set, int signal_number, sigset_t* storage) {
  if (set == nullptr || signal_number == 0 || !HasSignal(*set, signal_number)) return set;
  *storage = *set;
  RemoveSignal(storage, signal_number);
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
  EmptySignalSet(&action.sa_mask);
  if (mask_itself) AddSignal(&action.sa_mask, signal_number);
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

// How often the sampler looks at every disposition for a program handler on an alternate
// stack that no wrapper saw (MaskAlternateStackHandlersIfDue), besides when the entry found
// a sample there.
constexpr int64_t kAlternateStackRescanNs = 100 * 1000 * 1000;


// sigsuspend's body, for it and the sigpause family: `leaf` the function the program called,
// `wrapper_frame` and `return_address` those of the exported wrapper.
int SuspendWithMask(const sigset_t* mask, const void* leaf, const void* wrapper_frame,
                    const void* return_address) {
  const SigsuspendFunction real = Real(g_sigsuspend, "sigsuspend");
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  ScopedWait wait(leaf, wrapper_frame);
  const TemporarySamplingSignalMask temporary(FilteredSignal(return_address), mask);
  return real(mask);
}
// glibc's X/Open sigpause: the calling thread's mask without `signal_number`, then
// sigsuspend. The mask is read through the sigprocmask wrapper: the program's view, as plain.
int Sigpause(int signal_number, const void* leaf, const void* wrapper_frame,
             const void* return_address) {
  sigset_t mask;
  // As glibc's sigdelset refuses it: out of range, or one of its internal signals (SIGCANCEL,
  // SIGSETXID: 32 and 33).
  if (signal_number <= 0 || signal_number >= NSIG || signal_number == 32 || signal_number == 33) {
    errno = EINVAL;
    return -1;
  }
  if (sigprocmask(SIG_BLOCK, nullptr, &mask) != 0) return -1;
  RemoveSignal(&mask, signal_number);  // Not libc's sigdelset: nothing the program can interpose.
  return SuspendWithMask(&mask, leaf, wrapper_frame, return_address);
}
}  // namespace

int SamplingSignalOfProgramCall() {
  return IsInSamplingHandler() ? 0 : InstalledSamplingSignal();
}

long ProgramRawSigaction(long signal_number, long action_address, long old_address,
                         long set_size) {
  if (set_size != static_cast<long>(sizeof(uint64_t)) || SamplingSignalOfProgramCall() == 0 ||
      CurrentThreadMustNotCallStrata()) {  // In seccomp: only the call itself.
    return 1;
  }
  struct sigaction action, old;
  if (action_address != 0) {
    KernelAction kernel;
    // Unreadable: the kernel's own answer (EFAULT), nothing changed.
    if (!CheckedRead(reinterpret_cast<const void*>(action_address), &kernel, sizeof(kernel))) {
      return 1;
    }
    SigactionOf(kernel, &action);
  }
  if (ProgramSigactionThrough(true, static_cast<int>(signal_number),
                              action_address != 0 ? &action : nullptr,
                              old_address != 0 ? &old : nullptr) != 0) {
    return -1;
  }
  if (old_address == 0) return 0;
  // The kernel checks the old action's address, as its own copy-out would, after the change
  // (a query that writes the kernel's action there), then it gets the program's.
  const long rc = RawSyscall(SYS_rt_sigaction, signal_number, 0, old_address, sizeof(uint64_t));
  if (rc != 0) {
    errno = static_cast<int>(-rc);
    return -1;
  }
  *reinterpret_cast<KernelAction*>(old_address) = KernelFormOf(old);
  return 0;
}

namespace {
// rt_sigprocmask as the kernel takes it (an 8-byte set), for ChangeMask: -1 and errno on error.
int KernelMaskCall(int how, const sigset_t* set, sigset_t* old) {
  const long rc = RawSyscall(SYS_rt_sigprocmask, how, reinterpret_cast<long>(set),
                             reinterpret_cast<long>(old), sizeof(uint64_t));
  if (rc == 0) return 0;
  errno = static_cast<int>(-rc);
  return -1;
}

// rt_sigtimedwait as the kernel takes it, for WaitForSignal on a raw call: glibc's
// sigtimedwait would add a cancellation point and report SI_TKILL as SI_USER.
int KernelTimedWait(const sigset_t* set, siginfo_t* info, const struct timespec* timeout) {
  const long rc = RawSyscall(SYS_rt_sigtimedwait, reinterpret_cast<long>(set),
                             reinterpret_cast<long>(info), reinterpret_cast<long>(timeout),
                             sizeof(uint64_t));
  if (rc >= 0) return static_cast<int>(rc);
  errno = static_cast<int>(-rc);
  return -1;
}

// The kernel's 8-byte set at `address` as a sigset_t (the rest empty); false when unreadable
// (then the kernel's own answer, EFAULT, is the program's).
bool ReadKernelSet(long address, sigset_t* set) {
  EmptySignalSet(set);
  return CheckedRead(reinterpret_cast<const void*>(address), set, sizeof(uint64_t));
}

long ResultOf(long rc) {
  if (rc >= 0) return rc;
  errno = static_cast<int>(-rc);
  return -1;
}
}  // namespace

bool ProgramRawSignalCall(long number, const long* a, const void* return_address,
                          long* result) {
  if (number == SYS_rt_sigaction) {
    *result = ProgramRawSigaction(a[0], a[1], a[2], a[3]);
    return *result <= 0;
  }
  if (number == SYS_rt_sigpending) {  // set, size
    const int sampling = FilteredSignal(return_address);
    if (sampling == 0 || CurrentThreadMustNotCallStrata() ||
        a[1] != static_cast<long>(sizeof(uint64_t)) || !ProgramBlocksSamplingSignal()) {
      return false;
    }
    *result = ResultOf(RawSyscall(SYS_rt_sigpending, a[0], a[1]));
    if (*result != 0) return true;
    PullPendingSamplingSignals(sampling);  // Sent, and not yet taken by any thread.
    if (HasHeldSamplingSignal()) {
      uint64_t pending;
      std::memcpy(&pending, reinterpret_cast<const void*>(a[0]), sizeof(pending));
      pending |= uint64_t{1} << (sampling - 1);
      std::memcpy(reinterpret_cast<void*>(a[0]), &pending, sizeof(pending));
    }
    return true;
  }
  const bool mask = number == SYS_rt_sigprocmask;  // how, set, old, size
  const bool wait = number == SYS_rt_sigtimedwait;  // set, info, timeout, size
  // Or signalfd (fd, set, size) and signalfd4 (fd, set, size, flags).
  if (!mask && !wait && number != SYS_signalfd && number != SYS_signalfd4) return false;
  const int sampling = FilteredSignal(return_address);
  const long set_address = wait ? a[0] : a[1];
  sigset_t set;
  if (sampling == 0 || CurrentThreadMustNotCallStrata() ||
      a[mask || wait ? 3 : 2] != static_cast<long>(sizeof(uint64_t)) ||
      (set_address != 0 && !ReadKernelSet(set_address, &set))) {
    return false;
  }
  if (mask) {
    sigset_t old;
    *result = ChangeMask(&KernelMaskCall, static_cast<int>(a[0]),
                         set_address != 0 ? &set : nullptr, &old, sampling);
    if (*result != 0 || a[2] == 0) return true;
    // The kernel checks the old set's address after the change, as its own copy-out (a
    // query writing there: EFAULT for a bad one), then it gets the program's view.
    *result = ResultOf(RawSyscall(SYS_rt_sigprocmask, SIG_BLOCK, 0, a[2], sizeof(uint64_t)));
    if (*result == 0) std::memcpy(reinterpret_cast<void*>(a[2]), &old, sizeof(uint64_t));
    return true;
  }
  // A wait or signalfd whose set does not name S: the kernel's own.
  if (set_address == 0 || !HasSignal(set, sampling)) return false;
  if (wait) {
    struct timespec timeout;
    if (a[2] != 0 &&
        !CheckedRead(reinterpret_cast<const void*>(a[2]), &timeout, sizeof(timeout))) {
      return false;
    }
    *result = WaitForSignal(&set, reinterpret_cast<siginfo_t*>(a[1]),
                            a[2] != 0 ? &timeout : nullptr, sampling, &KernelTimedWait);
    return true;
  }
  RemoveSignal(&set, sampling);
  *result = ResultOf(RawSyscall(number, a[0], reinterpret_cast<long>(&set), a[2], a[3]));
  if (*result >= 0) NoteSignalfdNamingSignal();
  return true;
}

int RawCallTemporaryMask(long number, const long* a, const void* return_address,
                         sigset_t* mask) {
  const int sampling = FilteredSignal(return_address);
  if (sampling == 0 || CurrentThreadMustNotCallStrata()) return 0;
  long set_address = 0, set_size = 0;
  switch (number) {
    case SYS_rt_sigsuspend:  // mask, size
      set_address = a[0];
      set_size = a[1];
      break;
    case SYS_ppoll:  // fds, count, timeout, mask, size
      set_address = a[3];
      set_size = a[4];
      break;
    case SYS_epoll_pwait:  // epoll, events, capacity, timeout, mask, size
#ifdef SYS_epoll_pwait2
    case SYS_epoll_pwait2:
#endif
      set_address = a[4];
      set_size = a[5];
      break;
    case SYS_pselect6: {  // count, readable, writable, exceptional, timeout, {mask, size}*
      long pair[2] = {0, 0};
      if (a[5] == 0 || !CheckedRead(reinterpret_cast<const void*>(a[5]), pair, sizeof(pair))) {
        return 0;
      }
      set_address = pair[0];
      set_size = pair[1];
      break;
    }
    default:
      return 0;
  }
  if (set_address == 0 || set_size != static_cast<long>(sizeof(uint64_t)) ||
      !ReadKernelSet(set_address, mask)) {
    return 0;
  }
  return sampling;
}

void MaskAlternateStackHandlersIfDue() {
  // The sampler thread's alone (one at a time): no lock.
  static uint64_t seen_on_alternate_stack = 0;
  static int64_t last_scan_ns = 0;
  const int sampling = InstalledSamplingSignal();
  if (sampling == 0) return;
  const uint64_t seen = SamplingSignalsOnAlternateStack();
  const int64_t now_ns = MonotonicNs();
  if (seen == seen_on_alternate_stack && now_ns - last_scan_ns < kAlternateStackRescanNs) return;
  seen_on_alternate_stack = seen;
  last_scan_ns = now_ns;
  MaskSamplingSignalInAlternateStackHandlers(sampling);
}

void PrepareSignalInterposers() {
  ResolveRealFunctions();
  // The session's starting thread takes a process-directed S unless it blocks it in the
  // program's view (held_sampling_signals.h) -- or is one of Strata's threads, which block
  // every signal for real (a session started by the control signal).
  uint64_t real_mask = 0;
  RawSyscall(SYS_rt_sigprocmask, SIG_BLOCK, 0, reinterpret_cast<long>(&real_mask),
             static_cast<long>(sizeof(real_mask)));
  constexpr uint64_t kStandardSignals = (uint64_t{1} << 31) - 1;  // Signals 1..31.
  constexpr uint64_t kUnblockable = (uint64_t{1} << (SIGKILL - 1)) | (uint64_t{1} << (SIGSTOP - 1));
  if ((real_mask | kUnblockable) != ((real_mask | kUnblockable) | kStandardSignals)) {
    SetProgramBlocksSamplingSignal(ProgramBlocksSamplingSignal());
  }
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

// glibc's bsd_signal is its signal (one function, two names): so is this wrapper.
sighandler_t bsd_signal(int signal_number, sighandler_t handler) __attribute__((alias("signal")));

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
  const int filtered = FilteredSignal(__builtin_return_address(0));
  const int result = real(fd, WithoutSignal(mask, filtered, &storage), flags);
  if (result >= 0 && Names(mask, filtered)) NoteSignalfdNamingSignal();  // Said if made.
  return result;
}

// The waits below are marked for wait stacks (scoped_wait.h), the libc function the program
// called as their leaf.
int sigwait(const sigset_t* set, int* signal_number) {
  const int filtered = FilteredSignal(__builtin_return_address(0));
  const SigwaitFunction real = Real(g_sigwait, "sigwait");
  ScopedWait wait(reinterpret_cast<const void*>(real), STRATA_WRAPPER_FRAME());
  if (filtered == 0) return real != nullptr ? real(set, signal_number) : ENOSYS;
  // glibc's sigwait: sigtimedwait without a timeout, again after a handler interrupted it.
  int result;
  do {
    result = WaitForSignal(set, nullptr, nullptr, filtered, Real(g_sigtimedwait, "sigtimedwait"));
  } while (result < 0 && errno == EINTR);
  if (result < 0) return errno;
  *signal_number = result;
  return 0;
}

// glibc's sigwaitinfo is its sigtimedwait without a timeout; so is this wrapper's (also when
// nothing is filtered: one real function fewer in the size-budgeted library).
int sigwaitinfo(const sigset_t* set, siginfo_t* info) {
  ScopedWait wait(Real(g_sigwaitinfo_leaf, "sigwaitinfo"), STRATA_WRAPPER_FRAME());
  return WaitForSignal(set, info, nullptr, FilteredSignal(__builtin_return_address(0)),
                       Real(g_sigtimedwait, "sigtimedwait"));
}

int sigtimedwait(const sigset_t* set, siginfo_t* info, const struct timespec* timeout) {
  ScopedWait wait(reinterpret_cast<const void*>(Real(g_sigtimedwait, "sigtimedwait")),
                  STRATA_WRAPPER_FRAME());
  return WaitForSignal(set, info, timeout, FilteredSignal(__builtin_return_address(0)),
                       Real(g_sigtimedwait, "sigtimedwait"));
}

// The temporary mask is the program's view during the call (held_sampling_signals.h,
// TemporarySamplingSignalMask): a foreign S it unblocks is delivered inside the call, which
// returns EINTR, as plain; the held ones first.

int sigsuspend(const sigset_t* mask) {
  return SuspendWithMask(mask, reinterpret_cast<const void*>(Real(g_sigsuspend, "sigsuspend")),
                         STRATA_WRAPPER_FRAME(), __builtin_return_address(0));
}
// <signal.h> names the X/Open form `sigpause` for GNU compilers (its symbol is
// __xpg_sigpause). glibc's `sigpause` symbol (the BSD form, taking a mask word) and
// `__sigpause` are not wrapped: no current header makes a program call them.
int sigpause(int signal_number) {
  return Sigpause(signal_number, Real(g_xpg_sigpause, "__xpg_sigpause"), STRATA_WRAPPER_FRAME(),
                  __builtin_return_address(0));
}

// The held instances of S (held_sampling_signals.h) are pending in the program's view.
int sigpending(sigset_t* set) {
  const SigpendingFunction real = Real(g_sigpending, "sigpending");
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  const int result = real(set);
  const int filtered = FilteredSignal(__builtin_return_address(0));
  if (result != 0 || filtered == 0 || !ProgramBlocksSamplingSignal()) return result;
  PullPendingSamplingSignals(filtered);  // Sent, and not yet taken by any thread.
  if (HasHeldSamplingSignal()) AddSignal(set, filtered);
  return result;
}

// System V signal functions (glibc implements them with its internal sigaction and
// sigprocmask): for S and C, the same operations through the wrappers above.
sighandler_t sigset(int signal_number, sighandler_t disposition) {
  if (!IsStrataSignal(signal_number)) {
    const SigsetFunction real = Real(g_sigset, "sigset");
    return real != nullptr ? real(signal_number, disposition) : SIG_ERR;
  }
  sigset_t one, old_mask;
  EmptySignalSet(&one);
  AddSignal(&one, signal_number);
  struct sigaction previous;
  if (disposition == SIG_HOLD) {
    if (sigaction(signal_number, nullptr, &previous) != 0 ||
        sigprocmask(SIG_BLOCK, &one, &old_mask) != 0) {
      return SIG_ERR;
    }
    return HasSignal(old_mask, signal_number) ? SIG_HOLD : HandlerOf(previous);
  }
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = disposition;
  EmptySignalSet(&action.sa_mask);
  if (sigaction(signal_number, &action, &previous) != 0 ||
      sigprocmask(SIG_UNBLOCK, &one, &old_mask) != 0) {
    return SIG_ERR;
  }
  return HasSignal(old_mask, signal_number) ? SIG_HOLD : HandlerOf(previous);
}

int sigignore(int signal_number) {
  sighandler_t old;  // SIG_IGN, no flags, nothing blocked: as glibc's sigignore sets it.
  if (IsStrataSignal(signal_number) && RecordSignalCall(signal_number, SIG_IGN, 0, false, &old)) {
    return old == SIG_ERR ? -1 : 0;
  }
  return CallRealOneSignal(g_sigignore, "sigignore", signal_number);
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
