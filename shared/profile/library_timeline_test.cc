#include "shared/profile/library_timeline.h"

#include <string>
#include <utility>
#include <vector>

#include "catch2/catch.hpp"

namespace strata {
namespace profile {
namespace {

SharedLibrary Library(const char* name, uint64_t start, uint64_t end) {
  SharedLibrary l;
  l.name = l.path = name;
  l.start = start;
  l.end = end;
  l.offset = 0x1000;
  return l;
}

TimeStamp At(int64_t ns) { return TimeStamp::FromNanoseconds(ns); }

TEST_CASE("Without overlaps every library keeps its address, unloaded ones included") {
  const LibraryTimeline timeline({{Library("b", 0x20000, 0x30000), At(0), TimeStamp()},
                                  {Library("a", 0x10000, 0x18000), At(0), At(50)}});
  REQUIRE(timeline.libs().size() == 2);
  CHECK(timeline.libs()[0].name == "a");
  CHECK(timeline.libs()[1].name == "b");
  CHECK_FALSE(timeline.has_moved_libraries());
  CHECK(timeline.AddressAt(0x10010, At(100)) == 0x10010);
}

TEST_CASE("A library replaced at its address moves to a synthetic range, by sample time") {
  const LibraryTimeline timeline({{Library("old", 0x10000, 0x18000), TimeStamp(), At(100)},
                                  {Library("new", 0x10000, 0x19000), At(100), TimeStamp()},
                                  {Library("other", 0x40000, 0x50000), TimeStamp(), TimeStamp()}});
  REQUIRE(timeline.has_moved_libraries());
  REQUIRE(timeline.libs().size() == 3);
  CHECK(timeline.libs()[0].name == "new");  // The latest keeps the real range.
  CHECK(timeline.libs()[0].start == 0x10000);
  const SharedLibrary& moved = timeline.libs()[2];
  CHECK(moved.name == "old");
  CHECK(moved.start >= LibraryTimeline::kSyntheticBase);
  CHECK(moved.end - moved.start == 0x8000);
  CHECK(moved.offset == 0x1000);
  // Before the replacement: the old library's moved address, same lib-relative address.
  const uint64_t early = timeline.AddressAt(0x10123, At(50));
  CHECK(early == moved.start + 0x123);
  CHECK(early - (moved.start - moved.offset) == 0x10123 - (0x10000 - 0x1000));
  // After: the real address (the newcomer). Elsewhere: unchanged.
  CHECK(timeline.AddressAt(0x10123, At(150)) == 0x10123);
  CHECK(timeline.AddressAt(0x18123, At(50)) == 0x18123);  // Only the newcomer spans it.
  CHECK(timeline.AddressAt(0x40123, At(50)) == 0x40123);
  // Libs stay sorted and non-overlapping.
  for (size_t i = 1; i < timeline.libs().size(); ++i) {
    CHECK(timeline.libs()[i - 1].end <= timeline.libs()[i].start);
  }
}

TEST_CASE("Three generations at one address each get their own range") {
  const LibraryTimeline timeline({{Library("one", 0x10000, 0x18000), At(0), At(10)},
                                  {Library("two", 0x10000, 0x18000), At(10), At(20)},
                                  {Library("three", 0x10000, 0x18000), At(20), At(30)}});
  REQUIRE(timeline.libs().size() == 3);
  const uint64_t one = timeline.AddressAt(0x10000, At(5));
  const uint64_t two = timeline.AddressAt(0x10000, At(15));
  const uint64_t three = timeline.AddressAt(0x10000, At(25));
  CHECK(three == 0x10000);
  CHECK(one != two);
  CHECK(one >= LibraryTimeline::kSyntheticBase);
  CHECK(two >= LibraryTimeline::kSyntheticBase);
  CHECK(timeline.AddressAt(0x10000, At(35)) == three);  // After all: the nearest in time.
}

TEST_CASE("The same library opened and closed in a loop at one address is one library") {
  std::vector<LibraryLifetime> lifetimes;
  for (int i = 0; i < 10000; ++i) {
    lifetimes.push_back({Library("plugin", 0x10000, 0x18000), At(10 * i), At(10 * i + 5)});
  }
  lifetimes.push_back({Library("main", 0x40000, 0x50000), TimeStamp(), TimeStamp()});
  const LibraryTimeline timeline(std::move(lifetimes));
  CHECK_FALSE(timeline.has_moved_libraries());
  REQUIRE(timeline.libs().size() == 2);
  CHECK(timeline.libs()[0].name == "plugin");
  CHECK(timeline.AddressAt(0x10123, At(99999)) == 0x10123);
}

TEST_CASE("At most kMaxMovedLibraries earlier libraries are moved; the latest are kept") {
  std::vector<LibraryLifetime> lifetimes;
  const int generations = static_cast<int>(LibraryTimeline::kMaxMovedLibraries) + 40;
  for (int i = 0; i < generations; ++i) {
    const std::string name = "gen" + std::to_string(i);
    lifetimes.push_back({Library(name.c_str(), 0x10000, 0x18000), At(10 * i), At(10 * i + 10)});
  }
  const LibraryTimeline timeline(std::move(lifetimes));
  REQUIRE(timeline.has_moved_libraries());
  CHECK(timeline.libs().size() == LibraryTimeline::kMaxMovedLibraries + 1);
  CHECK(timeline.libs()[0].name == "gen" + std::to_string(generations - 1));
  // The second newest is moved; the oldest (not listed) resolves in the nearest listed one.
  CHECK(timeline.AddressAt(0x10123, At(10 * (generations - 2) + 1)) >=
        LibraryTimeline::kSyntheticBase);
  const uint64_t oldest = timeline.AddressAt(0x10123, At(1));
  bool listed = false;
  for (const SharedLibrary& l : timeline.libs()) listed |= oldest >= l.start && oldest < l.end;
  CHECK(listed);
}

}  // namespace
}  // namespace profile
}  // namespace strata
