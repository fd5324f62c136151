// Labels among an allocation's return addresses (allocation_stack.h).
#include "base/internal/allocations/allocation_stack.h"

namespace strata {
namespace base_internal {
namespace {

// The most words one search reads (256 KiB of stack): a deeper search gives up (the caller
// then walks with stack pointers).
constexpr size_t kMaxSearchWords = 32 * 1024;

// The word at `address` of `image`. Reads other frames' memory, which ASan's instrumentation
// would take for an overflow of this one.
__attribute__((no_sanitize("address", "hwaddress"))) inline uint64_t ReadWord(
    const StackImage& image, uintptr_t address) {
  if (image.words == nullptr) return *reinterpret_cast<const volatile uint64_t*>(address);
  return image.words[(address - image.address) / 8];
}

}  // namespace

bool CountSlotsBelowLabels(const uintptr_t* returns, size_t count, StackAnchor anchor,
                           uintptr_t high, const uintptr_t* label_addresses,
                           size_t label_count, StackImage image, uint32_t* slots_below) {
  if (label_count == 0) return true;
  if (label_count > kMaxAllocationStackLabels || anchor.slot % 8 != 0 || high <= anchor.slot) {
    return false;
  }
  // The anchor's index: its slot is known, and so are the slots of the frames inside it
  // (Strata's own: below it, as no label can be).
  size_t first = count;
  for (size_t i = 0; i < count; ++i) {
    if (returns[i] == anchor.return_address) {
      first = i;
      break;
    }
  }
  if (first == count) return false;
  uintptr_t lowest_label = UINTPTR_MAX;
  uintptr_t highest_label = 0;
  for (size_t k = 0; k < label_count; ++k) {
    const uintptr_t a = label_addresses[k];
    if (a <= anchor.slot || a >= high) continue;  // Not between the anchor and the top.
    if (a < lowest_label) lowest_label = a;
    if (a > highest_label) highest_label = a;
  }
  // Per label: the slots (after the anchor's) found below it by each search.
  uint32_t below_low[kMaxAllocationStackLabels] = {};
  uint32_t above_high[kMaxAllocationStackLabels] = {};
  const uintptr_t top = high & ~uintptr_t{7};
  if (highest_label != 0) {
    // Upward: a slot at or below the real one. A return address not found (a frame without
    // a return-address slot: a signal frame) keeps where its search began as its bound, and
    // the next one is searched from there.
    uintptr_t at = anchor.slot + 8;
    size_t budget = kMaxSearchWords;
    for (size_t i = first + 1; i < count; ++i) {
      uintptr_t slot = at;
      for (; slot < top && ReadWord(image, slot) != returns[i]; slot += 8) {
        if (--budget == 0) return false;
      }
      if (slot >= top) slot = at;  // Not found.
      if (slot >= highest_label) break;  // This one and every later one is above every label.
      for (size_t k = 0; k < label_count; ++k) {
        if (slot < label_addresses[k]) ++below_low[k];
      }
      if (slot != at || ReadWord(image, slot) == returns[i]) at = slot + 8;
    }
    // Downward: a slot at or above the real one (not found: where the search began).
    uintptr_t from = top - 8;
    budget = kMaxSearchWords;
    for (size_t i = count; i-- > first + 1;) {
      uintptr_t slot = from;
      for (; slot > anchor.slot && ReadWord(image, slot) != returns[i]; slot -= 8) {
        if (--budget == 0) return false;
      }
      if (slot <= anchor.slot) slot = from;  // Not found.
      if (slot < lowest_label) break;  // This one and every earlier one is below every label.
      for (size_t k = 0; k < label_count; ++k) {
        if (slot > label_addresses[k]) ++above_high[k];
      }
      if (slot != from || ReadWord(image, slot) == returns[i]) from = slot - 8;
    }
  }
  const uint32_t after_anchor = static_cast<uint32_t>(count - first - 1);
  for (size_t k = 0; k < label_count; ++k) {
    const uintptr_t a = label_addresses[k];
    if (a <= anchor.slot) {
      slots_below[k] = 0;  // In Strata's own frames (never): after the leaf.
      continue;
    }
    if (a >= high) {
      slots_below[k] = static_cast<uint32_t>(count);  // Not on this stack: after the root.
      continue;
    }
    const uint32_t upper = below_low[k];
    const uint32_t lower = after_anchor - above_high[k];
    if (upper != lower) return false;
    slots_below[k] = static_cast<uint32_t>(first + 1) + upper;
  }
  return true;
}

}  // namespace base_internal
}  // namespace strata
