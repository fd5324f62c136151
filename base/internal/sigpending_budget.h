// Strata's share of the user's queued-signal entries (RLIMIT_SIGPENDING).
//
// Every POSIX timer preallocates the queue entry of its signal at timer_create, charged to
// the user's RLIMIT_SIGPENDING count (shared by all the user's processes, shown as "SigQ" in
// /proc/<pid>/status); so do signals queued with sigqueue(). One sampling timer per thread
// would take entries the program counts on: at `ulimit -i 48` its own timer_create and
// sigqueue failed with EAGAIN. So Strata keeps its timers to 1/kSigpendingShareDivisor of
// the soft limit (1 505 timers at this machine's default 96 365; none at 48): a thread
// beyond that is not sampled. The limit is read at each timer creation (the program may
// lower it). The user's other processes are not looked at.
//
// Thread safety: thread-safe. Async-signal safety: no (logs, allocates).
#ifndef STRATA_BASE_INTERNAL_SIGPENDING_BUDGET_H_
#define STRATA_BASE_INTERNAL_SIGPENDING_BUDGET_H_

#include <string>

#include "platform/process_thread_ids.h"

namespace strata {
namespace base_internal {

inline constexpr unsigned kSigpendingShareDivisor = 64;

// Whether Strata may create one more sampling timer (for `thread`, named `thread_name`),
// with `live_timers` already created. When not: says so once in the log (LogError), and puts
// a "Thread not sampled" marker naming the thread and the reason on the main thread's track
// (written straight into the session buffer, so callable with the registry mutex held).
bool SigpendingBudgetAllowsTimerFor(ThreadId thread, const char* thread_name,
                                    int live_timers);

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_SIGPENDING_BUDGET_H_
