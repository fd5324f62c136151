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

#include "platform/thread_fence.h"
#include "platform/time_stamp.h"

namespace strata {
namespace clock_internal {

inline constexpr uint64_t kStrataClockSlots = 64;

// One cache line: the segment and a copy of the one before it (index - 1), which converts
// the ticks read in the ~2 ms between the segment's publication and its start without a
// walk back through the ring.
struct alignas(64) StrataClockSlot {
  std::atomic<uint64_t> sequence{0};  // 2 * index when complete; 2 * index - 1 while written.
  std::atomic<uint64_t> start_ticks{0};
  std::atomic<int64_t> start_ns{0};
  std::atomic<uint64_t> ns_per_tick_q32{0};  // Nanoseconds per tick, 32 fractional bits.
  std::atomic<uint64_t> previous_start_ticks{0};
  std::atomic<int64_t> previous_start_ns{0};
  std::atomic<uint64_t> previous_ns_per_tick_q32{0};  // 0 for the first segment: none.
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
// The usual case, a tick at or after the newest segment's start or the one before it, is
// inline (~20 instructions); an older tick (read by a reader stalled between its tick and
// this call) walks back through the ring, out of line (time_stamp.cc). A tick older than the ring's oldest intact segment (a stall of ~3 s) is
// converted by that segment's line extended backwards: off by the rate difference over the
// stall, well under the calibration error.
bool TicksToStrataNanosecondsSlow(uint64_t ticks, int64_t* ns);
// The usual case alone: false when it does not apply (then call TicksToStrataNanoseconds).
__attribute__((always_inline)) inline bool TicksToStrataNanosecondsUsualCase(uint64_t ticks,
                                                                              int64_t* ns) {
  StrataClockTable& table = g_strata_clock;
  const uint64_t index = table.latest.load(std::memory_order_acquire);
  const StrataClockSlot& slot = table.slots[index % kStrataClockSlots];
  const uint64_t sequence = slot.sequence.load(std::memory_order_acquire);
  const uint64_t start_ticks = slot.start_ticks.load(std::memory_order_relaxed);
  const int64_t start_ns = slot.start_ns.load(std::memory_order_relaxed);
  const uint64_t q32 = slot.ns_per_tick_q32.load(std::memory_order_relaxed);
  const uint64_t previous_start_ticks = slot.previous_start_ticks.load(std::memory_order_relaxed);
  const int64_t previous_start_ns = slot.previous_start_ns.load(std::memory_order_relaxed);
  const uint64_t previous_q32 = slot.previous_ns_per_tick_q32.load(std::memory_order_relaxed);
  StrataThreadFence(std::memory_order_acquire);
  // Index 0 (off) would pass the sequence test on the never-written slot 0: tested apart.
  if (__builtin_expect(index == 0 || sequence != 2 * index ||
                           slot.sequence.load(std::memory_order_relaxed) != sequence,
                       0)) {
    return false;
  }
  const uint64_t delta = ticks - start_ticks;
  if (__builtin_expect(static_cast<int64_t>(delta) >= 0, 1)) {
    *ns = start_ns + static_cast<int64_t>((static_cast<unsigned __int128>(delta) * q32) >> 32);
    return true;
  }
  const uint64_t previous_delta = ticks - previous_start_ticks;
  if (previous_q32 != 0 && static_cast<int64_t>(previous_delta) >= 0) {
    *ns = previous_start_ns +
          static_cast<int64_t>((static_cast<unsigned __int128>(previous_delta) * previous_q32) >>
                               32);
    return true;
  }
  return false;
}
// The newest segment alone (five loads, no copy of the one before it: fewer registers where
// the caller holds many): false when the clock is off, the slot is being recycled or `ticks`
// precede the newest segment's start (~4 % of the time: the ~2 ms between a publication and
// its start); then TicksToStrataNanosecondsSlow() converts it.
__attribute__((always_inline)) inline bool TicksToStrataNanosecondsNewestSegment(uint64_t ticks,
                                                                                  int64_t* ns) {
  StrataClockTable& table = g_strata_clock;
  const uint64_t index = table.latest.load(std::memory_order_acquire);
  const StrataClockSlot& slot = table.slots[index % kStrataClockSlots];
  const uint64_t sequence = slot.sequence.load(std::memory_order_acquire);
  const uint64_t start_ticks = slot.start_ticks.load(std::memory_order_relaxed);
  const int64_t start_ns = slot.start_ns.load(std::memory_order_relaxed);
  const uint64_t q32 = slot.ns_per_tick_q32.load(std::memory_order_relaxed);
  StrataThreadFence(std::memory_order_acquire);
  const uint64_t delta = ticks - start_ticks;
  // Index 0 (off) would pass the sequence test on the never-written slot 0: tested apart.
  if (__builtin_expect(index == 0 || sequence != 2 * index || static_cast<int64_t>(delta) < 0 ||
                           slot.sequence.load(std::memory_order_relaxed) != sequence,
                       0)) {
    return false;
  }
  *ns = start_ns + static_cast<int64_t>((static_cast<unsigned __int128>(delta) * q32) >> 32);
  return true;
}
__attribute__((always_inline)) inline bool TicksToStrataNanoseconds(uint64_t ticks,
                                                                     int64_t* ns) {
  return TicksToStrataNanosecondsUsualCase(ticks, ns) || TicksToStrataNanosecondsSlow(ticks, ns);
}

// The tick a Strata clock reading converts: rdtscp, which executes only after every earlier
// instruction has and every earlier load is globally visible (rdtsc may run ahead of them).
// So a reading that follows, in this thread's order, a load of another thread's reading (or of
// anything written after it) has a later tick: plain rdtsc broke that hand-over order in 1 of
// ~1.2 M hand-overs in strata_clock_test (the vDSO's clock_gettime orders its rdtsc likewise,
// with lfence or rdtscp). x86-64 only (callers check).
__attribute__((always_inline)) inline uint64_t ReadStrataClockTicks() {
#if defined(__x86_64__)
  unsigned int processor;
  return __builtin_ia32_rdtscp(&processor);
#else
  return 0;
#endif
}

// TimeStamp::Now()'s nanoseconds with the fast case inline (rdtscp and the table): for the
// marker fast path, which reads one time per marker. Same clock, same fallbacks (the
// out-of-line StrataClockNowNanoseconds()). Async-signal-safe; thread-safe.
__attribute__((always_inline)) inline int64_t StrataClockNowInline() {
#if defined(__x86_64__)
  // The gate's load is not the table's: the tick is read before those.
  if (__builtin_expect(StrataClockOn() && !strata_t_tsc_forbidden, 1)) {
    const uint64_t ticks = ReadStrataClockTicks();
    int64_t ns;
    if (__builtin_expect(TicksToStrataNanoseconds(ticks, &ns), 1)) return ns;
  }
#endif
  return StrataClockNowNanoseconds();
}

}  // namespace clock_internal
}  // namespace strata

#endif  // STRATA_PLATFORM_STRATA_CLOCK_TABLE_H_
