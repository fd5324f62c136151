// The process-wide TSC calibration's life cycle. Its own binary, because it must observe the
// state before anything in the process asked for the calibration.
#include <thread>
#include <vector>

#include "catch2/catch.hpp"
#include "platform/tsc_clock.h"

namespace strata {
namespace {

TEST_CASE("ProcessTscCalibration: absent until asked, then measured once for all threads",
          "[platform][tsc]") {
  REQUIRE(ProcessTscCalibrationIfReady() == nullptr);
  REQUIRE(TscTicksToTimeStamp(ReadTscTicks()).IsNull());

  constexpr int kThreads = 4;
  std::vector<const TscCalibration*> seen(kThreads, nullptr);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] { seen[i] = &ProcessTscCalibration(); });
  }
  for (auto& t : threads) t.join();

  const TscCalibration* ready = ProcessTscCalibrationIfReady();
  REQUIRE(ready != nullptr);
  REQUIRE(ready->IsValid());
  for (int i = 0; i < kThreads; ++i) REQUIRE(seen[i] == ready);
  REQUIRE_FALSE(TscTicksToTimeStamp(ReadTscTicks()).IsNull());
}

}  // namespace
}  // namespace strata
