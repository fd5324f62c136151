#include "full/internal/sub_process_end.h"

#include <string>

#include "catch2/catch.hpp"

namespace strata {
namespace full {
namespace {

TEST_CASE("A sub-process profile's range comes from its meta, in epoch nanoseconds") {
  const std::optional<EpochRangeNs> range = SubProcessProfileRangeEpochNs(
      R"({"meta":{"version":36,"startTime":1700000000000.5,"categories":[{"name":"startTime"}],)"
      R"("extra":{"startTime":1,"profilingEndTime":99},"profilingStartTime":-2.25,)"
      R"("profilingEndTime":30.125},"threads":[{"startTime":7}]})");
  REQUIRE(range.has_value());
  CHECK(range->start == 1700000000000500000 - 2250000);
  CHECK(range->end == 1700000000000500000 + 30125000);
}

TEST_CASE("The parse stops at the end of meta: what follows is not read") {
  // Broken JSON after meta: still a range.
  CHECK(SubProcessProfileRangeEpochNs(
            R"({"meta":{"startTime":1700000000000,"profilingStartTime":0,"profilingEndTime":5},"threads":[}}}}}")")
            .has_value());
}

TEST_CASE("No range without meta's three numbers") {
  CHECK_FALSE(SubProcessProfileRangeEpochNs("").has_value());
  CHECK_FALSE(SubProcessProfileRangeEpochNs("{").has_value());
  CHECK_FALSE(SubProcessProfileRangeEpochNs(R"({"meta":{"startTime":1700000000000}})").has_value());
  CHECK_FALSE(SubProcessProfileRangeEpochNs(
                  R"({"meta":{"startTime":"x","profilingStartTime":0,"profilingEndTime":5}})")
                  .has_value());
  CHECK_FALSE(SubProcessProfileRangeEpochNs(
                  R"({"threads":[{"meta":{"startTime":1,"profilingStartTime":0,"profilingEndTime":5}}]})")
                  .has_value());
}

}  // namespace
}  // namespace full
}  // namespace strata
