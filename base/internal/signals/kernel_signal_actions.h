// Signal dispositions in the kernel's own form, and the sampling signal S kept out of the
// program's alternate-stack handlers (the signal interposers' bookkeeping,
// signal_interposers.cc; docs/host-contract.md, "Stack").
//
// KernelAction is struct sigaction as rt_sigaction reads and writes it on x86-64 (an 8-byte
// mask): exactly what is installed, the program's own sa_restorer included. A program
// handler on an alternate stack (SA_ONSTACK) whose mask does not name S runs with S added to
// the mask the kernel holds, so that no sample's kernel frame lands on a small alternate
// stack; the action installed that way is recorded per signal, so that the program reads its
// own mask back (S hidden) while the kernel's action is still exactly the recorded one.
//
// Thread safety: all thread-safe (the records are atomics; one writer per signal at a time in
// practice: the program's sigaction calls for it, or the sampler's scan). Async-signal-safe:
// raw system calls and atomics only.
#ifndef STRATA_BASE_INTERNAL_SIGNALS_KERNEL_SIGNAL_ACTIONS_H_
#define STRATA_BASE_INTERNAL_SIGNALS_KERNEL_SIGNAL_ACTIONS_H_

#include <signal.h>
#include <sys/syscall.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "platform/kernel_signal_set.h"
#include "platform/raw_syscall.h"

namespace strata {
namespace base_internal {

// The kernel's struct sigaction on x86-64, as rt_sigaction reads and writes it (an 8-byte
// set): exactly what is installed, the program's own sa_restorer included (glibc's sigaction
// would put its own there).
struct KernelAction {
  uintptr_t handler;
  uint64_t flags;
  uintptr_t restorer;
  uint64_t mask;
  bool operator==(const KernelAction& other) const {
    return handler == other.handler && flags == other.flags && restorer == other.restorer &&
           mask == other.mask;
  }
};

inline uint64_t SignalBit(int signal_number) { return uint64_t{1} << (signal_number - 1); }

// The kernel's action for `signal_number` (raw rt_sigaction); false when it refuses.
inline bool ReadKernelAction(int signal_number, KernelAction* action) {
  return RawSyscall(SYS_rt_sigaction, signal_number, 0, reinterpret_cast<long>(action),
                    sizeof(uint64_t)) == 0;
}

// The kernel action as a glibc sigaction read back from it: glibc copies the kernel's handler,
// flags (into an int), restorer and first 8 mask bytes.
inline KernelAction KernelFormOf(const struct sigaction& action) {
  return KernelAction{reinterpret_cast<uintptr_t>(action.sa_handler),
                      static_cast<uint32_t>(action.sa_flags),
                      reinterpret_cast<uintptr_t>(action.sa_restorer),
                      KernelMaskWord(action.sa_mask)};
}

// Whether `current` is the action `recorded`, flags compared as glibc reports them (32 bits).
inline bool SameAction(const KernelAction& current, const KernelAction& recorded) {
  return current.handler == recorded.handler &&
         static_cast<uint32_t>(current.flags) == static_cast<uint32_t>(recorded.flags) &&
         current.restorer == recorded.restorer && current.mask == recorded.mask;
}

// Whether S must stay blocked while the program's handler `action` for `signal_number` runs:
// a handler (not SIG_DFL/SIG_IGN) on the alternate stack (SA_ONSTACK), whose own mask does
// not block S already. Whatever the size of any thread's alternate stack: those are crash or
// rare handlers, and a second kernel signal frame (several KiB with AVX-512/AMX state) below
// one on a small stack makes the kernel kill the process ("overflowed sigaltstack").
inline bool MasksSamplingSignalIn(int signal_number, const struct sigaction& action,
                                  int sampling) {
  return sampling > 0 && signal_number != sampling && (action.sa_flags & SA_ONSTACK) != 0 &&
         action.sa_handler != SIG_DFL && action.sa_handler != SIG_IGN &&
         !HasSignal(action.sa_mask, sampling);
}

// The glibc form of a kernel action (what glibc's sigaction reads back from it).
inline void SigactionOf(const KernelAction& kernel, struct sigaction* action) {
  std::memset(action, 0, sizeof(*action));
  action->sa_handler = reinterpret_cast<sighandler_t>(kernel.handler);
  std::memcpy(&action->sa_mask, &kernel.mask, sizeof(kernel.mask));
  action->sa_flags = static_cast<int>(kernel.flags);
  action->sa_restorer = reinterpret_cast<void (*)()>(kernel.restorer);
}

// rt_sigaction with sigaction's interface, the action passed as it is (its own sa_restorer
// kept: not libc's, which puts its own there): the `real` of a program's raw rt_sigaction.
// Returns 0, or -1 with errno set.
__attribute__((visibility("hidden"))) int KernelSigaction(int signal_number,
                                                          const struct sigaction* action,
                                                          struct sigaction* old_action);

// Per signal 1..64: the action Strata installed for the program's SA_ONSTACK handler, its
// mask with the sampling signal `sampling` added (0: none recorded; the program's own mask
// did not name it). The mask read back is made the program's own, and the stop takes S out
// again, only while the kernel's action is still exactly that one: a later action of the
// program's (a raw rt_sigaction no wrapper sees) whose own mask names S keeps it.
// Written by one thread at a time per signal in practice (the program's sigaction calls for
// one signal, the sampler's scan); `sampling` is cleared first and set last, and a reader
// that sees it change meanwhile takes it as not recorded.
struct MaskedAction {
  std::atomic<int> sampling{0};
  std::atomic<uintptr_t> handler{0};
  std::atomic<uint64_t> flags{0};
  std::atomic<uintptr_t> restorer{0};
  std::atomic<uint64_t> mask{0};
};
// Indexed by signal number (0 unused). Defined in kernel_signal_actions.cc.
__attribute__((visibility("hidden"))) extern MaskedAction g_masked_actions[65];

inline void RecordMaskedAction(int signal_number, const KernelAction& installed, int sampling) {
  MaskedAction& record = g_masked_actions[signal_number];
  record.sampling.store(0);
  record.handler.store(installed.handler);
  record.flags.store(installed.flags);
  record.restorer.store(installed.restorer);
  record.mask.store(installed.mask);
  record.sampling.store(sampling);
}

inline void ForgetMaskedAction(int signal_number) {
  g_masked_actions[signal_number].sampling.store(0);
}

// The recorded action in *recorded and its S, or 0 when none is recorded.
inline int MaskedActionOf(int signal_number, KernelAction* recorded) {
  MaskedAction& record = g_masked_actions[signal_number];
  const int sampling = record.sampling.load();
  if (sampling == 0) return 0;
  *recorded = KernelAction{record.handler.load(), record.flags.load(), record.restorer.load(),
                           record.mask.load()};
  return record.sampling.load() == sampling ? sampling : 0;
}

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_SIGNALS_KERNEL_SIGNAL_ACTIONS_H_
