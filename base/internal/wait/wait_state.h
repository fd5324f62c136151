// Wait stacks (docs/sampling.md, "Wait stacks"): what a registered thread publishes when it
// enters one of the blocking functions that wait_wrappers.cc wraps, and what the sampler
// thread keeps about it (wait_sampling.cc).
//
// Protocol (a sequence lock plus a handshake):
//   - The thread, on entry: fills `function`, `caller_pc/sp/fp`, `start_ns` (relaxed stores),
//     then makes `sequence` odd (release). No system call, no lock.
//   - The thread, on exit: claims the wait (`ending_sequence`, seq_cst), so that no walk of
//     its stack begins from now on; if the sampler is walking its stack (`walking`), waits for
//     the walk to finish (a few tens of microseconds, only when the wait ended during a walk).
//     It waits asleep on a futex (AwaitWalkEnd), never spinning: a real-time thread that spun
//     would keep the sampler off its CPU for good. Then, if the sampler never walked this wait
//     (`walked_sequence`: it did not run during the wait, or not once the wait had reached a
//     sample's time), the thread writes the wait's samples into its ring itself, from its own
//     context (own_samples.h), as it writes the call's kernel CPU. Then, if the sampler tracks
//     this very wait (`tracked_sequence`), it stores `end_ns` and `end_sequence`, and makes
//     `sequence` even again (seq_cst). What the thread wrote is in its ring before the sequence
//     moves on, so the sampler, once it sees the wait ended, drains it before anything later.
//   - The sampler, to walk: reads an odd `sequence` and the snapshot (acquire), sets
//     `walking` (seq_cst), re-reads `sequence` and `ending_sequence`: the wait neither ended
//     nor claimed, the thread is still inside the wrapper and cannot leave it before `walking`
//     is cleared, so the frames above the wrapper's (the program's, down to the blocking call)
//     stay as they are during the walk.
//
// Thread safety: the fields marked "thread" are written only by the owning thread; those
// marked "sampler" only by the sampler thread under the registry mutex; the atomics are the
// interface between the two. Async-signal safety: the thread's side is (plain stores and
// atomics); a wrapper called from a signal handler while the thread is already in a wait
// does not mark a second wait (`depth`).
#ifndef STRATA_BASE_INTERNAL_WAIT_STATE_H_
#define STRATA_BASE_INTERNAL_WAIT_STATE_H_

#include <linux/futex.h>
#include <time.h>

#include <atomic>
#include <cstdint>

#include "platform/raw_syscall.h"

namespace strata {
namespace base_internal {

struct WaitState {
  // Odd while the thread waits in a wrapped function; +2 per wait.
  std::atomic<uint64_t> sequence{0};
  // The sampler is walking the thread's stack from the snapshot: kNotWalking, kWalking, or
  // kWalkingWithWaiter (the thread sleeps, or is about to, on this word as a futex).
  static constexpr uint32_t kNotWalking = 0;
  static constexpr uint32_t kWalking = 1;
  static constexpr uint32_t kWalkingWithWaiter = 2;
  std::atomic<uint32_t> walking{kNotWalking};

