#include "shared/json/shortest_double.h"

#include "catch2/catch.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>

namespace strata {
namespace {

std::string Format(double value) {
  char buffer[kMaxRoundTripDoubleChars];
  return std::string(buffer, FormatRoundTripDouble(value, buffer));
}

std::string StdToChars(double value) {
  char buffer[64];
  return std::string(buffer, std::to_chars(buffer, buffer + sizeof(buffer), value).ptr);
}

double Read(const std::string& text) { return std::strtod(text.c_str(), nullptr); }

bool SameDouble(double a, double b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

TEST_CASE("the forms std::to_chars writes") {
  CHECK(Format(1.0) == "1");
  CHECK(Format(0.5) == "0.5");
  CHECK(Format(0.1 + 0.2) == "0.30000000000000004");
  CHECK(Format(100) == "100");
  CHECK(Format(1e6) == "1e+06");  // Shorter than 1000000.
  CHECK(Format(1e21) == "1e+21");
  CHECK(Format(0.001) == "0.001");  // As short as 1e-03: fixed wins the tie.
  CHECK(Format(0.0001) == "1e-04");
  CHECK(Format(1.5e-7) == "1.5e-07");
  CHECK(Format(-2.25) == "-2.25");
  CHECK(Format(0.0) == "0");
  CHECK(Format(-0.0) == "-0");
  CHECK(Format(5e-324) == "5e-324");
  CHECK(Format(std::numeric_limits<double>::max()) == "1.7976931348623157e+308");
  CHECK(Format(std::numeric_limits<double>::min()) == "2.2250738585072014e-308");
  CHECK(Format(1700000000123.456) == "1700000000123.456");
  CHECK(Format(std::nan("")) == "null");
  CHECK(Format(-std::numeric_limits<double>::infinity()) == "null");
}

// Every output reads back as the same double and fits the documented room; it is what
// std::to_chars writes for almost every value, and at most one digit longer otherwise.
void CheckAgainstStd(double value, size_t* differing) {
  const std::string ours = Format(value);
  const std::string reference = StdToChars(value);
  INFO(ours << " vs std::to_chars " << reference);
  REQUIRE(ours.size() < kMaxRoundTripDoubleChars);
  REQUIRE(SameDouble(Read(ours), value));
  REQUIRE(ours.size() <= reference.size() + 1);
  if (ours != reference) ++*differing;
}

TEST_CASE("random doubles: round trip, and std::to_chars' text in at least 99 % of cases") {
  std::mt19937_64 random(20261122);
  constexpr int kCount = 200000;
  size_t differing_bits = 0, differing_decimals = 0, differing_times = 0;
  for (int i = 0; i < kCount; ++i) {
    // Any finite bit pattern (all magnitudes, subnormals included).
    uint64_t bits = random();
    double value;
    std::memcpy(&value, &bits, sizeof(value));
    if (std::isfinite(value)) CheckAgainstStd(value, &differing_bits);
    // Short decimals, as profiles hold (microsecond figures, ratios).
    CheckAgainstStd(static_cast<double>(random() % 10000000) / 1000.0, &differing_decimals);
    // Millisecond times with nanosecond fractions.
    CheckAgainstStd(static_cast<double>(random() % 4000000000000ull) / 1e6, &differing_times);
  }
  CHECK(differing_bits < kCount / 100);
  CHECK(differing_decimals < kCount / 100);
  CHECK(differing_times < kCount / 100);
  WARN("differing from std::to_chars: " << differing_bits << " random bit patterns, "
                                        << differing_decimals << " decimals, " << differing_times
                                        << " times, of " << kCount << " each");
}

}  // namespace
}  // namespace strata
