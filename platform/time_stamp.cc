#include "platform/time_stamp.h"

#include "platform/strata_clock_table.h"

__thread bool strata_t_tsc_forbidden __attribute__((tls_model("initial-exec"))) = false;

namespace strata {
namespace clock_internal {

StrataClockTable g_strata_clock;

}  // namespace clock_internal

int64_t StrataClockNowNanoseconds() {
#if defined(__x86_64__)
  // The tick is read before the table (TicksToStrataNanoseconds: the segment in force when
  // it was read converts it, whichever table is seen afterwards).
  if (__builtin_expect(clock_internal::StrataClockOn() && !strata_t_tsc_forbidden, 1)) {
    const uint64_t ticks = __builtin_ia32_rdtsc();
    int64_t ns;
    if (__builtin_expect(clock_internal::TicksToStrataNanoseconds(ticks, &ns), 1)) return ns;
  }
#endif
  timespec ts;
  ReadClock(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace strata
