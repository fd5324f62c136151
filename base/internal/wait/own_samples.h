// Samples a program thread writes into its own sample ring at the end of a wrapped call,
// outside its signal handler: the kernel CPU a call used (kernel_cpu_charge.h), and the
// samples of a wait whose stack the sampler never walked (WriteMissedWaitSamples, below).
//
// Thread safety: the calling thread's own state only (its ring, which its signal handler also
// fills: every signal is blocked meanwhile, with raw rt_sigprocmask calls that restore the
// thread's mask exactly). Async-signal-safe: raw system calls, the stack walkers the handler
// uses, no lock, no allocation.
#ifndef STRATA_BASE_INTERNAL_WAIT_OWN_SAMPLES_H_
#define STRATA_BASE_INTERNAL_WAIT_OWN_SAMPLES_H_

#include <cstdint>

#include "base/internal/session/session_state.h"

namespace strata {
namespace base_internal {

struct RegisteredThread;
struct CallerRegisters;
struct SampleSlot;

// Every signal blocked on the calling thread while it writes its own ring, as they are while
// its sampling handler (which writes the same ring) runs; restored exactly as it was (raw
// rt_sigprocmask: the program's mask interposers are not involved, and the program cannot
// see the change). Every signal, not only the sampling one: a handler of the program's run
// in between could unblock the sampling signal through our pthread_sigmask (which leaves it
// unblocked for real, signal_interposers.cc) and so nest a sample in this write, or leave
// the write unfinished by a longjmp (the ring would then refuse the thread's samples:
// sample_ring.h). Program signals wait at most the write (a stack walk), as for a sample.
class STRATA_BASE_HIDDEN SignalsBlockedForRingWrite {
 public:
  SignalsBlockedForRingWrite();
  ~SignalsBlockedForRingWrite();
  bool ok() const { return blocked_; }
  SignalsBlockedForRingWrite(const SignalsBlockedForRingWrite&) = delete;
  SignalsBlockedForRingWrite& operator=(const SignalsBlockedForRingWrite&) = delete;

 private:
  uint64_t previous_ = 0;
  bool blocked_ = false;
};

// Fills `slot` with a wrapped call's stack: the wrapped libc `function` as the leaf, then the
// program's frames from the caller's registers (walked as the signal handler walks), and the
// thread's labels. Leaves `time_ns`, `cpu_ns` and the record kind to the caller.
STRATA_BASE_HIDDEN void FillCallStack(RegisteredThread* thread, SampleSlot* slot,
                                      const void* function, const CallerRegisters& caller);

// The calling thread's ring, open for records on a wrapped call's stack: every signal
// blocked, the thread's scratch slot filled by FillCallStack and `capturing` set; closed by
// the destructor (the slot's record kind reset, the write ended, the mask restored). slot()
// is null when nothing can be written (no sampling signal installed; the ring busy or full,
// counted as a dropped sample).
class STRATA_BASE_HIDDEN CallStackRecords {
 public:
  CallStackRecords(RegisteredThread* thread, const void* function, const CallerRegisters& caller);
  ~CallStackRecords();
  SampleSlot* slot() const { return slot_; }
  // Commits the slot as one record and keeps it filled for the next; false (counted as a
  // dropped sample) when the ring has no room.
  bool Commit();
  CallStackRecords(const CallStackRecords&) = delete;
  CallStackRecords& operator=(const CallStackRecords&) = delete;

 private:
  RegisteredThread* const thread_;
  SignalsBlockedForRingWrite blocked_;
  SampleSlot* slot_ = nullptr;
};

// A wrapped wait that ended without the sampler having walked its stack (the sampler thread
// runs every few intervals, and a busy machine can keep it off a CPU for longer than a wait):
// its wait samples, one per point of the thread's interval grid in (start_ns, end_ns]
// (TimeStamp ns; the sampler's own rule, wait_sampling.cc), as one ring record that the
// sampler expands (SampleSlot::missed_wait). The wait counts from the session's start or its
// latest resume at the earliest. Does nothing for a wait that spans no grid point, while
// the profiler is paused, and on a thread sampled by CPU-clock timers (whose CPU before the
// wait the sampler's own path accounts for).
STRATA_BASE_HIDDEN void WriteMissedWaitSamples(RegisteredThread* thread, const void* function,
                                               const CallerRegisters& caller, int64_t start_ns,
                                               int64_t end_ns);

// The most samples one thread-written wait record stands for (SampleSlot::missed_wait).
inline constexpr int64_t kMaxMissedWaitPoints = 100000;

// The number of points of the interval grid (multiples of `interval_ns`) in (start_ns, end_ns],
// and the first of them: the wait samples of a wait that lasted from start to end.
inline int64_t WaitGridPoints(int64_t start_ns, int64_t end_ns, int64_t interval_ns) {
  return end_ns <= start_ns ? 0 : end_ns / interval_ns - start_ns / interval_ns;
}
inline int64_t FirstWaitGridPoint(int64_t start_ns, int64_t interval_ns) {
  return (start_ns / interval_ns + 1) * interval_ns;
}
// The k-th of them (1-based): where the k-th sample of such a wait is dated.
inline int64_t WaitGridPoint(int64_t start_ns, int64_t k, int64_t interval_ns) {
  return FirstWaitGridPoint(start_ns, interval_ns) + (k - 1) * interval_ns;
}

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_WAIT_OWN_SAMPLES_H_
