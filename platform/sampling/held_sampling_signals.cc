#include "platform/sampling/held_sampling_signals.h"

#include <errno.h>
#include <sys/syscall.h>

#include <atomic>
#include <cstring>

#include "platform/kernel_signal_set.h"
#include "platform/raw_syscall.h"
#include "platform/thread_fence.h"
#include "platform/sampling/sampling_signal.h"

namespace strata {
namespace {

// A held instance: kEmpty -> kBusy (a writer claimed it) -> kFull -> kBusy (a reader claimed
// it) -> kEmpty. `sequence` orders them (oldest first, as the kernel queues real-time signals).
enum SlotState : uint32_t { kEmpty = 0, kBusy = 1, kFull = 2 };
// `info` is touched only by the thread that claimed the slot (kBusy); the fields a reader
// looks at before claiming are atomics (a scan may read a slot another thread is refilling).
struct HeldSlot {
  std::atomic<uint32_t> state{kEmpty};
  std::atomic<uint64_t> sequence{0};
  std::atomic<int32_t> tid{0};  // 0: the process; else the thread it was sent to (SI_TKILL).
  std::atomic<int32_t> pid{0};  // The process that held it: a forked child's copy is not its own.
  siginfo_t info;
};
HeldSlot g_slots[kHeldSlots];
std::atomic<uint64_t> g_next_sequence{1};
std::atomic<int32_t> g_waiters[kSamplingSignalWaiterSlots];

std::atomic<uint64_t> g_held{0};
std::atomic<uint64_t> g_handed_to_waiter{0};
std::atomic<uint64_t> g_handed_to_acceptor{0};
std::atomic<uint64_t> g_delivered{0};
std::atomic<uint64_t> g_dropped{0};
std::atomic<uint64_t> g_samples_read_by_waits{0};
std::atomic<uint64_t> g_signalfds{0};

// Threads whose program view leaves S unblocked (they take a process-directed S: its handler
// or default action), as far as known: registered when the view turns unblocked (a thread
// made by our pthread_create, the session's starting thread, an unblock), unregistered when
// it turns blocked; a slot of a thread that ended is found dead (ESRCH) and freed.
std::atomic<int32_t> g_acceptors[kAcceptorSlots];

__attribute__((tls_model("initial-exec"))) thread_local bool t_program_blocks = false;
// Whether t_program_blocks was ever set on this thread (ProgramSamplingSignalViewKnown).
__attribute__((tls_model("initial-exec"))) thread_local bool t_view_known = false;
__attribute__((tls_model("initial-exec"))) thread_local int t_acceptor_slot = -1;
// The view during a call with a temporary mask (sigsuspend, ppoll...): -1 none, 0 unblocked,
// 1 blocked.
__attribute__((tls_model("initial-exec"))) thread_local int t_view_override = -1;

// Whether a foreign instance ever reached the handler or a pull in this process: until then
// there is nothing to hold or pull, and the unblocks, waits and sigpending calls of a program
// that never gets one cost a few relaxed loads (a block + unblock pair of S costs what it did
// before; ~1.85 us with an unconditional pull: docs/benchmarks.md).
bool AnyForeignSeen() {
  return g_held.load(std::memory_order_relaxed) != 0 ||
         g_handed_to_waiter.load(std::memory_order_relaxed) != 0 ||
         g_handed_to_acceptor.load(std::memory_order_relaxed) != 0 ||
         g_dropped.load(std::memory_order_relaxed) != 0;
}

int32_t Tid() { return static_cast<int32_t>(RawSyscall(SYS_gettid)); }
int32_t Pid() { return static_cast<int32_t>(RawSyscall(SYS_getpid)); }

long Queue(int32_t tid, int signal_number, const siginfo_t& info) {
  siginfo_t copy;
  std::memcpy(&copy, &info, sizeof(copy));
  copy.si_signo = signal_number;
  return RawSyscall(SYS_rt_tgsigqueueinfo, Pid(), tid, signal_number,
                    reinterpret_cast<long>(&copy));
}

bool ForProcessOrThread(const HeldSlot& slot, int32_t tid) {
  const int32_t target = slot.tid.load(std::memory_order_relaxed);
  return target == 0 || target == tid;
}

// A full slot copied by fork() from the parent: freed (a child starts with no pending signal).
// `*pid` is read once, when first needed.
bool FreedAsParents(HeldSlot& slot, int32_t* pid) {
  if (*pid == 0) *pid = Pid();
  if (slot.pid.load(std::memory_order_relaxed) == *pid) return false;
  uint32_t expected = kFull;
  if (slot.state.compare_exchange_strong(expected, kBusy, std::memory_order_acquire)) {
    slot.state.store(kEmpty, std::memory_order_release);
  }
  return true;
}

// Claims the oldest full slot meant for the process or `tid`; -1 if none.
int ClaimOldest(int32_t tid) {
  for (;;) {
    int oldest = -1;
    uint64_t oldest_sequence = 0;
    int32_t pid = 0;
    for (int i = 0; i < kHeldSlots; ++i) {
      HeldSlot& slot = g_slots[i];
      if (slot.state.load(std::memory_order_acquire) != kFull) continue;
      if (FreedAsParents(slot, &pid) || !ForProcessOrThread(slot, tid)) continue;
      const uint64_t sequence = slot.sequence.load(std::memory_order_relaxed);
      if (oldest < 0 || sequence < oldest_sequence) {
        oldest = i;
        oldest_sequence = sequence;
      }
    }
    if (oldest < 0) return -1;
    uint32_t expected = kFull;
    if (g_slots[oldest].state.compare_exchange_strong(expected, kBusy,
                                                      std::memory_order_acquire)) {
      return oldest;
    }
    // Another thread took it meanwhile: look again.
  }
}

std::atomic<uint32_t> g_next_probe{0};
constexpr int kProbesPerRegistration = 4;

// A slot for the calling thread, or -1 when none is free. When every slot is taken and
// `probe`, a few of them (kProbesPerRegistration, in turn) are checked for a thread that
// ended (tgkill with signal 0: ESRCH) and reused: one live acceptor is all the handler needs.
int RegisterAcceptor(int32_t tid, bool probe) {
  for (int i = 0; i < kAcceptorSlots; ++i) {
    int32_t expected = 0;
    if (g_acceptors[i].compare_exchange_strong(expected, tid, std::memory_order_acq_rel)) {
      return i;
    }
  }
  if (!probe) return -1;
  const int32_t pid = Pid();
  for (int probe = 0; probe < kProbesPerRegistration; ++probe) {
    const int i =
        static_cast<int>(g_next_probe.fetch_add(1, std::memory_order_relaxed) % kAcceptorSlots);
    int32_t expected = g_acceptors[i].load(std::memory_order_acquire);
    if (expected != 0 && RawSyscall(SYS_tgkill, pid, expected, 0) == -ESRCH &&
        g_acceptors[i].compare_exchange_strong(expected, tid, std::memory_order_acq_rel)) {
      return i;
    }
  }
  return -1;
}

void UnregisterAcceptor(int slot, int32_t tid) {
  if (slot < 0 || slot >= kAcceptorSlots) return;
  int32_t expected = tid;
  g_acceptors[slot].compare_exchange_strong(expected, 0, std::memory_order_acq_rel);
}

// Hands `info` to one of `table`'s threads other than the caller; false if none took it.
// Dead threads' slots are freed on the way.
bool HandTo(std::atomic<int32_t>* table, int slots, int signal_number, const siginfo_t& info,
            std::atomic<uint64_t>* counter) {
  const int32_t self = Tid();
  for (int i = 0; i < slots; ++i) {
    const int32_t tid = table[i].load(std::memory_order_acquire);
    if (tid == 0 || tid == self) continue;
    const long queued = Queue(tid, signal_number, info);
    if (queued == 0) {
      counter->fetch_add(1, std::memory_order_relaxed);
      return true;
    }
    int32_t stale = tid;
    if (queued == -ESRCH) table[i].compare_exchange_strong(stale, 0);
  }
  return false;
}

}  // namespace

namespace {
// t_acceptor_slot: a slot, kNotTried, or kTableFull (tried when the view last turned
// unblocked: tried again only at the next such turn, so that a thread calling sigprocmask in
// a loop with a full table does not scan it at every call).
constexpr int kNotTried = -1;
constexpr int kTableFull = -2;
}  // namespace

// Whether `signal_number` is blocked for real in `mask` (a kernel sigset: signal n at bit n-1).
bool BlockedIn(uint64_t mask, int signal_number) {
  return signal_number > 0 && ((mask >> (signal_number - 1)) & 1) != 0;
}

uint64_t RealMask() {
  uint64_t mask = 0;
  RawSyscall(SYS_rt_sigprocmask, SIG_BLOCK, 0, reinterpret_cast<long>(&mask),
             static_cast<long>(sizeof(mask)));
  return mask;
}

void SetProgramBlocksSamplingSignal(bool blocked) {
  const bool turned_unblocked = t_program_blocks && !blocked;
  t_program_blocks = blocked;
  t_view_known = true;
  if (blocked) {
    if (t_acceptor_slot >= 0) UnregisterAcceptor(t_acceptor_slot, Tid());
    if (t_acceptor_slot != kTableFull) t_acceptor_slot = kNotTried;
  } else if (t_acceptor_slot == kNotTried || (t_acceptor_slot == kTableFull && turned_unblocked)) {
    // Never a thread where S is blocked for real: one of Strata's threads (the program's
    // handler may run there and set masks), or a program thread inside a wait of ours (a
    // handler of another signal interrupted it); tried again at its next call.
    if (BlockedIn(RealMask(), InstalledSamplingSignal())) return;
    const int slot = RegisterAcceptor(Tid(), /*probe=*/true);
    t_acceptor_slot = slot >= 0 ? slot : kTableFull;
  }
}

bool ProgramBlocksSamplingSignal() { return t_program_blocks; }

bool ProgramSamplingSignalViewKnown() { return t_view_override >= 0 || t_view_known; }

void StartThreadSamplingSignalView(bool blocked, int blocked_for_start) {
  t_program_blocks = blocked;
  t_view_known = true;
  // The handler sees the view before S can reach it.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (blocked_for_start > 0) {
    uint64_t one = uint64_t{1} << (blocked_for_start - 1);
    RawSyscall(SYS_rt_sigprocmask, SIG_UNBLOCK, reinterpret_cast<long>(&one), 0,
               static_cast<long>(sizeof(one)));
  }
  SetProgramBlocksSamplingSignal(blocked);  // An acceptor when unblocked.
}

