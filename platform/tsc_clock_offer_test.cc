// OfferProcessTscCalibration: a calibration measured elsewhere (by a thread that takes two
// anchors across its own work instead of sleeping) becomes the process-wide one, and
// ProcessTscCalibration() then returns it without measuring. Its own binary: it must run
// before anything in the process asked for the calibration.
#include <thread>
#include <vector>

#include "catch2/catch.hpp"
#include "platform/time_stamp.h"
#include "platform/tsc_clock.h"

namespace strata {
namespace {

TEST_CASE("OfferProcessTscCalibration: the first offer is put in force, for everyone",
          "[platform][tsc]") {
  REQUIRE(ProcessTscCalibrationIfReady() == nullptr);
  // A synthetic calibration: 3 ticks per ns from an anchor at 1 s.
  TscAnchor earlier;
  earlier.ticks = 1000;
  earlier.time = TimeStamp::FromNanoseconds(1000000000);
  TscAnchor later;
  later.ticks = 1000 + 3000000;
  later.time = TimeStamp::FromNanoseconds(1001000000);
  const TscCalibration offered = TscCalibration::FromAnchors(earlier, later);
  REQUIRE(offered.IsValid());

  const TscCalibration& in_force = OfferProcessTscCalibration(offered);
  REQUIRE(ProcessTscCalibrationIfReady() == &in_force);
  CHECK(in_force.TicksPerNanosecond() == Approx(3.0));
  // 3000 ticks later: 1000 ns later (to the nanosecond: the rate is fixed point).
  const int64_t converted = TscTicksToTimeStamp(1000 + 3000).ToNanoseconds();
  CHECK(converted >= 1000000999);
  CHECK(converted <= 1000001001);

  // Later askers get the offered one, without measuring (a measurement would give this
  // machine's real rate, not 3 ticks per ns), and so do later offers.
  std::vector<const TscCalibration*> seen(4, nullptr);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&, i] { seen[i] = &ProcessTscCalibration(); });
  for (auto& t : threads) t.join();
  for (const TscCalibration* s : seen) REQUIRE(s == &in_force);
  // Nobody measured: a measurement would give this machine's rate, not the offered 3 ticks
  // per ns to 1e-8 (a measurement is noisier than that). No wall-clock bound: on a loaded
  // machine four threads may wait longer than a calibration window to be scheduled (a CI run
  // failed on that once).
  CHECK(ProcessTscCalibrationIfReady()->TicksPerNanosecond() == Approx(3.0).epsilon(1e-8));
  const TscCalibration second = TscCalibration::FromAnchors(earlier, TscAnchor{later.ticks * 2, later.time});
  CHECK(&OfferProcessTscCalibration(second) == &in_force);
  CHECK(ProcessTscCalibrationIfReady()->TicksPerNanosecond() == Approx(3.0));
}

}  // namespace
}  // namespace strata
