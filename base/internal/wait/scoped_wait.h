// What every wait wrapper file shares (wait_wrappers.cc, blocking_io_wrappers.cc,
// file_syscall_wrappers.cc, stdio_wrappers.cc): marking the calling thread as waiting
// (ScopedWait, scoped_wait_mark.h), whether a call comes from libunwind, and the table of the
// wrapped functions' real definitions (STRATA_DEFINE_REAL_TABLE, RealAt). Internal to the
// wrappers' translation units.
//
// Thread safety: a ScopedWait acts on the calling thread's WaitState only. Async-signal
// safety: all of it is (stores, atomics, _dl_find_object, a raw futex wait when a walk of
// the thread's stack is under way as the wait ends); RealAt's first lookup of a slot is not
// (dlsym), which is why ResolveWaitFunctions fills every table at load time.
#ifndef STRATA_BASE_INTERNAL_SCOPED_WAIT_H_
#define STRATA_BASE_INTERNAL_SCOPED_WAIT_H_

#include <link.h>

#include <atomic>
#include <cstdint>

#include "base/internal/session/core.h"
#include "base/internal/registry/thread_registry.h"
#include "base/profiler.h"
#include "platform/next_definition.h"
#include "platform/sampling/libunwind_imports.h"
#include "platform/sampling/libunwind_loader.h"
#include "platform/time_stamp.h"
#include "base/internal/wait/scoped_wait_mark.h"

