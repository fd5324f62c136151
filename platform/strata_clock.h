// The Strata clock's writer: switches TimeStamp::Now() to the TSC when it can be trusted and
// keeps the conversion (platform/strata_clock_table.h) slaved to CLOCK_MONOTONIC.
//
//   // The sampler thread, at each loop:
//   UpdateStrataClock();
//
// Each call takes an anchor (rdtsc, clock_gettime(CLOCK_MONOTONIC), rdtsc; the tightest of
// five) and, at most every kStrataClockUpdatePeriod, publishes a segment that starts
// kStrataClockLead in the future, continues the function where it stands, and has the slope
// that brings it onto CLOCK_MONOTONIC (as extrapolated from the long-run rate) over
// kStrataClockConvergence, within ±kStrataClockMaxSlewPpm of that rate. The first segment is
// published once two anchors are kStrataClockFirstWindow apart; it starts a margin (the
// anchors' uncertainty) above CLOCK_MONOTONIC, so the switch from clock_gettime never goes
// back, and the following segments slew that margin away.
//
// The TSC is used when it is a hardware counter (x86-64) read with rdtscp (the readers' ordered
// read; CPUID says the CPU has it), invariant (CPUID nonstop_tsc), the
// kernel's own clock source ("tsc" in /sys/devices/system/clocksource/clocksource0: a kernel
// that found it unstable on this machine or VM switched away from it), and the calling thread
// may execute rdtsc; otherwise UpdateStrataClock() does nothing and Now() stays on
// clock_gettime, as before issue 38.
//
// Thread safety: one caller at a time (the sampler thread; the base and full tiers share
// one). StrataClockStatistics() is thread-safe. Not async-signal-safe (reads a file once).
#ifndef STRATA_PLATFORM_STRATA_CLOCK_H_
#define STRATA_PLATFORM_STRATA_CLOCK_H_

#include <cstdint>

#include "platform/time_stamp.h"

namespace strata {

inline constexpr TimeDuration kStrataClockFirstWindow = TimeDuration::FromMilliseconds(10);
inline constexpr TimeDuration kStrataClockUpdatePeriod = TimeDuration::FromMilliseconds(50);
inline constexpr TimeDuration kStrataClockLead = TimeDuration::FromMilliseconds(2);
inline constexpr TimeDuration kStrataClockConvergence = TimeDuration::FromMilliseconds(500);
inline constexpr int64_t kStrataClockMaxSlewPpm = 500;

// See above. Returns true when the Strata clock runs on the TSC after the call.
bool UpdateStrataClock();

// True when this process's Strata clock runs on the TSC. Thread-safe, async-signal-safe.
bool StrataClockUsesTsc();

// True when this machine's TSC may carry the Strata clock (x86-64, rdtscp, invariant, the
// kernel's clock source), whatever the calling thread may do. Thread-safe; reads a file at the first
// call (not async-signal-safe then).
bool StrataClockTscUsable();

struct StrataClockStatistics {
  uint64_t segments = 0;         // Published.
  uint64_t skipped_updates = 0;  // Not published: the anchor was disturbed, or the writer
                                 // was held up until too close to the segment's start.
  uint64_t late_publications = 0;  // Published when the TSC had passed the segment's start:
                                   // readers may have converted ticks past it by the
                                   // previous segment (an ordering error of at most the two
                                   // slopes' difference over the delay). Expected 0.
  int64_t last_offset_ns = 0;      // Strata clock minus CLOCK_MONOTONIC at the latest update,
  int64_t max_abs_offset_ns = 0;   // and the largest magnitude since the first segment's
                                   // kStrataClockConvergence (the switch's margin excluded).
  int64_t last_anchor_uncertainty_ns = 0;  // Half the latest anchor's bracket.
};

// A snapshot of the writer's counters. Thread-safe (relaxed reads).
StrataClockStatistics GetStrataClockStatistics();

}  // namespace strata

#endif  // STRATA_PLATFORM_STRATA_CLOCK_H_
