#include "shared/buffer/leb128.h"

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "catch2/catch.hpp"

namespace strata {
namespace {

template <typename T>
void CheckRoundTrip(T value) {
  uint8_t bytes[ULEB128MaxSize<T>()] = {};
  uint8_t* w = bytes;
  WriteULEB128(value, w);
  REQUIRE(static_cast<size_t>(w - bytes) == ULEB128Size(value));
  const uint8_t* r = bytes;
  REQUIRE(ReadULEB128<T>(r) == value);
  REQUIRE(r == w);
  const uint8_t* cursor = bytes;
  T out = 0;
  REQUIRE(TryReadULEB128<T>(&cursor, w, &out));
  REQUIRE(out == value);
  REQUIRE(cursor == w);
}

TEST_CASE("ULEB128 sizes at the 7-bit boundaries") {
  CHECK(ULEB128MaxSize<uint8_t>() == 2);
  CHECK(ULEB128MaxSize<uint32_t>() == 5);
  CHECK(ULEB128MaxSize<uint64_t>() == 10);
  CHECK(ULEB128Size(0u) == 1);
  CHECK(ULEB128Size(127u) == 1);
  CHECK(ULEB128Size(128u) == 2);
  CHECK(ULEB128Size(16383u) == 2);
  CHECK(ULEB128Size(16384u) == 3);
  CHECK(ULEB128Size(std::numeric_limits<uint64_t>::max()) == 10);
}

TEST_CASE("ULEB128 known encodings") {
  uint8_t bytes[10];
  uint8_t* w = bytes;
  WriteULEB128(624485u, w);  // The classic example: E5 8E 26.
  REQUIRE(w - bytes == 3);
  CHECK(bytes[0] == 0xE5);
  CHECK(bytes[1] == 0x8E);
  CHECK(bytes[2] == 0x26);
}

TEST_CASE("ULEB128 round-trips boundaries and random values") {
  for (uint64_t shift = 0; shift < 64; ++shift) {
    const uint64_t v = uint64_t{1} << shift;
    CheckRoundTrip<uint64_t>(v);
    CheckRoundTrip<uint64_t>(v - 1);
    CheckRoundTrip<uint64_t>(v + 1);
  }
  CheckRoundTrip<uint64_t>(std::numeric_limits<uint64_t>::max());
  for (unsigned v = 0; v <= 255; ++v) CheckRoundTrip<uint8_t>(static_cast<uint8_t>(v));
  CheckRoundTrip<uint32_t>(std::numeric_limits<uint32_t>::max());
  std::mt19937_64 rng(42);
  for (int i = 0; i < 10000; ++i) {
    CheckRoundTrip<uint64_t>(rng() >> (rng() % 64));
    CheckRoundTrip<uint32_t>(static_cast<uint32_t>(rng()));
  }
}

TEST_CASE("TryReadULEB128 refuses truncated, overlong and overflowing input") {
  const uint8_t truncated[] = {0x80, 0x80};
  const uint8_t* cursor = truncated;
  uint64_t out = 7;
  CHECK_FALSE(TryReadULEB128<uint64_t>(&cursor, truncated + 2, &out));
  CHECK(cursor == truncated);
  CHECK(out == 7);

  const uint8_t empty[1] = {0};
  cursor = empty;
  CHECK_FALSE(TryReadULEB128<uint64_t>(&cursor, empty, &out));

  // 256 does not fit in uint8_t.
  const uint8_t too_big_for_u8[] = {0x80, 0x02};
  cursor = too_big_for_u8;
  uint8_t small = 0;
  CHECK_FALSE(TryReadULEB128<uint8_t>(&cursor, too_big_for_u8 + 2, &small));
  // 255 does.
  const uint8_t u8_max[] = {0xFF, 0x01};
  cursor = u8_max;
  CHECK(TryReadULEB128<uint8_t>(&cursor, u8_max + 2, &small));
  CHECK(small == 255);

  // Eleven bytes for a uint64_t is too many.
  std::vector<uint8_t> overlong(11, 0x80);
  overlong.back() = 0x00;
  cursor = overlong.data();
  CHECK_FALSE(TryReadULEB128<uint64_t>(&cursor, overlong.data() + overlong.size(), &out));

  // 2^64 (bit 64 set in the tenth byte) does not fit.
  std::vector<uint8_t> two_to_64(9, 0x80);
  two_to_64.push_back(0x02);
  cursor = two_to_64.data();
  CHECK_FALSE(TryReadULEB128<uint64_t>(&cursor, two_to_64.data() + two_to_64.size(), &out));
}

}  // namespace
}  // namespace strata
