// Sampling sources of the base tier. See sampling_source.h and docs/sampling.md.
#include "base/internal/sampling/sampling_source.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "base/internal/settings/log.h"
#include "base/internal/sampling/sigpending_budget.h"
#include "base/internal/registry/thread_registry.h"
#include "base/internal/wait/kernel_cpu_charge.h"
#include "platform/never_destroyed.h"
#include "platform/sampling/sampling_signal.h"
#include "platform/sampling/seccomp_probe.h"
#include "platform/sampling/thread_sampling_timer.h"

namespace strata {
namespace base_internal {
namespace {

constexpr size_t kReasonBytes = 224;

// Session-wide state, registry mutex held.
struct SourceState {
  SamplingSourceRequest request = SamplingSourceRequest::kAuto;
  bool precise = false;
  // Set once perf_event_open was refused for a reason that holds for every thread
  // (permission, no system call, no software events): later threads go straight to timers.
  // Fixed arrays, not strings: they are written by a new thread's registration, on the
  // program's thread, which never allocates (docs/host-contract.md).
  char perf_refused[kReasonBytes] = {};
  // The seccomp check before the session's first perf_event_open was made.
  bool seccomp_checked = false;
  // It found a filter: no helper process for the events' descriptors (a sandbox's filter may
  // kill a process-making clone), so they stay below the soft limit (Strata's share).
  bool seccomp_filtered = false;
  // Why the latest thread that fell back to a timer did (out of descriptors, ...).
  char thread_fallback[kReasonBytes] = {};
  uint64_t threads_on_events = 0;
  uint64_t threads_on_timers = 0;
  uint64_t lost_events = 0;
  uint64_t samples = 0;
  uint64_t expirations = 0;
  // Samples (and copies) that carried CPU, and that CPU: what a sample stands for, measured.
  uint64_t cpu_samples = 0;
  int64_t cpu_ns = 0;
};
SourceState& State() {
  static NeverDestroyed<SourceState> state;  // Leaked, as the registry.
  return state.get();
}

// `error`'s name (EMFILE...), or its number, in `buffer`. No allocation.
const char* ErrnoName(int error, char (&buffer)[16]) {
  if (const char* name = strerrorname_np(error)) return name;
  snprintf(buffer, sizeof(buffer), "%d", error);
  return buffer;
}

// The program's RLIMIT_NOFILE now (it may change it): perf events are numbered above the
// soft limit, so they need room under the hard one (PerfTaskClockEvent::Open).
struct DescriptorLimits {
  long soft = -1;
  long hard = -1;
};
DescriptorLimits ReadDescriptorLimits() {
  rlimit limit{};
  DescriptorLimits limits;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return limits;
  limits.soft = limit.rlim_cur == RLIM_INFINITY ? -1 : static_cast<long>(limit.rlim_cur);
  limits.hard = limit.rlim_max == RLIM_INFINITY ? -1 : static_cast<long>(limit.rlim_max);
  return limits;
}

// Where a perf event's descriptor cannot be numbered above the soft limit (the hard limit
// equals it and the process may not raise it: private_fd.h), at most this share of the soft
// limit is taken below it, in the program's range; beyond, threads get CPU-clock timers.
constexpr int kBelowLimitShareDivisor = 16;
int BelowSoftLimitBudget(const DescriptorLimits& limits) {
  if (limits.soft < 0) return PerfTaskClockEvent::kMaxOpenEvents;
  return static_cast<int>(std::min<long>(limits.soft / kBelowLimitShareDivisor,
                                         PerfTaskClockEvent::kMaxOpenEvents));
}

// Why perf_event_open must not be used because the process's seccomp filter would kill or
// trap it (a trial in a throwaway child), or "" when it may be used (a filter that answers
// with an error is found by the first real call, as without a filter). A literal.
const char* PerfEventOpenRefusalBySeccomp(SeccompMode mode) {
  if (mode == SeccompMode::kNone || mode == SeccompMode::kUnknown) return "";
  if (mode == SeccompMode::kStrict) return "perf_event_open not tried (seccomp strict mode)";
  struct perf_event_attr attr;
  memset(&attr, 0, sizeof(attr));
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_TASK_CLOCK;
  attr.disabled = 1;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  const TrialResult trial = TrySystemCallInChild(SYS_perf_event_open, reinterpret_cast<long>(&attr),
                                                 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
  switch (trial) {
    case TrialResult::kReturned:
      return "";
    case TrialResult::kKilled:
      return "perf_event_open refused (the process's seccomp filter kills or traps it)";
    case TrialResult::kUnknown:
      break;
  }
  return "perf_event_open not tried (a seccomp filter is installed and a trial in a child "
         "process could not be made)";
}

// Refusals that will not change from one thread to the next.
bool RefusedForEveryThread(int error) {
  return error == EACCES || error == EPERM || error == ENOSYS || error == ENOENT ||
         error == EOPNOTSUPP || error == EINVAL || error == ENODEV;
}

// Why perf_event_open answered `error`, written into `reason` (after `prefix`). Runs on a new
// thread's registration: formats into the caller's array, allocates nothing.
void WriteRefusalReason(int error, const char* prefix, char (&reason)[kReasonBytes]) {
  if (error == ERANGE) {
    const DescriptorLimits limits = ReadDescriptorLimits();
    snprintf(reason, sizeof(reason),
             "%sperf_event_open not used (no descriptor number above the program's soft "
             "RLIMIT_NOFILE %ld, hard %ld, and Strata's share below it, 1/%d: %d, in use)",
             prefix, limits.soft, limits.hard, kBelowLimitShareDivisor,
             BelowSoftLimitBudget(limits));
    return;
  }
  char number[16];
  char detail[64] = {};
  if (error == EACCES || error == EPERM) {
    const int paranoid = PerfTaskClockEvent::ParanoidLevel();
    if (paranoid != -100) snprintf(detail, sizeof(detail), ", perf_event_paranoid=%d", paranoid);
  } else if (error == ENOSYS) {
    snprintf(detail, sizeof(detail), ": no such system call, or a seccomp filter");
  } else if (error == EMFILE || error == ENFILE) {
    snprintf(detail, sizeof(detail), ": out of file descriptors");
  } else if (error == ENOSPC) {
    snprintf(detail, sizeof(detail), ": more than %d threads with events",
             PerfTaskClockEvent::kMaxOpenEvents);
  }
  snprintf(reason, sizeof(reason), "%sperf_event_open refused (%s%s)", prefix,
           ErrnoName(error, number), detail);
}

bool StartTimer(RegisteredThread* thread, const char* thread_name,
                const ProfilerSettings& settings, int signal_number) {
  const bool precise = (settings.features & kFeaturePrecise) != 0;
  int error;
  if (pthread_equal(thread->pthread, pthread_self())) {
    error = thread->timer.CreateForCurrentThread(
        signal_number, precise ? TimerClock::kMonotonic : TimerClock::kThreadCpuTime);
  } else {
    error = thread->timer.CreateForThread(thread->tid,
                                          precise ? CLOCK_MONOTONIC : thread->cpu_clock.id(),
                                          signal_number);
  }
  if (error == 0) error = thread->timer.Arm(TimeDuration::FromMilliseconds(settings.interval_ms));
  if (error != 0) {
    char number[16];
    LogError("cannot sample thread %d (%s): %s", thread->tid.ToNumber(), thread_name,
             ErrnoName(error, number));
    thread->timer.Destroy();
    return false;
  }
  thread->source.kind = precise ? ThreadSourceKind::kWallTimer : ThreadSourceKind::kCpuTimer;
  if (!precise) ++State().threads_on_timers;
  return true;
}

// Opens `thread`'s perf event. Returns 0 or the errno of the refusal.
int StartEvent(RegisteredThread* thread, const ProfilerSettings& settings, int signal_number) {
  // ERANGE: no room above the program's soft limit, nor in Strata's share below it
  // (WriteRefusalReason says so).
  const bool below_allowed =
      PerfTaskClockEvent::BelowSoftLimitCount() < BelowSoftLimitBudget(ReadDescriptorLimits());
  ThreadSamplingSource& source = thread->source;
  const int error = source.perf_event.Open(
      thread->tid, TimeDuration::FromMilliseconds(settings.interval_ms), signal_number,
      below_allowed, /*above_soft_limit_helper_allowed=*/!State().seccomp_filtered);
  if (error != 0) return error;
  // The previous event's signals may still be queued: its number stays recognised.
  const int previous = source.descriptors.current.load(std::memory_order_relaxed);
  if (previous >= 0) source.descriptors.retired.store(previous, std::memory_order_relaxed);
  source.descriptors.current.store(source.perf_event.descriptor(), std::memory_order_release);
  source.kind = ThreadSourceKind::kPerfEvent;
  source.cpu_at_check = thread->cpu_clock.Read();
  source.check_backoff = 1;
  // Wrapped calls read the event's page to measure their CPU cheaply (kernel_cpu_charge.h).
  MapCpuPageLocked(thread->wait, source.perf_event.descriptor());
  return 0;
}

void RetireEvent(RegisteredThread* thread) {
  ThreadSamplingSource& source = thread->source;
  RetireCpuPageLocked(thread->wait);
  const int current = source.descriptors.current.exchange(-1, std::memory_order_relaxed);
  if (current >= 0) source.descriptors.retired.store(current, std::memory_order_release);
  source.perf_event.Close();
}

}  // namespace

void ResetSamplingSourcesLocked(const ProfilerSettings& settings) {
  SourceState& state = State();
  state = SourceState();
  state.request = settings.sampling_source;
  state.precise = (settings.features & kFeaturePrecise) != 0;
}

bool StartThreadSamplingSourceLocked(RegisteredThread* thread, const char* thread_name,
                                     const ProfilerSettings& settings, int signal_number) {
  SourceState& state = State();
  // Leave the program its RLIMIT_SIGPENDING entries (sigpending_budget.h). A timer holds one
  // for its life; an event's signal holds one while it is pending (each overflow queues a
  // new one): both count against Strata's share.
  if (!SigpendingBudgetAllowsTimerFor(thread->tid, thread_name,
                                      ThreadSamplingTimer::LiveCount() +
                                          PerfTaskClockEvent::OpenCount())) {
    return false;
  }
  if (state.precise || state.request == SamplingSourceRequest::kTimers ||
      state.perf_refused[0] != '\0') {
    return StartTimer(thread, thread_name, settings, signal_number);
  }
  if (!state.seccomp_checked) {
    state.seccomp_checked = true;
    const SeccompMode mode = CurrentSeccompMode();
    state.seccomp_filtered = mode != SeccompMode::kNone;
    snprintf(state.perf_refused, sizeof(state.perf_refused), "%s",
             PerfEventOpenRefusalBySeccomp(mode));
    if (state.perf_refused[0] != '\0') {
      LogInfo("%s: sampling with CPU-clock timers", state.perf_refused);
      return StartTimer(thread, thread_name, settings, signal_number);
    }
  }
  const int error = StartEvent(thread, settings, signal_number);
  if (error == 0) {
    ++state.threads_on_events;
    return true;
  }
  if (RefusedForEveryThread(error)) {
    WriteRefusalReason(error, "", state.perf_refused);
    if (state.request == SamplingSourceRequest::kPerfEvents) {
      LogError("STRATA_SAMPLING_SOURCE=perf: %s; CPU-clock timers instead (one sample per "
               "scheduler tick at most)",
               state.perf_refused);
    } else {
      LogInfo("%s: sampling with CPU-clock timers", state.perf_refused);
    }
  } else {
    WriteRefusalReason(error, "", state.thread_fallback);
    LogInfo("thread %d (%s): %s: a CPU-clock timer instead", thread->tid.ToNumber(),
            thread_name, state.thread_fallback);
  }
  return StartTimer(thread, thread_name, settings, signal_number);
}

void StopThreadSamplingSourceLocked(RegisteredThread* thread) {
  ThreadSamplingSource& source = thread->source;
  if (source.kind == ThreadSourceKind::kPerfEvent) RetireEvent(thread);
  thread->timer.Destroy();  // No signal is generated after this returns.
  source.kind = ThreadSourceKind::kNone;
}

void NoteThreadSampledLocked(RegisteredThread* thread, const std::optional<TimeDuration>& cpu) {
  ThreadSamplingSource& source = thread->source;
  if (source.kind != ThreadSourceKind::kPerfEvent) return;
  source.cpu_at_check = cpu;
  source.check_backoff = 1;
}

void CheckThreadSamplingSourceLocked(RegisteredThread* thread, const char* thread_name,
                                     const ProfilerSettings& settings, TimeStamp now) {
  ThreadSamplingSource& source = thread->source;
  if (source.kind != ThreadSourceKind::kPerfEvent) return;
  // The CPU clock is read at most once per kLostEventIntervals intervals (and 4 ms) of wall
  // time per thread: idle threads cost the sampler little.
  if (!source.next_check.IsNull() && now < source.next_check) return;
  source.next_check =
      now + TimeDuration::FromNanoseconds(std::max<int64_t>(
                static_cast<int64_t>(settings.interval_ms * 1e6) * kLostEventIntervals,
                4 * 1000 * 1000));
  const std::optional<TimeDuration> cpu = thread->cpu_clock.Read();
  if (!cpu) return;
  if (!source.cpu_at_check) {
    source.cpu_at_check = cpu;
    return;
  }
  const int64_t threshold_ns =
      static_cast<int64_t>(settings.interval_ms * 1e6) * kLostEventIntervals * source.check_backoff;
  if ((*cpu - *source.cpu_at_check).ToNanoseconds() < threshold_ns) return;
  source.cpu_at_check = cpu;
  if (source.perf_event.IsStillOurs()) {
    // In place: the thread ran in the kernel (overflows there are not signalled), or its
    // signals wait for it to run. Look again later.
    source.check_backoff = std::min(source.check_backoff * 2, 64);
    return;
  }
  // The program closed the descriptor (or reused its number): the event is gone.
  SourceState& state = State();
  ++state.lost_events;
  RetireEvent(thread);
  const int signal_number = InstalledSamplingSignal();
  const int error = StartEvent(thread, settings, signal_number);
  if (error == 0) {
    LogInfo("thread %d (%s): its perf event's descriptor was closed by the program; opened "
            "another",
            thread->tid.ToNumber(), thread_name);
    return;
  }
  WriteRefusalReason(error, "the program closed the event's descriptor and ",
                     state.thread_fallback);
  --state.threads_on_events;
  LogInfo("thread %d (%s): %s: a CPU-clock timer instead", thread->tid.ToNumber(),
          thread_name, state.thread_fallback);
  if (!StartTimer(thread, thread_name, settings, signal_number)) {
    source.kind = ThreadSourceKind::kNone;  // Not sampled any more (logged).
  }
}

void NoteSampleExpirationsLocked(int expirations, int64_t cpu_delta_ns) {
  SourceState& state = State();
  ++state.samples;
  state.expirations += static_cast<uint64_t>(expirations < 1 ? 1 : expirations);
  if (cpu_delta_ns > 0) {
    ++state.cpu_samples;
    state.cpu_ns += cpu_delta_ns;
  }
}

void NoteCopyCpuLocked(int64_t cpu_delta_ns) {
  SourceState& state = State();
  if (cpu_delta_ns > 0) {
    ++state.cpu_samples;
    state.cpu_ns += cpu_delta_ns;
  }
}

SamplingSourceReport SamplingSourceReportLocked(const ProfilerSettings& settings) {
  const SourceState& state = State();
  SamplingSourceReport report;
  report.requested_interval_ms = settings.interval_ms;
  report.lost_events = state.lost_events;
  // Perf events and wall-clock timers sample at the requested interval (a late wall-clock
  // expiry is the program not running, not a coarser rate).
  // CPU-clock timers: the CPU the drained samples carried, per sample (with the `cpu`
  // feature), else the timers' own count of intervals per signal (1 + si_overrun). The
  // measured figure is the one that holds under load: beside 8 busy processes on 2 CPUs the
  // overrun count said 41 ms per sample where the samples carried 15 ms.
  if (state.samples == 0 || state.precise || state.threads_on_timers == 0) {
    report.effective_interval_ms = settings.interval_ms;
  } else if (state.cpu_samples > 0) {
    report.effective_interval_ms =
        static_cast<double>(state.cpu_ns) / 1e6 / static_cast<double>(state.cpu_samples);
  } else {
    report.effective_interval_ms = settings.interval_ms * static_cast<double>(state.expirations) /
                                   static_cast<double>(state.samples);
  }
  char counts[160];
  if (state.precise) {
    report.description = "wall-clock timers (precise mode)";
  } else if (state.threads_on_timers == 0) {
    report.description = "perf task-clock events";
    if (state.lost_events > 0) {
      snprintf(counts, sizeof(counts),
               " (%" PRIu64 " lost to the program closing their descriptor, reopened)",
               state.lost_events);
      report.description += counts;
    }
  } else {
    std::string why;
    if (state.request == SamplingSourceRequest::kTimers) {
      why = "STRATA_SAMPLING_SOURCE=timer";
    } else if (state.perf_refused[0] != '\0') {
      why = state.perf_refused;
    } else {
      why = state.thread_fallback;
    }
    if (state.threads_on_events == 0) {
      report.description = "CPU-clock timers: " + why;
    } else {
      snprintf(counts, sizeof(counts),
               "perf task-clock events (%" PRIu64 " threads); CPU-clock timers (%" PRIu64
               " threads): ",
               state.threads_on_events, state.threads_on_timers);
      report.description = counts + why;
    }
  }
  return report;
}

std::vector<ThreadId> ThreadsOnEventsLocked(RegisteredThread* const* threads, size_t count) {
  std::vector<ThreadId> tids;
  for (size_t i = 0; i < count; ++i) {
    const RegisteredThread* thread = threads[i];
    if (thread->source.kind == ThreadSourceKind::kPerfEvent) tids.push_back(thread->tid);
  }
  return tids;
}

void WaitForQueuedEventSignals(const std::vector<ThreadId>& threads, int signal_number) {
  if (threads.empty() || signal_number <= 0) return;
  const uint64_t bit = 1ULL << (signal_number - 1);
  const timespec one_millisecond{0, 1000 * 1000};
  for (int attempt = 0; attempt < 100; ++attempt) {
    bool pending = false;
    for (const ThreadId& tid : threads) {
      char path[64];
      snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid.ToNumber());
      FILE* file = fopen(path, "re");
      if (!file) continue;  // Exited: nothing pending.
      char line[256];
      while (fgets(line, sizeof(line), file)) {
        unsigned long long mask = 0;
        if (sscanf(line, "SigPnd: %llx", &mask) == 1) {
          if ((mask & bit) != 0) pending = true;
          break;
        }
      }
      fclose(file);
      if (pending) break;
    }
    if (!pending) return;
    nanosleep(&one_millisecond, nullptr);
  }
  LogInfo("a thread still had a sampling signal pending after 100 ms");
}

void CloseSamplingSourcesInForkedChild() { PerfTaskClockEvent::CloseAllInForkedChild(); }

}  // namespace base_internal
}  // namespace strata
