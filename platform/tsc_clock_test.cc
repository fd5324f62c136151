#include "platform/tsc_clock.h"

#include <sys/prctl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "catch2/catch.hpp"

namespace strata {
namespace {

TscAnchor MakeAnchor(uint64_t ticks, int64_t ns) {
  TscAnchor anchor;
  anchor.ticks = ticks;
  anchor.time = TimeStamp::FromNanoseconds(ns);
  return anchor;
}

int64_t Abs(TimeDuration d) {
  return d.ToNanoseconds() < 0 ? -d.ToNanoseconds() : d.ToNanoseconds();
}

// How far `calibration` is from TimeStamp::Now(), right now: the tightest of a few
// (counter, clock, counter) brackets, so that one preemption does not count.
TimeDuration ErrorAgainstNow(const TscCalibration& calibration) {
  TimeDuration best = TimeDuration::FromSeconds(1000);
  uint64_t best_width = UINT64_MAX;
  for (int i = 0; i < 20; ++i) {
    const uint64_t before = ReadTscTicks();
    const TimeStamp now = TimeStamp::Now();
    const uint64_t after = ReadTscTicks();
    if (after - before < best_width) {
      best_width = after - before;
      best = calibration.ToTimeStamp(before + (after - before) / 2) - now;
    }
  }
  return best;
}

TEST_CASE("TscCalibration: exact arithmetic from synthetic anchors", "[platform][tsc]") {
  // 2000 ticks over 1000 ns: 2 ticks per ns.
  const TscCalibration c = TscCalibration::FromAnchors(MakeAnchor(1000, 5000),
                                                       MakeAnchor(3000, 6000));
  REQUIRE(c.IsValid());
  REQUIRE(c.TicksPerNanosecond() == 2.0);
  REQUIRE(c.anchor().ticks == 1000);
  REQUIRE(c.ToTimeStamp(1000).ToNanoseconds() == 5000);
  REQUIRE(c.ToTimeStamp(3000).ToNanoseconds() == 6000);
  REQUIRE(c.ToTimeStamp(5000).ToNanoseconds() == 7000);
  REQUIRE(c.ToTimeStamp(0).ToNanoseconds() == 4500);  // before the anchor
  REQUIRE(c.ToDuration(2000000).ToNanoseconds() == 1000000);
  REQUIRE(c.ToDuration(-4).ToNanoseconds() == -2);
  REQUIRE(c.ToDuration(0).ToNanoseconds() == 0);
}

TEST_CASE("TscCalibration: a non-integer rate, and large tick counts", "[platform][tsc]") {
  // 2.097 GHz, the counter on this machine kind: 2097 ticks per 1000 ns.
  const TscCalibration c = TscCalibration::FromAnchors(
      MakeAnchor(10'000'000'000'000ull, 1'000'000'000),
      MakeAnchor(10'000'000'000'000ull + 2'097'000'000ull, 2'000'000'000));
  REQUIRE(c.TicksPerNanosecond() == Approx(2.097).epsilon(1e-9));
  // One hour of ticks later. The rate is kept to 2^-32 ns per tick, so the rounding error
  // grows by at most ~0.12 ns per 10^9 ticks: under 1 µs after an hour.
  const uint64_t hour_of_ticks = 3600ull * 2'097'000'000ull;
  const TimeStamp t = c.ToTimeStamp(10'000'000'000'000ull + hour_of_ticks);
  const int64_t expected = 1'000'000'000 + 3600ll * 1'000'000'000;
  REQUIRE(std::llabs(t.ToNanoseconds() - expected) < 1000);
  // Tick counts near the top of the range, across the anchor.
  const TscCalibration high = TscCalibration::FromAnchors(
      MakeAnchor(UINT64_MAX - 1000, 0), MakeAnchor(UINT64_MAX, 1000));
  REQUIRE(high.IsValid());
  REQUIRE(high.ToTimeStamp(UINT64_MAX - 500).ToNanoseconds() == 500);
}

TEST_CASE("TscCalibration: invalid inputs give an invalid calibration", "[platform][tsc]") {
  const TscCalibration none;
  REQUIRE_FALSE(none.IsValid());
  REQUIRE(none.ToTimeStamp(12345).IsNull());
  REQUIRE(none.ToDuration(12345).ToNanoseconds() == 0);
  REQUIRE(none.TicksPerNanosecond() == 0.0);

  // Same time, later ticks / same ticks / time going back / ticks going back.
  REQUIRE_FALSE(TscCalibration::FromAnchors(MakeAnchor(1, 100), MakeAnchor(2, 100)).IsValid());
  REQUIRE_FALSE(TscCalibration::FromAnchors(MakeAnchor(1, 100), MakeAnchor(1, 200)).IsValid());
  REQUIRE_FALSE(TscCalibration::FromAnchors(MakeAnchor(1, 200), MakeAnchor(2, 100)).IsValid());
  REQUIRE_FALSE(TscCalibration::FromAnchors(MakeAnchor(5, 100), MakeAnchor(2, 200)).IsValid());
}

TEST_CASE("ReadTscTicks: advances, and at a plausible rate", "[platform][tsc]") {
  const uint64_t a = ReadTscTicks();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const uint64_t b = ReadTscTicks();
  REQUIRE(b > a);
  const TscCalibration& c = ProcessTscCalibration();
  REQUIRE(c.IsValid());
  if (kTscIsHardwareCounter) {
    // Any x86-64 with an invariant TSC: between 0.5 and 10 GHz.
    REQUIRE(c.TicksPerNanosecond() > 0.5);
    REQUIRE(c.TicksPerNanosecond() < 10.0);
  } else {
    REQUIRE(c.TicksPerNanosecond() == 1.0);
  }
}

TEST_CASE("TscAnchor::Capture pairs the counter with TimeStamp::Now", "[platform][tsc]") {
  const uint64_t ticks_before = ReadTscTicks();
  const TimeStamp time_before = TimeStamp::Now();
  const TscAnchor anchor = TscAnchor::Capture();
  const TimeStamp time_after = TimeStamp::Now();
  const uint64_t ticks_after = ReadTscTicks();
  REQUIRE(ticks_before <= anchor.ticks);
  REQUIRE(anchor.ticks <= ticks_after);
  REQUIRE(time_before <= anchor.time);
  REQUIRE(anchor.time <= time_after);
}

TEST_CASE("ProcessTscCalibration agrees with TimeStamp::Now", "[platform][tsc]") {
  const TscCalibration& c = ProcessTscCalibration();
  REQUIRE(ProcessTscCalibrationIfReady() == &c);
  REQUIRE(&ProcessTscCalibration() == &c);

  // Let some time pass since the calibration window so that a rate error shows: at 300 ms
  // past the anchor, a 0.1 % rate error is 300 µs.
  const TimeStamp target = c.anchor().time + TimeDuration::FromMilliseconds(300);
  while (TimeStamp::Now() < target) std::this_thread::sleep_for(std::chrono::milliseconds(10));

  // The tolerance allows for a badly preempted anchor on a busy VM: a 20 µs bracket at each
  // end of the 20 ms window is a 0.2 % rate error, 0.6 ms at 300 ms, and for NTP slewing
  // CLOCK_MONOTONIC (at most 500 ppm). A unit mistake or a wrong rate misses it by far.
  const TimeDuration error = ErrorAgainstNow(c);
  INFO("error against TimeStamp::Now(): " << error.ToNanoseconds() << " ns; rate "
                                          << c.TicksPerNanosecond() << " ticks/ns");
  REQUIRE(Abs(error) < 1000000);
  // And the signal-safe shortcut gives the same conversions.
  const uint64_t ticks = ReadTscTicks();
  REQUIRE(TscTicksToTimeStamp(ticks) == c.ToTimeStamp(ticks));
}

TEST_CASE("TscCalibration::Measure is repeatable", "[platform][tsc]") {
  const TscCalibration a = TscCalibration::Measure(TimeDuration::FromMilliseconds(20));
  const TscCalibration b = TscCalibration::Measure(TimeDuration::FromMilliseconds(20));
  REQUIRE(a.IsValid());
  REQUIRE(b.IsValid());
  // Each has a rate error of a few ppm normally; 0.2 % allows a badly preempted anchor.
  REQUIRE(a.TicksPerNanosecond() == Approx(b.TicksPerNanosecond()).epsilon(0.002));
  // The anchors are where they say: the window really was slept.
  REQUIRE(b.anchor().time - a.anchor().time >= TimeDuration::FromMilliseconds(20));
}

TEST_CASE("TscCalibration::FromAnchors over a long window converts exactly at its ends",
          "[platform][tsc]") {
  const TscAnchor start = TscAnchor::Capture();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const TscAnchor end = TscAnchor::Capture();
  const TscCalibration c = TscCalibration::FromAnchors(start, end);
  REQUIRE(c.IsValid());
  REQUIRE(c.ToTimeStamp(start.ticks) == start.time);
  // Within fixed-point rounding at the far end.
  REQUIRE(Abs(c.ToTimeStamp(end.ticks) - end.time) <= 1);
  // Halfway in ticks is halfway in time.
  const uint64_t mid_ticks = start.ticks + (end.ticks - start.ticks) / 2;
  const TimeStamp mid_time = start.time + TimeDuration::FromNanoseconds(
                                              (end.time - start.time).ToNanoseconds() / 2);
  REQUIRE(Abs(c.ToTimeStamp(mid_ticks) - mid_time) <= 2);
}

TEST_CASE("TscIsInvariant matches the kernel's nonstop_tsc flag", "[platform][tsc]") {
  if (!kTscIsHardwareCounter) {
    REQUIRE(TscIsInvariant());
    return;
  }
  std::ifstream cpuinfo("/proc/cpuinfo");
  REQUIRE(cpuinfo.good());
  std::string line;
  bool nonstop = false;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) == 0) {
      nonstop = (line + " ").find(" nonstop_tsc ") != std::string::npos;
      break;
    }
  }
  REQUIRE(TscIsInvariant() == nonstop);
}

TEST_CASE("A thread that forbids rdtsc reads the time without it", "[platform][tsc]") {
  TimeStamp before, after;
  int prctl_result = -1;
  std::thread([&] {
    // As base's prctl wrapper does (thread_restrictions.h): mark, then forbid. Without the
    // mark TimeStamp::Now() (the vDSO executes rdtsc) dies of SIGSEGV here.
    strata_t_tsc_forbidden = true;
    prctl_result = prctl(PR_SET_TSC, PR_TSC_SIGSEGV, 0, 0, 0);
    before = TimeStamp::Now();
    after = TimeStamp::Now();
    // Allowed again before the thread ends: a sanitizer runtime's thread teardown reads the
    // clock through the vDSO (the test hung under ASan without this).
    prctl(PR_SET_TSC, PR_TSC_ENABLE, 0, 0, 0);
    strata_t_tsc_forbidden = false;
  }).join();
  REQUIRE(prctl_result == 0);
  CHECK_FALSE(before.IsNull());
  CHECK(before <= after);
  CHECK(Abs(TimeStamp::Now() - after) < TimeDuration::FromMilliseconds(1000).ToNanoseconds() + 1);
}

}  // namespace
}  // namespace strata
