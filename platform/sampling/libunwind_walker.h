// Native stack walk with libunwind (DWARF call-frame information), from a signal handler's
// context. Complete where frame pointers are not: frameless leaf functions (g++ 12 gives them
// no frame record even under -fno-omit-frame-pointer) and code built with
// -fomit-frame-pointer, such as most of libc.
//
// How, and why this way (measured on the project's machine kind; docs/sampling.md has the
// numbers):
//   - unw_init_local2(context, UNW_INIT_SIGNAL_FRAME), not unw_getcontext() in the handler:
//     the walk starts at the interrupted instruction, looked up as such (not as a return
//     address), without walking the handler and the sigreturn trampoline first; cheaper too.
//   - The cursor (unw_step + UNW_REG_IP/UNW_REG_SP), not unw_backtrace(): unw_backtrace is
//     6-25x cheaper but yields no stack pointers, which label merging needs, and recovering
//     them by searching the stack for each return address was measured to be wrong (a copy of
//     a return address in a caller's locals is found before the real slot).
//   - libunwind's caching policy is left at its default, UNW_CACHE_GLOBAL, and never changed
//     (the address space is process-wide and the program may use libunwind too). Debian's
//     libunwind 1.6.2 is built without __thread support, so UNW_CACHE_PER_THREAD silently is
//     the global cache (measured: same system calls per sample); UNW_CACHE_NONE would call
//     dl_iterate_phdr() for every frame.
//
// Cost: every unw_step takes the global cache's lock, which libunwind takes only with every
// signal blocked: two rt_sigprocmask system calls per step (counted: ~90 per sample at depth
// 45). Measured in the handler (sampling_benchmark, p50, quiet machine): 6-9 us for 8
// frames, 13-17 us for 18, 28-37 us for 48, so ~0.6 us per further frame. A cache miss (a pc
// not seen before, or evicted from the 128-entry cache) adds a dl_iterate_phdr() walk of
// the loaded objects. Each frame's pc is also checked with _dl_find_object (3-10 ns).
//
// Deep stacks (issue 38): frames whose frame-pointer step libunwind has confirmed are
// walked by frame pointers. After each libunwind step from a return address, the walker
// checks whether that step equals a frame-pointer step (caller's sp = %rbp + 16, its pc and
// %rbp the frame record's two words) and notes the address in a preallocated lock-free table
// (4 096 return addresses, 32 KiB of .bss; an address where a later libunwind step disagrees
// is dropped). A later walk that reaches a noted return address reads frame records from
// there on (WalkFramePointerCallers, inside `bounds`) until the first address not noted,
// where libunwind resumes (as after JIT code). Same frames, same stack pointers; a 1 000-frame
// recursion built with frame pointers costs ~20 ns a frame instead of ~0.3-0.6 us
// (docs/benchmarks.md). Code built without frame pointers (most of Debian's libc,
// libstdc++) never matches, and is walked by libunwind as before. The table is emptied when
// an object is unloaded (FlushLibunwindCaches). The interrupted instruction itself is never
// noted (it may be in a prologue or epilogue); only return addresses are.
//
// Why it is safe in a signal handler that may interrupt malloc or the dynamic loader:
//   - It does not allocate (checked with an interposed allocator, cold and warm).
//   - libunwind's own lock is held only with all signals blocked, so the handler can never
//     interrupt its own thread while that thread holds it; another thread holding it is
//     running and will release it (nothing is suspended in this design).
//   - On a cache miss libunwind calls dl_iterate_phdr(), which would take glibc's
//     dl_load_write_lock. During a walk that call never reaches glibc: libunwind's import is
//     redirected (libunwind_imports.h) to ServeDlIteratePhdrDuringWalk(), which answers
//     without the lock. The lock is recursive, but re-entering it from a handler is not safe:
//     a sample that lands between the moment dlopen() takes the lock word and the moment it
//     stores the owner waits for itself forever (seen in libunwind_walker_test, in
//     _dl_add_to_namespace_list, about once in a hundred runs before the redirection).
//   - libunwind is never handed a pc that lies in no loaded object (glibc's lock-free
//     _dl_find_object tells; JIT code, for example): for it libunwind has no unwind
//     information and would fall back to reading through %rbp, trusting a 4-page cache of
//     addresses it checked earlier, which a program that unmapped such a page since makes it
//     fault on (issue 16). Such frames are crossed by frame pointers, reading only inside
//     `bounds` (frame_pointer_walker.h), and libunwind resumes (unw_init_local2 on a copy of
//     the context with pc/sp/fp replaced, flag 0) at the first return address back in a
//     loaded object. Handler stack: libunwind's cursor (1 KiB) and the context copy for
//     resuming after such frames (1 KiB) are in the caller's LibunwindWalkScratch when it
//     passes one (the base tier does: one per thread), else on the stack.
//   - libunwind reads no table of the program's objects itself: the lookup hands it checked
//     copies (unwind_table_copy.h); and every word it reads through its accessor outside
//     the walked stack's bounds (its frame-chain fallback where DWARF information is
//     missing, its sigreturn check's code bytes) is read with CheckedRead
//     (CheckLibunwindMemoryReads, libunwind_imports.h). A walk never reads, writes, closes
//     or opens a descriptor, and calls no cancellation point.
//   - This walker also stops as soon as a frame's stack pointer leaves `bounds` or stops
//     increasing.
// Hence the rule: use it only to walk the calling thread's own stack in its own signal
// handler. Never from another thread while the walked thread is suspended (the Firefox
// handshake design): the suspended thread may hold libunwind's lock or the loader lock.
//
// libunwind is not linked: libunwind_loader.h opens it privately (RTLD_LOCAL) so that its
// copy of the C++ exception ABI never enters the program's global symbol scope, and these
// functions call it through the loader's table. WarmUpLibunwind() loads it. Without
// libunwind in the process (not installed, or not loaded yet) the walks report the
// interrupted pc only and CaptureCurrentStack() reports nothing; nothing is logged.
//
// Before issue 33's checked accessor, libunwind's frame-chain fallback trusted a 4-page cache
// of addresses it had validated: a page the program unmapped since then faulted. Now every
// such read outside the stack is checked.
//
// Thread safety: thread-safe. Async-signal safety: WalkStackWithLibunwind() is
// async-signal-safe under the rule above, once WarmUpLibunwind() has run in the process.
// WarmUpLibunwind(), FlushLibunwindCaches() and CaptureCurrentStack() are NOT
// async-signal-safe.
#ifndef STRATA_PLATFORM_SAMPLING_LIBUNWIND_WALKER_H_
#define STRATA_PLATFORM_SAMPLING_LIBUNWIND_WALKER_H_

