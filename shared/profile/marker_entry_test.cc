// MarkerHeaderRef (the recording side) must write exactly the bytes MarkerHeader (the reading
// side) reads, on its plain-store fast path and on the field-by-field path alike.
#include "shared/profile/marker_entry.h"

#include <cstdint>
#include <cstring>
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

// The marker fast path (base/internal/markers/markers.cc, BeginStagedMarkerNow) writes the
// common header with the given times and then stores the clock's reading over the start or
// the end at these offsets: the bytes must be those of a header written with that time.
TEST_CASE("The common header's time offsets hold its start and end", "[profile][marker]") {
  static const char kName[] = "Frame";
  const TimeStamp start = TimeStamp::FromNanoseconds(1'000'000'123);
  const TimeStamp end = TimeStamp::FromNanoseconds(1'000'900'456);
  const int64_t now_ns = 2'000'000'789;
  for (const bool now_at_start : {true, false}) {
    CAPTURE(now_at_start);
    uint8_t patched[kCommonMarkerHeaderBytes];
    REQUIRE(WriteCommonMarkerHeader(patched, ThreadId::FromNumber(4321), MarkerPhase::kInterval,
                                    start, end, kName, sizeof(kName) - 1, 7, 3) ==
            patched + kCommonMarkerHeaderBytes);
    std::memcpy(patched + (now_at_start ? kCommonMarkerHeaderStartOffset
                                        : kCommonMarkerHeaderEndOffset),
                &now_ns, sizeof(now_ns));
    uint8_t direct[kCommonMarkerHeaderBytes];
    WriteCommonMarkerHeader(direct, ThreadId::FromNumber(4321), MarkerPhase::kInterval,
                            now_at_start ? TimeStamp::FromNanoseconds(now_ns) : start,
                            now_at_start ? end : TimeStamp::FromNanoseconds(now_ns), kName,
                            sizeof(kName) - 1, 7, 3);
    CHECK(std::memcmp(patched, direct, kCommonMarkerHeaderBytes) == 0);
    const std::vector<uint8_t> bytes(patched, patched + kCommonMarkerHeaderBytes);
    EntryReader reader = EntryReader::OverBytes(bytes);
    const MarkerHeader read = reader.ReadObject<MarkerHeader>();
    REQUIRE_FALSE(reader.Failed());
    CHECK(read.start.ToNanoseconds() == (now_at_start ? now_ns : start.ToNanoseconds()));
    CHECK(read.end.ToNanoseconds() == (now_at_start ? end.ToNanoseconds() : now_ns));
    CHECK(read.name.View() == "Frame");
  }
}

TEST_CASE("label blocks in a marker stack are read back in place, natives untouched") {
  std::vector<uint64_t> stack = {0x401000};
  auto append = [&](const char* label, const char* dynamic, uint8_t category, uint64_t site) {
    const size_t label_length = std::string(label).size();
    const size_t dynamic_length = dynamic ? std::string(dynamic).size() : 0;
    const size_t at = stack.size();
    stack.resize(at + MarkerStackLabelWords(label_length, dynamic_length));
    REQUIRE(WriteMarkerStackLabel(stack.data() + at, label, label_length, dynamic,
                                  dynamic_length, dynamic != nullptr, category, site) ==
            stack.size() - at);
  };
  append("Parse config", nullptr, 3, 0x401234);
  stack.push_back(0x402000);
  append("Load", "data.bin", 5, 0);
  append("Exactly8", "", 1, 7);  // Text of a whole number of words; an empty dynamic string.
  stack.push_back(0x7f0000001000);
  std::vector<std::string> seen;
  REQUIRE(ForEachMarkerStackFrame(
      stack.data(), stack.size(),
      [&](uint64_t address) { seen.push_back(std::to_string(address)); },
      [&](const MarkerStackLabel& l) {
        seen.push_back(std::string(l.label) + "|" + (l.has_dynamic ? std::string(l.dynamic) : "-") +
                       "|" + std::to_string(l.category) + "|" + std::to_string(l.push_site));
      }));
  CHECK(seen == std::vector<std::string>{"4198400", "Parse config|-|3|4198964", "4202496",
                                         "Load|data.bin|5|0", "Exactly8||1|7",
                                         "139637976731648"});
  // No return address is taken for a label word: the tag is a non-canonical address.
  CHECK_FALSE(IsMarkerStackLabelWord(0x00007fffffffe000ull));
  CHECK_FALSE(IsMarkerStackLabelWord(0xffffffffff600000ull));  // The vsyscall page.
  // A block cut short (damaged data) ends the walk.
  stack.resize(3);
  size_t natives = 0;
  CHECK_FALSE(ForEachMarkerStackFrame(
      stack.data(), stack.size(), [&](uint64_t) { ++natives; }, [&](const MarkerStackLabel&) {}));
  CHECK(natives == 1);
}

TEST_CASE("label text longer than a block holds is cut to the maxima") {
  const std::string label(300, 'a');
  const std::string dynamic(200, 'b');
  std::vector<uint64_t> words(MarkerStackLabelWords(kMaxMarkerStackLabelLength,
                                                    kMaxMarkerStackDynamicLength));
  REQUIRE(WriteMarkerStackLabel(words.data(), label.data(), label.size(), dynamic.data(),
                                dynamic.size(), true, 0, 0) == words.size());
  REQUIRE(ForEachMarkerStackFrame(words.data(), words.size(), [](uint64_t) { FAIL(); },
                                  [&](const MarkerStackLabel& l) {
                                    CHECK(l.label.size() == kMaxMarkerStackLabelLength);
                                    CHECK(l.dynamic.size() == kMaxMarkerStackDynamicLength);
                                  }));
}

}  // namespace
}  // namespace profile
}  // namespace strata
