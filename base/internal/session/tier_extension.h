// How a later tier (full) extends the base tier's session in place: same buffer, same thread
// registry, same sampler code, same timers. See docs/takeover.md.
//
// The base tier owns the session machinery. A tier extension brings:
//   - a sampling-signal callback that replaces base's (base's is retired). It runs base's
//     own capture (BeginSample / CommitSample below) and may add to the slot in between;
//   - work for the sampler thread's loop (counters, spying on unregistered threads);
//   - whether the loop's own cost (overhead) is recorded.
// AttachTierExtension() swaps these in without waiting for any other thread: when a session
// is running, the one sampler thread keeps running and runs the extension's loop work from
// its next iteration on (it reads the attached extension once per iteration), and the signal
// callback is switched with one atomic exchange, with no instant unhandled. No timer is
// re-created, no ring reset, no thread stopped or started: the hand-over takes microseconds
// whatever the scheduler does, and no sample is delayed or lost by it. DetachTierExtension()
// does the same the other way, then waits for the extension's last uses (a handler still in
// its callback, the sampler's current iteration) so that none of its code runs afterwards;
// samples go on meanwhile.
//
// Thread safety: Attach/Detach are thread-safe (session lock). BeginSample,
// BeginSampleWithoutNativeWalk and CommitSample are for the sampling-signal callback only
// (async-signal-safe, on the sampled thread).
#ifndef STRATA_BASE_INTERNAL_TIER_EXTENSION_H_
#define STRATA_BASE_INTERNAL_TIER_EXTENSION_H_

#include <cstdint>

#include <ucontext.h>

#include "base/internal/sampling/sample_ring.h"
#include "platform/sampling/native_frame.h"
#include "platform/time_stamp.h"

namespace strata {
class ControlledChunkManager;
namespace profile {
struct CaptureInputs;
}  // namespace profile
namespace base_internal {

// The sampling signal's callback type (platform/sampling/sampling_signal.h's
// SamplingCallback, repeated here so that a tier needs no platform/sampling header).
using TierSignalCallback = void (*)(void* thread_context, ucontext_t* context, int overruns);

struct TierExtension {
  const char* name = "";
  // Replaces base's sampling callback while attached (null: keep base's).
  TierSignalCallback signal_callback = nullptr;
  // Called by the sampler thread once per loop, after threads and counters (may be null).
  void (*on_sampling_loop)(TimeStamp loop_start) = nullptr;
  // Record the sampler loop's own cost (kProfilerOverhead entries).
  bool record_overhead = false;
  // Called by every capture (capture.h) with its inputs, before the profile is written, on
  // the capturing thread with the session lock held (may be null). The multi-process
  // capture adds the children's profiles here (docs/ipc.md).
  void (*adjust_capture)(profile::CaptureInputs& inputs) = nullptr;
};

struct TakeoverReport {
  bool session_was_running = false;  // A running session was taken over in place.
  // The hand-over under the session lock: the extension and the signal callback swapped in
  // (samples keep being taken and drained throughout).
  TimeDuration sampler_handover;
  uint64_t buffer_blocks_before = 0;  // Blocks pushed into the buffer before the takeover.
};

// Makes `extension` (which must outlive its attachment) part of the session machinery.
TakeoverReport AttachTierExtension(const TierExtension* extension);
// Removes it (if attached); a running session goes back to base's own sampler and callback.
// After return, none of the extension's functions runs or will run.
void DetachTierExtension(const TierExtension* extension);
// The attached extension, or null.
const TierExtension* AttachedTierExtension();

// The running session's chunk manager, as a multi-process controller sees it (updates,
// destruction of released chunks), or null out of session. Only while holding a SessionLock
// (core.h): the manager goes away when the session stops.
ControlledChunkManager* SessionControlledChunkManager();
// The same manager's DestroyChunksAtOrBefore(done), without waiting for the session lock:
// false (nothing done) when the lock is held (a capture, a start or a stop); try later.
bool TryDestroySessionChunksAtOrBefore(TimeStamp done);

// A tier's own data for the calling thread (for example its script-engine context), kept with
// the thread's registration; false when the thread is not registered. The tier owns `data`
// and must reset it (nullptr) before freeing it.
bool SetCurrentThreadTierData(void* data);
// That data for the thread of a sampling-signal callback's `thread_context`.
// Async-signal-safe.
void* TierDataOf(void* thread_context);

// Base's capture of one sample on the current thread, for a tier's signal callback: fills
// the thread's scratch slot with time, CPU time, native frames and labels, and returns it
// (not yet visible to the sampler), or null when this thread takes no sample now. The
// callback may add to the slot, then must call CommitSample(), which copies the slot's used
// parts into the thread's ring (or drops the sample, counted, when they do not fit:
// sample_ring.h). Async-signal-safe.
SampleSlot* BeginSample(void* thread_context, ucontext_t* context, int overruns);
void CommitSample(void* thread_context);

// How base walks a thread's native stack in the running session, for a tier that walks it
// itself.
struct NativeWalkPlan {
  bool walk = false;            // Feature stackwalk: walk at all (else the pc only).
  bool frame_pointers = false;  // Feature framepointers, or libunwind is unavailable.
  uintptr_t stack_low = 0;      // The thread's stack, [low, high).
  uintptr_t stack_high = 0;
};

// BeginSample without the native walk, for a tier that knows code base's walkers cannot
// unwind (a script engine's JIT code): the slot's natives hold only the interrupted pc and
// sp (native_count 1) and *plan says how base would have walked. The callback then writes the
// natives itself (SampleSlot: innermost first, pc 0 = boundary) and calls CommitSample().
// Async-signal-safe.
SampleSlot* BeginSampleWithoutNativeWalk(void* thread_context, ucontext_t* context,
                                         int overruns, NativeWalkPlan* plan);

// One segment of such a walk: the calling thread's native stack, walked as base walks it
// (libunwind, or frame pointers per the plan) from `start` (null: the interrupted registers
// of `context`; otherwise registers a tier knows, such as those of the native frame that
// entered JIT code), innermost first into `frames`. The walk stops before the first frame
// whose pc lies in no loaded ELF object (JIT code, which base cannot unwind): then *stopped
// holds that frame's pc, stack pointer and frame pointer (fp 0 when unknown), else it is
// zeroed. Returns the frames written (0 when `start` itself is such code). `ended` (may be
// null): set when the walk reached the stack's outermost frame by the unwind rules' own
// account (libunwind's step found no caller: `_start`, a thread's start), not an unwind
// error, a capacity limit or JIT code; always false for a frame-pointer walk.
// Async-signal-safe (libunwind: own thread, own handler).
size_t WalkNativeSegment(void* thread_context, ucontext_t* context, const FrameRegisters* start,
                         NativeFrame* frames, size_t capacity, FrameRegisters* stopped,
                         bool* ended = nullptr);

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_TIER_EXTENSION_H_