void ForgetSamplingSignalThread() {
  if (t_acceptor_slot >= 0) UnregisterAcceptor(t_acceptor_slot, Tid());
  t_acceptor_slot = kNotTried;
}

bool ProgramBlocksSamplingSignalNow() {
  return t_view_override >= 0 ? t_view_override == 1 : t_program_blocks;
}

TemporarySamplingSignalMask::TemporarySamplingSignalMask(int signal_number,
                                                         const sigset_t* mask)
    : signal_number_(mask != nullptr ? signal_number : 0) {
  if (signal_number_ == 0) return;
  // S blocked for real until the kernel applies the temporary mask atomically: an S that
  // arrives meanwhile, or one of the held ones re-queued below, is delivered inside the call
  // (which then returns EINTR), as plain, and not just before it.
  sigset_t one;
  EmptySignalSet(&one);
  AddSignal(&one, signal_number_);
  RawSyscall(SYS_rt_sigprocmask, SIG_BLOCK, reinterpret_cast<long>(&one),
             reinterpret_cast<long>(&previous_), static_cast<long>(sizeof(uint64_t)));
  previous_override_ = t_view_override;
  const bool unblocks = !HasSignal(*mask, signal_number_);
  t_view_override = unblocks ? 0 : 1;
  if (unblocks) {
    // Only into a free slot: with every slot taken, live acceptors are already known.
    uint64_t before = 0;
    std::memcpy(&before, &previous_, sizeof(before));
    if (t_program_blocks && !BlockedIn(before, signal_number_)) {
      acceptor_slot_ = RegisterAcceptor(Tid(), /*probe=*/false);
    }
    DeliverHeldSamplingSignals(signal_number_);
  }
}

