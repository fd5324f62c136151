// The prctl() and syscall() wrappers of libstrata_base.so; see thread_restrictions.h.
#include "base/internal/process/thread_restrictions.h"

#include <dlfcn.h>
#include <errno.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>

#include "base/internal/settings/log.h"
#include "base/internal/signals/signal_interposers.h"
#include "base/internal/wait/scoped_wait.h"
#include "base/internal/wait/wait_wrappers.h"
#include "base/markers.h"
#include "base/profiler.h"
#include "platform/next_definition.h"
#include "platform/process_thread_ids.h"
#include "platform/sampling/held_sampling_signals.h"
#include "platform/time_stamp.h"

namespace strata {
namespace base_internal {
namespace {

// Set by a thread just before it enters seccomp (cleared again if the call fails).
__thread bool t_entered_seccomp __attribute__((tls_model("initial-exec"))) = false;
// Set once a thread is about to put every thread under a filter (SECCOMP_FILTER_FLAG_TSYNC).
std::atomic<bool> g_all_threads_in_seccomp{false};

using PrctlFunction = int (*)(int, ...);
using SyscallFunction = long (*)(long, ...);

// The real functions, resolved by the library's constructor (so that no wrapper call, from
// a signal handler say, has to run dlsym), or at first use before it ran.
std::atomic<PrctlFunction> g_real_prctl{nullptr};
std::atomic<SyscallFunction> g_real_syscall{nullptr};

PrctlFunction RealPrctl() {
  PrctlFunction real = g_real_prctl.load(std::memory_order_acquire);
  if (!real) {
    real = reinterpret_cast<PrctlFunction>(NextDefinition("prctl"));
    g_real_prctl.store(real, std::memory_order_release);
  }
  return real;
}

SyscallFunction RealSyscall() {
  SyscallFunction real = g_real_syscall.load(std::memory_order_acquire);
  if (!real) {
    real = reinterpret_cast<SyscallFunction>(NextDefinition("syscall"));
    g_real_syscall.store(real, std::memory_order_release);
  }
  return real;
}

__attribute__((constructor)) void ResolveRealFunctions() {
  (void)RealPrctl();
  (void)RealSyscall();
}

// Before prctl(PR_SET_TSC, mode). Returns the thread's previous mark, for UndoTscMark.
bool BeforeSetTsc(unsigned long mode) {
  const bool previous = strata_t_tsc_forbidden;
  if (mode == PR_TSC_SIGSEGV && !previous) {
    // Before the call: from here on this thread's handler and clocks make system calls.
    strata_t_tsc_forbidden = true;
    LogInfo("thread %d forbids rdtsc (PR_SET_TSC): its time stamps come from the "
            "clock_gettime system call from now on", CurrentThreadId().ToNumber());
  }
  return previous;
}

void AfterSetTsc(unsigned long mode, bool previous, bool succeeded) {
  if (!succeeded) {
    strata_t_tsc_forbidden = previous;
  } else if (mode == PR_TSC_ENABLE) {
    strata_t_tsc_forbidden = false;
  }
}

// Before the calling thread enters seccomp, while it may still make any system call.
// `all_threads`: SECCOMP_FILTER_FLAG_TSYNC.
void BeforeSeccomp(bool strict, bool all_threads) {
  const int saved_errno = errno;
  const char* const why = strict ? "the thread entered seccomp strict mode"
                                 : all_threads ? "the process entered a seccomp filter"
                                               : "the thread entered a seccomp filter";
  if (strict) strata_t_tsc_forbidden = true;  // Strict mode also disables rdtsc (measured).
  if (ProfilerIsThreadRegistered() && ProfilerIsActive()) {
    AddTextMarker(ProfilerString::Literal("Sampling stopped"), Category::kProfiler,
                  MarkerOptions(), why);
  }
  if (all_threads) {
    // Every thread, the sampler included, will be under the filter: save now, and stop.
    if (!g_all_threads_in_seccomp.exchange(true)) {
      LogInfo("%s (SECCOMP_FILTER_FLAG_TSYNC): saving the profile and stopping sampling", why);
      ProfilerShutdown();
    }
  } else if (ProfilerIsThreadRegistered()) {
    // Deletes the thread's timer (no signal after that) and keeps its samples and markers.
    ProfilerUnregisterThread();
    LogInfo("thread %d: sampling stopped: %s", CurrentThreadId().ToNumber(), why);
  }
  t_entered_seccomp = true;
  errno = saved_errno;
}

void AfterSeccomp(bool all_threads, bool succeeded) {
  if (succeeded) return;
  // Nothing was restricted: Strata may make system calls here again (the thread stays
  // unregistered, and a stopped session stays stopped).
  t_entered_seccomp = false;
  if (all_threads) g_all_threads_in_seccomp.store(false);
}

// A prctl call, through the wrapper of prctl() or of syscall(SYS_prctl, ...): `forward`
// makes the real call.
template <typename Forward>
long InterceptPrctl(long option, unsigned long mode, Forward forward) {
  if (option == PR_SET_TSC) {
    const bool previous = BeforeSetTsc(mode);
    const long rc = forward();
    AfterSetTsc(mode, previous, rc == 0);
    return rc;
  }
  if (option == PR_SET_SECCOMP && (mode == SECCOMP_MODE_STRICT || mode == SECCOMP_MODE_FILTER)) {
    BeforeSeccomp(mode == SECCOMP_MODE_STRICT, false);
    const long rc = forward();
    AfterSeccomp(false, rc == 0);
    return rc;
  }
  return forward();
}

}  // namespace

bool CurrentThreadMustNotCallStrata() {
  return t_entered_seccomp || g_all_threads_in_seccomp.load(std::memory_order_relaxed);
}

InheritedRestrictions CurrentThreadRestrictions() {
  InheritedRestrictions restrictions;
  restrictions.tsc_forbidden = strata_t_tsc_forbidden;
  return restrictions;
}

void ApplyInheritedRestrictions(const InheritedRestrictions& restrictions) {
  strata_t_tsc_forbidden = restrictions.tsc_forbidden;
}

}  // namespace base_internal
}  // namespace strata

