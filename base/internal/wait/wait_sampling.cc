// Wait stacks, the sampler's side (thread_registry.h: SampleWaitLocked,
// FinishEndedWaitLocked; docs/sampling.md, "Wait stacks"; the protocol is in wait_state.h).
//
// A thread blocked in a wrapped function (wait_wrappers.cc) gets one sample per interval of
// the wait's wall time, time-stamped at the multiples of the interval inside the wait (the
// interval grid, own_samples.h), with CPU delta 0. The first one, written once the wait has
// reached a grid point, carries the stack walked from the wrapper's snapshot: the wrapped
// function (its leaf) and the program's frames above it; the others are copies of it
// (kSameSample), O(1) each, however long the wait. No signal is sent to the waiting thread.
// A wait the sampler did not walk while it lasted (shorter than the sampler's period, or the
// sampler kept off a CPU) gets the same samples from the thread itself as it leaves the
// wrapper (own_samples.h, WriteMissedWaitSamples).
//
// The walk runs on the sampler thread over the waiting thread's stack, which is safe here
// (unlike a suspended thread's, libunwind_walker.h): the thread is inside our wrapper, in
// neither libunwind nor the loader, and cannot return into the walked frames before the walk
// ends (WaitState::walking); libunwind's object lookups are served from _dl_find_object
// without the loader's lock (SetLibunwindLookupPc), and every frame's stack pointer is kept
// inside the thread's stack bounds.
//
// Thread safety: registry mutex held (sampler thread). Async-signal safety: none.
#include <ucontext.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>

#include "base/internal/sampling/sample_capture.h"
#include "base/internal/sampling/sample_entries.h"
#include "base/internal/session/session_state.h"
#include "base/internal/registry/thread_registry.h"
#include "base/internal/wait/kernel_cpu_charge.h"
#include "platform/sampling/libunwind_imports.h"
#include "base/internal/wait/own_samples.h"
#include "platform/sampling/frame_pointer_walker.h"
#include "platform/sampling/libunwind_walker.h"
#include "platform/time_stamp.h"
#include "shared/buffer/entry_kinds.h"

