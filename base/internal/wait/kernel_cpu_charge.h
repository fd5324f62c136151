// Kernel CPU charged to the wrapped call that used it (issue 34; docs/sampling.md, "Kernel
// CPU").
//
// The perf task-clock event counts user mode only for its signals: an overflow that falls
// while the thread is in a system call is dropped, so a thread busy in pwrite, read or
// fsync got fewer samples, and the call's CPU landed in the next user-mode sample's delta.
// Instead, every wrapped call (wait_wrappers.cc, blocking_io_wrappers.cc) on a thread whose
// source is a perf event (WaitState::charges_kernel_cpu) reads the thread's CPU clock at
// entry and exit, and adds what the call used to the thread's credit; each whole interval of
// credit becomes one sample on the call's own stack (leaf: the libc function, then the
// program's frames), written by the thread itself into its sample ring as its signal handler
// would. Error diffusion: a call that carries the credit over an interval takes the sample,
// so calls far shorter than an interval (sqlite's 20 us pwrites) are charged in proportion
// to their CPU, and a 5 ms call takes 5 samples, time-stamped across it.
//
// Each charged sample carries its share of the call's CPU as its CPU delta (SampleSlot::
// charged_cpu_ns; the sampler takes it out of the next sample's delta, so a thread's CPU in
// the profile still sums to its CPU clock).
//
// Cost: two CLOCK_THREAD_CPUTIME_ID reads per wrapped call (a system call each, ~0.2-1.3 us:
// the vDSO does not serve CPU clocks; the perf event's user page would avoid them where the
// kernel offers cap_user_time, which this VM's does not), plus a stack walk per charged
// sample (at most one per interval of kernel CPU).
//
// Cheap path. Two CPU-clock system calls per call cost ~0.6 us here (sqlite3's CPU doubled),
// so where the thread's perf event's first page is mapped (WaitState::cpu_page) the clock is
// not read: the page's `lock` is bumped at every sched-in of the thread, so a
// call whose entry and exit see the same value ran without being switched out, and its CPU
// is its wall time (TimeStamp::Now, vDSO). A call that was switched out (it blocked, or was
// preempted) is not charged: its CPU goes to the next user-mode sample, as before issue 34.
// (The page's `time_enabled` cannot date the latest sched-in: measured under load, it lags
// the thread's CPU clock by ~20 us more at every switch, and the lock also moves without one;
// charging "the CPU since the latest sched-in" from it charged calls up to their whole wall
// time, preemption included, and `kernel_cpu_share_test` failed in CI. Reading the clock at
// both ends of the next 128 calls after a switched one measured no better under load and
// brings back the cost the page avoids: docs/sampling.md.) Without a page (mmap refused),
// both clock reads.
//
// Thread safety: the calling thread's own state only (its WaitState credit, its ring, which
// its signal handler also fills: the sampling signal is blocked meanwhile, with raw
// rt_sigprocmask calls that restore the thread's mask exactly). Async-signal-safe: raw
// system calls, no lock, no allocation.
#ifndef STRATA_BASE_INTERNAL_WAIT_KERNEL_CPU_CHARGE_H_
#define STRATA_BASE_INTERNAL_WAIT_KERNEL_CPU_CHARGE_H_

#include <cstdint>

#include "base/internal/session/session_state.h"
#include "base/labels.h"

namespace strata {
namespace base_internal {

struct RegisteredThread;
struct CallerRegisters;
struct WaitState;
struct SampleSlot;

// WaitState::start_cpu_ns besides a clock reading: the call is not measured, or its entry
// noted the page's lock.
inline constexpr int64_t kCpuNotMeasured = -1;
inline constexpr int64_t kCpuFromPage = -2;

// The calling thread's side of a measured call (ScopedWait): at entry, notes what its end
// compares with (the page's lock, or the CPU clock); at its end, the call's CPU (-1: not
// measured). `start_ns`/`end_ns`: the call's wall-clock span (TimeStamp ns).
STRATA_BASE_HIDDEN void NoteMeasuredCallStart(WaitState& wait);
STRATA_BASE_HIDDEN int64_t MeasuredCallCpu(WaitState& wait, int64_t start_ns, int64_t end_ns);

// The sampler's side (registry mutex held): maps thread's perf event `descriptor`'s first
// page at the thread's reserved address (or a new one) and publishes it. On failure nothing
// is published (the thread then reads the clock twice per call).
STRATA_BASE_HIDDEN void MapCpuPageLocked(WaitState& wait, int descriptor);
// Unpublishes the page and puts a zero page in its place (the thread may be reading it).
STRATA_BASE_HIDDEN void RetireCpuPageLocked(WaitState& wait);
// Unmaps the reserved page (the thread is gone or unregistering, outside any wrapper).
STRATA_BASE_HIDDEN void ReleaseCpuPage(WaitState& wait);

// One finished wrapped call of the calling thread: the libc function it wrapped, its
// caller's registers at the wrapper's entry, the part of its wall-clock span (TimeStamp ns)
// its CPU is stamped across (the call's last `call_cpu_ns`: what came before was waiting,
// wait/own_samples.h) and the CPU it used (MeasuredCallCpu). Adds the call's CPU to the
// thread's credit and writes a sample per whole interval of credit on the call's stack.
STRATA_BASE_HIDDEN void ChargeWrappedCallCpu(RegisteredThread* thread, const void* function,
                                             const CallerRegisters& caller, int64_t start_ns,
                                             int64_t end_ns, int64_t call_cpu_ns);

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_WAIT_KERNEL_CPU_CHARGE_H_
