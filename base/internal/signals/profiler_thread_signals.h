// Strata's own threads and the program's thread-directed signals (docs/host-contract.md,
// "Signals"; issue 33).
//
// Strata's threads (the sampler, the control thread; CreateProfilerThread) block every
// signal, so that a process-directed signal (kill, a terminal's SIGINT, ITIMER_PROF) always
// goes to one of the program's threads, or stays pending for the program's sigwait, as
// without Strata. But a program may also signal every task in /proc/self/task (tgkill) and
// wait for each to answer from its handler: a signal sent to one of our threads must then be
// taken there, by the program's handler or its default action, as a thread of the program
// would take it. So each of Strata's threads calls AnswerThreadDirectedSignals at every turn
// of its loop (its waits are bounded: the sampler's period, the control thread's 10 ms):
//   - one rt_sigpending system call: the signals pending for this thread or the process that
//     it blocks (nearly always none: the check ends there; ~0.1 us, docs/benchmarks.md);
//   - when some are, and the set differs from the one seen last time (a process-directed
//     signal the program leaves pending stays in it: read once), /proc/thread-self/status
//     tells those pending for this thread alone (SigPnd) from the process's (ShdPnd);
//   - the signals pending for this thread and not for the process are unblocked for the
//     length of one rt_sigprocmask call and blocked again: the kernel delivers them on the
//     way out of that call, to the program's action (its handler runs on our thread, with
//     our thread's stack). A signal pending both for this thread and for the process is left
//     blocked (unblocking it would also deliver the process's instance here, which belongs to
//     the program's threads): such an instance waits until the process's one is taken.
//
// Thread safety: call it only from the thread that owns `state`, a thread of Strata's that
// holds no lock (the program's handler may run inside). Not async-signal-safe.
#ifndef STRATA_BASE_INTERNAL_PROFILER_THREAD_SIGNALS_H_
#define STRATA_BASE_INTERNAL_PROFILER_THREAD_SIGNALS_H_

#include <stdint.h>

namespace strata {
namespace base_internal {

struct ThreadDirectedSignalCheck {
  uint64_t last_pending = 0;  // The blocked pending set last read from /proc (signal n: bit n-1).
};

// Delivers the signals pending for the calling thread alone (see above). Returns how many
// signal numbers it unblocked.
int AnswerThreadDirectedSignals(ThreadDirectedSignalCheck* state);

// Parses the SigPnd and ShdPnd lines of a /proc/<pid>/task/<tid>/status text (hexadecimal
// masks, signal n at bit n-1). False if either is missing. For tests.
bool ParsePendingSignalMasks(const char* status, uint64_t* thread_pending,
                             uint64_t* shared_pending);

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_PROFILER_THREAD_SIGNALS_H_
