#include "platform/strata_clock.h"

#include <fcntl.h>
#include <sys/syscall.h>

#include <atomic>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "platform/raw_syscall.h"
#include "platform/strata_clock_table.h"
#include "platform/thread_fence.h"
#include "platform/tsc_clock.h"

namespace strata {
namespace {

using clock_internal::g_strata_clock;
using clock_internal::kStrataClockSlots;
using clock_internal::SegmentValue;
using clock_internal::StrataClockSlot;

// An anchor whose two tick reads are further apart than this was disturbed (an interrupt, a
// preemption of the vCPU): ~25 µs at 2.6 GHz. Such an update is skipped.
constexpr uint64_t kMaxAnchorWidthTicks = uint64_t{1} << 16;

struct Anchor {
  uint64_t ticks = 0;  // The middle of the bracket.
  int64_t ns = 0;      // CLOCK_MONOTONIC, read inside the bracket.
  uint64_t width = UINT64_MAX;
};

Anchor CaptureAnchor() {
  Anchor best;
  for (int i = 0; i < 5; ++i) {
    const uint64_t before = ReadTscTicks();
    const int64_t ns = TimeStamp::MonotonicNow().ToNanoseconds();
    const uint64_t after = ReadTscTicks();
    if (after - before < best.width) {
      best.width = after - before;
      best.ticks = before + best.width / 2;
      best.ns = ns;
    }
  }
  return best;
}

// The writer's own state: only the one updating thread touches it.
struct WriterState {
  bool have_first = false;
  Anchor first;
  uint64_t index = 0;  // The newest segment published (0: none).
  uint64_t start_ticks = 0;
  int64_t start_ns = 0;
  uint64_t q32 = 0;
  int64_t first_segment_ns = 0;
  int64_t last_update_ns = 0;
};
WriterState g_writer;

struct AtomicStatistics {
  std::atomic<uint64_t> segments{0};
  std::atomic<uint64_t> skipped_updates{0};
  std::atomic<uint64_t> late_publications{0};
  std::atomic<int64_t> last_offset_ns{0};
  std::atomic<int64_t> max_abs_offset_ns{0};
  std::atomic<int64_t> last_anchor_uncertainty_ns{0};
};
AtomicStatistics g_statistics;

void Count(std::atomic<uint64_t>& counter) {
  counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// True when the kernel's current clock source is the TSC.
bool KernelClockSourceIsTsc() {
  const long fd = RawSyscall(SYS_openat, AT_FDCWD,
                             reinterpret_cast<long>(
                                 "/sys/devices/system/clocksource/clocksource0/"
                                 "current_clocksource"),
                             O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[16] = {};
  const long n = RawSyscall(SYS_read, fd, reinterpret_cast<long>(text), sizeof(text) - 1);
  RawSyscall(SYS_close, fd);
  return n >= 3 && std::memcmp(text, "tsc", 3) == 0 && (n == 3 || text[3] == '\n');
}

// -1: not checked yet; 0 / 1: StrataClockTscUsable()'s cached answer.
std::atomic<int> g_tsc_usable{-1};

// The readers' instruction (strata_clock_table.h ReadStrataClockTicks): CPUID 0x80000001,
// EDX bit 27.
bool CpuHasRdtscp() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0x80000000u, &eax, &ebx, &ecx, &edx) || eax < 0x80000001u) return false;
  if (!__get_cpuid(0x80000001u, &eax, &ebx, &ecx, &edx)) return false;
  return (edx & (1u << 27)) != 0;
#else
  return false;
#endif
}

bool TscUsableHere() { return !strata_t_tsc_forbidden && StrataClockTscUsable(); }

// Nanoseconds per tick (32 fractional bits) between two anchors; 0 when not after.
uint64_t RateQ32(const Anchor& earlier, const Anchor& later) {
  const uint64_t ticks = later.ticks - earlier.ticks;
  const int64_t ns = later.ns - earlier.ns;
  if (ns <= 0 || ticks == 0 || ticks > static_cast<uint64_t>(INT64_MAX)) return 0;
  const unsigned __int128 q32 = ((static_cast<unsigned __int128>(ns) << 32) + ticks / 2) / ticks;
  return q32 == 0 || q32 > UINT64_MAX ? 0 : static_cast<uint64_t>(q32);
}

uint64_t TicksFor(TimeDuration duration, uint64_t q32) {
  return static_cast<uint64_t>(
      (static_cast<unsigned __int128>(duration.ToNanoseconds()) << 32) / q32);
}

int64_t NanosecondsFor(uint64_t ticks, uint64_t q32) {
  return static_cast<int64_t>((static_cast<unsigned __int128>(ticks) * q32) >> 32);
}

// Writes segment `index` into its slot and publishes it, unless the writer was held up until
// less than half the lead before its start (then the update is skipped: the slot, the ring's
// oldest, is lost). Returns true when published.
bool PublishSegment(uint64_t index, uint64_t start_ticks, int64_t start_ns, uint64_t q32,
                    uint64_t lead_ticks) {
  StrataClockSlot& slot = g_strata_clock.slots[index % kStrataClockSlots];
  slot.sequence.store(2 * index - 1, std::memory_order_relaxed);
  StrataThreadFence(std::memory_order_release);
  slot.start_ticks.store(start_ticks, std::memory_order_relaxed);
  slot.start_ns.store(start_ns, std::memory_order_relaxed);
  slot.ns_per_tick_q32.store(q32, std::memory_order_relaxed);
  // The segment before it: the newest published (index - 1), none for the first.
  slot.previous_start_ticks.store(index == 1 ? 0 : g_writer.start_ticks, std::memory_order_relaxed);
  slot.previous_start_ns.store(index == 1 ? 0 : g_writer.start_ns, std::memory_order_relaxed);
  slot.previous_ns_per_tick_q32.store(index == 1 ? 0 : g_writer.q32, std::memory_order_relaxed);
  slot.sequence.store(2 * index, std::memory_order_release);
  if (static_cast<int64_t>(start_ticks - ReadTscTicks()) < static_cast<int64_t>(lead_ticks / 2)) {
    Count(g_statistics.skipped_updates);
    return false;
  }
  g_strata_clock.latest.store(index, std::memory_order_release);
  // A reader that saw the previous table read its tick before this store was visible: if
  // the TSC has not reached the start now, every such tick is before it (strata_clock_table.h).
  StrataThreadFence(std::memory_order_seq_cst);
#if defined(__x86_64__)
  __builtin_ia32_lfence();
#endif
  if (static_cast<int64_t>(ReadTscTicks() - start_ticks) >= 0) {
    Count(g_statistics.late_publications);
  }
  g_writer.index = index;
  g_writer.start_ticks = start_ticks;
  g_writer.start_ns = start_ns;
  g_writer.q32 = q32;
  Count(g_statistics.segments);
  return true;
}

}  // namespace