namespace strata {
namespace base_internal {
namespace {

int64_t IntervalNs() {
  return std::max<int64_t>(
      1, TimeDuration::FromMilliseconds(GetRegistry().settings.interval_ms).ToNanoseconds());
}

// The sampler's slot for wait stacks (one at a time, under the registry mutex).
SampleSlot* WaitStackSlot() {
  return StaticConsumerSlot<struct WaitStackSlotTag>();
}

// Walks `thread`'s stack from its wait's snapshot and writes it as a sample at `time`, CPU
// delta 0. Returns false (nothing written) when the wait `sequence` ended, or its thread began
// to leave it, before the walk (the thread then writes the samples itself: wait_state.h).
bool WriteWaitStackLocked(RegisteredThread* thread, uint64_t sequence, TimeStamp time) {
  WaitState& wait = thread->wait;
  wait.BeginWalk();
  if (wait.sequence.load(std::memory_order_seq_cst) != sequence ||
      wait.ending_sequence.load(std::memory_order_seq_cst) == sequence) {
    wait.EndWalk();
    return false;
  }
  // The thread stays in this wait's wrapper until `walking` is cleared: the snapshot is this
  // wait's, and the frames above the wrapper do not change.
  SampleSlot* slot = WaitStackSlot();
  const uintptr_t function = wait.function.load(std::memory_order_relaxed);
  const FrameRegisters caller{wait.caller_pc.load(std::memory_order_relaxed),
                              wait.caller_sp.load(std::memory_order_relaxed),
                              wait.caller_fp.load(std::memory_order_relaxed)};
  // The wrapped function is the leaf (+1: inside it, whatever a symbolizer does with it).
  slot->natives[0] = {function + 1, caller.sp - 2 * sizeof(uintptr_t)};
  size_t count = 1;
  const uint32_t features = g_sampling_features.load(std::memory_order_relaxed);
  if (!(features & kFeatureStackWalk) || !thread->bounds.Contains(caller.sp)) {
    slot->natives[count++] = {caller.pc, caller.sp};
  } else if ((features & kFeatureFramePointers) ||
             !g_libunwind_ready.load(std::memory_order_acquire)) {
    // The caller's frame first, then its callers by the frame record chain.
    slot->natives[count++] = {caller.pc, caller.sp};
    FrameRegisters resume;
    count += WalkFramePointerCallers(caller, thread->bounds, slot->natives + count,
                                     SampleSlot::kMaxNativeFrames - count, nullptr, &resume);
  } else {
    ucontext_t context;
    memset(&context, 0, sizeof(context));
    context.uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(caller.pc);
    context.uc_mcontext.gregs[REG_RSP] = static_cast<greg_t>(caller.sp);
    context.uc_mcontext.gregs[REG_RBP] = static_cast<greg_t>(caller.fp);
    // On the sampler thread every signal is blocked (profiler_thread_signals.h): libunwind's
    // own blocking, two system calls a frame, is skipped. Asked, not assumed: a program's
    // thread also gets here (its unregistration, a registration's sweep, the save), with
    // its own mask.
    ScopedEverySignalBlocked every_signal_blocked(EverySignalBlockedOnThisThread());
    count += WalkStackWithLibunwind(&context, thread->bounds, slot->natives + count,
                                    SampleSlot::kMaxNativeFrames - count);
  }
  // The thread's labels (its label stack cannot change either: the thread is in the wrapper).
  // The frames were written before the thread entered the wait: the sequence's acquire load
  // above (it read the wait's release store) already orders them before these reads.
  CopyLabelsIntoSlot(thread->profiling_stack, slot);
  // The thread, once this wait ends, leaves its samples to the sampler (own_samples.h).
  wait.walked_sequence.store(sequence, std::memory_order_release);
  wait.EndWalk();
  slot->time_ns = time.ToNanoseconds();
  slot->cpu_ns = -1;
  slot->overruns = 0;
  slot->in_system_call = false;
  slot->native_count = static_cast<uint32_t>(count);
  slot->script_frame_count = 0;
  slot->script_text_bytes = 0;
  GetSession().buffer.PutObjects(EntryKind::kSample, thread->tid, time, int64_t{0}, int32_t{0},
                                 MergedStack{slot});
  thread->previous_stack.Forget();  // The thread's next sample cannot share this one's frames.
  GetRegistry().infos[thread->info_index].recorded = true;
  thread->has_sample = true;
  thread->last_sample = RegisteredThread::LastSample::kWait;
  return true;
}

// Writes the tracked wait's samples up to the `due`-th (1-based: at start + due intervals).
// `sequence`: the wait, still in progress; 0 when it has ended (then only copies of a stack
// already written are added).
void WriteDueWaitSamplesLocked(RegisteredThread* thread, int64_t due, uint64_t sequence) {
  WaitState& wait = thread->wait;
  if (due <= wait.samples_written) return;
  if (ProfilerIsPaused()) {  // Paused time is not profiled.
    wait.samples_written = due;
    return;
  }
  const int64_t interval_ns = IntervalNs();
  // The k-th (1-based) point of the interval grid after the wait's start (own_samples.h:
  // a wait from s to e gets one sample per multiple of the interval in (s, e], so a wait
  // shorter than an interval, or the part of one beyond its last whole interval, is counted
  // in proportion on average instead of being dropped).
  auto time_of = [&](int64_t k) {
    return TimeStamp::FromNanoseconds(WaitGridPoint(wait.tracked_start_ns, k, interval_ns));
  };
  if (!wait.stack_written) {
    if (sequence == 0) return;
    const int64_t first = wait.samples_written + 1;
    // CPU accounting (docs/sampling.md): the CPU used before the wait stays with the next
    // CPU sample when it is less than an interval; an interval or more (missed signals) goes
    // to a copy of the previous CPU sample, at the wait's start, as a blocked thread's copy
    // carries it.
    const std::optional<TimeDuration> cpu = thread->cpu_clock.Read();
    if (thread->has_sample && cpu && thread->last_sample_cpu_ns >= 0 &&
        cpu->ToNanoseconds() - thread->last_sample_cpu_ns >= interval_ns) {
      PutCopyOfLastSampleLocked(thread, *cpu, TimeStamp::FromNanoseconds(wait.tracked_start_ns));
    }
    if (!WriteWaitStackLocked(thread, sequence, time_of(first))) return;
    wait.stack_written = true;
    wait.samples_written = first;
  }
  ChunkedBuffer& buffer = GetSession().buffer;
  for (int64_t k = wait.samples_written + 1; k <= due; ++k) {
    buffer.PutObjects(EntryKind::kSameSample, thread->tid, time_of(k), int64_t{0});
  }
  wait.samples_written = due;
}

}  // namespace

void ResetWaitSamplingLocked(RegisteredThread* thread) {
  WaitState& wait = thread->wait;
  wait.tracked_sequence.store(0, std::memory_order_relaxed);
  wait.samples_written = 0;
  wait.stack_written = false;
  wait.abandoned_sequence = 0;
}

void FinishEndedWaitLocked(RegisteredThread* thread) {
  WaitState& wait = thread->wait;
  const uint64_t tracked = wait.tracked_sequence.load(std::memory_order_relaxed);
  if (tracked == 0 || wait.sequence.load(std::memory_order_acquire) == tracked) return;
  // The thread noted the end of the wait it knew tracked; else (it ended before it could
  // see that) the latest loop that saw it waiting bounds it.
  const int64_t end = wait.end_sequence.load(std::memory_order_acquire) == tracked
                          ? wait.end_ns.load(std::memory_order_relaxed)
                          : wait.last_seen_waiting_ns;
  WriteDueWaitSamplesLocked(thread, WaitGridPoints(wait.tracked_start_ns, end, IntervalNs()), 0);
  wait.tracked_sequence.store(0, std::memory_order_relaxed);
  // An unknown wait that follows is dated from here (thread_sampling.cc): never before a point
  // already written. The thread may end the wait before such a point, at a sample its handler
  // took inside the call (wait_wrappers.cc, WaitSpanAroundOwnSample), after a loop had written
  // points past that sample.
  const int64_t last_written =
      wait.samples_written > 0
          ? WaitGridPoint(wait.tracked_start_ns, wait.samples_written, IntervalNs())
          : 0;
  wait.last_ended_ns = std::max(end, last_written);
}

bool SampleWaitLocked(RegisteredThread* thread, TimeStamp now, bool ran) {
  WaitState& wait = thread->wait;
  const uint64_t sequence = wait.sequence.load(std::memory_order_acquire);
  if ((sequence & 1) == 0 || sequence == wait.abandoned_sequence) return false;
  // The thread took CPU samples (an interval of CPU) since the previous loop while in a wait
  // that loop already saw: it is running, so it left the wait without the wrapper's return
  // (siglongjmp out of a signal handler: wait_wrappers.cc). Its snapshot describes frames that
  // may be gone: never walked, no more samples for it.
  // Unless the latest of those samples was taken inside the wrapped call itself (its walk
  // passes through the wrapper's caller frame: the thread ran between the wrapper's mark and
  // the blocking system call, preempted there on a loaded machine; seen in a CI run, the rest
  // of a 200 ms waitpid then became copies of that sample): still waiting. The grid points up
  // to that sample's time are its, not the wait's; and the wait's stack is written again at
  // the next point (its copies repeat the latest sample written, which is now that one).
  if (ran && wait.tracked_sequence.load(std::memory_order_relaxed) == sequence) {
    if (thread->signal_sample_wait_sequence != sequence) {
      wait.tracked_sequence.store(0, std::memory_order_relaxed);
      wait.abandoned_sequence = sequence;
      return false;
    }
    wait.samples_written =
        std::max(wait.samples_written,
                 WaitGridPoints(wait.tracked_start_ns, thread->signal_sample_ns, IntervalNs()));
    wait.stack_written = false;
  }
  if (wait.tracked_sequence.load(std::memory_order_relaxed) != sequence) {
    FinishEndedWaitLocked(thread);  // An earlier wait that ended (normally done already).
    // What the thread wrote into its ring before this wait began (the sequence's acquire load
    // above makes it visible), drained first, so that it precedes this wait's samples: a
    // record it wrote as it left an earlier wrapped call (own_samples.h), or its handler's
    // last samples. The wait's copies (kSameSample) then repeat the wait's own stack.
    if (DrainRingLocked(thread)) thread->has_sample = true;
    // Acquire: the sequence is re-read after the start (a sequence lock's read side).
    const int64_t start = wait.start_ns.load(std::memory_order_acquire);
    if (wait.sequence.load(std::memory_order_relaxed) != sequence) return false;  // Ended.
    wait.tracked_sequence.store(sequence, std::memory_order_relaxed);
    // A wait that began before the session counts from the session's start.
    wait.tracked_start_ns = std::max(start, GetSession().start_time.ToNanoseconds());
    wait.samples_written = 0;
    wait.stack_written = false;
  }
  wait.last_seen_waiting_ns = now.ToNanoseconds();
  WriteDueWaitSamplesLocked(
      thread, WaitGridPoints(wait.tracked_start_ns, now.ToNanoseconds(), IntervalNs()), sequence);
  return true;
}

}  // namespace base_internal
}  // namespace strata
