#include "shared/progress/proportion_value.h"

#include <cmath>
#include <cstdint>
#include <random>

#include "catch2/catch.hpp"

namespace strata {
namespace {

using PV = ProportionValue;

// Compile-time use.
static_assert(PV().IsExactlyZero());
static_assert(PV::One().IsExactlyOne());
static_assert(PV(0.5) + PV(0.5) == PV::One());
static_assert(PV::FromRatio(1, 4) * PV::FromRatio(1, 2) == PV::FromRatio(1, 8));
static_assert(PV(1.5).IsInvalid());
static_assert(sizeof(PV) == 4);

TEST_CASE("construction, limits and invalid values") {
  CHECK(PV().ToDouble() == 0.0);
  CHECK(PV::Zero() == PV(0.0));
  CHECK(PV::One() == PV(1.0));
  CHECK(PV::One().ToUnderlying() == PV::kOneUnderlying);
  CHECK(PV(0.25).ToDouble() == 0.25);
  CHECK(PV(-0.0).IsExactlyZero());
  CHECK(PV(-0.001).IsInvalid());
  CHECK(PV(1.0000001).IsInvalid());
  CHECK(PV(std::nan("")).IsInvalid());
  CHECK(PV(INFINITY).IsInvalid());
  CHECK(std::isnan(PV::Invalid().ToDouble()));
  CHECK(PV::FromUnderlying(PV::kOneUnderlying + 1).IsInvalid());
  // Invalid compares greater than every valid value, equal to itself.
  CHECK(PV::One() < PV::Invalid());
  CHECK(PV::Invalid() == PV::Invalid());
}

TEST_CASE("ratios are rounded to the nearest and exact at the ends") {
  CHECK(PV::FromRatio(0, 7).IsExactlyZero());
  CHECK(PV::FromRatio(7, 7).IsExactlyOne());
  CHECK(PV::FromRatio(1, 2) == PV(0.5));
  CHECK(PV::FromRatio(1, 3).ToUnderlying() == 357913941);  // 2^30/3 = 357913941.33
  CHECK(PV::FromRatio(2, 3).ToUnderlying() == 715827883);  // 715827882.67
  CHECK(PV::FromRatio(1, 0).IsInvalid());
  CHECK(PV::FromRatio(0, 0).IsInvalid());
  CHECK(PV::FromRatio(8, 7).IsInvalid());
  // Huge operands (buffer indexes) do not overflow.
  CHECK(PV::FromRatio(UINT64_MAX / 2, UINT64_MAX) == PV(0.5));
  CHECK(PV::FromRatio(UINT64_MAX, UINT64_MAX).IsExactlyOne());
}

TEST_CASE("arithmetic is exact integer arithmetic, invalid outside [0, 1]") {
  // 0.1 + 0.2 == 0.3, unlike doubles.
  CHECK(PV(0.1) + PV(0.2) == PV(0.3));
  CHECK(PV(0.75) - PV(0.25) == PV(0.5));
  CHECK((PV(0.6) + PV(0.6)).IsInvalid());
  CHECK((PV(0.25) - PV(0.5)).IsInvalid());
  CHECK((PV::Invalid() + PV()).IsInvalid());
  CHECK((PV() - PV::Invalid()).IsInvalid());
  CHECK((PV::Invalid() * PV::One()).IsInvalid());
  // Multiplying by 0 or 1 is exact for every value.
  std::mt19937 rng(42);
  for (int i = 0; i < 10000; ++i) {
    const PV p = PV::FromUnderlying(rng() % (PV::kOneUnderlying + 1));
    REQUIRE(p * PV::One() == p);
    REQUIRE(PV::One() * p == p);
    REQUIRE((p * PV()).IsExactlyZero());
    REQUIRE(p - p == PV());
    REQUIRE((p * PV(0.5)).ToUnderlying() == (p.ToUnderlying() + 1) / 2);  // Rounded.
  }
  CHECK(PV(0.5) * PV(0.5) == PV(0.25));
}

TEST_CASE("split points tile a range exactly") {
  const PV from(0.2), to(0.7);
  CHECK(PV::SplitPoint(from, to, 0, 3) == from);
  CHECK(PV::SplitPoint(from, to, 3, 3) == to);
  // Widths of the parts add up to the whole, with no gap or overlap.
  for (uint64_t count : {1u, 2u, 3u, 7u, 1000u, 1000003u}) {
    PV sum;
    PV previous = from;
    for (uint64_t i = 1; i <= count; i += (count > 1000 ? 997 : 1)) {
      const PV point = PV::SplitPoint(from, to, i, count);
      REQUIRE(point >= previous);
      sum = sum + (point - previous);
      previous = point;
    }
    sum = sum + (to - previous);
    CHECK(sum == to - from);
  }
  CHECK(PV::SplitPoint(from, to, 4, 3).IsInvalid());
  CHECK(PV::SplitPoint(from, to, 0, 0).IsInvalid());
  CHECK(PV::SplitPoint(to, from, 1, 2).IsInvalid());
  CHECK(PV::SplitPoint(PV::Invalid(), to, 1, 2).IsInvalid());
  // A huge count (block indexes) does not overflow.
  CHECK(PV::SplitPoint(PV(), PV::One(), UINT64_MAX / 2, UINT64_MAX - 1) == PV(0.5));
}

TEST_CASE("interpolation stays within its bounds") {
  const PV from(0.3), to(0.9);
  CHECK(PV::Interpolate(from, to, PV()) == from);
  CHECK(PV::Interpolate(from, to, PV::One()) == to);
  CHECK(std::abs(PV::Interpolate(from, to, PV(0.5)).ToDouble() - 0.6) < 1e-9);
  CHECK(PV::Interpolate(to, from, PV(0.5)).IsInvalid());
  std::mt19937 rng(7);
  for (int i = 0; i < 10000; ++i) {
    const PV t = PV::FromUnderlying(rng() % (PV::kOneUnderlying + 1));
    const PV p = PV::Interpolate(from, to, t);
    REQUIRE(p >= from);
    REQUIRE(p <= to);
  }
}

}  // namespace
}  // namespace strata