  // Sampler: a walk starts (seq_cst: the sequence is re-read after it), and ends, waking the
  // thread if it waits. Thread (async-signal-safe): returns once no walk is under way.
  void BeginWalk() { walking.store(kWalking, std::memory_order_seq_cst); }
  void EndWalk();
  void AwaitWalkEnd();
  // Thread: nesting depth of wrapped calls (signal handlers, wrappers calling wrappers).
  int depth = 0;
  // Thread: recording a lock marker (its own locks are not measured).
  bool in_lock_marker = false;
  // Snapshot (thread, published by `sequence`): the wrapper's own address (the wait's leaf
  // frame), and the registers of its caller: return address, stack pointer (the wrapper's
  // CFA) and frame pointer.
  std::atomic<uintptr_t> function{0};
  std::atomic<uintptr_t> caller_pc{0};
  std::atomic<uintptr_t> caller_sp{0};
  std::atomic<uintptr_t> caller_fp{0};
  std::atomic<int64_t> start_ns{0};  // TimeStamp nanoseconds.
  // Kernel CPU charged to the call (kernel_cpu_charge.h): the thread's CPU clock at the
  // call's entry, kCpuFromPage (the page's lock was noted) or kCpuNotMeasured (-1).
  std::atomic<int64_t> start_cpu_ns{-1};
  // Set by the sampler (registry mutex held, read by the thread): the thread's sampling
  // source drops the signals of kernel-mode CPU (a perf event), so wrapped calls measure
  // their CPU and charge it to their own stack.
  std::atomic<bool> charges_kernel_cpu{false};
  // Thread: the CPU of wrapped calls not yet charged as samples (error diffusion: a sample
  // per interval of it, kernel_cpu_charge.h).
  int64_t kernel_cpu_credit_ns = 0;
  // The thread's perf event's first page (kernel_cpu_charge.h, "Cheap path"): published by the
  // sampler (release) once mapped, null otherwise; the thread reads its `lock` (bumped at
  // every sched-in, among other times).
  // A retired event's page is replaced by a zero page at the same address, never
  // unmapped while the thread lives (it may be reading it).
  std::atomic<const void*> cpu_page{nullptr};
  // Thread: the page's `lock` at the measured call's entry (cpu_page mode).
  uint32_t start_page_lock = 0;
  // Sampler (registry mutex): the page's reserved address and the process that mapped it
  // (a forked child has no copy: perf mappings are not inherited).
  void* cpu_page_mapping = nullptr;
  int cpu_page_pid = 0;
  // Set by the sampler to the sequence of the wait it emits samples for; the thread then
  // notes when that wait ended (end_sequence == that sequence).
  std::atomic<uint64_t> tracked_sequence{0};
  // Set by the sampler (release, before its walk ends) to the sequence of the wait whose stack
  // it walked and wrote. A wait that ends with another value here was never walked and never
  // will be (its sequence is even once it ends): the thread writes that wait's samples itself
  // (own_samples.h, WriteMissedWaitSamples).
  std::atomic<uint64_t> walked_sequence{0};
  // Set by the thread (seq_cst) to the sequence of the wait it is leaving, before it decides
  // whether to write that wait's samples itself: a walk that begins after it sees it and does
  // not walk (WriteWaitStackLocked), one begun before it is waited for (AwaitWalkEnd).
  std::atomic<uint64_t> ending_sequence{0};
  // Sampler: the wait whose leaving the sampler last waited for (DrainLocked), the thread's
  // CPU clock when it began to (-1: unread), and since when the thread's ring has been left
  // for a later loop, whatever wait it was leaving (0: it was drained at the last loop).
  uint64_t deferred_ending_sequence = 0;
  int64_t deferred_ending_cpu_ns = -1;
  int64_t deferred_ending_since_ns = 0;
  std::atomic<uint64_t> end_sequence{0};
  std::atomic<int64_t> end_ns{0};

  // Sampler: the wait being sampled (tracked_sequence), its start, the wait samples written
  // for it, whether its stack was walked and written, and the latest loop that saw it.
  int64_t tracked_start_ns = 0;
  int64_t samples_written = 0;
  bool stack_written = false;
  int64_t last_seen_waiting_ns = 0;
  // A wait the thread left without the wrapper's return (wait_sampling.cc): not sampled.
  uint64_t abandoned_sequence = 0;
  // When the latest sampled wait ended (TimeStamp ns), 0 before any: where an unknown wait
  // after it begins (thread_sampling.cc).
  int64_t last_ended_ns = 0;
};

inline void WaitState::EndWalk() {
  if (walking.exchange(kNotWalking, std::memory_order_release) == kWalkingWithWaiter) {
    RawSyscall(SYS_futex, reinterpret_cast<long>(&walking), FUTEX_WAKE_PRIVATE, 1);
  }
}

inline void WaitState::AwaitWalkEnd() {
  uint32_t state = walking.load(std::memory_order_seq_cst);
  while (state != kNotWalking) {
    if (state == kWalking &&
        !walking.compare_exchange_weak(state, kWalkingWithWaiter, std::memory_order_seq_cst)) {
      continue;  // `state` reloaded.
    }
    // Asleep until the sampler's wake, or 1 ms: a bound, so no wake-up can be lost for good.
    const timespec bound{0, 1000000};
    RawSyscall(SYS_futex, reinterpret_cast<long>(&walking), FUTEX_WAIT_PRIVATE,
               kWalkingWithWaiter, reinterpret_cast<long>(&bound));
    state = walking.load(std::memory_order_seq_cst);
  }
}

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_WAIT_STATE_H_
