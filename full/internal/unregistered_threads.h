// Spying on threads that never registered (seed: "Unregistered Thread Profiling"): at a low
// rate, the sampler thread lists the process's threads, reads the CPU clock of each one the
// registry does not know, and records the CPU it used since the last look as an interval
// marker ("Unregistered thread") on the main thread's track: who else is burning CPU.
//
// Thread safety: called from the sampler thread only. Async-signal safety: no.
#ifndef STRATA_FULL_INTERNAL_UNREGISTERED_THREADS_H_
#define STRATA_FULL_INTERNAL_UNREGISTERED_THREADS_H_

#include "platform/time_stamp.h"

namespace strata {
namespace full {

// One look at the unregistered threads (a /proc/self/task listing plus one CPU-clock read
// per thread).
void SpyOnUnregisteredThreads(TimeStamp now);

// Forgets what the previous looks saw (a new session starts from scratch).
void ResetUnregisteredThreadSpy();

}  // namespace full
}  // namespace strata

#endif  // STRATA_FULL_INTERNAL_UNREGISTERED_THREADS_H_
