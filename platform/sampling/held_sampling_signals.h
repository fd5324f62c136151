// Foreign instances of the sampling signal S that the program blocks (docs/sampling.md,
// "Foreign instances of the sampling signal").
//
// While a session samples with S, S stays unblocked on every thread of the program (the
// preload tier's mask interposers remove it from the masks the program sets and remember what
// the program asked for: the *program's view* of the thread's mask, below). A foreign S (sent
// by kill, tgkill or sigqueue, not one of Strata's samples) then reaches the sampling handler
// even where the program blocks it. Plain, it would stay pending until the program read it
// (sigwaitinfo, sigtimedwait, sigwait) or unblocked it. So the handler, on a foreign S taken
// on a thread whose program view blocks S, *holds* it:
//   - a process-directed S (si_code other than SI_TKILL) is re-queued with its siginfo
//     (rt_tgsigqueueinfo: for one's own process it keeps si_code, si_pid, si_uid, si_value)
//     to a thread that is waiting for S in an interposed wait, which reads it, or to a thread
//     whose view leaves S unblocked (its handler or default action); else
//   - it is kept in a process-wide table of kHeldSlots entries (a thread-directed one for the
//     thread it was sent to), which the interposed waits read first (TakeHeldSamplingSignal),
//     sigpending reports (HasHeldSamplingSignal), and an unblocking of S in the program's
//     view delivers (DeliverHeldSamplingSignals: re-queued to the calling thread, whose
//     handler then passes it to the program's action, as the kernel does at an unblock).
//   - A table that is full drops the signal and counts it (never fatal; plain, the kernel
//     would queue up to RLIMIT_SIGPENDING).
// What is not exact (docs/host-contract.md, "Signals"): a signalfd that includes S never
// becomes readable for a held S (it is read by a later sigwait-style call or delivered at an
// unblock instead); the order of a held S relative to the program's other pending signals
// can differ from the kernel's (lowest number first) when several are pending at once.
//
// Thread safety: every function is thread-safe and async-signal-safe (atomics, raw system
// calls: rt_tgsigqueueinfo, gettid, getpid). No lock, no allocation.
#ifndef STRATA_PLATFORM_SAMPLING_HELD_SAMPLING_SIGNALS_H_
#define STRATA_PLATFORM_SAMPLING_HELD_SAMPLING_SIGNALS_H_

#include <signal.h>
#include <stdint.h>

namespace strata {

// Foreign instances of S that can be held at once.
constexpr int kHeldSlots = 64;
// Threads that can wait for S at once in an interposed wait and be found by the handler (a
// thread beyond this still reads S and held instances, but a process-directed S taken on
// another thread during its wait is held, not handed to it).
constexpr int kSamplingSignalWaiterSlots = 32;

// Threads whose view leaves S unblocked that the handler can find at once (one live one is
// enough: a process-directed S is handed to it).
constexpr int kAcceptorSlots = 64;

// The program's view of the calling thread's mask for S: whether the program asked for S to
// be blocked (the mask interposers set it; a new thread inherits its creator's, set by the
// thread-start trampoline; the session's starting thread sets its own). One initial-exec
// thread-local bool; a thread whose view leaves S unblocked is registered as a thread that
// takes a process-directed S (an *acceptor*), so that a foreign S taken on a thread that
// blocks it goes there, as the kernel would have sent it there.
void SetProgramBlocksSamplingSignal(bool blocked);
bool ProgramBlocksSamplingSignal();
// Whether the calling thread's view is known: set by SetProgramBlocksSamplingSignal (a mask
// interposer, the thread-start trampoline, the session's starting thread) or in force through
// a temporary mask. A thread not seen (made without our pthread_create wrapper, or one that
// existed before a session began) has none: the sampling handler never gives a foreign S
// taken there to a SIG_DFL action (it is held instead, handed to a thread that takes S), since
// the program may block S there (docs/host-contract.md, "Signals").
bool ProgramSamplingSignalViewKnown();
// For the thread-start trampoline, first thing on the new thread: the view its creator passed
// on, then `blocked_for_start` (the sampling signal, or 0) unblocked for real. The creator
// blocks S for real around pthread_create (kernel masks are inherited), so that no S reaches
// the new thread's handler between glibc's restoring its mask and this call, while its view is
// not known yet (before: the program killed by a foreign S, issue 33). Registers the thread as
// an acceptor when its view leaves S unblocked.
void StartThreadSamplingSignalView(bool blocked, int blocked_for_start);
// For a thread that ends (the thread-start trampoline, however its routine ends): its
// acceptor slot is freed at once rather than found dead later.
void ForgetSamplingSignalThread();
// The view in force right now: during a call with a temporary mask (sigsuspend, ppoll,
// pselect, epoll_pwait; TemporarySamplingSignalMask), that mask's; else the thread's. For the
// handler.
bool ProgramBlocksSamplingSignalNow();

// For the wrappers of calls that apply a temporary mask atomically (sigsuspend, ppoll,
// pselect, epoll_pwait), around the real call with the program's mask unchanged: S is blocked
// for real from here until the kernel applies the temporary mask, the view in force is that
// mask's, and when it unblocks S the calling thread takes a process-directed S meanwhile and
// the held instances are re-queued to it, so that the call delivers them and returns EINTR as
// plain. `signal_number` 0 or a null `mask`: does nothing. The destructor puts the view and
// the thread's real mask back (a cancellation unwinds through it).
class TemporarySamplingSignalMask {
 public:
  TemporarySamplingSignalMask(int signal_number, const sigset_t* mask);
  ~TemporarySamplingSignalMask();
  TemporarySamplingSignalMask(const TemporarySamplingSignalMask&) = delete;
  TemporarySamplingSignalMask& operator=(const TemporarySamplingSignalMask&) = delete;

