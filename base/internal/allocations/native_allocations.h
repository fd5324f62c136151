// Native allocation profiling, base's half (docs/memory.md): the switch the allocation hooks
// read, the mean sampling interval, and the recording of one sampled allocation or free as a
// "Native allocation" marker, in the format the Firefox Profiler reads (payload size,
// memoryAddress, threadId, and a stack; every record on the main thread's track so that a
// free made on another thread matches its allocation).
//
// The hooks themselves (malloc, free, operator new/delete...) are not in libstrata_base.so:
// they are in libstrata_alloc.so (base/internal/allocations/allocation_hooks.cc), preloaded or linked
// beside it, so that a program profiled without the feature pays nothing for them and base
// stays small. That library reads g_native_allocation_interval (one relaxed load per
// allocation) and calls RecordNativeAllocation() for the sampled ones.
//
// Thread safety: everything here is thread-safe. RecordNativeAllocation() runs on a program
// thread inside its allocator's call: it allocates nothing, takes no lock of the program's
// (only the session buffer's own futex mutex, and never when the calling thread already holds
// it or the session lock), and makes raw system calls only. Not async-signal-safe (the stack
// walk: libunwind outside a signal handler, as marker stacks).
#ifndef STRATA_BASE_INTERNAL_NATIVE_ALLOCATIONS_H_
#define STRATA_BASE_INTERNAL_NATIVE_ALLOCATIONS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/internal/allocations/allocation_stack.h"

namespace strata {
struct LabelFrame;  // base/labels.h
namespace base_internal {

// Mean bytes between sampled allocations (STRATA_ALLOC_INTERVAL) while a session with the
// feature 'nativeallocations' runs, else 0. Read by the hooks on every allocation (relaxed).
extern std::atomic<uint64_t> g_native_allocation_interval;

// The default mean interval, and the range STRATA_ALLOC_INTERVAL accepts (bytes).
inline constexpr uint64_t kDefaultNativeAllocationInterval = 64 * 1024;
inline constexpr uint64_t kMinNativeAllocationInterval = 256;
inline constexpr uint64_t kMaxNativeAllocationInterval = uint64_t{1} << 30;

// The mean interval sessions use from now on (STRATA_ALLOC_INTERVAL, read at load).
void SetNativeAllocationInterval(uint64_t bytes);

// Session start and stop (core.cc, session lock held): turns the hooks on when `features`
// has kFeatureNativeAllocations, off otherwise.
void StartNativeAllocations(uint32_t features);
void StopNativeAllocations();

// Records one sampled allocation (`bytes` > 0: the estimate of the bytes it stands for) or
// the free of one (`bytes` < 0: minus its allocation's estimate) at `address`, with the
// calling thread's stack and its labels among the frames (allocation_stack.h: `anchor` is the
// hook's return address and its slot, which the labels' placement starts from). False when nothing was recorded: no session with the feature, the
// thread is not registered, or Strata itself holds the buffer or session lock on this thread
// (its own allocations), or the stack cannot be walked safely here. The caller (the hooks)
// keeps a sampled address for its free only when this returned true.
// Stack: it runs on whatever stack the program allocates on. On the thread's own stack it
// first checks the room below its frame: with less than kRecordStackNeed bytes it records
// nothing, and where the labels' placement needs the cursor walk (allocation_stack.h) with
// less than kWalkStackNeed it records nothing either; both counted
// (NativeAllocationsSkippedForLowStack, in the profile's meta). Off the thread's own stack (a
// coroutine's, the signal stack) its room is unknown and not checked.
bool RecordNativeAllocation(int64_t bytes, uint64_t address, StackAnchor anchor);

// The bytes of stack the recording needs below RecordNativeAllocation's frame address:
// tests/native_allocations/alloc_tiny_stack_program --measure (its thread unsampled, R = 256)
// found at most 12 320 bytes used below the allocating frame without labels, 12 784 with one,
// 11 952 with the cursor walk forced for every record (STRATA_TEST_ALLOC_CURSOR_WALK=1;
// libunwind's cold paths dominate: its unw_backtrace takes a DWARF step too); 14 KiB leaves
// ~1.2 KiB for other CPUs' larger xsave areas (lazy binding). The walk's own frame
// (ucontext_t and 128 frames, 3 KiB by -fstack-usage) is kept on top as margin, its cursor
// walk being libunwind's slow path.
inline constexpr size_t kRecordStackNeed = 14 * 1024;
inline constexpr size_t kWalkStackNeed = kRecordStackNeed + 3 * 1024;

// Records skipped this session for want of stack (above). Async-signal-safe.
uint64_t NativeAllocationsSkippedForLowStack();

// Records this session whose labels were placed by the cursor walk (allocation_stack.h: where
// the searches of the stack could not place them). Async-signal-safe.
uint64_t NativeAllocationCursorWalks();

// Test switch: with STRATA_TEST_ALLOC_CURSOR_WALK=1 in the environment when a session starts
// (read by StartNativeAllocations), every record with labels places them with the cursor
// walk, as if the searches had failed (tests/native_allocations/alloc_labels_test.sh).
inline constexpr char kForceCursorWalkVariable[] = "STRATA_TEST_ALLOC_CURSOR_WALK";

// The labels of a thread's profiling stack, root first, the outermost
// kMaxAllocationStackLabels: each LabelFrame and its stack address.
struct AllocationStackLabels {
  const LabelFrame* frames[kMaxAllocationStackLabels];
  uintptr_t addresses[kMaxAllocationStackLabels];
  uint32_t count = 0;
};

// The most words an allocation's marker stack takes: the most native frames a marker keeps
// and this many words of labels (the outermost labels that fit).
inline constexpr size_t kMaxAllocationStackLabelWords = 128;

// Writes an allocation's marker stack (profile/marker_entry.h) into `words`: the walk's `pcs`
// (leaf first, `count`, at most kMaxMarkerStackFrames) without Strata's own frames (those up to
// `anchor_return_address`, looked for among the first 16), with `labels` merged in, each
// after the frame it belongs to (`slots_below[k]`: the walk's frames below label k; adjusted
// here for the frames dropped). `words` has room for kMaxMarkerStackFrames +
// kMaxAllocationStackLabelWords. Returns the words written; 0 when no native frame remains
// (the walk found none, or only Strata's own): a stack of labels alone would be a record with
// no frame of the program's, refused as a stackless one. No allocation, no system call.
size_t WriteAllocationStack(const uintptr_t* pcs, size_t count, uintptr_t anchor_return_address,
                            const AllocationStackLabels& labels, uint32_t* slots_below,
                            uint64_t* words);

// Notes, once per session, that the hooks' set of live sampled addresses is full: a text
// marker on the main thread says so (later sampled allocations keep being recorded, but
// their frees are not matched: they look retained).
void NoteNativeAllocationSetFull(uint64_t capacity);

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_NATIVE_ALLOCATIONS_H_
