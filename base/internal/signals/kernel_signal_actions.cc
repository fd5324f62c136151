// Signal dispositions in the kernel's form, and S in the masks of the program's
// alternate-stack handlers (kernel_signal_actions.h; the public entry points
// MaskSamplingSignalInAlternateStackHandlers and UnmaskSamplingSignalInAlternateStackHandlers
// are declared in signal_interposers.h).
#include "base/internal/signals/kernel_signal_actions.h"

#include <sys/syscall.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/internal/signals/control_signal.h"
#include "base/internal/signals/signal_interposers.h"
#include "platform/kernel_signal_set.h"
#include "platform/raw_syscall.h"

namespace strata {
namespace base_internal {

MaskedAction g_masked_actions[65];
namespace {


// MasksSamplingSignalIn for the kernel's form.
bool KernelActionNeedsMask(int signal_number, const KernelAction& action, int sampling) {
  return sampling > 0 && signal_number != sampling && (action.flags & SA_ONSTACK) != 0 &&
         action.handler != reinterpret_cast<uintptr_t>(SIG_DFL) &&
         action.handler != reinterpret_cast<uintptr_t>(SIG_IGN) &&
         (action.mask & SignalBit(sampling)) == 0;
}

// Installs `read` changed by `change`, unless the program replaces the action meanwhile. The
// kernel has no compare-and-swap for a disposition: the action is exchanged, and the one it
// displaced compared with the one read. A different one is the program's newer action (its
// sigaction on another thread, or a raw rt_sigaction, between the read and the write), which
// is put back at once, changed by `put_back` when that applies to it, and compared in turn
// with what was just written; at most kActionRewriteRounds rounds, each one system call
// wide. The window left (docs/host-contract.md, "Known gaps"): between a displacing exchange
// and the put-back, the kernel holds the older action (changed), for one system call: a
// signal delivered then runs the older handler, a concurrent sigaction's old action is that
// one. `read` must be read just before the call, so that the gap it covers is one system
// call too. Returns 1 when the action left installed (in *installed) is one that `change` or
// `put_back` changed, 0 when it is the program's own unchanged, -1 when rt_sigaction failed.
constexpr int kActionRewriteRounds = 8;
// `change` and `put_back` for the two users: with `add`, S (`sampling`) added where the
// action needs it (KernelActionNeedsMask), for both; without, S taken out by `change` only.
// One function, not a template per user: the library's size is budgeted.
bool ChangeSamplingBit(int signal_number, int sampling, bool add, KernelAction* action) {
  if (!add) {
    action->mask &= ~SignalBit(sampling);
    return true;
  }
  if (!KernelActionNeedsMask(signal_number, *action, sampling)) return false;
  action->mask |= SignalBit(sampling);
  return true;
}
int RewriteKernelAction(int signal_number, const KernelAction& read, int sampling, bool add,
                        KernelAction* installed) {
  KernelAction expected = read;
  KernelAction desired = read;
  bool changed = ChangeSamplingBit(signal_number, sampling, add, &desired);
  for (int round = 0;; ++round) {
    // After kActionRewriteRounds, still changing every round: its latest action goes back,
    // unchecked.
    const bool last = round == kActionRewriteRounds;
    KernelAction displaced;
    if (RawSyscall(SYS_rt_sigaction, signal_number, reinterpret_cast<long>(&desired),
                   last ? 0 : reinterpret_cast<long>(&displaced), sizeof(uint64_t)) != 0) {
      return -1;
    }
    *installed = desired;
    if (last || displaced == expected) return changed ? 1 : 0;
    expected = desired;
    desired = displaced;
    changed = add && ChangeSamplingBit(signal_number, sampling, add, &desired);
  }
}

}  // namespace

// rt_sigaction with sigaction's interface, the action passed as it is (its own sa_restorer
// kept: not libc's, which puts its own there): the `real` of a program's raw rt_sigaction.
int KernelSigaction(int signal_number, const struct sigaction* action,
                    struct sigaction* old_action) {
  KernelAction given, previous;  // The kernel writes `previous` in any case.
  if (action != nullptr) given = KernelFormOf(*action);
  const long rc = RawSyscall(SYS_rt_sigaction, signal_number,
                             action != nullptr ? reinterpret_cast<long>(&given) : 0,
                             reinterpret_cast<long>(&previous), sizeof(uint64_t));
  if (rc != 0) {
    errno = static_cast<int>(-rc);
    return -1;
  }
  if (old_action != nullptr) SigactionOf(previous, old_action);
  return 0;
}

void MaskSamplingSignalInAlternateStackHandlers(int sampling) {
  if (sampling <= 0 || sampling > 64) return;
  for (int signal_number = 1; signal_number <= 64; ++signal_number) {
    if (signal_number == SIGKILL || signal_number == SIGSTOP || signal_number == ControlSignal()) {
      continue;
    }
    // Read from the kernel each time, not from the bookkeeping: a raw rt_sigaction may have
    // replaced a handler Strata masked before.
    KernelAction current, masked;
    if (!ReadKernelAction(signal_number, &current)) continue;
    masked = current;
    if (!ChangeSamplingBit(signal_number, sampling, true, &masked)) continue;  // Needs none.
    KernelAction installed;
    const int added = RewriteKernelAction(signal_number, current, sampling, true, &installed);
    if (added > 0) RecordMaskedAction(signal_number, installed, sampling);
  }
}

void UnmaskSamplingSignalInAlternateStackHandlers() {
  for (int signal_number = 1; signal_number <= 64; ++signal_number) {
    KernelAction recorded;
    const int masked = MaskedActionOf(signal_number, &recorded);
    ForgetMaskedAction(signal_number);
    if (masked == 0) continue;
    // Only the action Strata masked, still installed: one the program installed since (a raw
    // rt_sigaction no wrapper saw) keeps its own mask, S in it or not.
    KernelAction current;
    if (!ReadKernelAction(signal_number, &current) || !(current == recorded)) continue;
    // A newer action of the program's met meanwhile is put back as it is.
    KernelAction installed;
    (void)RewriteKernelAction(signal_number, current, masked, false, &installed);
  }
}

}  // namespace base_internal
}  // namespace strata
