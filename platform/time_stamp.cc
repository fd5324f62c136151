#include "platform/time_stamp.h"

#include "platform/strata_clock_table.h"

__thread bool strata_t_tsc_forbidden __attribute__((tls_model("initial-exec"))) = false;

namespace strata {
namespace clock_internal {

StrataClockTable g_strata_clock;

bool TicksToStrataNanosecondsSlow(uint64_t ticks, int64_t* ns) {
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
      StrataThreadFence(std::memory_order_acquire);
      const bool intact = sequence == 2 * index &&
                          slot.sequence.load(std::memory_order_relaxed) == sequence;
      if (!intact) {
        if (!have_newer) break;  // The newest slot was recycled under us: start over.
        *ns = SegmentValue(newer_ticks, newer_ns, newer_q32, ticks);  // strata_clock_table.h
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

int64_t StrataClockNowNanoseconds() {
#if defined(__x86_64__)
  // The tick is read before the table (TicksToStrataNanoseconds: the segment in force when
  // it was read converts it, whichever table is seen afterwards).
  if (__builtin_expect(clock_internal::StrataClockOn() && !strata_t_tsc_forbidden, 1)) {
    const uint64_t ticks = clock_internal::ReadStrataClockTicks();
    int64_t ns;
    if (__builtin_expect(clock_internal::TicksToStrataNanoseconds(ticks, &ns), 1)) return ns;
  }
#endif
  timespec ts;
  ReadClock(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace strata
