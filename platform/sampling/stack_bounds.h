// The address range of a thread's stack, [low, high), captured once at registration.
//
// Stack walkers use it to refuse every read that is not inside the walked thread's stack, so a
// garbage frame pointer or stack pointer can never fault. The stack grows down: the walked
// frames lie between the interrupted stack pointer and `high`.
//
// Thread safety: StackBounds is a value type; every function is thread-safe.
// Allocation: OfCurrentThread(), OfMainThread() and MainStackReach() allocate nothing and
// call no libc function the program could interpose: they ask /proc/self/maps with raw
// system calls (a new thread's registration runs them on the program's thread, before its
// start routine: docs/host-contract.md): OfCurrentThread() with one PROCMAP_QUERY ioctl
// where the kernel has it (Linux 6.11+; ~1.4 us of CPU here), else, like the other two, by
// reading the file into a fixed 2 KiB buffer on the caller's stack (~8 us for 25 mappings,
// more for more). They open a descriptor for that long (the lowest free number, as any open
// does).
// OfThread() calls glibc's pthread_getattr_np, which allocates through the program's malloc:
// only for another thread, from Strata's own threads (attach).
// Async-signal safety: none of the four is meant for a signal handler (they ask a
// kernel-generated file, taking the kernel's memory-map lock); Contains() and the accessors
// are async-signal-safe.
#ifndef STRATA_PLATFORM_SAMPLING_STACK_BOUNDS_H_
#define STRATA_PLATFORM_SAMPLING_STACK_BOUNDS_H_

#include <pthread.h>

#include <cstddef>
#include <cstdint>

namespace strata {

struct StackBounds {
  uintptr_t low = 0;   // Lowest address of the stack (inclusive).
  uintptr_t high = 0;  // One past the highest address (exclusive): where the stack starts.

  // The calling thread's stack: the mapping that holds the caller's frame, which for a stack
  // glibc allocated is what pthread_getattr_np reports (the guard page below is a mapping of
  // its own). On the main stack (the mapping that holds __libc_stack_end, whichever thread
  // runs on it: a forked child's), OfMainThread(). A stack the program gave
  // (pthread_attr_setstack) may lie inside a larger mapping: pthread_create's wrapper narrows
  // these bounds to the given stack. Empty bounds when /proc/self/maps cannot be read.
  static StackBounds OfCurrentThread();
  // The main thread's stack, from any thread, as glibc reports it: `high` the page above
  // __libc_stack_end, `low` `high`'s mapping end minus the soft RLIMIT_STACK (read now), or
  // the end of the mapping below, whichever is higher: the pages between `low` and the
  // current stack pointer may not be mapped yet, which is why walkers only read between the
  // interrupted stack pointer and `high`. Empty bounds on failure.
  static StackBounds OfMainThread();
  // The same as OfCurrentThread() for `thread`, which must be alive for the duration of the
  // call, through glibc's pthread_getattr_np (allocates: see above).
  static StackBounds OfThread(pthread_t thread);

  // The main thread's growable stack, for the sampling handler's headroom check
  // (sampling_signal.h, SetSamplingMainStackLimits): `high` is the end of the mapping that
  // holds glibc's __libc_stack_end (RLIMIT_STACK counts from there), `low` the lowest address
  // it can grow to whatever the limit: the end of the mapping below plus the kernel's stack
  // guard gap (256 pages, its default). Empty bounds on failure.
  static StackBounds MainStackReach();

  bool IsEmpty() const { return high <= low; }
  size_t size() const { return IsEmpty() ? 0 : high - low; }
  // The part of these bounds inside `other`; these when `other` is empty, `other` when these
  // are.
  StackBounds NarrowedTo(const StackBounds& other) const {
    if (other.IsEmpty()) return *this;
    if (IsEmpty()) return other;
    StackBounds narrowed;
    narrowed.low = low > other.low ? low : other.low;
    narrowed.high = high < other.high ? high : other.high;
    return narrowed;
  }
  bool Contains(uintptr_t address) const { return address >= low && address < high; }
  // True when [address, address + length) lies inside the bounds (no overflow).
  bool ContainsRange(uintptr_t address, size_t length) const {
    return address >= low && address <= high && length <= high - address;
  }
};

}  // namespace strata

#endif  // STRATA_PLATFORM_SAMPLING_STACK_BOUNDS_H_
