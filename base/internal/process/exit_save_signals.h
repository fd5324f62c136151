// Terminating signals during the exit save (issue 33: a fatal SIGTERM during the save lost
// the profile).
//
// The exit save (preload.cc, OnExit) runs after the program's own exit handlers: the
// program's life is over, and without Strata the process would have ended within
// microseconds. A signal sent to it now would, without Strata, have found it gone (or ended
// with the program's own exit status). So while the save runs, every signal whose default
// action ends the process and whose disposition is the default (SIG_DFL in the kernel) is
// caught by a handler of Strata's that only notes it: the save completes, the profile is
// kept, and the process then ends with the status the program gave to exit(), as it would
// have without Strata. Taken over: SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE,
// SIGALRM, SIGTERM, SIGSTKFLT, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGIO, SIGPWR and the
// real-time signals, each only where the kernel's action is SIG_DFL (the program's own
// handlers, SIG_IGN, Strata's sampling and control signals, glibc's internal ones are left
// alone). Never: SIGKILL, SIGSTOP (cannot be), the faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
// SIGTRAP, SIGSYS, SIGABRT: a crash of the save still ends the process), the stop signals.
//
// A stuck save can still be ended: a second such signal that arrives a second or more after
// the first restores the default actions and re-raises itself: the process dies by it at
// once (the profile is lost, as before). A repeat within the second (a terminal's Ctrl-C
// that reaches both a shell pipeline and the program) is the same request.
//
// What differs from plain: a program thread still running during the save (threads run
// until exit_group) that receives the signal runs Strata's handler and goes on; the handler
// has SA_RESTART, but a call the kernel never restarts (nanosleep, poll, epoll_wait, select,
// sigtimedwait...) returns EINTR in it, where without Strata the thread would be gone. A
// program thread that queries the disposition meanwhile (sigaction with a null action) sees
// Strata's handler. Under `strata record`, SIGINT, SIGTERM and SIGHUP have the record hook's
// handler (tools/strata/record_hook.cc), not SIG_DFL, and keep its behaviour. Under
// ThreadSanitizer nothing is taken over (TSan's own signal machinery is in the way).
//
// Thread safety: Defer and Restore are called by the one saving thread (OnExit), in that
// order, once each; the handler is async-signal-safe (atomics and raw system calls).
#ifndef STRATA_BASE_INTERNAL_PROCESS_EXIT_SAVE_SIGNALS_H_
#define STRATA_BASE_INTERNAL_PROCESS_EXIT_SAVE_SIGNALS_H_

namespace strata {
namespace base_internal {

// Takes over the terminating signals that have their default action (above).
void DeferTerminatingSignalsDuringExitSave();

// Puts back every action it took over that is still Strata's (one the program set meanwhile
// stays). The signals noted meanwhile are dropped: the process goes on to end with its own
// exit status.
void RestoreTerminatingSignalsAfterExitSave();

// How many such signals arrived during the save (for tests and the log).
int TerminatingSignalsDeferredDuringExitSave();

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_PROCESS_EXIT_SAVE_SIGNALS_H_
