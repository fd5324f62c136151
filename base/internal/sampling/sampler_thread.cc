// The sampler thread (sampler_thread.h): its loop, its period, and losing the sampling
// signal's handler. See docs/sampling.md and docs/session.md.
//
// Every time stamp of base is TimeStamp::Now(), the Strata clock (docs/sampling.md, "One
// clock"): this thread switches it to the TSC and keeps it slaved to CLOCK_MONOTONIC
// (UpdateStrataClock at each loop, platform/strata_clock.h).
#include "base/internal/sampling/sampler_thread.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/internal/session/core.h"
#include "base/internal/registry/counter_registry.h"
#include "base/internal/flight/flight_recorder.h"
#include "base/internal/settings/log.h"
#include "base/internal/signals/profiler_thread_signals.h"
#include "base/internal/signals/signal_interposers.h"
#include "base/internal/sampling/sample_ring.h"
#include "base/internal/sampling/sampling_source.h"
#include "base/internal/registry/thread_registry.h"
#include "base/internal/session/tier_extension.h"
#include "platform/mutex.h"
#include "platform/raw_syscall.h"
#include "platform/sampling/sampling_signal.h"
#include "platform/strata_clock.h"
#include "platform/time_stamp.h"
#include "shared/buffer/entry_kinds.h"