TemporarySamplingSignalMask::~TemporarySamplingSignalMask() {
  if (signal_number_ == 0) return;
  if (acceptor_slot_ >= 0) UnregisterAcceptor(acceptor_slot_, Tid());
  // The view first: an S pending now is the persistent view's when the mask is restored.
  t_view_override = previous_override_;
  RawSyscall(SYS_rt_sigprocmask, SIG_SETMASK, reinterpret_cast<long>(&previous_), 0,
             static_cast<long>(sizeof(uint64_t)));
}

namespace {

// Keeps `info` in the table: its slot, or -1 if it is full (counted as dropped).
int HoldInTable(int signal_number, const siginfo_t& info) {
  const uint64_t sequence = g_next_sequence.fetch_add(1, std::memory_order_relaxed);
  for (int i = 0; i < kHeldSlots; ++i) {
    HeldSlot& slot = g_slots[i];
    uint32_t expected = kEmpty;
    if (!slot.state.compare_exchange_strong(expected, kBusy, std::memory_order_acquire)) {
      continue;
    }
    slot.sequence.store(sequence, std::memory_order_relaxed);
    slot.tid.store(info.si_code == SI_TKILL ? Tid() : 0, std::memory_order_relaxed);
    slot.pid.store(Pid(), std::memory_order_relaxed);
    std::memcpy(&slot.info, &info, sizeof(info));
    slot.info.si_signo = signal_number;
    slot.state.store(kFull, std::memory_order_release);
    g_held.fetch_add(1, std::memory_order_relaxed);
    return i;
  }
  g_dropped.fetch_add(1, std::memory_order_relaxed);
  return -1;
}

}  // namespace

