// The Strata clock's conversion table: the TSC tick counter mapped to nanoseconds of
// CLOCK_MONOTONIC by a continuous, non-decreasing, piecewise-linear function, and the reader
// that applies it. TimeStamp::Now() (platform/time_stamp.h) and the marker fast path read the
// TSC and convert through it; platform/strata_clock.h is its one writer (the sampler thread),
// which keeps it within the calibration error of CLOCK_MONOTONIC (docs/sampling.md, "One
// clock").
//
// The function is a chain of segments. Segment i starts at tick start_ticks(i) with the
// value start_ns(i) and rises by ns_per_tick_q32(i) / 2^32 ns per tick until the next
// segment's start. The writer publishes a segment before its start (it starts ~2 ms in the
// future) with start_ns(i) = segment i - 1's value at start_ticks(i): so the function is
// continuous (to the nanosecond) and non-decreasing, and a tick is converted by the segment
// in force when it was read, whichever table the reader sees afterwards.
//
// Storage is a ring of kStrataClockSlots immutable slots (a published slot is rewritten only
// when the ring wraps, 64 publications later, ~3 s at the writer's pace). Each slot carries a
// sequence number, 2 * index when complete (odd while the writer fills it), which the reader
// checks around its loads: a slot recycled under a stalled reader is detected, never used
// torn. The reader never waits for the writer.
//
// Thread safety: the reader is thread-safe and lock-free. Async-signal safety: the reader is
// async-signal-safe (atomic loads and arithmetic). Ownership: one table per process, defined
// in platform/time_stamp.cc and exported by libstrata_base.so (one copy for both tiers).
#ifndef STRATA_PLATFORM_STRATA_CLOCK_TABLE_H_
#define STRATA_PLATFORM_STRATA_CLOCK_TABLE_H_

#include <atomic>
#include <cstdint>

namespace strata {
namespace clock_internal {

inline constexpr uint64_t kStrataClockSlots = 64;

struct StrataClockSlot {
  std::atomic<uint64_t> sequence{0};  // 2 * index when complete; 2 * index - 1 while written.
  std::atomic<uint64_t> start_ticks{0};
  std::atomic<int64_t> start_ns{0};
  std::atomic<uint64_t> ns_per_tick_q32{0};  // Nanoseconds per tick, 32 fractional bits.
};

struct StrataClockTable {
  // Index of the newest published segment (1 for the first); 0 while the clock is off (the
  // TSC is not usable, or not calibrated yet): TimeStamp::Now() reads clock_gettime then.
  std::atomic<uint64_t> latest{0};
  StrataClockSlot slots[kStrataClockSlots];
};

// The process's table (platform/time_stamp.cc).
extern StrataClockTable g_strata_clock;

// True once the clock runs on the TSC (it never goes back in a process).
inline bool StrataClockOn() { return g_strata_clock.latest.load(std::memory_order_relaxed) != 0; }

// The value of segment (start_ticks, start_ns, q32) at `ticks` (before its start too).
inline int64_t SegmentValue(uint64_t start_ticks, int64_t start_ns, uint64_t q32,
                            uint64_t ticks) {
  const int64_t delta = static_cast<int64_t>(ticks - start_ticks);
  const __int128 product = static_cast<__int128>(delta) * static_cast<__int128>(q32);
  return start_ns + static_cast<int64_t>(product >> 32);
}

// Converts `ticks`, read before this call, to Strata clock nanoseconds. Returns false (and
// leaves *ns alone) when the clock is off or `ticks` precede its first segment (read before
// the clock was switched on): the caller reads clock_gettime instead.
// A tick older than the ring's oldest intact segment (a reader stalled for ~3 s between its
// tick and this call) is converted by that segment's line extended backwards: off by the
// rate difference over the stall, well under the calibration error.
inline bool TicksToStrataNanoseconds(uint64_t ticks, int64_t* ns) {
  StrataClockTable& table = g_strata_clock;
  for (int attempt = 0; attempt < 8; ++attempt) {
    uint64_t index = table.latest.load(std::memory_order_acquire);
    if (index == 0) return false;
    bool have_newer = false;
    uint64_t newer_ticks = 0, newer_q32 = 0;
    int64_t newer_ns = 0;
    for (;;) {
      const StrataClockSlot& slot = table.slots[index % kStrataClockSlots];
      const uint64_t sequence = slot.sequence.load(std::memory_order_acquire);
      const uint64_t start_ticks = slot.start_ticks.load(std::memory_order_relaxed);
      const int64_t start_ns = slot.start_ns.load(std::memory_order_relaxed);
      const uint64_t q32 = slot.ns_per_tick_q32.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      const bool intact = sequence == 2 * index &&
                          slot.sequence.load(std::memory_order_relaxed) == sequence;
      if (!intact) {
        if (!have_newer) break;  // The newest slot was recycled under us: start over.
        *ns = SegmentValue(newer_ticks, newer_ns, newer_q32, ticks);  // See above.
        return true;
      }
      if (static_cast<int64_t>(ticks - start_ticks) >= 0) {
        *ns = SegmentValue(start_ticks, start_ns, q32, ticks);
        return true;
      }
      if (index == 1) return false;  // Before the first segment.
      have_newer = true;
      newer_ticks = start_ticks;
      newer_ns = start_ns;
      newer_q32 = q32;
      --index;
    }
  }
  return false;
}

}  // namespace clock_internal
}  // namespace strata

#endif  // STRATA_PLATFORM_STRATA_CLOCK_TABLE_H_
