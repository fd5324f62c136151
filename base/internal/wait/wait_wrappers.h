// Wait stacks, the thread's side (docs/sampling.md, "Wait stacks"): wait_wrappers.cc wraps
// the common blocking libc functions (the sleep family, poll/select/epoll, blocking I/O,
// condition variables, contended mutexes and rwlocks, pthread_join, semaphores, wait*, fsync,
// flock). On entry a wrapper publishes where the program called it from (WaitState, a few
// stores, no system call), so that the sampler can write exact stacks for the wait without
// sending the thread a signal; a contended pthread_mutex_lock that waits 1 ms or more also
// records an "Awaiting lock" marker.
//
// Thread safety: the wrappers are called by any thread; they touch only the calling thread's
// WaitState. Async-signal safety: a wrapper is as async-signal-safe as the function it wraps
// (plain stores and atomics; TimeStamp::Now()); nested calls (a signal handler's, during a
// wait) are not marked.
#ifndef STRATA_BASE_INTERNAL_WAIT_WRAPPERS_H_
#define STRATA_BASE_INTERNAL_WAIT_WRAPPERS_H_

#include "base/internal/session/session_state.h"

namespace strata {
namespace base_internal {

// Looks up the wrapped functions' real definitions (dlsym RTLD_NEXT) ahead of their first
// call. Called by the library's constructor; the wrappers also look them up lazily.
STRATA_BASE_HIDDEN void ResolveWaitFunctions();
// The same for blocking_io_wrappers.cc's (called by ResolveWaitFunctions).
STRATA_BASE_HIDDEN void ResolveBlockingIoFunctions();
STRATA_BASE_HIDDEN void ResolveFileSyscallFunctions();
STRATA_BASE_HIDDEN void ResolveStdioFunctions();

// Whether `syscall(number, arguments[0..5])` may block (blocking_io_wrappers.cc): a futex
// wait or lock, io_uring_enter waiting for completions, futex_waitv, and the blocking calls
// the libc wrappers cover (sleeps, poll/select/epoll, reads and receives, accept, connect,
// wait4/waitid, fsync...). The `syscall` interposer (thread_restrictions.cc) marks those as
// waits whose leaf is libc's `syscall`. Async-signal-safe: reads its arguments only.
STRATA_BASE_HIDDEN bool IsBlockingSystemCall(long number, const long* arguments);

// The shortest contended pthread_mutex_lock wait recorded as an "Awaiting lock" marker.
inline constexpr int64_t kLockMarkerThresholdNs = 1000000;

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_WAIT_WRAPPERS_H_