#include <link.h>
#include <ucontext.h>

#include <cstddef>
#include <cstdint>

#include "platform/sampling/libunwind_imports.h"
#include "platform/sampling/libunwind_loader.h"
#include "platform/sampling/native_frame.h"
#include "platform/sampling/stack_bounds.h"

namespace strata {

// Walks the stack interrupted by the signal whose handler received `context` (its third
// argument), writing at most `capacity` frames (see native_frame.h); returns the number
// written: 0 only when capacity is 0, 1 when the interrupted stack pointer is outside
// `bounds` (code running on a signal alternate stack or a coroutine stack is reported by its
// pc only). Frames in no loaded object (JIT code) are walked by frame pointers inside
// `bounds` (a JIT frame without a frame record ends the walk there). The caller must guarantee: it runs on the interrupted thread itself, inside the
// handler that received `context`; `bounds` are that thread's (StackBounds::OfCurrentThread()
// at registration); `frames` has room for `capacity` entries.
//
// `scratch`, if given, holds libunwind's cursor and the context copy of a resumed walk
// instead of the handler's stack (2 KiB less of it: docs/sampling.md, "Stack"): one per
// thread, used only by that thread's handler (every signal is blocked there, so it is never
// in use twice at once). Without it they are on the stack.
struct LibunwindWalkScratch {
  unw_cursor_t cursor;
  ucontext_t resumed;
};
size_t WalkStackWithLibunwind(ucontext_t* context, const StackBounds& bounds, NativeFrame* frames,
                              size_t capacity, LibunwindWalkScratch* scratch = nullptr);

// Whether walks use verified frame-pointer steps ("Deep stacks" above; on by default). Off,
// every frame is a libunwind step, as before issue 38: for benchmarks and tests comparing
// the two. Process-wide; thread-safe.
void SetVerifiedFramePointerSteps(bool enabled);
// Whether a walk has noted `return_address` as verified (tests). Async-signal-safe.
bool FramePointerStepVerifiedForTesting(uintptr_t return_address);

// --- The dynamic loader's lock.
//
// On a cache miss libunwind calls dl_iterate_phdr, which takes the dynamic loader's list lock
// (dl_load_write_lock), while it holds its own cache lock. In a signal handler that is a
// deadlock waiting to happen (found by tests/signal_stress_test.sh): thread A, interrupted
// inside dlopen/dlclose while it holds the loader's list lock, waits in its handler for
// libunwind's lock; thread B holds libunwind's lock and waits in dl_iterate_phdr for the
// loader's lock. Or B, interrupted inside malloc, waits for the loader's lock while A, in
// dlclose, waits for malloc's. So a walk in a handler must never wait for the loader's lock:
//
// - While a thread walks with libunwind (WalkStackWithLibunwind, WarmUpLibunwind, or a caller's
//   own step loop between SetLibunwindLookupPc(pc) and SetLibunwindLookupPc(0)), libunwind's
//   redirected dl_iterate_phdr import (and the preload tier's dl_iterate_phdr wrapper, for
//   any other caller) asks ServeDlIteratePhdrDuringWalk() first, which reports
//   only the object containing the pc being unwound, found with glibc's lock-free
//   _dl_find_object, without taking the loader's lock. That object cannot be unloaded while
//   its code is on the walking thread's own stack.
// - LibunwindWalkMayDeadlock() is true when the calling thread may itself hold the loader's
//   list lock: it is inside a dl_iterate_phdr call marked with ScopedDlIteratePhdrCall, or the
//   base namespace's link map is being changed (_r_debug.r_state != RT_CONSISTENT, set by
//   glibc around dlclose's unmapping). Callers then walk frame pointers.
//
// Not covered: libunwind used outside signal handlers while it misses its cache (marker stacks
// through CaptureCurrentStack(), or the program's own use of libunwind) still takes the
// loader's lock with libunwind's lock held; a thread interrupted while it adds an object to the
// list in dlopen (before glibc marks RT_ADD) could then wait for it. All async-signal-safe.
bool LibunwindWalkMayDeadlock();

// Marks the calling thread as inside dl_iterate_phdr for its lifetime (the preload tier's
// dl_iterate_phdr wrapper uses it). Nests.
class ScopedDlIteratePhdrCall {
 public:
  ScopedDlIteratePhdrCall();
  ~ScopedDlIteratePhdrCall();
  ScopedDlIteratePhdrCall(const ScopedDlIteratePhdrCall&) = delete;
  ScopedDlIteratePhdrCall& operator=(const ScopedDlIteratePhdrCall&) = delete;
};

// True when `pc` lies in a loaded ELF object (not in JIT code or other anonymous memory).
// glibc's _dl_find_object: no lock, no allocation once the loader is initialised.
// Async-signal-safe. Callers driving libunwind's cursor themselves must stop before a pc for
// which this is false (use pc - 1 for a return address).
bool PcInLoadedObject(uintptr_t pc);

// SetLibunwindLookupPc() and ServeDlIteratePhdrDuringWalk(): libunwind_imports.h (libunwind's
// own dl_iterate_phdr import is redirected to the latter during walks).

// Loads libunwind (libunwind_loader.h) on the first call in the process, then initialises
// libunwind's process-wide state (its one-time set-up takes locks and opens files) by walking
// the calling thread's stack once. Call it from each thread when it registers for sampling,
// before its timer is armed; later calls are cheap. Returns false when libunwind is
// unavailable: WalkStackWithLibunwind() then reports the pc only, so the caller should walk
// frame pointers instead.
bool WarmUpLibunwind();

// Drops libunwind's cached unwind information. Call after dlclose(): otherwise a library
// later mapped at the same addresses could be unwound with the unloaded one's rules. Does
// nothing if libunwind is not loaded (nothing is cached then); never loads it.
void FlushLibunwindCaches();

// The most frames CaptureCurrentStack() reports.
inline constexpr size_t kMaxCapturedFrames = 256;

// The calling thread's own stack, outside signal context (marker stacks): writes at most
// min(capacity, kMaxCapturedFrames) return addresses, innermost first, and returns how many.
// Uses libunwind only once WarmUpLibunwind() has loaded it (never loads it itself: it runs on
// program threads, in marker paths); before that it reports nothing.
// Entry 0 is CaptureCurrentStack()'s own return address, i.e. an address inside its caller;
// entry i is the return address of the caller's i-th caller. They are return addresses:
// symbolize each at address - 1. Uses libunwind's unw_backtrace (its cached fast path, no
// system call per frame), loading libunwind if needed. Returns 0 when libunwind is
// unavailable or capacity is 0. Not for signal handlers (use WalkStackWithLibunwind()).
size_t CaptureCurrentStack(uintptr_t* return_addresses, size_t capacity);

struct LibunwindFunctions;  // libunwind_loader.h

namespace libunwind_walker_internal {

// WalkStackWithLibunwind() with an explicit libunwind table; nullptr stands for "libunwind
// unavailable". For tests.
size_t WalkStackWith(const LibunwindFunctions* functions, ucontext_t* context,
                     const StackBounds& bounds, NativeFrame* frames, size_t capacity, LibunwindWalkScratch* scratch = nullptr);

}  // namespace libunwind_walker_internal
}  // namespace strata

#endif  // STRATA_PLATFORM_SAMPLING_LIBUNWIND_WALKER_H_
