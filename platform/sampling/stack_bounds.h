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
// more for more). They use the descriptor OpenSharedMapsDescriptor() opened, else open one
// for that long (the lowest free number, as any open does).
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

  // The calling thread's stack: the mapping that holds the caller's frame, up to the thread's
  // TCB (pthread_self(), which glibc places at the top of the stack block, above every frame)
  // when that lies inside: for a stack glibc allocated, pthread_getattr_np's `low` (the guard
  // page below is a mapping of its own) and, as `high`, the thread pointer, below its end
  // (the TCB and static TLS; the mapping can also reach further up, merged with an adjacent
  // anonymous one the program may unmap). On the main stack (the mapping that holds __libc_stack_end, whichever thread
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
  // call, through glibc's pthread_getattr_np (allocates: see above), capped at its TCB too.
  static StackBounds OfThread(pthread_t thread);

  // The main thread's growable stack, for the sampling handler's headroom check
  // (sampling_signal.h, SetSamplingMainStackLimits): `high` is the end of the mapping that
  // holds glibc's __libc_stack_end (RLIMIT_STACK counts from there), `low` the lowest address
  // it can grow to whatever the limit: the end of the mapping below plus the kernel's stack
  // guard gap (256 pages, its default). Empty bounds on failure.
  static StackBounds MainStackReach();

  // Opens the process-wide /proc/self/maps descriptor the three functions above use from then
  // on (the ioctl ignores the file position; the file is read with pread from offset 0):
  // close-on-exec, moved above the soft RLIMIT_NOFILE (MoveDescriptorAboveSoftLimit, a helper
  // process: `above_soft_limit_helper_allowed` false where a seccomp filter may kill it).
  // Where that is not possible, none is kept and each query opens its own for its length (the
  // lowest free number, as any open does), as before the first call. Checked before each use
  // by process (an inherited one names the parent's maps: a forked child queries with its own
  // until it calls this again, which closes the inherited one and opens its own) and identity
  // (fstat: a number the program closed or reused is never used). Returns whether one is held.
  // Call at session start, not on a program thread's path: thread-safe (one caller at a time)
  // but not async-signal-safe, and it may allocate (clone's helper stack is Strata's).
  static bool OpenSharedMapsDescriptor(bool above_soft_limit_helper_allowed);

  // Test hook: true makes OfCurrentThread() read the file's lines as on kernels before 6.11
  // (no PROCMAP_QUERY ioctl). Thread-safe; set it while no other thread reads bounds.
  static void ForceMapsFileReadForTesting(bool forced);

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

// The /proc/self/maps line parser, separate for its unit test. Allocates nothing, calls
// nothing but `read`; async-signal-safe when `read` is.
namespace stack_bounds_internal {

// The bytes FindInMaps reads at once, on the caller's stack.
inline constexpr size_t kMapsBufferSize = 2048;

// One line of /proc/self/maps ("start-end perms offset dev inode path") and the end of the
// line before it.
struct MapsLine {
  uintptr_t start = 0;
  uintptr_t end = 0;
  uintptr_t previous_end = 0;
  bool previous_known = false;  // False for the first line (or an unparsable one before).
};

// Reads up to `capacity` bytes of the file at `offset` into `into`: the count, 0 at its end,
// negative on error.
using MapsReader = long (*)(void* context, char* into, size_t capacity, uint64_t offset);

// Finds the line whose [start, end) holds `address`, reading the file from offset 0 through
// `read` into a kMapsBufferSize buffer. A line longer than the buffer (a long path) is parsed
// from its head and its tail skipped, never taken for a line of its own. False when no line
// holds `address` or `read` fails.
bool FindInMaps(MapsReader read, void* context, uintptr_t address, MapsLine* found);

}  // namespace stack_bounds_internal
}  // namespace strata

#endif  // STRATA_PLATFORM_SAMPLING_STACK_BOUNDS_H_
