// The registered counters (base/counters.h): ProfilerCounter's constructor and destructor
// register and unregister a counter here, the sampler thread samples them every loop, and
// capture describes them (core.h, CounterDescriptions, defined in counter_registry.cc).
//
// Thread safety: thread-safe (the counter registry's own mutex, taken after the session and
// registry mutexes, never with another lock taken inside it but the buffer's). Async-signal
// safety: none. A fork()ed child neither registers nor samples counters.
#ifndef STRATA_BASE_INTERNAL_COUNTER_REGISTRY_H_
#define STRATA_BASE_INTERNAL_COUNTER_REGISTRY_H_

#include "base/internal/session/session_state.h"
#include "platform/time_stamp.h"

namespace strata {
namespace base_internal {

// Writes a kCounterSample entry at `now` for each live counter whose value or operation
// count changed since its last sample of the session, or that has none yet. Sampler thread.
STRATA_BASE_HIDDEN void SampleCounters(TimeStamp now);

// Called when a session starts: its first sampling loop samples every live counter, changed
// or not, so that each session's profile has every counter from its start.
STRATA_BASE_HIDDEN void ForgetCounterSamples();

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_COUNTER_REGISTRY_H_
