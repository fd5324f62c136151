// The address range of a thread's stack, [low, high), captured once at registration.
//
// Stack walkers use it to refuse every read that is not inside the walked thread's stack, so a
// garbage frame pointer or stack pointer can never fault. The stack grows down: the walked
// frames lie between the interrupted stack pointer and `high`.
//
// Thread safety: StackBounds is a value type. OfCurrentThread() and OfThread() are
// thread-safe.
// Async-signal safety: OfCurrentThread() and OfThread() are NOT async-signal-safe:
// pthread_getattr_np() allocates, and for the main thread it reads /proc/self/maps (~0.1 M
// instructions and five reads of a kernel-generated file). Call them outside signal
// handlers. Contains() and the accessors are async-signal-safe.
#ifndef STRATA_PLATFORM_SAMPLING_STACK_BOUNDS_H_
#define STRATA_PLATFORM_SAMPLING_STACK_BOUNDS_H_

#include <pthread.h>

#include <cstddef>
#include <cstdint>

namespace strata {

struct StackBounds {
  uintptr_t low = 0;   // Lowest address of the stack (inclusive).
  uintptr_t high = 0;  // One past the highest address (exclusive): where the stack starts.

  // The calling thread's stack as the threading library reports it (without its guard page).
  // For the main thread, `low` is `high` minus the stack size limit: the pages between `low`
  // and the current stack pointer may not be mapped yet, which is why walkers only read
  // between the interrupted stack pointer and `high`. Returns empty bounds on failure.
  static StackBounds OfCurrentThread();
  // The same for `thread`, which must be alive for the duration of the call.
  static StackBounds OfThread(pthread_t thread);

  // The main thread's growable stack, for the sampling handler's headroom check
  // (sampling_signal.h, SetSamplingMainStackLimits): `high` is the end of the mapping that
  // holds glibc's __libc_stack_end (RLIMIT_STACK counts from there), `low` the lowest address
  // it can grow to whatever the limit: the end of the mapping below plus the kernel's stack
  // guard gap (256 pages, its default). Reads /proc/self/maps. Empty bounds on failure.
  static StackBounds MainStackReach();

  bool IsEmpty() const { return high <= low; }
  size_t size() const { return IsEmpty() ? 0 : high - low; }
  bool Contains(uintptr_t address) const { return address >= low && address < high; }
  // True when [address, address + length) lies inside the bounds (no overflow).
  bool ContainsRange(uintptr_t address, size_t length) const {
    return address >= low && address <= high && length <= high - address;
  }
};

}  // namespace strata

#endif  // STRATA_PLATFORM_SAMPLING_STACK_BOUNDS_H_
