// Capture of one sample on the sampled thread, in its sampling-signal handler: base's own
// sampling callback (OnSamplingSignal), and the pieces of it a tier's callback uses
// (tier_extension.h: BeginSample, BeginSampleWithoutNativeWalk, WalkNativeSegment,
// CommitSample, defined in sample_capture.cc). docs/sampling.md.
//
// Async-signal safety: everything here runs in signal context on the sampled thread: no
// lock, no allocation, no cancellation point, no errno left changed (the dispatcher in
// platform/sampling saves it). Thread safety: only the sampled thread writes its scratch slot
// and its ring; the sampler thread reads a sample from the ring after CommitSample
// (sample_ring.h).
#ifndef STRATA_BASE_INTERNAL_SAMPLE_CAPTURE_H_
#define STRATA_BASE_INTERNAL_SAMPLE_CAPTURE_H_

#include <ucontext.h>

#include "base/internal/session/session_state.h"
#include "base/labels.h"
#include "platform/sampling/native_frame.h"

namespace strata {
namespace base_internal {

// Base's own sampling callback (retired while a tier extension provides one), installed by
// core.cc (StartLocked, DetachTierExtension). `context` is the thread's RegisteredThread.
STRATA_BASE_HIDDEN void OnSamplingSignal(void* context, ucontext_t* signal_context,
                                         int overruns);

struct SampleSlot;

// Copies a thread's label stack into `slot` (labels, label_count; at most
// SampleSlot::kMaxLabels, dynamic strings cut to the slot's room). The stack must not change
// meanwhile: the calling thread's own (its handler, or a wrapper with the sampling signal
// blocked), or that of a thread waiting in a wrapper. Async-signal-safe.
STRATA_BASE_HIDDEN void CopyLabelsIntoSlot(const ProfilingStack& labels, SampleSlot* slot);

struct RegisteredThread;

// The calling thread's own stack walked from `context` (a wrapped call's caller registers:
// own_samples.h), as its signal handler walks a sample under the sampling `features` (the
// caller's snapshot of them): frames into `frames`. *reads_logged
// is false when frame pointers were read (directly), true otherwise: the frames are then a
// function of the context's pc, sp and fp, the stack words libunwind read (a WalkReadLog set
// on the thread has them all: libunwind_imports.h) and the loaded objects. Async-signal-safe.
STRATA_BASE_HIDDEN size_t WalkCallerStack(RegisteredThread* thread, ucontext_t* context,
                                          NativeFrame* frames, size_t capacity,
                                          uint32_t features, bool* reads_logged);

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_SAMPLE_CAPTURE_H_