 private:
  const int signal_number_;
  sigset_t previous_;
  int previous_override_ = -1;
  int acceptor_slot_ = -1;
};

// From the sampling handler: holds a foreign instance of `signal_number` taken on the calling
// thread (see the file comment).
void HoldForeignSamplingSignal(int signal_number, const siginfo_t& info);

// Removes the oldest held instance meant for the process or for the calling thread, and copies
// its siginfo to `*info`. False if there is none.
bool TakeHeldSamplingSignal(siginfo_t* info);

// Moves the instances of S pending in the kernel for the calling thread or the process (not
// yet taken by any thread) into the table, behind the ones held already; a sample of Strata's
// met there is given back (GiveSampleBack). Call it where S is unblocked for real. For sigpending and an unblock, which must
// see every instance sent before them.
void PullPendingSamplingSignals(int signal_number);

// Whether an instance is held for the process or for the calling thread.
bool HasHeldSamplingSignal();

// Pulls the pending ones (PullPendingSamplingSignals), then re-queues every instance held for
// the process or the calling thread to the calling thread (rt_tgsigqueueinfo), oldest first; they are delivered when the system call returns. For the
// mask interposers, after the program unblocked S. An instance the kernel refuses (EAGAIN:
// RLIMIT_SIGPENDING) stays held. Until a foreign instance has been held or handed over in this
// process, does nothing (two relaxed loads): a program that never gets one pays no system call.
void DeliverHeldSamplingSignals(int signal_number);

// The calling thread waits for S in an interposed wait from Register to Unregister; the
// handler may re-queue a process-directed S to it meanwhile. Register returns a slot for
// Unregister, or -1 when every slot is taken.
int RegisterSamplingSignalWaiter();
void UnregisterSamplingSignalWaiter(int slot);

// Counts since the process started, for the profile (profilingLog.foreignSamplingSignals).
struct HeldSamplingSignalCounts {
  uint64_t held = 0;              // Foreign instances held (table) since the start.
  uint64_t handed_to_waiter = 0;  // Re-queued by the handler to a waiting thread.
  uint64_t handed_to_acceptor = 0;  // Re-queued to a thread whose view leaves S unblocked.
  uint64_t delivered = 0;         // Taken by a wait or delivered at an unblock.
  uint64_t dropped = 0;           // The table was full.
  uint64_t held_now = 0;          // Still held.
  uint64_t samples_read_by_waits = 0;  // Strata's samples a wait dequeued and could not give back.
  uint64_t signalfds = 0;         // signalfd calls whose mask named S (NoteSignalfdNamingSignal).
};
HeldSamplingSignalCounts CountHeldSamplingSignals();

// For the wait interposers: one of Strata's samples that a wait dequeued (IsStrataSamplingSignal)
// is queued back to the calling thread with its siginfo (rt_tgsigqueueinfo), so that the
// handler takes it as a sample where the thread waits once S is unblocked for real again;
// if the kernel refuses (RLIMIT_SIGPENDING), it is dropped and counted.
void GiveSampleBack(int signal_number, const siginfo_t& info);

// For the signalfd interposer: the program made a signalfd whose mask names S (a held S is not
// readable there: said in the profile).
void NoteSignalfdNamingSignal();

}  // namespace strata

#endif  // STRATA_PLATFORM_SAMPLING_HELD_SAMPLING_SIGNALS_H_
