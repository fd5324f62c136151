#include "shared/buffer/entry_serialization.h"

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "catch2/catch.hpp"
#include "shared/buffer/entry_kinds.h"

namespace strata {
namespace {

enum class Color : uint16_t { kRed = 1, kBlue = 513 };

using Everything =
    std::tuple<int8_t, uint16_t, int32_t, uint64_t, float, double, bool, Color, TimeStamp,
               TimeDuration, ProcessId, ThreadId, BlockIndex, std::string, ProfilerString,
               ProfilerString, std::vector<uint32_t>, std::vector<std::string>,
               std::optional<int>, std::optional<std::string>, std::variant<int, std::string>,
               std::pair<char, double>, LegacyEntry>;

Everything MakeEverything() {
  return Everything(-5, 65000, -123456, 0xFEDCBA9876543210ull, 1.5f, -2.25, true, Color::kBlue,
                    TimeStamp::FromNanoseconds(123456789), TimeDuration::FromNanoseconds(-42),
                    ProcessId::FromNumber(1234), ThreadId::FromNumber(5678),
                    BlockIndex::FromTrustedBufferIndex(99), std::string("dynamic\0string", 14),
                    ProfilerString::Literal("a literal"), ProfilerString::Dynamic("copied"),
                    std::vector<uint32_t>{1, 2, 3, 0xFFFFFFFF},
                    std::vector<std::string>{"", "x", std::string(200, 'y')}, std::nullopt,
                    std::optional<std::string>("present"), std::variant<int, std::string>("alt"),
                    std::make_pair('c', 3.75),
                    LegacyEntry::FromDouble(EntryKind::kTime, 12.5));
}

void CheckEqual(const Everything& a, const Everything& b) {
  CHECK(std::get<0>(a) == std::get<0>(b));
  CHECK(std::get<1>(a) == std::get<1>(b));
  CHECK(std::get<2>(a) == std::get<2>(b));
  CHECK(std::get<3>(a) == std::get<3>(b));
  CHECK(std::get<4>(a) == std::get<4>(b));
  CHECK(std::get<5>(a) == std::get<5>(b));
  CHECK(std::get<6>(a) == std::get<6>(b));
  CHECK(std::get<7>(a) == std::get<7>(b));
  CHECK(std::get<8>(a) == std::get<8>(b));
  CHECK(std::get<9>(a) == std::get<9>(b));
  CHECK(std::get<10>(a) == std::get<10>(b));
  CHECK(std::get<11>(a) == std::get<11>(b));
  CHECK(std::get<12>(a) == std::get<12>(b));
  CHECK(std::get<13>(a) == std::get<13>(b));
  CHECK(std::get<14>(a).View() == std::get<14>(b).View());
  CHECK(std::get<14>(b).IsLiteral());
  // The literal comes back as the very same characters, not a copy.
  CHECK(std::get<14>(a).View().data() == std::get<14>(b).View().data());
  CHECK(std::get<15>(a).View() == std::get<15>(b).View());
  CHECK_FALSE(std::get<15>(b).IsLiteral());
  CHECK(std::get<16>(a) == std::get<16>(b));
  CHECK(std::get<17>(a) == std::get<17>(b));
  CHECK(std::get<18>(a) == std::get<18>(b));
  CHECK(std::get<19>(a) == std::get<19>(b));
  CHECK(std::get<20>(a) == std::get<20>(b));
  CHECK(std::get<21>(a) == std::get<21>(b));
  CHECK(std::get<22>(a) == std::get<22>(b));
}

TEST_CASE("Every supported type round-trips, whatever the split between two spans") {
  const Everything original = MakeEverything();
  const size_t bytes = SumBytes(original);
  std::vector<uint8_t> contiguous(bytes);
  {
    EntryWriter writer(contiguous.data(), bytes, nullptr, 0);
    writer.WriteObject(original);
    REQUIRE(writer.RemainingBytes() == 0);
  }
  for (size_t split = 0; split <= bytes; ++split) {
    // Write across two separate spans split at `split`, read back across the same split.
    std::vector<uint8_t> first(split), second(bytes - split);
    EntryWriter writer(first.data(), first.size(), second.data(), second.size());
    writer.WriteObject(original);
    REQUIRE(writer.RemainingBytes() == 0);
    std::vector<uint8_t> joined(first);
    joined.insert(joined.end(), second.begin(), second.end());
    REQUIRE(joined == contiguous);

    EntryReader reader(first.data(), first.size(), second.data(), second.size());
    Everything copy;
    reader.ReadIntoObject(copy);
    INFO("split at " << split);
    REQUIRE_FALSE(reader.Failed());
    CHECK(reader.RemainingBytes() == 0);
    CheckEqual(original, copy);
  }
}

TEST_CASE("Encodings are the documented ones") {
  std::vector<uint8_t> out(SumBytes(std::string("ab")));
  EntryWriter writer(out.data(), out.size(), nullptr, 0);
  writer.WriteObject(std::string("ab"));
  CHECK(out == std::vector<uint8_t>{4, 'a', 'b'});  // ULEB128(2 << 1), bytes.

  std::variant<int8_t, uint8_t> v = uint8_t{7};
  out.assign(SumBytes(v), 0);
  EntryWriter writer2(out.data(), out.size(), nullptr, 0);
  writer2.WriteObject(v);
  CHECK(out == std::vector<uint8_t>{1, 7});
}

TEST_CASE("Reading past the entry fails cleanly instead of overrunning") {
  const uint8_t bytes[] = {1, 2, 3};
  EntryReader reader = EntryReader::OverBytes(bytes);
  uint16_t two = reader.ReadObject<uint16_t>();
  CHECK(two == 0x0201);
  CHECK_FALSE(reader.Failed());
  uint32_t four = 0xFFFFFFFF;
  reader.ReadIntoObject(four);
  CHECK(reader.Failed());
  CHECK(four == 0);
}

TEST_CASE("Garbage lengths and indexes fail instead of allocating or crashing") {
  SECTION("string longer than the entry") {
    const uint8_t bytes[] = {0xFE, 0xFF, 0xFF, 0xFF, 0x0F, 'a'};
    EntryReader reader = EntryReader::OverBytes(bytes);
    std::string s = reader.ReadObject<std::string>();
    CHECK(reader.Failed());
    CHECK(s.empty());
  }
  SECTION("vector count beyond the entry") {
    const uint8_t bytes[] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F};
    EntryReader reader = EntryReader::OverBytes(bytes);
    std::vector<uint64_t> v = reader.ReadObject<std::vector<uint64_t>>();
    CHECK(reader.Failed());
    CHECK(v.empty());
  }
  SECTION("variant index out of range") {
    const uint8_t bytes[] = {5, 0, 0, 0, 0};
    EntryReader reader = EntryReader::OverBytes(bytes);
    reader.ReadObject<std::variant<int, float>>();
    CHECK(reader.Failed());
  }
  SECTION("bool that is neither 0 nor 1") {
    const uint8_t bytes[] = {2};
    EntryReader reader = EntryReader::OverBytes(bytes);
    reader.ReadObject<bool>();
    CHECK(reader.Failed());
  }
  SECTION("legacy entry with a modern kind") {
    uint8_t bytes[9] = {static_cast<uint8_t>(EntryKind::kMarker)};
    EntryReader reader = EntryReader::OverBytes(bytes);
    reader.ReadObject<LegacyEntry>();
    CHECK(reader.Failed());
  }
}

TEST_CASE("Untrusted readers refuse literal-string addresses") {
  const ProfilerString literal = ProfilerString::Literal("static");
  std::vector<uint8_t> bytes(SumBytes(literal));
  EntryWriter writer(bytes.data(), bytes.size(), nullptr, 0);
  writer.WriteObject(literal);

  EntryReader trusted = EntryReader::OverBytes(bytes);
  CHECK(trusted.ReadObject<std::string>() == "static");
  CHECK_FALSE(trusted.Failed());

  EntryReader untrusted = EntryReader::OverBytes(bytes);
  untrusted.SetUntrusted();
  CHECK(untrusted.ReadObject<std::string>().empty());
  CHECK(untrusted.Failed());
}

TEST_CASE("Skip and PeekByte respect both spans") {
  const uint8_t a[] = {1, 2};
  const uint8_t b[] = {3, 4};
  EntryReader reader(a, 2, b, 2);
  reader.Skip(3);
  CHECK(reader.PeekByte() == 4);
  CHECK(reader.ReadObject<uint8_t>() == 4);
  reader.Skip(1);
  CHECK(reader.Failed());
}

TEST_CASE("Legacy entries keep integers, doubles and addresses") {
  static const char kLabel[] = "label";
  CHECK(LegacyEntry::FromInteger(EntryKind::kThreadId, 77).AsInteger() == 77);
  CHECK(LegacyEntry::FromDouble(EntryKind::kTime, -1.25).AsDouble() == -1.25);
  CHECK(LegacyEntry::FromAddress(EntryKind::kLabel, kLabel).AsAddress() == kLabel);
  CHECK(IsLegacyKind(EntryKind::kTime));
  CHECK_FALSE(IsLegacyKind(EntryKind::kMarker));
  CHECK(IsModernKind(EntryKind::kMarker));
}

}  // namespace
}  // namespace strata
