// Samples a program thread writes into its own ring (own_samples.h). Runs on the program's
// thread, at the end of a wrapped call: raw system calls, no lock, no allocation.
#include "base/internal/wait/own_samples.h"

#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstring>

#include "base/internal/registry/thread_registry.h"
#include "base/internal/sampling/sample_capture.h"
#include "base/internal/session/tier_extension.h"
#include "base/internal/wait/own_walk_cache.h"
#include "base/internal/wait/scoped_wait.h"
#include "platform/raw_syscall.h"
#include "platform/sampling/libunwind_imports.h"
#include "platform/sampling/sampling_signal.h"

namespace strata {
namespace base_internal {

SignalsBlockedForRingWrite::SignalsBlockedForRingWrite() {
  if (InstalledSamplingSignal() <= 0) return;
  const uint64_t block = ~uint64_t{0};  // The kernel leaves SIGKILL and SIGSTOP out.
  blocked_ = RawSyscall(SYS_rt_sigprocmask, SIG_BLOCK, reinterpret_cast<long>(&block),
                        reinterpret_cast<long>(&previous_), sizeof(uint64_t)) == 0;
}

SignalsBlockedForRingWrite::~SignalsBlockedForRingWrite() {
  if (blocked_) {
    RawSyscall(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&previous_), 0,
               sizeof(uint64_t));
  }
}

static_assert(OwnWalkCache::kMaxFrames == SampleSlot::kMaxNativeFrames - 1,
              "the cache holds every frame of a slot but the leaf");

namespace {

struct CallerWalk {
  RegisteredThread* thread;
  ucontext_t* context;
  uint32_t features;  // The cache's key has the same snapshot.
};

size_t WalkFromCaller(void* argument, NativeFrame* frames, size_t capacity, bool* reads_logged) {
  const CallerWalk& walk = *static_cast<const CallerWalk*>(argument);
  return WalkCallerStack(walk.thread, walk.context, frames, capacity, walk.features,
                         reads_logged);
}

}  // namespace

void FillCallStack(RegisteredThread* thread, SampleSlot* slot, const void* function,
                   const CallerRegisters& caller) {
  slot->natives[0] = {reinterpret_cast<uintptr_t>(function) + 1,
                      caller.sp - 2 * sizeof(uintptr_t)};
  // The caller's registers as a context to walk from (the thread's scratch, not its stack;
  // the other registers only matter to unusual CFA rules).
  ucontext_t& context = thread->walk_scratch.resumed;
  memset(&context, 0, sizeof(context));
  context.uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(caller.pc);
  context.uc_mcontext.gregs[REG_RSP] = static_cast<greg_t>(caller.sp);
  context.uc_mcontext.gregs[REG_RBP] = static_cast<greg_t>(caller.fp);
  // The same walk as last time from this place when the stack words it read still hold
  // (own_walk_cache.h).
  const uint32_t features = g_sampling_features.load(std::memory_order_relaxed);
  CallerWalk walk{thread, &context, features};
  const OwnWalkStart start{caller.pc, caller.sp, caller.fp, features};
  size_t count = 1 + thread->own_walk_cache.Walk(start, context, thread->bounds.high,
                                                 slot->natives + 1,
                                                 SampleSlot::kMaxNativeFrames - 1,
                                                 &WalkFromCaller, &walk);
  if (count == 1) slot->natives[count++] = {caller.pc, caller.sp};
  slot->native_count = static_cast<uint32_t>(count);
  std::atomic_signal_fence(std::memory_order_acquire);  // The thread's own label stack.
  CopyLabelsIntoSlot(thread->profiling_stack, slot);
  slot->overruns = 0;
  slot->in_system_call = false;
  slot->charged_system_call = false;
  slot->missed_wait = false;
  slot->script_frame_count = 0;
  slot->script_text_bytes = 0;
}

CallStackRecords::CallStackRecords(RegisteredThread* thread, const void* function,
                                   const CallerRegisters& caller)
    : thread_(thread) {
  if (!blocked_.ok()) return;
  slot_ = thread->ring.BeginWrite();
  if (!slot_) {
    thread->dropped_samples.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  thread->capturing.store(true, std::memory_order_relaxed);
  ScopedEverySignalBlocked every_signal_blocked;  // By blocked_ (libunwind_imports.h).
  FillCallStack(thread, slot_, function, caller);
}

CallStackRecords::~CallStackRecords() {
  if (!slot_) return;
  slot_->charged_system_call = false;  // The handler's samples are neither.
  slot_->missed_wait = false;
  thread_->ring.EndWrite();
  thread_->capturing.store(false, std::memory_order_release);
}

bool CallStackRecords::Commit() {
  if (thread_->ring.CommitWriteKeepingSlot()) return true;
  thread_->dropped_samples.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void WriteMissedWaitSamples(RegisteredThread* thread, const void* function,
                            const CallerRegisters& caller, int64_t start_ns, int64_t end_ns) {
  const int64_t interval_ns = g_sampling_interval_ns.load(std::memory_order_relaxed);
  if (interval_ns <= 0) return;
  // A wait begun before the session (or before its latest resume) counts from there, as the
  // sampler's do; and one record stands for at most kMaxMissedWaitPoints (a bound on what the
  // sampler expands under its lock: 100 s at 1 ms).
  start_ns = std::max(start_ns, g_wait_samples_since_ns.load(std::memory_order_relaxed));
  const int64_t points =
      std::min<int64_t>(WaitGridPoints(start_ns, end_ns, interval_ns), kMaxMissedWaitPoints);
  if (points <= 0) return;
  if (!thread->sampling.load(std::memory_order_relaxed) || ProfilerIsPaused()) return;
  // Only on a perf event (the default source; charges_kernel_cpu says so): with CPU-clock
  // timers a thread's CPU before a wait can be several intervals not yet sampled (the timer
  // is tick-bound), which the sampler's own path puts on a copy at the wait's start; this
  // record cannot (the thread does not read its CPU clock here), so there the sampler's
  // path alone stays (cpu_accounting_test, timer mode).
  if (!thread->wait.charges_kernel_cpu.load(std::memory_order_relaxed)) return;
  CallStackRecords records(thread, function, caller);
  SampleSlot* slot = records.slot();
  if (!slot) return;
  slot->missed_wait = true;
  slot->time_ns = FirstWaitGridPoint(start_ns, interval_ns);
  slot->cpu_ns = end_ns;  // SampleSlot::missed_wait: the wait's end.
  slot->overruns = static_cast<int32_t>(points - 1);
  records.Commit();
}

}  // namespace base_internal
}  // namespace strata
