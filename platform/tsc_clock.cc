#include "platform/tsc_clock.h"

#include <cerrno>

#include <atomic>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace strata {
namespace {

// -1: not asked yet; 0 / 1: the cached answer.
std::atomic<int> g_tsc_invariant{-1};

// Published by ProcessTscCalibration() once measured (release), read by
// ProcessTscCalibrationIfReady() (acquire): a reader that sees the pointer sees the value.
std::atomic<const TscCalibration*> g_process_calibration{nullptr};

bool AskCpuForInvariantTsc() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0x80000000u, &eax, &ebx, &ecx, &edx) || eax < 0x80000007u) return false;
  if (!__get_cpuid(0x80000007u, &eax, &ebx, &ecx, &edx)) return false;
  return (edx & (1u << 8)) != 0;
#else
  return true;
#endif
}

// Sleeps until CLOCK_MONOTONIC reaches `deadline`, through signal interruptions.
void SleepUntil(TimeStamp deadline) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(deadline.ToNanoseconds() / 1000000000);
  ts.tv_nsec = static_cast<long>(deadline.ToNanoseconds() % 1000000000);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

}  // namespace

bool TscIsInvariant() {
  int cached = g_tsc_invariant.load(std::memory_order_relaxed);
  if (cached < 0) {
    // Racing first callers all ask the CPU and store the same answer.
    cached = AskCpuForInvariantTsc() ? 1 : 0;
    g_tsc_invariant.store(cached, std::memory_order_relaxed);
  }
  return cached == 1;
}

TscAnchor TscAnchor::Capture() {
  constexpr int kTries = 5;
  TscAnchor best;
  uint64_t best_width = UINT64_MAX;
  for (int i = 0; i < kTries; ++i) {
    const uint64_t before = ReadTscTicks();
    const TimeStamp time = TimeStamp::MonotonicNow();
    const uint64_t after = ReadTscTicks();
    const uint64_t width = after - before;
    if (width < best_width) {
      best_width = width;
      best.ticks = before + width / 2;
      best.time = time;
    }
  }
  return best;
}

TscCalibration TscCalibration::FromAnchors(const TscAnchor& earlier, const TscAnchor& later) {
  TscCalibration calibration;
  const uint64_t ticks = later.ticks - earlier.ticks;
  const int64_t ns = (later.time - earlier.time).ToNanoseconds();
  // A tick difference of 2^63 or more means `later` was really earlier (modulo 2^64).
  if (ns <= 0 || ticks == 0 || ticks > static_cast<uint64_t>(INT64_MAX)) return calibration;
  // Rounded to nearest: (ns * 2^32 + ticks / 2) / ticks.
  const unsigned __int128 q32 =
      ((static_cast<unsigned __int128>(ns) << 32) + ticks / 2) / ticks;
  if (q32 == 0 || q32 > UINT64_MAX) return calibration;  // beyond 2^32 ns per tick
  calibration.anchor_ = earlier;
  calibration.ns_per_tick_q32_ = static_cast<uint64_t>(q32);
  return calibration;
}

TscCalibration TscCalibration::Measure(TimeDuration window) {
  if (!kTscIsHardwareCounter) {
    // The ticks are CLOCK_MONOTONIC nanoseconds: one anchor and a rate of exactly 1.
    TscCalibration identity;
    identity.anchor_ = TscAnchor::Capture();
    identity.ns_per_tick_q32_ = uint64_t{1} << 32;
    return identity;
  }
  const TscAnchor start = TscAnchor::Capture();
  SleepUntil(start.time + window);
  return FromAnchors(start, TscAnchor::Capture());
}

double TscCalibration::TicksPerNanosecond() const {
  if (!IsValid()) return 0.0;
  return 4294967296.0 / static_cast<double>(ns_per_tick_q32_);
}

const TscCalibration& ProcessTscCalibration() {
  if (const TscCalibration* in_force = ProcessTscCalibrationIfReady()) return *in_force;
  return OfferProcessTscCalibration(TscCalibration::Measure(kTscCalibrationWindow));
}

const TscCalibration& OfferProcessTscCalibration(const TscCalibration& calibration) {
  // The first offer claims the storage, fills it, then publishes the pointer (release).
  static TscCalibration storage;
  static std::atomic<bool> claimed{false};
  if (!claimed.exchange(true, std::memory_order_acq_rel)) {
    storage = calibration;
    g_process_calibration.store(&storage, std::memory_order_release);
    return storage;
  }
  // The winner is between its two stores. Should it have been preempted there, sleep rather
  // than spin (a spinning real-time thread can keep it from running).
  const TscCalibration* in_force;
  for (int spins = 0;
       (in_force = g_process_calibration.load(std::memory_order_acquire)) == nullptr; ++spins) {
    if (spins < 1000) continue;
    const timespec step{0, 50 * 1000};
    nanosleep(&step, nullptr);
  }
  return *in_force;
}

const TscCalibration* ProcessTscCalibrationIfReady() {
  return g_process_calibration.load(std::memory_order_acquire);
}

}  // namespace strata