namespace strata {
namespace base_internal {


// The caller's registers at a wrapper's entry, read from the wrapper's own frame record (it
// has one: base is built with frame pointers, and __builtin_frame_address forces one): the
// return address above the saved frame pointer, the caller's stack pointer past both.
struct CallerRegisters {
  uintptr_t pc;
  uintptr_t sp;
  uintptr_t fp;
};
inline CallerRegisters CallerRegistersFromFrame(const void* wrapper_frame) {
  const uintptr_t* frame = static_cast<const uintptr_t*>(wrapper_frame);
  return CallerRegisters{frame[1], reinterpret_cast<uintptr_t>(frame) + 2 * sizeof(uintptr_t),
                         frame[0]};
}

// True when a call comes from the libunwind that Strata walks with (its cache lock, its
// reads): such a call must never be a wait the sampler walks, since the sampler's own walk
// needs that lock (a thread holding it and waiting for the walk to end would deadlock it).
// The same object may also be the program's libunwind (dlopen returns the loaded copy).
// Async-signal-safe: atomics and _dl_find_object.
inline std::atomic<uintptr_t> g_libunwind_start{0};
inline std::atomic<uintptr_t> g_libunwind_end{0};
inline bool CalledFromLibunwind(uintptr_t return_address) {
  uintptr_t start = g_libunwind_start.load(std::memory_order_acquire);
  if (start == 0) {
    const LibunwindFunctions* unwind = LoadedLibunwind();
    dl_find_object object;
    if (!unwind || _dl_find_object(reinterpret_cast<void*>(unwind->step), &object) != 0) {
      return false;  // Not loaded yet: none of its code can be calling.
    }
    g_libunwind_end.store(reinterpret_cast<uintptr_t>(object.dlfo_map_end),
                          std::memory_order_relaxed);
    start = reinterpret_cast<uintptr_t>(object.dlfo_map_start);
    g_libunwind_start.store(start, std::memory_order_release);
  }
  return return_address >= start &&
         return_address < g_libunwind_end.load(std::memory_order_relaxed);
}

// Whether a wrapped call made now may be marked as a wait: on a registered, sampled thread of
// a session with wait stacks; not from Strata's own sampling-signal handler or libunwind
// walks, nor from libunwind's code.
inline bool MayMarkWait(const RegisteredThread* thread, uintptr_t return_address) {
  return thread && WaitStacksOn() && thread->sampling.load(std::memory_order_relaxed) &&
         !thread->capturing.load(std::memory_order_relaxed) && !InStrataLibunwindWalk() &&
         !CalledFromLibunwind(return_address);
}


// A wrapped call made while the thread seems to be in another one is either nested (a signal
// handler's, on a deeper part of the stack or on an alternate stack) or follows a wait that
// was left without its wrapper returning (siglongjmp out of a signal handler that
// interrupted it, or an exception thrown from one): then this call's frame is not below the
// abandoned wrapper's, on the thread's own stack.
inline bool OuterWaitWasAbandoned(const RegisteredThread* thread, uintptr_t caller_sp) {
  return (thread->wait.sequence.load(std::memory_order_relaxed) & 1) != 0 &&
         thread->bounds.Contains(caller_sp) &&
         caller_sp >= thread->wait.caller_sp.load(std::memory_order_relaxed);
}
inline void EndAbandonedWait(WaitState& wait) {
  wait.sequence.store(wait.sequence.load(std::memory_order_relaxed) + 1,
                      std::memory_order_seq_cst);
  wait.AwaitWalkEnd();
  wait.depth = 0;
}


// The real definitions of a translation unit's wrapped functions, in one table: slot i holds
// the definition of the i-th name of `names` (each name followed by '\0'), looked up once
// (dlsym(RTLD_NEXT); dlvsym for the condition variables, whose unversioned lookup could find
// glibc's GLIBC_2.2.5 compatibility symbols). A table, not a slot and a name per function:
// each wrapper passes one index, and a translation unit's look-ups at load time are one loop
// (~5 KiB less in all, for libstrata_base.so's size budget).
// Async-signal-safe once the slot is filled (ResolveWaitFunctions fills every one at load).
STRATA_BASE_HIDDEN void* RealAt(std::atomic<void*>* slots, const char* names, int index);

// In a wrapper translation unit's anonymous namespace: the table of FOR_EACH's functions
// (FOR_EACH(X) calls X(function) for each), STRATA_REAL(function) to read it,
// STRATA_RESOLVE_TABLE() to fill it.
#define STRATA_REAL_TABLE_INDEX_(function) kRealIndex_##function,
#define STRATA_REAL_TABLE_NAME_(function) #function "\0"
#define STRATA_DEFINE_REAL_TABLE(FOR_EACH)                                  \
  enum RealIndex : int { FOR_EACH(STRATA_REAL_TABLE_INDEX_) kRealCount };   \
  constexpr char kRealNames[] = FOR_EACH(STRATA_REAL_TABLE_NAME_);          \
  std::atomic<void*> g_real[kRealCount];                                   \
  [[gnu::noinline]] void* RealOf(int index) { return RealAt(g_real, kRealNames, index); }
// One argument at each wrapper's call (RealOf is out of line): the fewest bytes per wrapper.
#define STRATA_REAL(function)                                  \
  reinterpret_cast<decltype(&::function)>(::strata::base_internal::RealOf( \
      ::strata::base_internal::kRealIndex_##function))
#define STRATA_RESOLVE_TABLE()                                                       \
  for (int index = 0; index < kRealCount; ++index) (void)RealAt(g_real, kRealNames, index)

}  // namespace base_internal
}  // namespace strata

// A wrapper: marks the wait, calls the real function, returns its result (errno untouched:
// the destructor only stores to memory and, rarely, sleeps on a futex with a raw system call).
// The wait's leaf is the real (libc) function, not this wrapper: no frame of Strata's own code
// appears in a profile (issue 34; docs/symbols.md "Strata's own frames").
#define STRATA_WAIT_CALL(function, ...)                                              \
  ::strata::base_internal::ScopedWait wait(reinterpret_cast<const void*>(real), STRATA_WRAPPER_FRAME()); \
  return real(__VA_ARGS__)
// The same for a system call whose kernel CPU is charged to its stack (kernel_cpu_charge.h).
#define STRATA_IO_CALL(function, ...)                                                    \
  ::strata::base_internal::ScopedWait wait(reinterpret_cast<const void*>(real),          \
                                           STRATA_WRAPPER_FRAME(), true);             \
  return real(__VA_ARGS__)

#endif  // STRATA_BASE_INTERNAL_SCOPED_WAIT_H_
