// Marking the calling thread as waiting, for wait stacks (ScopedWait, the WaitState protocol
// of wait_state.h): what a wrapper of a blocking call needs, apart from the lookup of the real
// function (scoped_wait.h, for the wait wrappers' own translation units). The signal
// interposers (signals/signal_interposers.cc) mark their waits with it too.
//
// Thread safety: a ScopedWait acts on the calling thread's WaitState only. Async-signal
// safety: all of it is (stores, atomics, _dl_find_object, a raw futex wait when a walk of the
// thread's stack is under way as the wait ends).
#ifndef STRATA_BASE_INTERNAL_WAIT_SCOPED_WAIT_MARK_H_
#define STRATA_BASE_INTERNAL_WAIT_SCOPED_WAIT_MARK_H_

#include <atomic>
#include <cstdint>

#include "base/internal/session/core.h"
#include "base/internal/registry/thread_registry.h"
#include "base/profiler.h"

namespace strata {
namespace base_internal {

// Whether waits are marked: a session runs with 'waitstacks' and without 'precise' (whose
// wall-clock timers sample blocked threads themselves).
inline bool WaitStacksOn() {
  const uint32_t features = g_sampling_features.load(std::memory_order_relaxed);
  return (features & (kFeatureWaitStacks | kFeaturePrecise)) == kFeatureWaitStacks;
}

// What a wrapper passes to ScopedWait: its frame address, one register (the registers are
// read from it out of line, in ScopedWait::Begin: ~20 bytes less in each of the ~110 wrappers,
// for the library's size budget).
#define STRATA_WRAPPER_FRAME() static_cast<const void*>(__builtin_frame_address(0))

// Marks the calling thread as waiting in `function` for its lifetime (wait_state.h has the
// protocol). Does nothing on an unregistered thread, without a session using wait stacks,
// and inside another marked wait (a signal handler's call).
class ScopedWait {
 public:
  // Inline: the check that a wait may be marked at all (one relaxed load without a session
  // using wait stacks); the marking itself is out of line (wait_wrappers.cc), so that each of
  // the ~90 wrappers stays a few instructions (the library's size, issue 33's budget).
  // `measure_cpu`: a system call that may spend CPU in the kernel (I/O, file system): its CPU
  // is charged to its stack (kernel_cpu_charge.h). Sleeps, locks and condition waits are not
  // measured (their kernel CPU is a futex's; two clock reads would cost more than it).
  // `wrapper_frame`: STRATA_WRAPPER_FRAME() in the wrapper itself.
  ScopedWait(const void* function, const void* wrapper_frame, bool measure_cpu = false) {
    if (WaitStacksOn()) Begin(function, wrapper_frame, measure_cpu);
  }
  ~ScopedWait() {
    if (thread_) End();
  }
  ScopedWait(const ScopedWait&) = delete;
  ScopedWait& operator=(const ScopedWait&) = delete;

  // Ends the wait before the wrapper returns: the call stopped waiting and runs code of the
  // program's own on this thread (pthread_once's initializer), whose CPU and waits are its
  // own. The destructor then does nothing.
  void EndNow() {
    if (thread_) End();
    thread_ = nullptr;
  }

 private:
  STRATA_BASE_HIDDEN void Begin(const void* function, const void* wrapper_frame,
                                 bool measure_cpu);
  STRATA_BASE_HIDDEN void End();

  RegisteredThread* thread_ = nullptr;
  bool marked_ = false;
};

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_WAIT_SCOPED_WAIT_MARK_H_
