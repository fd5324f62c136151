// JavaScript stacks from SpiderMonkey 102 (Debian's libmozjs-102) in Strata's samples: the
// adapter of full/script/script_stack.h for SpiderMonkey, in its own library
// (libstrata_spidermonkey.so, which links libstrata_full.so and libmozjs-102.so). See
// docs/js.md; the measurements behind the design are in the design note spidermonkey.md
// (outside the repository, see docs/js.md).
//
// The application owns the engine: JS_Init, its contexts, JS_ShutDown. For each JSContext it
// wants profiled, on the thread that owns the context:
//
//   JSContext* cx = JS_NewContext(...);            // the application's
//   strata::full::spidermonkey::AttachJSContext(cx);
//   ... run scripts; a session started or stopped anywhere turns the engine's profiling
//       instrumentation on or off on this thread at its next interrupt check ...
//   strata::full::spidermonkey::DetachJSContext(cx);  // with no script running on it
//   JS_DestroyContext(cx);
//
// While attached and a full session runs, every sample of the thread carries its JS frames —
// interpreter frames from SpiderMonkey's profiling stack, Baseline Interpreter, Baseline and
// Ion frames from JS::ProfilingFrameIterator on the interrupted registers — merged with the
// engine's labels, Strata's labels and the native frames by stack address. Engine events
// (bailouts, invalidations) become Text markers named by the engine's event string, with its
// details as the text (category JavaScript). DefineStrataObject() gives scripts
// `Strata.marker(...)` and friends.
//
// No SpiderMonkey header is needed to use this one (JSContext and JSObject are only named).
// The library must be built against the very mozjs-102 headers of the libmozjs it runs with
// (some engine layouts are compiled into it).
//
// Thread safety: Attach/Detach/DefineStrataObject/ReadThreadStats on the context's own thread.
// Async-signal safety: none.
#ifndef STRATA_FULL_SCRIPT_SPIDERMONKEY_SPIDERMONKEY_H_
#define STRATA_FULL_SCRIPT_SPIDERMONKEY_SPIDERMONKEY_H_

#include <cstdint>

struct JSContext;
class JSObject;

namespace strata {
namespace full {
namespace spidermonkey {

struct AttachOptions {
  // Register the engine's profiling event marker (bailouts, invalidations) as markers.
  bool event_markers = true;
};

// Attaches `cx`, owned by the calling thread (one context per thread, as SpiderMonkey has):
// installs a SpiderMonkey ProfilingStack of our own, an interrupt callback (through which
// profiling is turned on and off on this thread when a session starts or stops elsewhere),
// and publishes the context to the thread's sampling handler; turns profiling on now if a
// full session runs. Registers the thread with the profiler if needed. False when `cx`
// already has a profiling stack that is not ours, or the thread already has another context
// attached.
bool AttachJSContext(JSContext* cx, const AttachOptions& options = AttachOptions());

// Detaches `cx`, in this order: the sampling handler stops reading it, the engine's profiling
// is turned off (on this thread), the ProfilingStack is uninstalled and freed. Must run on the
// thread that attached it, with no script of the context on the stack (from inside JS the
// engine still has frames on our stack, which must stay alive): then false and nothing
// changes. Call it before JS_DestroyContext. The interrupt callback stays registered with the
// context (SpiderMonkey 102 has no way to remove one) and does nothing once detached.
bool DetachJSContext(JSContext* cx);

// True when the calling thread has `cx` attached.
bool IsAttached(JSContext* cx);

// Turns the engine's profiling on or off on the calling thread to match the session now
// (what the interrupt callback does). Attach calls it; an embedder without JS running for a
// long time may call it after starting a session.
void PollProfiling(JSContext* cx);

// Defines `Strata` on `global` (entering global's realm):
//   Strata.marker(name[, text])        instant marker (a "Text" marker with text)
//   Strata.markerStart(name[, text])   interval start ...
//   Strata.markerEnd(name[, text])     ... and end, paired by name on the thread
//   Strata.interval(name, start[, text])  interval from `start` (Strata.now()) to now
//   Strata.now()                       ms on the profiler's clock (CLOCK_MONOTONIC)
//   Strata.isActive()                  whether a session samples: active and not paused
//                                      (markers are recorded during a pause too)
// Markers go through the base marker API (category JavaScript) into the session buffer.
bool DefineStrataObject(JSContext* cx, JSObject* global);

// Sampling statistics of the calling thread's attached context.
struct ThreadStats {
  bool attached = false;
  bool profiling_enabled = false;   // The engine's instrumentation is on.
  uint64_t enable_count = 0;        // Times it was turned on / off on this thread.
  uint64_t disable_count = 0;
  uint64_t samples = 0;             // Samples taken while attached.
  uint64_t samples_with_js = 0;     // ... with at least one JS frame or engine label.
  uint64_t script_frames = 0;
  uint64_t dropped_frames = 0;      // Frames beyond the slot's capacity.
  uint64_t cached_walks = 0;        // Samples whose outer native frames came from the cache.
  uint64_t cache_resumes = 0;       // Walks out of JIT code by the cached outer segment.
  uint64_t scan_resumes = 0;        // Walks out of JIT code by a return address a stack scan found.
  uint64_t cut_walks = 0;           // Walks that found no way out of JIT code (no native root).
  double mean_sample_us = 0;        // Whole sample, in the handler.
  double median_sample_us = 0;      // Over the last 1024 samples.
  double p90_sample_us = 0;
  double max_sample_us = 0;
};
ThreadStats ReadThreadStats(JSContext* cx);

}  // namespace spidermonkey
}  // namespace full
}  // namespace strata

#endif  // STRATA_FULL_SCRIPT_SPIDERMONKEY_SPIDERMONKEY_H_
