// The preload tier's wrappers of libc's signal functions (signal_interposers.cc): while a
// session samples with signal S, the program's sigaction/signal calls for S are recorded as
// its action instead of replacing the sampling handler, S is removed from the masks it blocks
// (remembered as the program's view) and from its signalfd sets, and its sigwait-style calls
// and sigpending see the foreign instances of S held while it blocks S, never a sample. See
// docs/sampling.md, "Signal ownership" and "Foreign instances of the sampling signal", and
// docs/host-contract.md, "Signals".
#ifndef STRATA_BASE_INTERNAL_SIGNAL_INTERPOSERS_H_
#define STRATA_BASE_INTERNAL_SIGNAL_INTERPOSERS_H_

#include <signal.h>

namespace strata {
namespace base_internal {

// Resolves the real functions and notes libunwind's code range (its calls are forwarded
// unchanged). Call at session start, after libunwind is loaded, outside signal context.
// Thread-safe; not async-signal-safe.
void PrepareSignalInterposers();

// The sampling signal S when a call of the program's must treat it specially (a session
// samples with S and the caller is not the sampling handler), else 0. Async-signal-safe.
int SamplingSignalOfProgramCall();

// The program's syscall(SYS_rt_sigaction, ...) (the syscall() wrapper, thread_restrictions.cc)
// while a session samples: the sigaction wrapper's work on it, installing with rt_sigaction
// as given (its own sa_restorer kept). For S itself, the action is recorded as the program's
// (the sampling continues; the old action reported is the program's); for an SA_ONSTACK
// handler of another signal whose mask does not name S, S is added to the mask the kernel is
// given and the action recorded as masked: no window in which a sample's kernel frame can
// land on the handler's alternate stack, and the old action read back is the program's own.
// Returns 1 when the call is to be forwarded unchanged (no session, a set size other than
// 8, a thread in seccomp: thread_restrictions.h, an action CheckedRead cannot read: the
// kernel answers EFAULT), else what syscall() returns for it (0, or -1 with errno set). The
// old action's address is checked by the kernel (a query writing there, after the change,
// as the kernel's own copy-out): a bad one gives EFAULT, as plain. Async-signal-safe (raw
// system calls, atomics); the control signal goes through its own handling, as sigaction.
// Hidden: only the library's own syscall() wrapper calls it.
__attribute__((visibility("hidden"))) long ProgramRawSigaction(long signal_number, long action,
                                                             long old_action, long set_size);

// The program's other signal calls through libc's syscall() while a session samples with S,
// given the kernel's 8-byte sets: the same work as their wrappers' -- rt_sigprocmask as
// pthread_sigmask (S kept out of the kernel's mask, the program's view remembered and read
// back), rt_sigtimedwait of a set naming S as sigtimedwait (a foreign S read with its
// siginfo, never a sample), signalfd/signalfd4 as signalfd (S removed from the set, said in
// the profile) -- and rt_sigaction through ProgramRawSigaction. Returns true with `result`
// what syscall() returns (-1 with errno set on error), or false when the call is to be
// forwarded unchanged: no session, the sampling handler or libunwind calling, a thread in
// seccomp, another set size, a set the call does not name S in, or an argument CheckedRead
// cannot read (the kernel answers EFAULT). rt_sigpending as sigpending: S reported while a
// foreign instance is held for the thread or the process and the program's view blocks S.
// Async-signal-safe (atomics, raw system calls only: the wait is the kernel's
// rt_sigtimedwait, no cancellation point and si_code as the kernel gives it). Hidden: only
// the library's syscall() wrapper calls it.
__attribute__((visibility("hidden"))) bool ProgramRawSignalCall(long number, const long* arguments,
                                                               const void* return_address,
                                                               long* result);
// For the same wrapper: the signal mask that a raw rt_sigsuspend, ppoll, pselect6,
// epoll_pwait or epoll_pwait2 puts in place for the call's duration, as their libc wrappers'
// TemporarySamplingSignalMask takes it (held_sampling_signals.h: a held foreign S the mask
// unblocks is delivered inside the call, which returns EINTR, as plain). Copies it to `*mask`
// and returns S when a session samples and the call gives a readable 8-byte set; else 0 (no
// session, Strata calling, a thread in seccomp, no mask, another size, an unreadable address:
// the call is forwarded unchanged and the kernel answers). Async-signal-safe, no system call
// but the checked reads'. Hidden.
__attribute__((visibility("hidden"))) int RawCallTemporaryMask(long number,
                                                              const long* arguments,
                                                              const void* return_address,
                                                              sigset_t* mask);
// Adds the sampling signal S to the kernel mask of every program handler that runs on an
// alternate stack (SA_ONSTACK; not S's, nor the control signal's), as the kernel holds it
// (raw rt_sigaction: a handler installed by a raw system call included, its own sa_restorer
// kept), recording per signal the whole action installed (handler, flags, restorer, mask with
// S): the program's sigaction queries read back its own mask (S hidden) while the kernel's
// action is still exactly that one, and handlers it installs later through sigaction are
// masked by the wrapper (recorded anew). Call right after S is installed.
// UnmaskSamplingSignalInAlternateStackHandlers takes S out again only where the kernel's
// action is still the recorded one: an action the program installed since by a raw
// rt_sigaction keeps its own mask, S in it or not. Call after S is uninstalled. A program's
// sigaction for the same signal on another thread between a scan's read and its write is
// never lost: the write is an exchange, and a displaced action other than the one read is
// put back at once (masked in turn if it needs it), up to 8 rounds (docs/host-contract.md,
// "Stack"). Known gap (docs/host-contract.md, "Known gaps"): until it is put back, for one
// rt_sigaction system call, the older action the scan read is installed: a signal delivered
// then runs the older handler, and a concurrent sigaction(..., &old) on another thread reads
// that older action as its old one. Not concurrent with each other (the session's start and stop, the sampler in
// between); no lock, no allocation, raw system calls only.
void MaskSamplingSignalInAlternateStackHandlers(int sampling_signal);
void UnmaskSamplingSignalInAlternateStackHandlers();

// The sampler loop's look for program handlers on alternate stacks that no wrapper saw (a raw
// rt_sigaction during the session): MaskSamplingSignalInAlternateStackHandlers again when the
// sampling handler's entry found an instance of S on an alternate stack since the last look
// (it blocked S there for the rest of that handler run: SamplingSignalsOnAlternateStack), and
// every 100 ms regardless (62 rt_sigaction reads: 8 us of CPU here, 0.008 % of a CPU).
// Sampler thread only.
void MaskAlternateStackHandlersIfDue();

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_SIGNAL_INTERPOSERS_H_