// The wrappers: C linkage and default visibility, so that they interpose on libc's
// (libstrata_base.lds exports them).
//
// Contract. Every call that is not PR_SET_TSC, PR_SET_SECCOMP or SYS_seccomp (which is every
// call Strata makes itself, from its signal handler included: the raw rt_sigprocmask, futex)
// reads its arguments, loads the real function (resolved by the constructor: no dlsym here)
// and calls it: no lock, no allocation, no fault, and no cancellation point but the forwarded
// call's own, so it is as async-signal-safe as the real function. A call that may block
// (IsBlockingSystemCall) is also marked as a wait around it, as the wait wrappers mark theirs
// (scoped_wait.h: stores, atomics, the vDSO clock; rarely a raw futex wait). rt_sigaction,
// rt_sigprocmask, rt_sigtimedwait, rt_sigpending, signalfd and signalfd4, while a session
// samples, go to ProgramRawSignalCall (signal_interposers.h), and rt_sigsuspend, ppoll,
// pselect6 and epoll_pwait get their mask's TemporarySamplingSignalMask (RawCallTemporaryMask,
// held_sampling_signals.h): atomics and raw system calls only, as
// async-signal-safe as the call itself, and no cancellation point the call has not. The three intercepted calls
// record a marker and unregister the thread (allocation, locks): they are made by the
// program's own code, never from Strata's handler, and prctl/seccomp are not async-signal-safe
// calls a handler would make.
extern "C" {

int prctl(int option, ...) noexcept {
  using namespace strata::base_internal;
  va_list list;
  va_start(list, option);
  const unsigned long arg2 = va_arg(list, unsigned long);
  const unsigned long arg3 = va_arg(list, unsigned long);
  const unsigned long arg4 = va_arg(list, unsigned long);
  const unsigned long arg5 = va_arg(list, unsigned long);
  va_end(list);
  const PrctlFunction real = RealPrctl();
  if (!real) {
    errno = ENOSYS;
    return -1;
  }
  return static_cast<int>(InterceptPrctl(option, arg2, [&]() -> long {
    return real(option, arg2, arg3, arg4, arg5);
  }));
}

// Not instrumented by ASan: it reads six variadic arguments whatever the call passed, as
// glibc's own syscall() does (the sixth from the caller's stack), which ASan reports as an
// underflow of the caller's frame.
__attribute__((no_sanitize("address"))) long syscall(long number, ...) noexcept {
  using namespace strata::base_internal;
  va_list list;
  va_start(list, number);
  long a[6];
  for (long& argument : a) argument = va_arg(list, long);
  va_end(list);
  const SyscallFunction real = RealSyscall();
  if (!real) {
    errno = ENOSYS;
    return -1;
  }
  auto forward = [&]() -> long { return real(number, a[0], a[1], a[2], a[3], a[4], a[5]); };
  const void* const caller = __builtin_return_address(0);
  long result;
  if (number == SYS_prctl) {
    return InterceptPrctl(a[0], static_cast<unsigned long>(a[1]), forward);
  }
  if (number == SYS_seccomp &&
      (a[0] == SECCOMP_SET_MODE_STRICT || a[0] == SECCOMP_SET_MODE_FILTER)) {
    const bool all_threads =
        a[0] == SECCOMP_SET_MODE_FILTER && (a[1] & SECCOMP_FILTER_FLAG_TSYNC) != 0;
    BeforeSeccomp(a[0] == SECCOMP_SET_MODE_STRICT, all_threads);
    const long rc = forward();
    AfterSeccomp(all_threads, rc == 0);
    return rc;
  }
  // A blocking call made through syscall() (a raw futex wait, io_uring_enter waiting for
  // completions...) is a wait of its own, its leaf libc's `syscall` (issue 34: never an
  // unknown wait added to another call).
  // A raw signal call through libc's syscall() (language runtimes): rt_sigaction,
  // rt_sigprocmask, rt_sigtimedwait, rt_sigpending, signalfd and the waits that take a mask
  // get their wrappers' work on the sampling
  // signal (signal_interposers.h). Only inline system calls bypass it.
  if (IsBlockingSystemCall(number, a)) {
    ScopedWait wait(reinterpret_cast<const void*>(real), STRATA_WRAPPER_FRAME());
    // rt_sigsuspend, ppoll, pselect6, epoll_pwait: the call's own mask, as their wrappers.
    sigset_t call_mask;
    const int sampling = RawCallTemporaryMask(number, a, caller, &call_mask);
    const strata::TemporarySamplingSignalMask temporary(sampling,
                                                        sampling != 0 ? &call_mask : nullptr);
    return ProgramRawSignalCall(number, a, caller, &result) ? result : forward();
  }
  return ProgramRawSignalCall(number, a, caller, &result) ? result : forward();
}

}  // extern "C"
