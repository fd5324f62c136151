// Kernel CPU charged to the wrapped call that used it (kernel_cpu_charge.h). Runs on the
// program's thread, at the end of a wrapped call: raw system calls, no lock, no allocation.
#include "base/internal/wait/kernel_cpu_charge.h"

#include <linux/perf_event.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "base/internal/registry/thread_registry.h"
#include "base/internal/sampling/sample_capture.h"
#include "base/internal/session/tier_extension.h"
#include "base/internal/wait/own_samples.h"
#include "base/internal/wait/scoped_wait.h"
#include "platform/cpu_time.h"
#include "platform/raw_syscall.h"
#include "platform/sampling/sampling_signal.h"

namespace strata {
namespace base_internal {
namespace {

constexpr long kCpuPageBytes = 4096;

// The page's `lock` (bumped at every sched-in of the thread, and at other updates of the
// page); false when the page is not a live event's (a zero page after retirement: lock 0).
bool ReadCpuPageLock(const void* page, uint32_t* lock) {
  const volatile perf_event_mmap_page* event_page =
      static_cast<const volatile perf_event_mmap_page*>(page);
  *lock = event_page->lock;
  return *lock != 0;
}

}  // namespace

void NoteMeasuredCallStart(WaitState& wait) {
  const void* page = wait.cpu_page.load(std::memory_order_acquire);
  uint32_t lock = 0;
  if (page && ReadCpuPageLock(page, &lock)) {
    wait.start_page_lock = lock;
    wait.start_cpu_ns.store(kCpuFromPage, std::memory_order_relaxed);
    return;
  }
  wait.start_cpu_ns.store(CurrentThreadCpuTime().ToNanoseconds(), std::memory_order_relaxed);
}

int64_t MeasuredCallCpu(WaitState& wait, int64_t start_ns, int64_t end_ns) {
  const int64_t start_cpu_ns = wait.start_cpu_ns.load(std::memory_order_relaxed);
  if (start_cpu_ns == kCpuNotMeasured) return -1;
  const int64_t wall_ns = std::max<int64_t>(0, end_ns - start_ns);
  if (start_cpu_ns != kCpuFromPage) {
    // The clock reads enclose the wall-clock span: the call's CPU is at most that span.
    return std::clamp<int64_t>(CurrentThreadCpuTime().ToNanoseconds() - start_cpu_ns, 0,
                               wall_ns);
  }
  const void* page = wait.cpu_page.load(std::memory_order_acquire);
  uint32_t lock = 0;
  if (!page || !ReadCpuPageLock(page, &lock)) return -1;  // Retired meanwhile.
  // Never switched out: all of it ran. Switched out (it blocked, or was preempted): its CPU
  // is not known from the page, and not charged (it goes to the next user-mode sample).
  if (lock != wait.start_page_lock) return -1;
  return wall_ns;
}

void MapCpuPageLocked(WaitState& wait, int descriptor) {
  const int pid = static_cast<int>(RawSyscall(SYS_getpid));
  if (wait.cpu_page_pid != pid) wait.cpu_page_mapping = nullptr;  // Not this process's.
  void* at = wait.cpu_page_mapping;
  const long mapped = RawSyscall6(SYS_mmap, reinterpret_cast<long>(at), kCpuPageBytes, PROT_READ,
                                  MAP_SHARED | (at ? MAP_FIXED : 0), descriptor, 0);
  if (mapped < 0 && mapped > -4096) {
    RetireCpuPageLocked(wait);
    return;
  }
  wait.cpu_page_mapping = reinterpret_cast<void*>(mapped);
  wait.cpu_page_pid = pid;
  wait.cpu_page.store(wait.cpu_page_mapping, std::memory_order_release);
}

void RetireCpuPageLocked(WaitState& wait) {
  wait.cpu_page.store(nullptr, std::memory_order_release);
  if (!wait.cpu_page_mapping) return;
  // In place, at once: a reader sees the event's page or zeros (lock 0: not a live page).
  const long mapped =
      RawSyscall6(SYS_mmap, reinterpret_cast<long>(wait.cpu_page_mapping), kCpuPageBytes,
                  PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  if (mapped < 0 && mapped > -4096) {
    // Cannot happen short of the kernel refusing memory; keep the event's page mapped (it
    // holds the event open until the thread ends) rather than unmap under a reader.
    return;
  }
}

void ReleaseCpuPage(WaitState& wait) {
  wait.cpu_page.store(nullptr, std::memory_order_release);
  if (wait.cpu_page_mapping && wait.cpu_page_pid == static_cast<int>(RawSyscall(SYS_getpid))) {
    RawSyscall(SYS_munmap, reinterpret_cast<long>(wait.cpu_page_mapping), kCpuPageBytes);
  }
  wait.cpu_page_mapping = nullptr;
}

void ChargeWrappedCallCpu(RegisteredThread* thread, const void* function,
                          const CallerRegisters& caller, int64_t start_ns, int64_t end_ns,
                          int64_t call_cpu_ns) {
  WaitState& wait = thread->wait;
  const int64_t interval_ns = g_sampling_interval_ns.load(std::memory_order_relaxed);
  if (interval_ns <= 0 || call_cpu_ns <= 0) return;
  wait.kernel_cpu_credit_ns += call_cpu_ns;
  const int64_t samples = wait.kernel_cpu_credit_ns / interval_ns;
  if (samples == 0) return;
  wait.kernel_cpu_credit_ns -= samples * interval_ns;
  if (!thread->sampling.load(std::memory_order_relaxed) || ProfilerIsPaused()) return;
  CallStackRecords records(thread, function, caller);
  SampleSlot* slot = records.slot();
  if (!slot) return;
  // The samples share the call's wall time evenly; each stands for an interval of the
  // credit, which is its CPU delta (the sampler takes it out of the deltas that follow).
  const int64_t span_ns = std::max<int64_t>(0, end_ns - start_ns);
  slot->charged_system_call = true;
  slot->cpu_ns = interval_ns;
  // One write for all of them (the slot stays ours and filled between records: a handler
  // run in between, as ThreadSanitizer does, finds the ring busy; sample_ring.h).
  for (int64_t k = 1; k <= samples; ++k) {
    slot->time_ns = start_ns + span_ns * k / samples;
    if (!records.Commit()) break;
  }
}

}  // namespace base_internal
}  // namespace strata
