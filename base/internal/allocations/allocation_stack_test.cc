// CountSlotsBelowLabels (allocation_stack.h) on made-up stacks: exact placement, stale copies
// of return addresses on either side of the real slot, and what it refuses.
#include "base/internal/allocations/allocation_stack.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

namespace strata {
namespace base_internal {
namespace {

// A stack of 300 words at 0x10000: the return addresses 0xA (the anchor's, word 10), 0xB
// (word 40), 0xC (word 100) and 0xD (word 200); 0x1 and 0x2 are inner frames (Strata's own).
struct FakeStack {
  static constexpr uintptr_t kBase = 0x10000;
  std::vector<uint64_t> words = std::vector<uint64_t>(300, 0x5a5a);
  uintptr_t returns[6] = {0x1, 0x2, 0xA, 0xB, 0xC, 0xD};
  FakeStack() {
    words[10] = 0xA;
    words[40] = 0xB;
    words[100] = 0xC;
    words[200] = 0xD;
  }
  static uintptr_t At(size_t word) { return kBase + 8 * word; }
  StackImage Image() const { return StackImage{words.data(), kBase}; }
  StackAnchor Anchor() const { return StackAnchor{0xA, At(10)}; }
  uintptr_t High() const { return At(300); }
  bool Count(const std::vector<uintptr_t>& labels, std::vector<uint32_t>* below) const {
    below->assign(labels.size(), 99);
    return CountSlotsBelowLabels(returns, 6, Anchor(), High(), labels.data(), labels.size(),
                                 Image(), below->data());
  }
};

TEST_CASE("each label goes after the frame whose slots surround it") {
  FakeStack stack;
  std::vector<uint32_t> below;
  // In 0xB's frame (between its slot and 0xC's), in 0xC's, in 0xD's (the outermost).
  REQUIRE(stack.Count({FakeStack::At(60), FakeStack::At(150), FakeStack::At(250)}, &below));
  CHECK(below == std::vector<uint32_t>{4, 5, 6});
  // Two labels in one frame, and one in the frame right above the anchor's.
  REQUIRE(stack.Count({FakeStack::At(90), FakeStack::At(70), FakeStack::At(20)}, &below));
  CHECK(below == std::vector<uint32_t>{4, 4, 3});
}

TEST_CASE("no label: nothing to do") {
  FakeStack stack;
  std::vector<uint32_t> below;
  CHECK(stack.Count({}, &below));
}

TEST_CASE("a stale copy that moves a slot across a label is found out") {
  std::vector<uint32_t> below;
  SECTION("below the real slot: the upward search stops early") {
    FakeStack stack;
    stack.words[50] = 0xC;  // Under the label at 60, which is in 0xB's frame.
    CHECK_FALSE(stack.Count({FakeStack::At(60)}, &below));
  }
  SECTION("above the real slot: the downward search stops early") {
    FakeStack stack;
    stack.words[80] = 0xB;  // Above the label at 60, which is in 0xB's frame.
    CHECK_FALSE(stack.Count({FakeStack::At(60)}, &below));
  }
}

TEST_CASE("a stale copy that stays on the same side of every label changes nothing") {
  FakeStack stack;
  stack.words[120] = 0xC;  // Above the real slot (100), below the label at 150.
  stack.words[30] = 0xB;   // Below the real slot (40), above the anchor.
  std::vector<uint32_t> below;
  REQUIRE(stack.Count({FakeStack::At(60), FakeStack::At(150)}, &below));
  CHECK(below == std::vector<uint32_t>{4, 5});
}

TEST_CASE("labels off the searched range") {
  FakeStack stack;
  std::vector<uint32_t> below;
  // Above the stack's top (another stack): after the outermost frame. Below the anchor: after
  // the leaf.
  REQUIRE(stack.Count({FakeStack::At(400), FakeStack::At(150), FakeStack::At(5)}, &below));
  CHECK(below == std::vector<uint32_t>{6, 5, 0});
}

TEST_CASE("refused: an anchor that is not among the return addresses") {
  FakeStack stack;
  std::vector<uint32_t> below(1);
  const uintptr_t label = FakeStack::At(60);
  CHECK_FALSE(CountSlotsBelowLabels(stack.returns, 6, StackAnchor{0xE, FakeStack::At(10)},
                                    stack.High(), &label, 1, stack.Image(), below.data()));
}

TEST_CASE("a frame without a return-address slot only loosens the bounds around it") {
  FakeStack stack;
  stack.words[100] = 0;  // 0xC is nowhere on the stack (a signal frame's pc, say).
  std::vector<uint32_t> below;
  // A label far from it is still placed; one next to it cannot be.
  REQUIRE(stack.Count({FakeStack::At(20)}, &below));
  CHECK(below == std::vector<uint32_t>{3});
  CHECK_FALSE(stack.Count({FakeStack::At(60)}, &below));
}

}  // namespace
}  // namespace base_internal
}  // namespace strata
