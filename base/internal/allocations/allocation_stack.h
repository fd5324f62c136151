// The stack of a sampled allocation with the thread's labels in it (native allocations,
// docs/memory.md, "Labels"): a label goes right after the native frame it was pushed in, by
// stack address, as in a CPU sample (base/internal/sampling/sample_entries.h, MergedStack).
//
// The walk of an allocation (libunwind's unw_backtrace: CaptureCurrentStack) gives return
// addresses without stack pointers: 6-25x cheaper than the cursor walk that gives both. The
// stack pointers that matter are found from the stack itself: on x86-64 the return address
// into frame i sits in the slot just below frame i's stack pointer at its call, and a label
// (its AutoLabel object) at address A belongs to frame k when slot(k) < A < slot(k + 1). So
// what a label needs is the number of slots below its address. The slots are searched
// twice: upward from a slot known exactly (the hook's own return address), each return
// address at the first word above the previous one's that holds it, which finds every slot
// at or below the real one (a stale copy of a return address can only come earlier); and
// downward from the top of the stack, which finds every slot at or above the real one. When
// both give a label the same count, that count is the real one; when they differ (a stale
// copy moved a slot across a label), or a search fails, the caller walks the stack with
// stack pointers instead (libunwind's cursor, the CPU samples' walker).
//
// Thread safety: value functions. Async-signal safety: yes (no lock, no allocation, no
// system call); they read the calling thread's own stack (between `anchor` and `high`).
#ifndef STRATA_BASE_INTERNAL_ALLOCATIONS_ALLOCATION_STACK_H_
#define STRATA_BASE_INTERNAL_ALLOCATIONS_ALLOCATION_STACK_H_

#include <cstddef>
#include <cstdint>

namespace strata {
namespace base_internal {

// One return address whose slot is known: a hook's __builtin_return_address(0) and
// __builtin_frame_address(0) + 8 (STRATA_ALLOCATION_STACK_ANCHOR in allocation_hooks.cc).
struct StackAnchor {
  uintptr_t return_address = 0;
  uintptr_t slot = 0;
};

// The words of the stack a search reads: word i is at address `address` + 8 i. For the
// calling thread's own stack, StackImage::OfOwnStack(); tests pass an array.
struct StackImage {
  const uint64_t* words = nullptr;
  uintptr_t address = 0;
  static StackImage OfOwnStack() { return StackImage{nullptr, 0}; }
};

// The most labels an allocation stack carries (the outermost ones), as a CPU sample.
inline constexpr size_t kMaxAllocationStackLabels = 32;

// For each label (its stack address; root first, as the profiling stack holds them) the
// number of the walk's return-address slots below it, into slots_below[]: 0 puts it after
// the leaf, `count` after the outermost frame; the merged stack has it right after
// returns[slots_below - 1] (root first). `returns` are the walk's, leaf first; `high` the
// top of the thread's stack (its StackBounds). False when the two searches disagree for a
// label or cannot be made (the anchor is not among `returns`, a return address not found):
// then nothing is known and the caller walks with stack pointers.
bool CountSlotsBelowLabels(const uintptr_t* returns, size_t count, StackAnchor anchor,
                           uintptr_t high, const uintptr_t* label_addresses,
                           size_t label_count, StackImage image, uint32_t* slots_below);

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_ALLOCATIONS_ALLOCATION_STACK_H_
