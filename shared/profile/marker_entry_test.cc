// MarkerHeaderRef (the recording side) must write exactly the bytes MarkerHeader (the reading
// side) reads, on its plain-store fast path and on the field-by-field path alike.
#include "shared/profile/marker_entry.h"

#include <cstdint>
#include <string>
#include <vector>

#include "catch2/catch.hpp"

namespace strata {
namespace profile {
namespace {

std::vector<uint8_t> Serialize(const MarkerHeaderRef& h) {
  std::vector<uint8_t> bytes(Serializer<MarkerHeaderRef>::Bytes(h));
  EntryWriter writer(bytes.data(), bytes.size(), nullptr, 0);
  writer.WriteObject(h);
  REQUIRE(writer.RemainingBytes() == 0);
  return bytes;
}

std::vector<uint8_t> SerializeOwning(const MarkerHeader& h) {
  std::vector<uint8_t> bytes(Serializer<MarkerHeader>::Bytes(h));
  EntryWriter writer(bytes.data(), bytes.size(), nullptr, 0);
  writer.WriteObject(h);
  return bytes;
}

// Splits the entry over two spans at `split`, so the fast path cannot take it.
std::vector<uint8_t> SerializeSplit(const MarkerHeaderRef& h, size_t split) {
  const size_t n = Serializer<MarkerHeaderRef>::Bytes(h);
  std::vector<uint8_t> first(split), second(n - split);
  EntryWriter writer(first.data(), first.size(), second.data(), second.size());
  writer.WriteObject(h);
  REQUIRE(writer.RemainingBytes() == 0);
  first.insert(first.end(), second.begin(), second.end());
  return first;
}

TEST_CASE("MarkerHeaderRef writes what MarkerHeader reads", "[profile][marker]") {
  static const char kLongName[] =
      "a literal name that is longer than sixty-four characters, so two header bytes";
  const ProfilerString literal = ProfilerString::Literal("Frame");
  const ProfilerString long_literal = ProfilerString::Literal(kLongName);
  const ProfilerString dynamic = ProfilerString::Dynamic("dynamic name");
  const std::vector<uint64_t> stack = {0x401000, 0x402000, 0x7f0000001234};

  struct Case {
    const ProfilerString* name;
    bool with_stack;
  };
  const Case cases[] = {{&literal, false}, {&literal, true}, {&long_literal, false},
                        {&dynamic, false}, {&dynamic, true}};
  for (const Case& c : cases) {
    MarkerHeaderRef ref;
    ref.thread = ThreadId::FromNumber(4321);
    ref.phase = MarkerPhase::kInterval;
    ref.start = TimeStamp::FromNanoseconds(1'000'000'123);
    ref.end = TimeStamp::FromNanoseconds(1'000'900'456);
    ref.name = c.name;
    ref.category = 7;
    ref.payload_tag = 3;
    if (c.with_stack) ref.stack = stack;

    MarkerHeader owning;
    owning.thread = ref.thread;
    owning.phase = ref.phase;
    owning.start = ref.start;
    owning.end = ref.end;
    owning.name = *c.name;
    owning.category = ref.category;
    owning.payload_tag = ref.payload_tag;
    if (c.with_stack) owning.stack = stack;

    const std::vector<uint8_t> bytes = Serialize(ref);
    CAPTURE(std::string(c.name->View()), c.with_stack);
    REQUIRE(bytes == SerializeOwning(owning));
    for (size_t split = 0; split <= bytes.size(); ++split) {
      REQUIRE(SerializeSplit(ref, split) == bytes);
    }

    EntryReader reader = EntryReader::OverBytes(bytes);
    const MarkerHeader read = reader.ReadObject<MarkerHeader>();
    REQUIRE_FALSE(reader.Failed());
    REQUIRE(read.thread == ref.thread);
    REQUIRE(read.phase == ref.phase);
    REQUIRE(read.start == ref.start);
    REQUIRE(read.end == ref.end);
    REQUIRE(read.name.View() == c.name->View());
    REQUIRE(read.category == 7);
    REQUIRE(read.payload_tag == 3);
    REQUIRE(read.stack == (c.with_stack ? stack : std::vector<uint64_t>{}));
  }
}

}  // namespace
}  // namespace profile
}  // namespace strata
