// Sampling of one registered thread, on the sampler's side (declared in thread_registry.h):
// start and stop its sampling source, drain its ring into the session buffer, write copies
// of its previous sample while it does not run, and the CPU accounting across pauses
// (docs/sampling.md, "CPU accounting").
//
// Thread safety: every function here is called with the registry mutex held (by the sampler
// thread, the session's start and stop, ProfilerPause/Resume, capture and a thread's
// unregistration). Async-signal safety: none (the signal handler's side is
// sample_capture.cc).
#include <algorithm>
#include <atomic>
#include <optional>

#include "base/categories.h"
#include "base/internal/sampling/sample_entries.h"
#include "base/internal/session/session_state.h"
#include "base/internal/registry/thread_registry.h"
#include "platform/sampling/sampling_signal.h"
#include "platform/sampling/stack_bounds.h"
#include "platform/time_stamp.h"
#include "shared/buffer/entry_kinds.h"

namespace strata {
namespace base_internal {

// ---------------------------------------------------------------------------------------
// Sampling of one thread: start, stop, drain. Registry mutex held (thread_registry.h).

void StartSamplingLocked(Registry& registry, RegisteredThread* thread) {
  if (thread->sampling.load(std::memory_order_relaxed)) return;
  const ProfilerSettings& settings = registry.settings;
  ThreadInfo& info = registry.infos[thread->info_index];
  if (!NameMatchesFilters(info.name, thread->is_main, settings.thread_filters)) return;
  const int signal_number = InstalledSamplingSignal();
  if (signal_number == 0) return;  // No handler: a signal would kill the program.
  // The main thread's, once, before its first signal (read without allocating, from any
  // thread; other threads read theirs at registration).
  if (thread->bounds.IsEmpty() && thread->is_main) thread->bounds = StackBounds::OfMainThread();
  // The main thread's stack grows on demand: the handler's headroom check needs how far it
  // may grow (sampling_signal.h, SetSamplingMainStackLimits). Process-wide, set once.
  if (thread->is_main) {
    static bool main_reach_known = false;  // Registry mutex held.
    if (!main_reach_known) {
      const StackBounds reach = StackBounds::MainStackReach();
      if (!reach.IsEmpty()) SetSamplingMainStackLimits(reach.low, reach.high);
      main_reach_known = true;
    }
  }
  // A perf task-clock event, else a timer (sampling_source.h); logged when neither.
  if (!StartThreadSamplingSourceLocked(thread, info.name.c_str(), settings, signal_number)) return;
  info.profiled = true;
  thread->has_sample = false;
  thread->previous_stack.Forget();  // Its first sample is written whole.
  // The handler CPU counted from here (profilingLog.longHandlerCpuMs; the thread is not
  // sampled yet, so its handler does not write it now).
  thread->handler_cpu_ns.store(0, std::memory_order_relaxed);
  // The first sample carries the CPU used since sampling started, not since the thread did.
  const std::optional<TimeDuration> cpu = thread->cpu_clock.Read();
  thread->last_sample_cpu_ns = cpu ? cpu->ToNanoseconds() : -1;
  thread->last_seen_cpu = cpu;
  thread->paused_at_cpu.reset();
  if (ProfilerIsPaused()) thread->paused_at_cpu = cpu;
  thread->timer_parked = false;
  ResetWaitSamplingLocked(thread);  // A wait tracked in an earlier session (wait_sampling.cc).
  NoteKernelCpuChargingLocked(thread);
  thread->sampling.store(true, std::memory_order_relaxed);
}

// Wrapped calls charge their CPU to their own stack (wait/kernel_cpu_charge.h) on a perf
// event, whose signals skip kernel-mode CPU; not on timers, whose signals count it (a
// CPU-clock timer's expiry inside a system call is delivered on its return).
void NoteKernelCpuChargingLocked(RegisteredThread* thread) {
  thread->wait.charges_kernel_cpu.store(thread->source.kind == ThreadSourceKind::kPerfEvent,
                                        std::memory_order_relaxed);
}

void StopSamplingLocked(RegisteredThread* thread) {
  thread->wait.charges_kernel_cpu.store(false, std::memory_order_relaxed);
  thread->sampling.store(false, std::memory_order_relaxed);
  // No signal is generated after this returns (queued ones are still recognised).
  StopThreadSamplingSourceLocked(thread);
  thread->timer_parked = false;
}

namespace {

// Writes one record drained from `thread`'s ring (DrainRingLocked).
void PutRingRecordLocked(RegisteredThread* thread, const SampleSlot* slot, int* max_expirations,
                         bool* took_signal_samples) {
  ChunkedBuffer& buffer = GetSession().buffer;
  if (slot->missed_wait) {
    // A wait the sampler did not walk, written by the thread as it left the wrapper
    // (wait/own_samples.h): its stack at the first grid point, copies at the others.
    PutSampleEntry(buffer, thread->previous_stack, thread->tid,
                   TimeStamp::FromNanoseconds(slot->time_ns), int64_t{0}, 0, *slot);
    const int64_t interval_ns = std::max<int64_t>(
        1, TimeDuration::FromMilliseconds(GetRegistry().settings.interval_ms).ToNanoseconds());
    for (int64_t k = 1; k <= slot->overruns; ++k) {
      buffer.PutObjects(EntryKind::kSameSample, thread->tid,
                        TimeStamp::FromNanoseconds(slot->time_ns + k * interval_ns), int64_t{0});
    }
    thread->last_sample = RegisteredThread::LastSample::kWait;
    thread->wait.last_ended_ns = slot->cpu_ns;  // SampleSlot::missed_wait: the wait's end.
    return;
  }
  thread->last_sample = slot->charged_system_call ? RegisteredThread::LastSample::kChargedCall
                                                  : RegisteredThread::LastSample::kCpu;
  if (took_signal_samples && !slot->charged_system_call) *took_signal_samples = true;
  if (!slot->charged_system_call) {
    // Taken inside a wrapped call the thread is still in (between the wrapper's mark and the
    // blocking system call, e.g. preempted there)? Its walk then passes through the wrapper's
    // caller, at the wait's caller pc and sp (SampleWaitLocked).
    const WaitState& wait = thread->wait;
    const uint64_t sequence = wait.sequence.load(std::memory_order_acquire);
    thread->signal_sample_wait_sequence = 0;
    thread->signal_sample_ns = slot->time_ns;
    if ((sequence & 1) != 0) {
      const uintptr_t caller_pc = wait.caller_pc.load(std::memory_order_relaxed);
      const uintptr_t caller_sp = wait.caller_sp.load(std::memory_order_relaxed);
      for (uint32_t i = 0; i < slot->native_count; ++i) {
        if (slot->natives[i].pc == caller_pc && slot->natives[i].sp == caller_sp) {
          thread->signal_sample_wait_sequence = sequence;
          break;
        }
      }
    }
  }
  int64_t cpu_delta = -1;
  thread->last_sample_in_system_call = slot->in_system_call;
  if (slot->charged_system_call) {
    // A wrapped call's kernel CPU on its stack (wait/kernel_cpu_charge.h): it carries the
    // interval of the calls' CPU it stands for, which the clock already counted; the
    // samples that follow carry that much less (the accounted CPU may run ahead of the
    // clock until they absorb it).
    cpu_delta = slot->cpu_ns;
    if (thread->last_sample_cpu_ns >= 0) thread->last_sample_cpu_ns += cpu_delta;
  } else if (slot->cpu_ns >= 0) {
    // Never negative: a sample taken just before a pause's or a copy's clock reading.
    if (thread->last_sample_cpu_ns >= 0) {
      cpu_delta = std::max<int64_t>(0, slot->cpu_ns - thread->last_sample_cpu_ns);
    }
    thread->last_sample_cpu_ns = std::max(thread->last_sample_cpu_ns, slot->cpu_ns);
  }
  PutSampleEntry(buffer, thread->previous_stack, thread->tid,
                 TimeStamp::FromNanoseconds(slot->time_ns), cpu_delta, slot->overruns, *slot);
  if (max_expirations) *max_expirations = std::max(*max_expirations, slot->overruns + 1);
  // For meta.interval (sampling_source.h).
  NoteSampleExpirationsLocked(slot->overruns + 1, cpu_delta);
}

}  // namespace

// Writes the samples waiting in `thread`'s ring. Returns whether there were any. Raises
// `*max_expirations`, if given, to the most timer expirations one of them stood for
// (1 + overruns).
bool DrainRingLocked(RegisteredThread* thread, int* max_expirations, bool* took_signal_samples) {
  // Two slots the records are decoded into, for every thread (the registry mutex is held;
  // leaked, as the registry is: threads may unregister during exit): a record and the one
  // after it. A wait's own record (SampleSlot::missed_wait) is written as the thread leaves
  // the wrapper, after any sample its handler took on the way out (its time is later than
  // the wait's samples): that sample then goes after it, so the thread's samples stay in
  // time order.
  SampleSlot* record = StaticConsumerSlot<struct DrainedRecordSlot>();
  SampleSlot* following = StaticConsumerSlot<struct DrainedFollowingSlot>();
  if (took_signal_samples) *took_signal_samples = false;
  bool have_record = thread->ring.TryRead(record);
  const bool drained = have_record;
  while (have_record) {
    const bool have_following = thread->ring.TryRead(following);
    if (have_following && following->missed_wait && !record->missed_wait &&
        following->time_ns < record->time_ns) {
      PutRingRecordLocked(thread, following, max_expirations, took_signal_samples);
      PutRingRecordLocked(thread, record, max_expirations, took_signal_samples);
      have_record = thread->ring.TryRead(record);
      continue;
    }
    PutRingRecordLocked(thread, record, max_expirations, took_signal_samples);
    std::swap(record, following);
    have_record = have_following;
  }
  if (drained) GetRegistry().infos[thread->info_index].recorded = true;
  return drained;
}

void PutCopyOfLastSampleLocked(RegisteredThread* thread, TimeDuration cpu, TimeStamp now) {
  int64_t cpu_delta = 0;
  if (thread->last_sample_cpu_ns >= 0) {
    cpu_delta = std::max<int64_t>(0, cpu.ToNanoseconds() - thread->last_sample_cpu_ns);
    thread->last_sample_cpu_ns += cpu_delta;
  }
  if (thread->last_sample == RegisteredThread::LastSample::kWait ||
      thread->last_sample == RegisteredThread::LastSample::kChargedCall) {
    // CPU used after a wait ended is not the wait's, nor CPU after a charged call the call's
    // (its own CPU was charged up to its end): the call's caller frames carry it.
    PutUnknownWaitLocked(thread, now, cpu_delta);
  } else {
    GetSession().buffer.PutObjects(EntryKind::kSameSample, thread->tid, now, cpu_delta);
  }
  NoteCopyCpuLocked(cpu_delta);  // For meta.interval (sampling_source.h).
}

void PutUnknownWaitLocked(RegisteredThread* thread, TimeStamp now, int64_t cpu_delta) {
  const uint8_t flags = thread->last_sample == RegisteredThread::LastSample::kWait ||
                                thread->last_sample == RegisteredThread::LastSample::kChargedCall
                            ? kUnknownWaitDropsLeaf
                            : 0;
  GetSession().buffer.PutObjects(EntryKind::kUnknownWait, thread->tid, now, cpu_delta, flags,
                                 static_cast<uint8_t>(Category::kIdle));
  thread->last_sample = RegisteredThread::LastSample::kUnknownWait;
}

void NotePauseLocked(Registry& registry) {
  for (RegisteredThread* thread : registry.live) {
    if (thread->sampling.load(std::memory_order_relaxed)) {
      thread->paused_at_cpu = thread->cpu_clock.Read();
    }
  }
}

void NoteResumeLocked(Registry& registry) {
  for (RegisteredThread* thread : registry.live) {
    if (!thread->sampling.load(std::memory_order_relaxed)) continue;
    // The samples taken before the pause, with the CPU deltas they had then.
    if (DrainRingLocked(thread)) thread->has_sample = true;
    const std::optional<TimeDuration> cpu = thread->cpu_clock.Read();
    if (cpu && thread->paused_at_cpu && thread->last_sample_cpu_ns >= 0) {
      thread->last_sample_cpu_ns += (*cpu - *thread->paused_at_cpu).ToNanoseconds();
    }
    thread->paused_at_cpu.reset();
    thread->last_seen_cpu = cpu;
  }
}

void DrainLocked(RegisteredThread* thread, TimeStamp now, int* max_expirations, bool loop) {
  // A thread leaving a wrapped wait writes that wait's records into its ring (wait_state.h);
  // the loop drains it once it has left, so that its samples stay in time order (a sample its
  // handler took on the way out, drained alone, would precede the wait's own record, whose
  // samples are earlier: seen at load ~20, 11 samples out of order). Left for as long as the
  // thread has not run an interval of CPU since (preempted in the wrapper's end), and at most
  // a second in all (a thread caught leaving another wait at every loop); one that ran and is
  // still leaving the same wait left by a longjmp from a handler of the program's that
  // interrupted it.
  WaitState& wait = thread->wait;
  const uint64_t wait_sequence = wait.sequence.load(std::memory_order_acquire);
  if (loop && (wait_sequence & 1) != 0 &&
      wait.ending_sequence.load(std::memory_order_acquire) == wait_sequence) {
    const std::optional<TimeDuration> cpu = thread->cpu_clock.Read();
    const int64_t cpu_ns = cpu ? cpu->ToNanoseconds() : -1;
    if (wait.deferred_ending_since_ns == 0) wait.deferred_ending_since_ns = now.ToNanoseconds();
    const bool within_second =
        now.ToNanoseconds() - wait.deferred_ending_since_ns < int64_t{1000000000};
    if (wait.deferred_ending_sequence != wait_sequence) {
      wait.deferred_ending_sequence = wait_sequence;
      wait.deferred_ending_cpu_ns = cpu_ns;
      if (within_second) return;
    } else if (within_second && cpu_ns >= 0 && wait.deferred_ending_cpu_ns >= 0 &&
               cpu_ns - wait.deferred_ending_cpu_ns <
                   TimeDuration::FromMilliseconds(GetRegistry().settings.interval_ms)
                       .ToNanoseconds()) {
      return;
    }
  }
  wait.deferred_ending_since_ns = 0;
  const ProfilerSettings& settings = GetRegistry().settings;
  const bool precise = (settings.features & kFeaturePrecise) != 0;
  // Wait stacks (wait_sampling.cc): the samples still due for a wait that ended, before the
  // samples the thread took after it.
  FinishEndedWaitLocked(thread);
  // Records a wrapped call wrote at its end (kernel CPU, a wait the sampler did not walk) are
  // no sign of the thread's sampling source: only its handler's samples are.
  bool took_signal_samples = false;
  if (DrainRingLocked(thread, max_expirations, &took_signal_samples)) {
    thread->has_sample = true;  // DrainRingLocked set last_sample.
  }
  // A thread its handler samples: the rest of its ring made resident by the sampler thread,
  // off the thread (sample_ring.h, Memory); not by the last drains (stop, save, exit), where
  // the ring is written no more.
  if (loop && took_signal_samples && g_ring_populate_allowed.load(std::memory_order_relaxed)) {
    thread->ring.MakeResident();
  }
  if (took_signal_samples) {
    const std::optional<TimeDuration> cpu = thread->cpu_clock.Read();
    // Precise mode: a thread interrupted in a system call that used less than an eighth of
    // an interval of CPU (at least 50 us: our own handler's share) since the previous loop
    // is blocked: park its timer. A thread waiting for a CPU is not parked: it was
    // interrupted in its own code, and needs its samples as soon as it runs.
    if (precise && !thread->timer_parked && thread->last_sample_in_system_call && cpu &&
        thread->last_seen_cpu) {
      const int64_t blocked_below_ns =
          std::max<int64_t>(TimeDuration::FromMilliseconds(settings.interval_ms).ToNanoseconds() / 8,
                            50000);
      if ((*cpu - *thread->last_seen_cpu).ToNanoseconds() < blocked_below_ns &&
          thread->timer.Disarm() == 0) {
        thread->timer_parked = true;
      }
    }
    thread->last_seen_cpu = cpu;
    NoteThreadSampledLocked(thread, cpu);  // Lost-event detection (sampling_source.h).
    // It ran, then blocked in a wrapped call? (Not while its handler takes another sample:
    // below.)
    if (!thread->capturing.load(std::memory_order_acquire)) {
      SampleWaitLocked(thread, now, /*ran=*/true);
    }
    return;
  }
  // A perf event whose descriptor the program closed sends nothing more: reopened here.
  CheckThreadSamplingSourceLocked(thread, GetRegistry().infos[thread->info_index].name.c_str(),
                                  settings, now);
  NoteKernelCpuChargingLocked(thread);  // The source may have changed.
  // A sample being taken right now (the thread's handler, or its own records as it leaves a
  // wrapped call): the wait's points after that sample's time, written now, would come
  // before it. They wait for the next loop, which drains the sample first.
  if (thread->capturing.load(std::memory_order_acquire)) return;
  // A thread blocked in a wrapped call gets samples of where it waits instead of copies.
  if (SampleWaitLocked(thread, now, /*ran=*/false)) {
    thread->last_seen_cpu = thread->cpu_clock.Read();
    return;
  }
  // A wait that ended since the drain above: what the thread wrote as it left the wrapper
  // (wait/own_samples.h) is in its ring before its sequence moved on (the acquire load in
  // SampleWaitLocked), and goes before any copy dated now.
  if (DrainRingLocked(thread)) thread->has_sample = true;
  if (!thread->has_sample || ProfilerIsPaused()) return;
  // A sample being taken right now (its walk may be waiting for a lock, using no CPU): the
  // thread is not idle, and its sample will come.
  if (thread->capturing.load(std::memory_order_acquire)) return;
  // No signal since the last loop: if the thread has not run at all since the previous loop
  // (blocked, or runnable but waiting for a CPU), record a copy of its previous sample
  // without disturbing it. A thread whose clock moved gets no copy: its signal will come. A
  // parked thread that ran again is sampled at the real rate from now on.
  // The CPU the thread used between its previous sample and stopping (the residual) stays
  // with its next sample when it is less than an interval: a perf event keeps counting
  // across the wait, so that sample comes one interval of CPU after the previous one, and a
  // copy carries 0 (copies are then told from samples by their CPU delta). When the
  // residual is an interval or more, the source missed signals (CPU-clock timers are
  // tick-bound and, under load, sometimes silent for 20 ms of a thread's CPU; kernel-mode
  // time, which perf events do not count): the copy carries it, so that no later sample
  // claims more CPU than the wall time since its predecessor (docs/sampling.md).
  const std::optional<TimeDuration> cpu = thread->cpu_clock.Read();
  if (cpu && thread->last_seen_cpu && *cpu == *thread->last_seen_cpu) {
    const int64_t interval_ns =
        TimeDuration::FromMilliseconds(settings.interval_ms).ToNanoseconds();
    if (thread->last_sample_cpu_ns >= 0 &&
        cpu->ToNanoseconds() - thread->last_sample_cpu_ns >= interval_ns) {
      PutCopyOfLastSampleLocked(thread, *cpu, now);
    } else if (thread->last_sample != RegisteredThread::LastSample::kCpu) {
      // Off CPU after a wrapped wait ended, in no wrapped call (docs/sampling.md, "Unknown
      // waits"): not more time of that wait. The first such sample starts where the wait
      // ended, so the wait's own samples stand for its time only.
      const int64_t ended = thread->wait.last_ended_ns;
      const bool first = thread->last_sample == RegisteredThread::LastSample::kWait;
      PutUnknownWaitLocked(
          thread, first && ended > 0 && ended < now.ToNanoseconds() ? TimeStamp::FromNanoseconds(ended) : now,
          0);
    } else {
      GetSession().buffer.PutObjects(EntryKind::kSameSample, thread->tid, now, int64_t{0});
    }
  } else if (thread->timer_parked &&
             thread->timer.Arm(TimeDuration::FromMilliseconds(settings.interval_ms)) == 0) {
    thread->timer_parked = false;
  }
  thread->last_seen_cpu = cpu;
}

}  // namespace base_internal
}  // namespace strata
