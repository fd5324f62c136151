// Threads that restrict themselves: what Strata does before a thread forbids the TSC or
// enters seccomp, so that its sampling never makes it fault or be killed.
//
// libstrata_base.so wraps prctl() and syscall() (thread_restrictions.cc; only PR_SET_TSC,
// PR_SET_SECCOMP, the seccomp and rt_sigaction system calls are looked at, everything else is forwarded
// with all its arguments to the real function, found with dlsym(RTLD_NEXT)):
//   - prctl(PR_SET_TSC, PR_TSC_SIGSEGV): before the call, the thread is marked
//     strata_t_tsc_forbidden (platform/time_stamp.h): its samples' and markers' time stamps
//     and every TimeStamp::Now() on it then come from the clock_gettime system call instead
//     of rdtsc or the vDSO (which executes rdtsc and faults too). PR_TSC_ENABLE clears it.
//     Threads it creates later inherit the mark (the kernel makes them inherit the flag).
//   - seccomp, strict or filter mode (prctl(PR_SET_SECCOMP, ...), syscall(SYS_seccomp, ...),
//     so also libseccomp): before the call, while system calls are still allowed, the
//     thread's sampling stops (its timer is deleted; the thread is unregistered, its samples
//     kept) and its track gets a "Sampling stopped" marker saying why; the thread makes no
//     more Strata system calls: threads it creates later are not registered, and an exit
//     from it does not save the profile (the save's system calls could be killed).
//     SECCOMP_FILTER_FLAG_TSYNC puts every thread of the process under the filter: the
//     session then saves its profile (STRATA_SHUTDOWN, as at exit) and stops first.
//   - syscall(SYS_rt_sigaction, ...) while a session samples (not on a thread in seccomp):
//     handled by ProgramRawSigaction (signals/signal_interposers.h) as the sigaction wrapper
//     handles sigaction: the sampling signal's action recorded as the program's, S added to
//     the mask of an alternate-stack handler at once; async-signal-safe (raw system calls).
//
// Not covered (docs/reliability.md): a program that makes these system calls without libc's
// prctl() or syscall() (inline `syscall` instructions, a static binary, a raw clone), a
// thread registered explicitly (ProfilerRegisterThread) after it forbade the TSC by such a
// raw call, and the full tier's explicit cycle counters (perfmon, script stacks), which
// read the TSC on the calling thread by design.
//
// Thread safety: thread-safe; every function acts on the calling thread or on atomics.
// Async-signal safety: CurrentThreadMustNotCallStrata() and the inherit functions are; the
// wrappers are as safe as the calls they forward, except around PR_SET_SECCOMP/seccomp and
// PR_SET_TSC, which may lock and allocate (nobody calls those from a signal handler).
#ifndef STRATA_BASE_INTERNAL_THREAD_RESTRICTIONS_H_
#define STRATA_BASE_INTERNAL_THREAD_RESTRICTIONS_H_

namespace strata {
namespace base_internal {

// True on a thread that entered seccomp through the wrappers, and on every thread once one
// entered it with SECCOMP_FILTER_FLAG_TSYNC: Strata must make no system call on it (no
// registration of threads it creates, no save at an exit it calls).
bool CurrentThreadMustNotCallStrata();

// What a thread created by the calling thread inherits from it (the kernel copies the TSC
// flag and the seccomp state to a new thread): captured by the creator, applied by the new
// thread first thing.
struct InheritedRestrictions {
  bool tsc_forbidden = false;
};
InheritedRestrictions CurrentThreadRestrictions();
void ApplyInheritedRestrictions(const InheritedRestrictions& restrictions);

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_THREAD_RESTRICTIONS_H_
