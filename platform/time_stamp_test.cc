#include "platform/time_stamp.h"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <thread>
#include <type_traits>

#include "catch2/catch.hpp"

namespace strata {
namespace {

static_assert(sizeof(TimeStamp) == 8 && std::is_trivially_copyable_v<TimeStamp>);
static_assert(sizeof(TimeDuration) == 8 && std::is_trivially_copyable_v<TimeDuration>);

int64_t RawMonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

TEST_CASE("TimeDuration: unit conversions", "[platform][time]") {
  STATIC_REQUIRE(TimeDuration().ToNanoseconds() == 0);
  STATIC_REQUIRE(TimeDuration::FromNanoseconds(1500).ToNanoseconds() == 1500);
  STATIC_REQUIRE(TimeDuration::FromMicroseconds(1.5).ToNanoseconds() == 1500);
  STATIC_REQUIRE(TimeDuration::FromMilliseconds(2.5).ToNanoseconds() == 2500000);
  STATIC_REQUIRE(TimeDuration::FromSeconds(1.25).ToNanoseconds() == 1250000000);
  STATIC_REQUIRE(TimeDuration::FromSeconds(-3).ToNanoseconds() == -3000000000);

  const TimeDuration d = TimeDuration::FromNanoseconds(2500000);
  REQUIRE(d.ToMicroseconds() == 2500.0);
  REQUIRE(d.ToMilliseconds() == 2.5);
  REQUIRE(d.ToSeconds() == 0.0025);
  REQUIRE(TimeDuration::FromNanoseconds(-1500).ToMicroseconds() == -1.5);
}

TEST_CASE("TimeDuration: floating-point factories round to the nearest nanosecond",
          "[platform][time]") {
  // 1.001 * 1e6 is 1000999.9999999999 in double; truncation would give 1000999.
  REQUIRE(TimeDuration::FromMilliseconds(1.001).ToNanoseconds() == 1001000);
  REQUIRE(TimeDuration::FromSeconds(1.001).ToNanoseconds() == 1001000000);
  REQUIRE(TimeDuration::FromMicroseconds(0.0004).ToNanoseconds() == 0);
  REQUIRE(TimeDuration::FromMicroseconds(0.0006).ToNanoseconds() == 1);
  REQUIRE(TimeDuration::FromMicroseconds(-0.0006).ToNanoseconds() == -1);
  // Every whole number of milliseconds and microseconds up to 100 s comes out exact.
  for (int64_t i = 0; i <= 100000; ++i) {
    const double value = static_cast<double>(i) / 1000.0;  // i thousandths
    INFO("i = " << i);
    REQUIRE(TimeDuration::FromMilliseconds(value).ToNanoseconds() == i * 1000);
    REQUIRE(TimeDuration::FromSeconds(value).ToNanoseconds() == i * 1000000);
    REQUIRE(TimeDuration::FromSeconds(-value).ToNanoseconds() == -i * 1000000);
  }
}

TEST_CASE("TimeDuration: out-of-range inputs saturate", "[platform][time]") {
  REQUIRE(TimeDuration::FromSeconds(1e12).ToNanoseconds() == INT64_MAX);
  REQUIRE(TimeDuration::FromSeconds(-1e12).ToNanoseconds() == INT64_MIN);
  REQUIRE(TimeDuration::FromSeconds(std::numeric_limits<double>::infinity()).ToNanoseconds() ==
          INT64_MAX);
  REQUIRE(TimeDuration::FromSeconds(std::nan("")).ToNanoseconds() == 0);
}

TEST_CASE("TimeDuration: arithmetic and ordering", "[platform][time]") {
  const TimeDuration a = TimeDuration::FromNanoseconds(700);
  const TimeDuration b = TimeDuration::FromNanoseconds(300);
  REQUIRE((a + b).ToNanoseconds() == 1000);
  REQUIRE((a - b).ToNanoseconds() == 400);
  REQUIRE((b - a).ToNanoseconds() == -400);
  TimeDuration c = a;
  c += b;
  REQUIRE(c.ToNanoseconds() == 1000);
  c -= a;
  REQUIRE(c == b);
  REQUIRE(b < a);
  REQUIRE(b <= a);
  REQUIRE(a > b);
  REQUIRE(a >= b);
  REQUIRE(a != b);
  REQUIRE_FALSE(a < a);
  REQUIRE(a <= a);
  REQUIRE(a >= a);
}

TEST_CASE("TimeStamp: null, arithmetic with durations, ordering", "[platform][time]") {
  STATIC_REQUIRE(TimeStamp().IsNull());
  const TimeStamp t = TimeStamp::FromNanoseconds(5000);
  REQUIRE_FALSE(t.IsNull());
  REQUIRE(t.ToNanoseconds() == 5000);
  const TimeDuration d = TimeDuration::FromNanoseconds(1200);
  REQUIRE((t + d).ToNanoseconds() == 6200);
  REQUIRE((t - d).ToNanoseconds() == 3800);
  REQUIRE((t + d) - t == d);
  REQUIRE(t - (t + d) == TimeDuration::FromNanoseconds(-1200));
  REQUIRE(t < t + d);
  REQUIRE(t + d > t);
  REQUIRE(t <= t);
  REQUIRE(t >= t);
  REQUIRE(t == TimeStamp::FromNanoseconds(5000));
  REQUIRE(t != t + d);
}

TEST_CASE("TimeStamp::Now is CLOCK_MONOTONIC in nanoseconds", "[platform][time]") {
  const int64_t before = RawMonotonicNs();
  const TimeStamp now = TimeStamp::Now();
  const int64_t after = RawMonotonicNs();
  REQUIRE_FALSE(now.IsNull());
  REQUIRE(before <= now.ToNanoseconds());
  REQUIRE(now.ToNanoseconds() <= after);
}

TEST_CASE("TimeStamp::Now never goes backwards, on one thread or across threads",
          "[platform][time]") {
  TimeStamp previous = TimeStamp::Now();
  for (int i = 0; i < 100000; ++i) {
    const TimeStamp now = TimeStamp::Now();
    REQUIRE(now >= previous);
    previous = now;
  }
  // A stamp taken on another thread after this one (join orders them) is not earlier.
  const TimeStamp here = TimeStamp::Now();
  TimeStamp there;
  std::thread([&] { there = TimeStamp::Now(); }).join();
  REQUIRE(there >= here);
}

TEST_CASE("TimeStamp::Now advances by at least a sleep", "[platform][time]") {
  const TimeStamp start = TimeStamp::Now();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const TimeDuration slept = TimeStamp::Now() - start;
  REQUIRE(slept >= TimeDuration::FromMilliseconds(20));
  // Loose upper bound: a loaded VM can oversleep, but not by minutes.
  REQUIRE(slept < TimeDuration::FromSeconds(30));
}

}  // namespace
}  // namespace strata