void HoldForeignSamplingSignal(int signal_number, const siginfo_t& info) {
  if (info.si_code != SI_TKILL) {
    // Process-directed: the kernel would have given it to a thread that can take it -- one
    // waiting for S in an interposed wait, or one whose view leaves S unblocked (never the
    // calling thread: it is in the handler, not in its wait, and a re-queue to itself would
    // come straight back here).
    if (HandTo(g_waiters, kSamplingSignalWaiterSlots, signal_number, info,
               &g_handed_to_waiter) ||
        HandTo(g_acceptors, kAcceptorSlots, signal_number, info, &g_handed_to_acceptor)) {
      return;
    }
  }
  const int slot = HoldInTable(signal_number, info);
  if (slot < 0 || info.si_code == SI_TKILL) return;
  // A thread that began to wait between the look above and the hold registered before it
  // looks at the held ones (RegisterSamplingSignalWaiter), and may have looked before the
  // hold was visible: with a full fence on each side, one of the two sees the other. So a
  // waiter seen now gets it, unless a wait took the slot already; while the slot is claimed
  // here a new waiter's look misses it, so the look is made again after it is put back.
  // (Before, such an instance stayed held while the thread waited: the last of 200 in
  // thread_start_rtmax, CPU-clock timers, load ~15.)
  HeldSlot& held = g_slots[slot];
  const int32_t self = Tid();
  for (int round = 0; round < 4; ++round) {
    StrataThreadFence(std::memory_order_seq_cst);
    bool waiter = false;
    for (const std::atomic<int32_t>& registered : g_waiters) {
      const int32_t tid = registered.load(std::memory_order_relaxed);
      waiter |= tid != 0 && tid != self;
    }
    uint32_t expected = kFull;
    if (!waiter ||
        !held.state.compare_exchange_strong(expected, kBusy, std::memory_order_acquire)) {
      return;  // No waiter (one from now on sees it held), or a wait took it.
    }
    // (Refilled since by another hold: handed on only if it is process-directed too.)
    const bool handed = held.tid.load(std::memory_order_relaxed) == 0 &&
                        HandTo(g_waiters, kSamplingSignalWaiterSlots, signal_number, held.info,
                               &g_delivered);
    held.state.store(handed ? kEmpty : kFull, std::memory_order_release);
    if (handed || held.tid.load(std::memory_order_relaxed) != 0) return;
  }
}

