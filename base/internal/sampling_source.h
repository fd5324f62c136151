// What sends each registered thread its sampling signal (docs/sampling.md, "Sampling
// sources"):
//   - perf task-clock events (platform/sampling/perf_task_clock_event.h): one signal per
//     interval of the thread's own CPU time, the real rate. The default where the kernel
//     allows perf_event_open (STRATA_SAMPLING_SOURCE=auto or perf).
//   - CPU-clock POSIX timers (thread_sampling_timer.h): at most one signal per scheduler tick
//     (4 ms at HZ=250), each standing for 1 + si_overrun intervals. Used where perf events are
//     refused (perf_event_paranoid 3, seccomp, no perf support, out of descriptors), per
//     thread if need be, or when asked (STRATA_SAMPLING_SOURCE=timer).
//   - wall-clock (CLOCK_MONOTONIC) timers in precise mode (feature "precise"), unchanged.
// The source used, and why, goes into the profile (meta.profilingLog.samplingSource) and
// `strata summary`; meta.interval is the interval one sample stands for on average.
//
// The program owns its descriptors: a perf event whose descriptor it closed (a daemon's
// close_range(3, ~0U, 0)) sends nothing more. The sampler notices (CheckThreadSamplingSource:
// a thread whose CPU clock advanced by several intervals without a sample has its
// descriptor checked by identity) and opens a new event, or falls back to a timer.
//
// Locks: every function here is called with the registry mutex held (it guards the
// session-wide state too), except CloseSamplingSourcesInForkedChild. Async-signal safety: only
// CloseSamplingSourcesInForkedChild.
#ifndef STRATA_BASE_INTERNAL_SAMPLING_SOURCE_H_
#define STRATA_BASE_INTERNAL_SAMPLING_SOURCE_H_

#include <stdint.h>

#include <optional>
#include <string>
#include <vector>

#include "base/internal/core.h"
#include "base/profiler.h"
#include "platform/process_thread_ids.h"
#include "platform/sampling/perf_task_clock_event.h"
#include "platform/time_stamp.h"

namespace strata {
namespace base_internal {

struct RegisteredThread;

enum class ThreadSourceKind : uint8_t { kNone, kPerfEvent, kCpuTimer, kWallTimer };

// Per-thread state, a member of RegisteredThread. Registry mutex held, except `descriptors`
// (read by the thread's signal handler).
struct ThreadSamplingSource {
  ThreadSourceKind kind = ThreadSourceKind::kNone;
  PerfTaskClockEvent perf_event;
  SamplingEventDescriptors descriptors;
  // Lost-event detection: the thread's CPU clock at its latest sample (or check), and the
  // multiple of kLostEventIntervals to wait for before the next check (doubles while checks
  // find the event in place: a thread busy in the kernel takes no sample, exclude_kernel).
  std::optional<TimeDuration> cpu_at_check;
  int check_backoff = 1;
  TimeStamp next_check;  // No check before (wall clock); null: at the next loop.
};

// A thread whose CPU clock advanced by this many intervals (times its backoff) with no sample
// has its event checked.
inline constexpr int kLostEventIntervals = 4;

// The source the session asked for and its state. Called at session start.
void ResetSamplingSourcesLocked(const ProfilerSettings& settings);

// Starts `thread`'s source (perf event, else timer), within Strata's RLIMIT_SIGPENDING share
// (sigpending_budget.h: live timers and open events count). Returns whether the thread is now
// sampled (false: it was logged, and marked in the profile when the budget refused).
bool StartThreadSamplingSourceLocked(RegisteredThread* thread, const char* thread_name,
                                     const ProfilerSettings& settings, int signal_number);

// Stops it: no overflow or expiry after this returns (signals already queued are still
// recognised by the thread's handler).
void StopThreadSamplingSourceLocked(RegisteredThread* thread);

// The sampler drained samples of `thread`; `cpu` is its CPU clock now.
void NoteThreadSampledLocked(RegisteredThread* thread, const std::optional<TimeDuration>& cpu);

// The sampler drained no sample of `thread`: if it is on a perf event and its CPU clock
// advanced by kLostEventIntervals (x backoff) since, checks the descriptor; a lost event is
// opened again (or replaced by a timer).
// `now`: the sampler loop's time (the CPU clock is read at most every few intervals).
void CheckThreadSamplingSourceLocked(RegisteredThread* thread, const char* thread_name,
                                     const ProfilerSettings& settings, TimeStamp now);

// Counts a drained sample standing for `expirations` intervals (1 + overruns) and carrying
// `cpu_delta_ns` of its thread's CPU (-1: unknown).
void NoteSampleExpirationsLocked(int expirations, int64_t cpu_delta_ns);
// Counts a copy of a thread's previous sample that carried `cpu_delta_ns` of its CPU (the
// residual of missed signals, docs/sampling.md "CPU accounting"): it stands for that CPU in
// the profile as a sample does.
void NoteCopyCpuLocked(int64_t cpu_delta_ns);

SamplingSourceReport SamplingSourceReportLocked(const ProfilerSettings& settings);

// The tids of those of `threads` on perf events now (before stopping them), for
// WaitForQueuedEventSignals.
std::vector<ThreadId> ThreadsOnEventsLocked(RegisteredThread* const* threads, size_t count);

// Waits (bounded, ~100 ms) until none of `threads` has the sampling signal pending (a signal
// queued by an event before it was closed reaches the program's disposition once ours is
// uninstalled). Registry mutex NOT held.
void WaitForQueuedEventSignals(const std::vector<ThreadId>& threads, int signal_number);

// In a forked child: closes the child's copies of every event descriptor.
void CloseSamplingSourcesInForkedChild();

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_SAMPLING_SOURCE_H_
