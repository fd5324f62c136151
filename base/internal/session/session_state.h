// The base tier's session state, shared by the files of the session machinery (internal to
// //base:base_impl, never seen by a later tier): the Session (its mutex, the one profile
// buffer, the sampler thread's handle) and the process-wide flags that the signal handler,
// the sampler thread and the public API read. Defined in core.cc, which owns the session's
// life (docs/session.md).
//
// Locks: the session mutex, then Session::sampler_loop_mutex, then the registry mutex
// (core.h gives the whole order). The signal handler takes none.
//
// Thread safety: GetSession() is thread-safe; Session's members are under its mutex unless
// stated. The atomics may be read anywhere, in signal context too (async-signal-safe: lock-free
// loads); they are written where stated.
//
// Symbols: everything declared here is STRATA_BASE_HIDDEN, shared between base's own object
// files but never exported from libstrata_base.so (its version script exports
// namespace strata; these were once file-local to core.cc and stay out of the ABI).
#ifndef STRATA_BASE_INTERNAL_SESSION_STATE_H_
#define STRATA_BASE_INTERNAL_SESSION_STATE_H_

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "base/internal/session/tier_extension.h"
#include "platform/mutex.h"
#include "platform/time_stamp.h"
#include "shared/buffer/chunked_buffer.h"

// Base-internal symbols shared between base's files, not exported from libstrata_base.so.
#define STRATA_BASE_HIDDEN __attribute__((visibility("hidden")))

namespace strata {
class ControlledChunkManager;
namespace base_internal {

struct STRATA_BASE_HIDDEN Session {
  Mutex mutex{"strata session"};
  ChunkedBuffer buffer{ThreadSafety::kThreadSafe};
  TimeStamp start_time;
  std::string shutdown_path;
  pthread_t sampler_thread{};
  bool sampler_running = false;
  int32_t sampler_pid = 0;  // The process the sampler thread belongs to (RawGetPid()).
  // Held by the sampler thread for each loop iteration, the only place where a tier
  // extension's loop hooks run: taking it once after g_extension changed is the safe point
  // after which no iteration uses the previous extension (DetachTierExtension). Lock order:
  // session mutex -> this -> registry mutex.
  Mutex sampler_loop_mutex{"strata sampler loop"};
  // The buffer's manager while a session runs (owned by the buffer), for a controller.
  ControlledChunkManager* controlled_manager = nullptr;
};

// Leaked: threads may still run (and unregister) during exit, after static destructors.
STRATA_BASE_HIDDEN Session& GetSession();

// Set in a fork()ed child (core.cc, OnForkChild): the profiler stays off there for good.
extern std::atomic<bool> g_forked_child STRATA_BASE_HIDDEN;
// The attached tier extension (tier_extension.h). Changed under the session mutex while the
// sampler thread keeps running; the sampler reads it once per loop iteration (see
// Session::sampler_loop_mutex).
extern std::atomic<const TierExtension*> g_extension STRATA_BASE_HIDDEN;
// Asks the sampler thread to end (sampler_thread.h): 1 to stop, 0 to run. An int, the futex
// word the sampler sleeps on between loops, so that a stop wakes it at once (a process's
// exit used to wait up to a sampler period, 4 ms, for its next wake-up; issue 38).
extern std::atomic<int> g_sampler_stop STRATA_BASE_HIDDEN;
// libunwind is loaded and warmed up in this process (WarmUpLibunwind, libunwind_walker.h), so
// a handler may walk with it; until then samples and marker stacks walk frame pointers. Set
// once, by a session's start (core.cc, StartLocked), never cleared. When libunwind cannot be
// loaded it stays false for good (logged once).
extern std::atomic<bool> g_libunwind_ready STRATA_BASE_HIDDEN;
// The sampler may make a sampled thread's ring resident (SampleRing::MakeResident): set by a
// session's start where no seccomp filter is in force (a filter might kill on an madvise it
// does not expect: issue 33).
extern std::atomic<bool> g_ring_populate_allowed STRATA_BASE_HIDDEN;
// The running session's features, for the signal handler.
extern std::atomic<uint32_t> g_sampling_features STRATA_BASE_HIDDEN;
// The running session's sampling interval in ns (0 when none), for the signal handler's
// compensation of its own cost (sample_capture.cc, "The handler's own cost").
extern std::atomic<int64_t> g_sampling_interval_ns STRATA_BASE_HIDDEN;
// The running session's start, or its latest resume (TimeStamp ns): a wait that a thread
// writes itself (wait/own_samples.h) counts from there, as the sampler's waits do.
extern std::atomic<int64_t> g_wait_samples_since_ns STRATA_BASE_HIDDEN;

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_SESSION_STATE_H_
