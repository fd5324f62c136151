// The session's sampler thread: every loop it drains the registered threads' rings into the
// session buffer (thread_sampling.cc), flushes their staged markers, samples the counters,
// runs the attached tier extension's loop hook, and notices a sampling-signal handler the
// program took away. The loop's period and its reasons are in sampler_thread.cc.
//
// Thread safety: Start/StopSamplerThreadLocked with the session mutex held (core.cc,
// StartLocked/StopLocked). The thread itself takes Session::sampler_loop_mutex for each
// iteration, then the registry mutex. Async-signal safety: none; the sampler thread never
// receives the sampling signal.
#ifndef STRATA_BASE_INTERNAL_SAMPLER_THREAD_H_
#define STRATA_BASE_INTERNAL_SAMPLER_THREAD_H_

#include "base/internal/session_state.h"
#include "base/profiler.h"

namespace strata {
namespace base_internal {

// Starts the sampler thread for a session of `settings` (logged when it cannot start:
// the session then records markers and nothing drains the rings). Session mutex held.
STRATA_BASE_HIDDEN void StartSamplerThreadLocked(Session& session,
                                                 const ProfilerSettings& settings);
// Asks the sampler thread to end and joins it (nothing when it is not running). Session
// mutex held.
STRATA_BASE_HIDDEN void StopSamplerThreadLocked(Session& session);

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_SAMPLER_THREAD_H_
