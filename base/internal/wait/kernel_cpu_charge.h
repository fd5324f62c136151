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
// Thread safety: the calling thread's own state only (its WaitState credit, its ring, which
// its signal handler also fills: the sampling signal is blocked meanwhile, with raw
// rt_sigprocmask calls that restore the thread's mask exactly). Async-signal-safe: raw
// system calls, no lock, no allocation.
#ifndef STRATA_BASE_INTERNAL_WAIT_KERNEL_CPU_CHARGE_H_
#define STRATA_BASE_INTERNAL_WAIT_KERNEL_CPU_CHARGE_H_

#include <cstdint>

#include "base/internal/session/session_state.h"

namespace strata {
namespace base_internal {

struct RegisteredThread;
struct CallerRegisters;

// One finished wrapped call of the calling thread: the libc function it wrapped, its
// caller's registers at the wrapper's entry, its wall-clock span (TimeStamp ns) and the
// thread's CPU clock at its entry and exit. Adds the call's CPU to the thread's credit and
// writes a sample per whole interval of credit on the call's stack.
STRATA_BASE_HIDDEN void ChargeWrappedCallCpu(RegisteredThread* thread, const void* function,
                                             const CallerRegisters& caller, int64_t start_ns,
                                             int64_t end_ns, int64_t start_cpu_ns,
                                             int64_t end_cpu_ns);

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_WAIT_KERNEL_CPU_CHARGE_H_
