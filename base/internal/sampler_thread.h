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

#include <algorithm>
#include <cstdint>

#include "base/internal/sample_ring.h"
#include "base/internal/session_state.h"
#include "base/profiler.h"
#include "platform/time_stamp.h"

namespace strata {
namespace base_internal {

// Starts the sampler thread for a session of `settings` (logged when it cannot start:
// the session then records markers and nothing drains the rings). Session mutex held.
STRATA_BASE_HIDDEN void StartSamplerThreadLocked(Session& session,
                                                 const ProfilerSettings& settings);
// Asks the sampler thread to end and joins it (nothing when it is not running). Session
// mutex held.
STRATA_BASE_HIDDEN void StopSamplerThreadLocked(Session& session);

// The sampler loop's period while a thread is on a perf task-clock event in default mode
// (sampler_thread.cc, SamplerThreadMain).
inline constexpr int64_t kPerfLoopPeriodNs = 4000000;

// That period in requested intervals of `interval`: kPerfLoopPeriodNs, at most an eighth of
// the typical samples a thread's ring holds (sample_ring.h), so that a sampler thread kept
// from running for seven more periods still loses nothing (at 1 ms: 4 intervals, and a ring
// holds 119 ms of typical samples; at 0.25 ms: 14 intervals, 3.5 ms, of 29.75 ms); at least 1.
// Any thread.
inline int64_t SamplerLoopIntervalsWithPerfEvents(TimeDuration interval) {
  const int64_t interval_ns = std::max<int64_t>(1, interval.ToNanoseconds());
  const int64_t by_period = std::max<int64_t>(1, kPerfLoopPeriodNs / interval_ns);
  const int64_t by_ring =
      std::max<int64_t>(1, static_cast<int64_t>(SampleRing::kTypicalRecords / 8));
  return std::min(by_period, by_ring);
}

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_SAMPLER_THREAD_H_