bool StrataClockUsesTsc() { return clock_internal::StrataClockOn(); }

bool StrataClockTscUsable() {
  int usable = g_tsc_usable.load(std::memory_order_relaxed);
  if (usable < 0) {
    // Racing first callers all ask and store the same answer.
    usable = kTscIsHardwareCounter && CpuHasRdtscp() && TscIsInvariant() &&
                     KernelClockSourceIsTsc()
                 ? 1
                 : 0;
    g_tsc_usable.store(usable, std::memory_order_relaxed);
  }
  return usable == 1;
}

bool UpdateStrataClock() {
  if (!TscUsableHere()) return StrataClockUsesTsc();
  WriterState& w = g_writer;
  if (w.index != 0 &&
      TimeStamp::MonotonicNow().ToNanoseconds() - w.last_update_ns <
          kStrataClockUpdatePeriod.ToNanoseconds()) {
    return true;
  }
  const Anchor now = CaptureAnchor();
  if (now.width > kMaxAnchorWidthTicks) {
    Count(g_statistics.skipped_updates);
    return StrataClockUsesTsc();
  }
  if (!w.have_first) {
    w.first = now;
    w.have_first = true;
    return false;
  }
  const uint64_t long_q32 = RateQ32(w.first, now);
  if (long_q32 == 0) return StrataClockUsesTsc();
  g_statistics.last_anchor_uncertainty_ns.store(NanosecondsFor(now.width / 2 + 1, long_q32),
                                                std::memory_order_relaxed);
  const uint64_t lead_ticks = TicksFor(kStrataClockLead, long_q32);
  const uint64_t start_ticks = now.ticks + lead_ticks;
  // CLOCK_MONOTONIC extrapolated from this anchor at the long-run rate.
  auto monotonic_at = [&](uint64_t ticks) {
    return now.ns + NanosecondsFor(ticks - now.ticks, long_q32);
  };

  if (w.index == 0) {
    if (now.ns - w.first.ns < kStrataClockFirstWindow.ToNanoseconds()) return false;
    // Above CLOCK_MONOTONIC by the anchors' uncertainty and the rate's error over the lead,
    // so that no clock_gettime reading before the switch is later than the clock after it.
    const int64_t margin = NanosecondsFor(now.width + w.first.width, long_q32) + 100;
    const int64_t start_ns = monotonic_at(start_ticks) + margin;
    w.last_update_ns = now.ns;
    if (PublishSegment(1, start_ticks, start_ns, long_q32, lead_ticks)) w.first_segment_ns = now.ns;
    return StrataClockUsesTsc();
  }

  const int64_t offset = SegmentValue(w.start_ticks, w.start_ns, w.q32, now.ticks) - now.ns;
  g_statistics.last_offset_ns.store(offset, std::memory_order_relaxed);
  if (now.ns - w.first_segment_ns > 2 * kStrataClockConvergence.ToNanoseconds()) {
    const int64_t magnitude = offset < 0 ? -offset : offset;
    if (magnitude > g_statistics.max_abs_offset_ns.load(std::memory_order_relaxed)) {
      g_statistics.max_abs_offset_ns.store(magnitude, std::memory_order_relaxed);
    }
  }
  // Continue where the function stands at the new start (continuity)...
  int64_t start_ns = SegmentValue(w.start_ticks, w.start_ns, w.q32, start_ticks);
  // ...or step forward when far behind (never back: a clock far ahead slews).
  if (monotonic_at(start_ticks) - start_ns > 1000000) start_ns = monotonic_at(start_ticks);
  // The slope that meets CLOCK_MONOTONIC after kStrataClockConvergence, within the slew limit.
  const uint64_t convergence_ticks = TicksFor(kStrataClockConvergence, long_q32);
  const int64_t target_ns = monotonic_at(start_ticks + convergence_ticks);
  const __int128 wanted =
      (static_cast<__int128>(target_ns - start_ns) << 32) / static_cast<__int128>(convergence_ticks);
  const __int128 slew = static_cast<__int128>(long_q32) * kStrataClockMaxSlewPpm / 1000000;
  __int128 q32 = wanted;
  if (q32 < static_cast<__int128>(long_q32) - slew) q32 = static_cast<__int128>(long_q32) - slew;
  if (q32 > static_cast<__int128>(long_q32) + slew) q32 = static_cast<__int128>(long_q32) + slew;
  w.last_update_ns = now.ns;
  PublishSegment(w.index + 1, start_ticks, start_ns, static_cast<uint64_t>(q32), lead_ticks);
  return true;
}

StrataClockStatistics GetStrataClockStatistics() {
  StrataClockStatistics s;
  s.segments = g_statistics.segments.load(std::memory_order_relaxed);
  s.skipped_updates = g_statistics.skipped_updates.load(std::memory_order_relaxed);
  s.late_publications = g_statistics.late_publications.load(std::memory_order_relaxed);
  s.last_offset_ns = g_statistics.last_offset_ns.load(std::memory_order_relaxed);
  s.max_abs_offset_ns = g_statistics.max_abs_offset_ns.load(std::memory_order_relaxed);
  s.last_anchor_uncertainty_ns =
      g_statistics.last_anchor_uncertainty_ns.load(std::memory_order_relaxed);
  return s;
}

}  // namespace strata