namespace strata {
namespace base_internal {

namespace {

// ---------------------------------------------------------------------------------------
// The sampler thread.

struct LoopResult {
  int max_expirations = 0;   // The most timer expirations a drained sample stood for
                             // (1 + si_overrun; 0 when no sample was drained).
  bool perf_events = false;  // A sampled thread is on a perf task-clock event.
};

// One loop of the sampler thread.
LoopResult SamplingLoopIteration() {
  // The extension read here is used until the end of the iteration, and only under this lock.
  AutoLock loop_lock(GetSession().sampler_loop_mutex);
  const TimeStamp start = TimeStamp::Now();
  LoopResult result;
  const TierExtension* extension = g_extension.load(std::memory_order_acquire);
  Registry& registry = GetRegistry();
  TimeStamp locked;
  {
    AutoLock lock(registry.mutex);
    locked = TimeStamp::Now();
    // Threads that ended with a raw SYS_exit (no thread-specific-data destructor ran): their
    // timers or events, descriptors and entries are released at the first loop after.
    ReclaimDeadThreadsLocked(registry);
    for (RegisteredThread* thread : registry.live) {
      if (thread->sampling.load(std::memory_order_relaxed)) {
        DrainLocked(thread, locked, &result.max_expirations, /*loop=*/true);
        result.perf_events |= thread->source.kind == ThreadSourceKind::kPerfEvent;
      }
      FlushMarkersLocked(thread);
    }
  }
  const TimeStamp threads_done = TimeStamp::Now();
  SampleCounters(threads_done);
  const TimeStamp counters_done = TimeStamp::Now();
  if (extension && extension->on_sampling_loop) extension->on_sampling_loop(start);
  const TimeStamp extension_done = TimeStamp::Now();
  ChunkedBuffer& buffer = GetSession().buffer;
  buffer.PrepareNextChunk();
  if (extension && extension->record_overhead) {
    buffer.PutObjects(EntryKind::kProfilerOverhead, start, locked - start, threads_done - locked,
                      counters_done - threads_done, extension_done - counters_done);
  }
  FlightRecorderOnSamplerLoop();  // Publishes what this loop put into the buffer.
  return result;
}

// The kernel disposition of the sampling signal is no longer our handler: the program replaced
// it with a raw rt_sigaction system call (the interposers see every libc call). A sample
// would now reach the program's disposition (by default: terminate), so every timer is
// destroyed, and the profile says why its samples end. Sampler thread.
void StopSamplingAfterHandlerLost() {
  Registry& registry = GetRegistry();
  AutoLock lock(registry.mutex);
  if (!registry.sampling) return;
  registry.sampling = false;
  const TimeStamp now = TimeStamp::Now();
  for (RegisteredThread* thread : registry.live) {
    if (!thread->sampling.load(std::memory_order_relaxed)) continue;
    StopSamplingLocked(thread);
    DrainLocked(thread, now);
  }
  char reason[160];
  snprintf(reason, sizeof(reason),
           "the program replaced the handler of the sampling signal %d with a raw system call; "
           "sampling stopped",
           InstalledSamplingSignal());
  registry.sampling_stopped = reason;
  LogError("%s", reason);
}

struct SamplerThreadParams {
  TimeDuration interval;
  bool cpu_time_timers;  // Default mode (not precise): the threads' CPU-clock timers.
};

// Sleeps until CLOCK_MONOTONIC reaches `deadline` or the session asks the sampler to stop
// (g_sampler_stop, woken by StopSamplerThreadLocked). Returns false when asked to stop.
bool SleepUntilDeadlineOrStop(TimeStamp deadline) {
  const int64_t ns = deadline.ToNanoseconds();
  const timespec until{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  while (g_sampler_stop.load(std::memory_order_acquire) == 0) {
    // An absolute CLOCK_MONOTONIC timeout (FUTEX_WAIT_BITSET without FUTEX_CLOCK_REALTIME).
    const long rc = RawSyscall(SYS_futex, reinterpret_cast<long>(&g_sampler_stop),
                               FUTEX_WAIT_BITSET_PRIVATE, 0, reinterpret_cast<long>(&until), 0,
                               FUTEX_BITSET_MATCH_ANY);
    if (rc == -ETIMEDOUT) break;
    if (rc == -EAGAIN) continue;  // The word changed: asked to stop (checked above).
    if (rc != 0 && rc != -EINTR) {
      // No futex (a seccomp filter that refuses it): sleep as before, without the early wake.
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr) == EINTR) {
      }
      break;
    }
    if (TimeStamp::Now() >= deadline) break;  // Woken early for nothing, or interrupted.
  }
  return g_sampler_stop.load(std::memory_order_acquire) == 0;
}

// The longest sampler loop with CPU-clock timers, in requested intervals.
constexpr int kMaxLoopIntervals = 8;

void* SamplerThreadMain(void* arg) {
  pthread_setname_np(pthread_self(), "StrataSampler");
  // The sampler never takes samples of itself, and must not receive the sampling signal.
  BlockSamplingSignalOnCurrentThread();
  const SamplerThreadParams params = *static_cast<SamplerThreadParams*>(arg);
  delete static_cast<SamplerThreadParams*>(arg);
  // A thread inherits its creator's scheduling policy. In a program whose threads run at a
  // real-time priority (SCHED_FIFO, SCHED_RR), the sampler would queue behind a busy thread
  // of equal priority that never yields, and the kernel does not always move a waiting
  // real-time thread to an idle CPU: seen as the sampler not running for a whole 588 ms
  // phase (runnable on the busy thread's CPU, the other CPU idle) in the takeover benchmark
  // at SCHED_FIFO, in ~1 run of 20-80. So it takes one priority level above its creator's
  // when allowed (it then preempts the program's real-time threads for its loop's few tens
  // of microseconds, as the sampling signal does), and keeps the inherited one otherwise.
  int policy = SCHED_OTHER;
  sched_param priority{};
  if (pthread_getschedparam(pthread_self(), &policy, &priority) == 0 &&
      (policy == SCHED_FIFO || policy == SCHED_RR) &&
      priority.sched_priority < sched_get_priority_max(policy)) {
    ++priority.sched_priority;
    (void)pthread_setschedparam(pthread_self(), policy, &priority);
  }
  // The loop's period, in requested intervals. Perf task-clock events (the default source)
  // signal once per interval of a thread's CPU, each standing for one interval, and the
  // handler's records wait in the thread's ring, which holds over 100 typical samples
  // (sample_ring.h): the loop need not run every interval, and it costs the program to. A
  // wake-up of the sampler that preempts a thread holding a per-thread perf event costs
  // that thread the perf context switch: in a bare C experiment (two busy threads on 2 CPUs,
  // perf task-clock events at 1 kHz, empty handler) a thread waking every 1 ms took the
  // workers' CPU overhead from +2.3 % to +3.3 %, while with CPU-clock timers the same waker
  // cost +0.3 %. So with perf events the loop runs every SamplerLoopIntervalsWithPerfEvents
  // (4 ms at 1 ms; docs/sampling.md, "The sampler's period").
  // With CPU-clock timers (the fallback source) the kernel delivers a thread's signal at
  // most once per scheduler tick, however short the interval, and each signal says how many
  // intervals it stands for (1 + si_overrun: 4 for 1 ms at HZ=250). Waking more often than
  // samples can arrive drains nothing and costs the program samples: with two busy workers
  // and two competing spinners on 2 CPUs, a loop every 1 ms left the workers 164-314 samples
  // per CPU-second (median ~220; gperftools 230-250 in the same runs), a loop every 4 ms
  // 231-268 (docs/benchmarks.md, "Default mode: the sampler's wake-ups"). So the loop follows
  // the most expirations one signal has stood for in this session, capped at
  // kMaxLoopIntervals (a thread gets at most one signal per tick).
  // Precise mode's wall-clock timers fire every interval: its loop keeps that period.
  int64_t loop_intervals = 1;
  const int64_t perf_loop_intervals = SamplerLoopIntervalsWithPerfEvents(params.interval);
  // What a session needs only once it has lived a while waits for the end of the first
  // period (issue 38: a process of a build's short commands lives 1-3 ms, and each of these
  // cost it CPU time): the clock's first anchor (CPUID, a trap to
  // the hypervisor in a VM, and the clock source file read; the clock switches to the TSC ~10
  // ms after it), and the buffer's next chunk (the first loop prepares it: 1 MiB of pages,
  // in the flight recorder's file too). The first period is the one the loop settles on with
  // perf events (4 ms at 1 ms), whatever the source: the rings hold over 100 samples.
  bool first_loop = true;
  TimeStamp next = TimeStamp::Now() +
                   TimeDuration::FromNanoseconds(params.interval.ToNanoseconds() *
                                                 (std::max(perf_loop_intervals, loop_intervals) -
                                                  loop_intervals));
  ThreadDirectedSignalCheck signal_check;
  while (g_sampler_stop.load(std::memory_order_acquire) == 0) {
    next = next + TimeDuration::FromNanoseconds(params.interval.ToNanoseconds() * loop_intervals);
    const TimeStamp now = TimeStamp::Now();
    if (next < now) next = now;  // Late (the machine is busy): do not try to catch up.
    if (!SleepUntilDeadlineOrStop(next)) break;
    // libunwind is loaded by the session's start (core.cc, StartLocked); should that have
    // failed for a reason that passes (it is tried once per process), nothing more happens.
    if (first_loop && !g_libunwind_ready.load(std::memory_order_acquire)) {
      WarmUpLibunwindForSampling();
    }
    first_loop = false;
    // A signal the program sent to this thread (tgkill over /proc/self/task) is taken here,
    // as a thread of the program would take it; one rt_sigpending call when there is none
    // (profiler_thread_signals.h). No lock held.
    AnswerThreadDirectedSignals(&signal_check);
    // A program handler on an alternate stack installed by a raw rt_sigaction meanwhile gets
    // the sampling signal in its mask (signal_interposers.h).
    MaskAlternateStackHandlersIfDue();
    UpdateStrataClock();  // A clock_gettime; a new segment every ~50 ms (~0.3 µs).
    const LoopResult loop = SamplingLoopIteration();
    if (!SamplingHandlerInstalled() && InstalledSamplingSignal() != 0) {
      StopSamplingAfterHandlerLost();  // Idempotent.
    }
    if (params.cpu_time_timers) {
      // Perf events (while any thread is on one), else the timers' most expirations so far.
      if (loop.perf_events && loop_intervals < perf_loop_intervals) {
        loop_intervals = perf_loop_intervals;
      }
      if (loop.max_expirations > loop_intervals) {
        loop_intervals = std::min<int64_t>(loop.max_expirations, kMaxLoopIntervals);
      }
    }
  }
  return nullptr;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Start and stop. Session mutex held.

void StartSamplerThreadLocked(Session& session, const ProfilerSettings& settings) {
  g_sampler_stop.store(0, std::memory_order_release);
  auto* params = new SamplerThreadParams{
      TimeDuration::FromMilliseconds(settings.interval_ms),
      (settings.features & kFeaturePrecise) == 0};
  const int rc = CreateProfilerThread(&session.sampler_thread, &SamplerThreadMain, params);
  session.sampler_running = rc == 0;
  session.sampler_pid = RawGetPid();
  if (rc != 0) {
    delete params;
    LogError("cannot start the sampler thread: %s", strerror(rc));
  }
}

void StopSamplerThreadLocked(Session& session) {
  if (!session.sampler_running) return;
  if (session.sampler_pid != RawGetPid()) {
    // Never join a thread of another process (ours is a child that no atfork handler told,
    // and the sampler thread is the parent's): it would wait for ever.
    session.sampler_running = false;
    return;
  }
  g_sampler_stop.store(1, std::memory_order_release);
  // Wakes the sampler from its sleep between loops: the stop (at exit, every process's)
  // does not wait for the rest of its period.
  RawSyscall(SYS_futex, reinterpret_cast<long>(&g_sampler_stop), FUTEX_WAKE_PRIVATE, 1);
  JoinProfilerThread(session.sampler_thread);
  session.sampler_running = false;
}

}  // namespace base_internal
}  // namespace strata
