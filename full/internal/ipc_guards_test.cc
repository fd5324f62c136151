#include "full/internal/ipc_guards.h"

#include "catch2/catch.hpp"

namespace strata {
namespace full {
namespace {

TimeStamp Ms(int64_t ms) { return TimeStamp::FromNanoseconds(1'000'000'000 + ms * 1'000'000); }

TEST_CASE("LogRateLimiter: a burst per window, then the count of the lines not shown") {
  LogRateLimiter limiter(3, TimeDuration::FromMilliseconds(1000));
  uint64_t suppressed = 99;
  int allowed = 0;
  for (int i = 0; i < 2000; ++i) allowed += limiter.Allow(Ms(i / 10), &suppressed) ? 1 : 0;
  // 2000 lines within 200 ms: the burst only.
  CHECK(allowed == 3);
  CHECK(limiter.total_suppressed() == 1997);
  // Nothing to report while the window lasts.
  CHECK_FALSE(limiter.TakeUnreported(Ms(999), &suppressed));
  // Once it is over, the count comes on its own line, even if no line follows...
  REQUIRE(limiter.TakeUnreported(Ms(1000), &suppressed));
  CHECK(suppressed == 1997);
  // ...once.
  CHECK_FALSE(limiter.TakeUnreported(Ms(5000), &suppressed));
  // That line counts in its window: 2 more lines in it, then suppressed again.
  CHECK(limiter.Allow(Ms(1001), &suppressed));
  CHECK(suppressed == 0);
  CHECK(limiter.Allow(Ms(1002)));
  CHECK_FALSE(limiter.Allow(Ms(1003)));
  // A line allowed in a later window carries the count instead.
  CHECK(limiter.Allow(Ms(2500), &suppressed));
  CHECK(suppressed == 1);
  CHECK_FALSE(limiter.TakeUnreported(Ms(9000), &suppressed));
}

TEST_CASE("LogRateLimiter: lines and count lines stay within the burst per window") {
  // A peer that connects and closes for 60 s, 100 lines a millisecond, reported every 10 ms.
  LogRateLimiter limiter(40, TimeDuration::FromMilliseconds(10000));
  int written = 0;
  uint64_t shown_count = 0, suppressed = 0;
  for (int ms = 0; ms < 60000; ++ms) {
    for (int i = 0; i < 100; ++i) {
      if (!limiter.Allow(Ms(ms), &suppressed)) continue;
      ++written;
      shown_count += suppressed;  // Carried by the line.
    }
    if (ms % 10 == 0 && limiter.TakeUnreported(Ms(ms), &suppressed)) {
      ++written;
      shown_count += suppressed;
    }
  }
  CHECK(written <= 40 * 6);
  // Every line is either written or counted, on a later line or a count line of its own (the
  // last window's count is still to come).
  uint64_t last = 0;
  REQUIRE(limiter.TakeUnreported(Ms(70000), &last));
  CHECK(shown_count + last == limiter.total_suppressed());
}

}  // namespace
}  // namespace full
}  // namespace strata
