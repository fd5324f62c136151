// Whether a system call may be made without being killed by the process's seccomp filter.
//
// A filter inherited from a service manager or sandbox (systemd's SystemCallFilter=,
// minijail, a container runtime) may answer a system call Strata makes for itself
// (perf_event_open) with EPERM, which Strata handles, or by killing the process or trapping
// (SIGSYS), which would end the program because a profiler was loaded. So before its first
// perf_event_open, Strata looks at `Seccomp:` in /proc/self/status; under a filter it makes
// the call once in a throwaway child process (raw clone, no exit signal: the program sees
// no SIGCHLD and its wait(-1) cannot reap it) and uses the call only when the child was not
// killed by it.
//
// Thread safety: thread-safe. Not async-signal-safe (it reads a /proc file); it makes no
// call the program can interpose (raw system calls only) and allocates nothing.
#ifndef STRATA_PLATFORM_SAMPLING_SECCOMP_PROBE_H_
#define STRATA_PLATFORM_SAMPLING_SECCOMP_PROBE_H_

namespace strata {

enum class SeccompMode {
  kNone,     // No seccomp ("Seccomp: 0").
  kStrict,   // SECCOMP_MODE_STRICT: only read, write, exit and sigreturn.
  kFilter,   // One or more BPF filters.
  kUnknown,  // /proc/self/status unreadable or without the field.
};

SeccompMode CurrentSeccompMode();

enum class TrialResult {
  kReturned,  // The call returned (any result, errors included): the filter lets it through.
  kKilled,    // The child was killed by a signal (SIGSYS: killed or trapped by the filter).
  kUnknown,   // The trial could not be made (clone refused, wait failed).
};

// Makes system call `number` with the given arguments in a throwaway child process (the
// child resets SIGSYS to its default first, so that a trap kills it rather than running a
// handler of the program's) and reports what happened to it. Blocks until the child ends.
TrialResult TrySystemCallInChild(long number, long a1, long a2, long a3, long a4, long a5);

}  // namespace strata

#endif  // STRATA_PLATFORM_SAMPLING_SECCOMP_PROBE_H_
