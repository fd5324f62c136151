// WriteAllocationStack (native_allocations.h) on made-up walks: Strata's own frames dropped,
// labels merged after their frames, and no record of labels alone when no native frame
// remains (an empty walk, or one that stops at the hook).
#include "base/internal/allocations/native_allocations.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "base/labels.h"
#include "base/markers.h"
#include "shared/profile/marker_entry.h"

namespace strata {
namespace base_internal {
namespace {

constexpr uintptr_t kAnchorReturn = 0xA000;  // In the hook: the last of Strata's own frames.

// One label "Load" (category 3) pushed in the frame of `slots_below` walk frames.
struct OneLabel {
  LabelFrame frame{"Load", nullptr, nullptr, reinterpret_cast<const void*>(0x5150), 3};
  AllocationStackLabels labels;
  OneLabel() {
    labels.frames[0] = &frame;
    labels.addresses[0] = 0x7000;
    labels.count = 1;
  }
};

std::vector<uint64_t> Write(const std::vector<uintptr_t>& pcs, const AllocationStackLabels& labels,
                            uint32_t slots_below) {
  std::vector<uint64_t> words(kMaxMarkerStackFrames + kMaxAllocationStackLabelWords, 0);
  uint32_t below[kMaxAllocationStackLabels] = {slots_below};
  const size_t n = WriteAllocationStack(pcs.data(), pcs.size(), kAnchorReturn, labels, below,
                                        words.data());
  words.resize(n);
  return words;
}

TEST_CASE("Strata's frames up to the hook's are dropped; the label follows its frame") {
  OneLabel one;
  // Leaf first: two of Strata's frames, the hook's return address, then the program's
  // 0xB (allocating), 0xC (pushed the label), 0xD.
  const std::vector<uintptr_t> pcs = {0x1, 0x2, kAnchorReturn, 0xB, 0xC, 0xD};
  const std::vector<uint64_t> words = Write(pcs, one.labels, 5);  // 5 frames below: 0xC's.
  REQUIRE(words.size() == 3 + profile::MarkerStackLabelWords(4, 0));
  CHECK(words[0] == 0xB);
  CHECK(profile::IsMarkerStackLabelWord(words[1]));
  CHECK(words[2] == 0x5150);  // The push site.
  CHECK(words[words.size() - 2] == 0xC);
  CHECK(words.back() == 0xD);
  CHECK(Write(pcs, AllocationStackLabels{}, 0) == std::vector<uint64_t>{0xB, 0xC, 0xD});
}

TEST_CASE("No native frame left: nothing written, with or without labels") {
  OneLabel one;
  // The walk returned nothing.
  CHECK(Write({}, one.labels, 0).empty());
  CHECK(Write({}, AllocationStackLabels{}, 0).empty());
  // The walk stopped at the hook: only Strata's own frames.
  CHECK(Write({0x1, 0x2, kAnchorReturn}, one.labels, 3).empty());
  CHECK(Write({kAnchorReturn}, one.labels, 0).empty());
  CHECK(Write({0x1, kAnchorReturn}, AllocationStackLabels{}, 0).empty());
  // One program frame is enough for the record, the label pushed in it (leafward of it).
  const std::vector<uint64_t> words = Write({0x1, kAnchorReturn, 0xB}, one.labels, 3);
  REQUIRE(words.size() == 1 + profile::MarkerStackLabelWords(4, 0));
  CHECK(profile::IsMarkerStackLabelWord(words[0]));
  CHECK(words.back() == 0xB);
}

}  // namespace
}  // namespace base_internal
}  // namespace strata
