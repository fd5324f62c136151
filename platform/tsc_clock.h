// The CPU's time-stamp counter as a cheap clock, and its calibration against
// CLOCK_MONOTONIC (TimeStamp::MonotonicNow()).
//
// Reading the TSC costs ~9-11 ns here against ~22-26 ns for clock_gettime (see
// docs/benchmarks.md). TimeStamp::Now() itself reads the TSC through the Strata clock
// (platform/strata_clock_table.h), which is slaved continuously; a TscCalibration is one
// straight line between two anchors, for durations (perfmon's cycle windows) and code that
// wants ticks of its own, not for stamps compared with TimeStamp::Now() (they differ by the
// calibration's error: up to ~164 ns was seen, docs/sampling.md "One clock").
// A raw tick count means nothing
// by itself: a TscCalibration maps ticks to TimeStamps, from two simultaneous readings of
// both clocks (TscAnchor) some time apart.
//
//   const TscCalibration& calibration = ProcessTscCalibration();  // once, at start-up
//   uint64_t ticks = ReadTscTicks();                               // hot path
//   TimeStamp when = calibration.ToTimeStamp(ticks);               // whenever
//
// Accuracy. The process calibration is measured once over kTscCalibrationWindow; its rate
// error is about (anchor uncertainty, tens of ns) / window, a few ppm, so converted stamps
// drift from TimeStamp::Now() by a few µs per second, and also by any NTP slewing of
// CLOCK_MONOTONIC (the TSC is not slewed). For long sessions build a calibration from an
// anchor taken at the start and one taken at the end (TscCalibration::FromAnchors), which
// is exact at both ends.
//
// Off x86-64 the "ticks" are CLOCK_MONOTONIC nanoseconds, and every calibration is exact.
//
// Thread safety: ReadTscTicks, TscIsInvariant, TscAnchor::Capture and the process
// calibration functions are thread-safe; TscCalibration is an immutable value type.
// Async-signal safety: ReadTscTicks, TscIsInvariant, TscAnchor::Capture, every
// TscCalibration member except Measure, ProcessTscCalibrationIfReady and
// TscTicksToTimeStamp are async-signal-safe (no lock, no allocation). Measure sleeps, and
// ProcessTscCalibration may measure (and wait for another thread measuring): call it once
// outside signal context, at start-up.
#ifndef STRATA_PLATFORM_TSC_CLOCK_H_
#define STRATA_PLATFORM_TSC_CLOCK_H_

#include <cstdint>
#include <ctime>

#include "platform/time_stamp.h"

namespace strata {

// True when ReadTscTicks() reads a hardware counter (x86-64 rdtsc); false when it falls
// back to CLOCK_MONOTONIC.
#if defined(__x86_64__)
inline constexpr bool kTscIsHardwareCounter = true;
#else
inline constexpr bool kTscIsHardwareCounter = false;
#endif

// The current tick count: rdtsc on x86-64 (not serializing: it may be reordered with
// neighbouring instructions by a few tens of cycles); CLOCK_MONOTONIC nanoseconds
// elsewhere.
inline uint64_t ReadTscTicks() {
#if defined(__x86_64__)
  return __builtin_ia32_rdtsc();  // GCC and Clang; no <x86intrin.h> in every includer
#else
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
#endif
}

// True when the CPU reports an invariant TSC (CPUID 0x80000007, EDX bit 8: constant rate in
// every P-, C- and T-state; Linux shows it as the "nonstop_tsc" flag). Without it the TSC
// may change rate or stop, and callers should prefer TimeStamp::Now(). The CPUID result is
// cached after the first call (CPUID traps to the hypervisor on a VM). Always true off
// x86-64.
bool TscIsInvariant();

// A reading of the tick counter and of CLOCK_MONOTONIC taken together.
struct TscAnchor {
  uint64_t ticks = 0;
  TimeStamp time;

  // Reads the counter, the clock, the counter again, a few times, and keeps the reading
  // whose two counter reads are closest (the least disturbed by an interrupt or a vCPU
  // preemption), pairing the clock with the middle of that bracket. ~0.2 µs.
  static TscAnchor Capture();
};

class TscCalibration {
 public:
  // Invalid (IsValid() false): conversions give a null TimeStamp / zero duration.
  constexpr TscCalibration() = default;

  // The rate between two anchors, anchored at `earlier`. Exact at both anchors. Invalid
  // when `later` is not after `earlier` on both clocks.
  static TscCalibration FromAnchors(const TscAnchor& earlier, const TscAnchor& later);

  // Captures an anchor, sleeps `window`, captures another. Off x86-64 returns the exact
  // identity at once. Sleeps: not async-signal-safe.
  static TscCalibration Measure(TimeDuration window);

  bool IsValid() const { return ns_per_tick_q32_ != 0; }

  // Counter frequency, ticks per nanosecond (GHz). 0 when invalid.
  double TicksPerNanosecond() const;

  // The TimeStamp at which the counter read `ticks`. Ticks before the anchor are fine
  // (the counter wraps after centuries; differences are taken modulo 2^64).
  TimeStamp ToTimeStamp(uint64_t ticks) const {
    if (!IsValid()) return TimeStamp();
    return anchor_.time + ToDuration(static_cast<int64_t>(ticks - anchor_.ticks));
  }

  // The duration of `ticks` counter ticks (may be negative).
  TimeDuration ToDuration(int64_t ticks) const {
    // 64 x 64 -> 128-bit product, then drop the 32 fractional bits (floor).
    const __int128 product = static_cast<__int128>(ticks) * ns_per_tick_q32_;
    return TimeDuration::FromNanoseconds(static_cast<int64_t>(product >> 32));
  }

  // The earlier anchor it was built from.
  const TscAnchor& anchor() const { return anchor_; }

 private:
  TscAnchor anchor_;
  // Nanoseconds per tick, fixed point with 32 fractional bits; 0 when invalid.
  uint64_t ns_per_tick_q32_ = 0;
};

// The window ProcessTscCalibration() measures over.
inline constexpr TimeDuration kTscCalibrationWindow = TimeDuration::FromMilliseconds(20);

// The process-wide calibration: the one in force, or one measured now over
// kTscCalibrationWindow (~20 ms; concurrent first callers each measure, and all get the
// first one put in force). Stays valid across fork(). Not async-signal-safe until it has
// returned once.
const TscCalibration& ProcessTscCalibration();

// Offers `calibration` as the process-wide one: it is put in force unless one is already;
// returns the one in force. For a thread that must not sleep through the measuring window
// (the sampler measures across its first loops, TscCalibration::FromAnchors). Never sleeps;
// an offer racing another waits for the winner's few stores. Not async-signal-safe.
const TscCalibration& OfferProcessTscCalibration(const TscCalibration& calibration);

// The process-wide calibration once ProcessTscCalibration() has returned, else nullptr.
// Async-signal-safe.
const TscCalibration* ProcessTscCalibrationIfReady();

// ToTimeStamp with the process-wide calibration; a null TimeStamp before it exists.
// Async-signal-safe.
inline TimeStamp TscTicksToTimeStamp(uint64_t ticks) {
  const TscCalibration* calibration = ProcessTscCalibrationIfReady();
  return calibration ? calibration->ToTimeStamp(ticks) : TimeStamp();
}

}  // namespace strata

#endif  // STRATA_PLATFORM_TSC_CLOCK_H_