void PullPendingSamplingSignals(int signal_number) {
  sigset_t one;
  EmptySignalSet(&one);
  AddSignal(&one, signal_number);
  const struct timespec zero {};
  for (int round = 0; round < 2 * kHeldSlots; ++round) {
    siginfo_t info;
    const long got = RawSyscall(SYS_rt_sigtimedwait, reinterpret_cast<long>(&one),
                                reinterpret_cast<long>(&info), reinterpret_cast<long>(&zero),
                                static_cast<long>(sizeof(uint64_t)));
    if (got != signal_number) return;
    if (IsStrataSamplingSignal(info)) {
      // Where S is unblocked for real, taken by the handler on the way out of the re-queue;
      // where it is blocked, it would be met again: the pull ends here.
      GiveSampleBack(signal_number, info);
      return;
    } else if (HoldInTable(signal_number, info) < 0) {
      return;
    }
  }
}

bool TakeHeldSamplingSignal(siginfo_t* info) {
  if (!AnyForeignSeen()) return false;
  const int slot = ClaimOldest(Tid());
  if (slot < 0) return false;
  std::memcpy(info, &g_slots[slot].info, sizeof(*info));
  g_slots[slot].state.store(kEmpty, std::memory_order_release);
  g_delivered.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool HasHeldSamplingSignal() {
  if (!AnyForeignSeen()) return false;
  const int32_t tid = Tid();
  int32_t pid = 0;
  for (HeldSlot& slot : g_slots) {
    if (slot.state.load(std::memory_order_acquire) == kFull && !FreedAsParents(slot, &pid) &&
        ForProcessOrThread(slot, tid)) {
      return true;
    }
  }
  return false;
}

void DeliverHeldSamplingSignals(int signal_number) {
  // No foreign instance so far: none can be held, and one still in the kernel now will be
  // taken by a thread whose view unblocks it, or held and read by the next wait.
  if (!AnyForeignSeen()) return;
  PullPendingSamplingSignals(signal_number);  // Older than what arrives after the unblock.
  const int32_t tid = Tid();
  for (int round = 0; round < kHeldSlots; ++round) {
    const int slot = ClaimOldest(tid);
    if (slot < 0) return;
    HeldSlot& held = g_slots[slot];
    if (Queue(tid, signal_number, held.info) != 0) {
      held.state.store(kFull, std::memory_order_release);  // Refused: stays held.
      return;
    }
    held.state.store(kEmpty, std::memory_order_release);
    g_delivered.fetch_add(1, std::memory_order_relaxed);
  }
}

int RegisterSamplingSignalWaiter() {
  const int32_t tid = Tid();
  for (int i = 0; i < kSamplingSignalWaiterSlots; ++i) {
    int32_t expected = 0;
    if (g_waiters[i].compare_exchange_strong(expected, tid, std::memory_order_acq_rel)) {
      // Before the caller looks at the held ones (HoldForeignSamplingSignal's other side).
      StrataThreadFence(std::memory_order_seq_cst);
      return i;
    }
  }
  return -1;
}

void UnregisterSamplingSignalWaiter(int slot) {
  if (slot >= 0 && slot < kSamplingSignalWaiterSlots) {
    g_waiters[slot].store(0, std::memory_order_release);
  }
}

void GiveSampleBack(int signal_number, const siginfo_t& info) {
  if (Queue(Tid(), signal_number, info) != 0) {
    g_samples_read_by_waits.fetch_add(1, std::memory_order_relaxed);
  }
}

void NoteSignalfdNamingSignal() { g_signalfds.fetch_add(1, std::memory_order_relaxed); }

HeldSamplingSignalCounts CountHeldSamplingSignals() {
  HeldSamplingSignalCounts counts;
  counts.held = g_held.load(std::memory_order_relaxed);
  counts.handed_to_waiter = g_handed_to_waiter.load(std::memory_order_relaxed);
  counts.handed_to_acceptor = g_handed_to_acceptor.load(std::memory_order_relaxed);
  counts.delivered = g_delivered.load(std::memory_order_relaxed);
  counts.dropped = g_dropped.load(std::memory_order_relaxed);
  counts.samples_read_by_waits = g_samples_read_by_waits.load(std::memory_order_relaxed);
  counts.signalfds = g_signalfds.load(std::memory_order_relaxed);
  for (const HeldSlot& slot : g_slots) {
    if (slot.state.load(std::memory_order_relaxed) == kFull) ++counts.held_now;
  }
  return counts;
}

}  // namespace strata
