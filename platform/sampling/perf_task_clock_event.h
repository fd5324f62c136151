// A per-thread sampling source at the real rate: a perf software event on one thread's task
// clock (PERF_COUNT_SW_TASK_CLOCK, user mode only), whose overflow every `period` of that
// thread's CPU time sends the sampling signal to exactly that thread (fasync: F_SETSIG,
// F_SETOWN_EX {F_OWNER_TID}).
//
// Why (docs/sampling.md, "Sampling sources"): CPU-clock POSIX timers fire at most once per
// scheduler tick (4 ms at HZ=250), whatever the interval; the task clock's overflow is driven
// by an hrtimer and comes every period of the thread's own CPU time: ~990 signals per
// CPU-second at 1 ms, quiet and at load 12, as root and unprivileged (perf_event_paranoid 2
// needs exclude_kernel). It counts only while the thread runs: no sleep of the program is cut
// short. User mode only, even where kernel mode is allowed: an overflow inside a system call
// would leave the signal pending there, and select, poll, nanosleep... return EINTR whatever
// SA_RESTART says (tests/sleeper_test failed 3 runs in 20 under load that way). An overflow
// that happens while the thread is in the kernel is therefore not signalled (the next
// sample's CPU delta covers that time): 975-993 signals per CPU-second of a busy thread.
//
// Measured on kernel 6.18 (perf_task_clock_event_test): the event signals every overflow with
// si_code POLL_IN without PERF_EVENT_IOC_REFRESH, so the handler makes no system call on the
// descriptor (the program may have closed it and reused its number).
//
// The descriptor (platform/private_fd.h): opened close-on-exec, moved high before fasync is
// registered (the signal's si_fd is the number registered), identity-checked by the
// anonymous inode *and* the kernel's event id (PERF_EVENT_IOC_ID): every perf event, eventfd,
// epoll or timerfd shares one anonymous inode, so device and inode alone do not tell ours
// from the program's. A number that no longer names our event is forgotten, never closed.
// The program closing it (close_range(3, ~0U, 0)) frees the event when the descriptor was its
// last reference: no further signal; the owner notices with IsStillOurs() and opens another.
// Where the owner also mapped the event's first page (kernel CPU charging,
// base/internal/wait/kernel_cpu_charge.h), the mapping holds the event: its signals go on, with
// the old number as si_fd, until the owner retires it (docs/sampling.md, "Kernel CPU").
//
// Fork: every open descriptor is also recorded in a fixed table (kMaxOpenEvents) so that a
// forked child can close its copies without a lock (CloseAllInForkedChild).
//
// Thread safety: PerfTaskClockEvent is thread-compatible (one owner). Any thread may open the
// event of any live thread of the process. IsEventSignal and CloseAllInForkedChild are
// async-signal-safe; the rest makes system calls meant for ordinary context.
#ifndef STRATA_PLATFORM_SAMPLING_PERF_TASK_CLOCK_EVENT_H_
#define STRATA_PLATFORM_SAMPLING_PERF_TASK_CLOCK_EVENT_H_

#include <signal.h>
#include <stdint.h>

#include <atomic>

#include "platform/private_fd.h"
#include "platform/process_thread_ids.h"
#include "platform/time_stamp.h"

namespace strata {

// The event descriptors of one thread, as that thread's signal handler sees them (see
// SetSamplingThreadEventDescriptors in sampling_signal.h). Written by the owner of the event
// (any thread), read by the handler.
struct SamplingEventDescriptors {
  // The thread's open event, or -1.
  std::atomic<int> current{-1};
  // The previous one: signals it queued before it was closed may still be delivered (a
  // preempted thread takes its pending signals when it runs again). -1 when none.
  std::atomic<int> retired{-1};
};

class PerfTaskClockEvent {
 public:
  // Descriptors tracked for a forked child; Open fails with ENOSPC beyond this many.
  static constexpr int kMaxOpenEvents = 1024;

  PerfTaskClockEvent() = default;
  ~PerfTaskClockEvent() { Close(); }
  PerfTaskClockEvent(const PerfTaskClockEvent&) = delete;
  PerfTaskClockEvent& operator=(const PerfTaskClockEvent&) = delete;

  // Opens and enables the event on live thread `thread` of this process: `signal_number` is
  // sent to it after every `period` of its user-mode CPU time. Returns 0 or an errno value:
  // EBUSY if already open, EINVAL for a bad argument, ENOSPC when kMaxOpenEvents are open;
  // perf_event_open's own (EACCES/EPERM: refused by perf_event_paranoid or a security
  // policy; ENOSYS: no such system call or a seccomp filter; ENOENT/EOPNOTSUPP: no software
  // events; EMFILE/ENFILE), or fcntl's; ERANGE when the descriptor cannot be moved above the
  // soft RLIMIT_NOFILE (private_fd.h, MoveDescriptorAboveSoftLimit) and may not stay below.
  // The event's descriptor is numbered at or above the soft limit, outside the program's
  // range, where it can be. Nothing is left open on failure.
  // `below_soft_limit_allowed`: when the descriptor cannot be moved above the soft limit,
  // keep it below (moved high in the program's range, MoveDescriptorHigh) rather than fail
  // with ERANGE; counted in BelowSoftLimitCount() while open.
  // `above_soft_limit_helper_allowed`: false where a seccomp filter is installed (a sandbox's
  // filter may kill the helper's process-making clone): the descriptor is not moved above.
  [[nodiscard]] int Open(ThreadId thread, TimeDuration period, int signal_number,
                         bool below_soft_limit_allowed = false,
                         bool above_soft_limit_helper_allowed = true);

  // True when open and the descriptor still names the event opened (anonymous inode and
  // event id). When the program closed it (or reused the number), forgets it without closing
  // anything and returns false.
  bool IsStillOurs();

  // Disables the event and closes the descriptor if it is still ours; forgets it either way.
  // No overflow happens after it returns (signals already queued may still be delivered).
  // Idempotent.
  void Close();

  bool IsOpen() const { return !descriptor_.empty(); }
  // The number registered for the signal (si_fd), unchecked; -1 when not open.
  int descriptor() const { return descriptor_.UncheckedNumber(); }

  // Whether `info` is an overflow signal of the event whose descriptor is `current` or
  // `retired` (si_code POLL_IN or POLL_HUP and si_fd). Async-signal-safe.
  static bool IsEventSignal(const siginfo_t& info, const SamplingEventDescriptors& descriptors);

  // In a fork()ed child: closes the child's copies of every event descriptor still open in
  // the parent (each checked by identity first) and empties the table. The parent's events
  // are not affected. Async-signal-safe (fstat, ioctl, close); call it from a fork handler.
  static void CloseAllInForkedChild();

  // How many events of this copy of the code are open now. Async-signal-safe.
  static int OpenCount();
  // How many of them have their descriptor below the soft RLIMIT_NOFILE (in the program's
  // range: Open's below_soft_limit_allowed). Async-signal-safe.
  static int BelowSoftLimitCount();

  // perf_event_paranoid as /proc says (-100 when unreadable), for messages.
  static int ParanoidLevel();

 private:
  void ReleaseTableSlot();

  PrivateDescriptor descriptor_;
  uint64_t event_id_ = 0;
  int table_slot_ = -1;
  bool below_soft_limit_ = false;  // Counted in BelowSoftLimitCount().
};

}  // namespace strata

#endif  // STRATA_PLATFORM_SAMPLING_PERF_TASK_CLOCK_EVENT_H_
