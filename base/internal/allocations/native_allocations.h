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
#include <cstdint>

#include "base/internal/allocations/allocation_stack.h"

namespace strata {
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
bool RecordNativeAllocation(int64_t bytes, uint64_t address, StackAnchor anchor);

// Notes, once per session, that the hooks' set of live sampled addresses is full: a text
// marker on the main thread says so (later sampled allocations keep being recorded, but
// their frees are not matched: they look retained).
void NoteNativeAllocationSetFull(uint64_t capacity);

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_NATIVE_ALLOCATIONS_H_
