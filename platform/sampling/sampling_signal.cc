#include "platform/sampling/sampling_signal.h"

#include <dlfcn.h>
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstring>

#include "platform/next_definition.h"
#include "platform/sampling/thread_sampling_timer.h"

namespace strata {
namespace {

using SigactionFunction = int (*)(int, const struct sigaction*, struct sigaction*);

std::atomic<SamplingCallback> g_callback{nullptr};
// Handler invocations between loading g_callback and returning from the callback, counted in
// two slots by the low bit of the epoch they read before loading it. Retiring a callback
// flips the epoch and waits for the previous epoch's slot only: handlers that begin after the
// flip load the new callback and count in the other slot, so on a busy process the wait ends
// when the handlers already under way end, not when every thread happens to be outside one.
std::atomic<uint32_t> g_callback_epoch{0};
std::atomic<int> g_callbacks_running[2] = {{0}, {0}};  // 32-bit futex words.
static_assert(sizeof(std::atomic<int>) == sizeof(int) && std::atomic<int>::is_always_lock_free,
              "a futex word");
// Threads in WaitForCallbacksOfPreviousEpoch: a handler that empties a slot then wakes them.
std::atomic<int> g_callback_waiters{0};
std::atomic<int> g_installed_signal{0};
// Uninstall gave up waiting for a callback: our handler is still the kernel disposition.
std::atomic<bool> g_uninstall_abandoned{false};
std::atomic<uint64_t> g_samples_skipped_low_stack{0};
std::atomic<uint64_t> g_stray_notifications_dropped{0};
// The sigaction after ours in the lookup order (libc's), so that our own calls do not go
// through the preload tier's interposer (ThreadSanitizer builds: OwnSigaction in the header).
// Resolved outside signal context (Install, Choose).
std::atomic<SigactionFunction> g_real_sigaction{nullptr};

// The program's action for the installed signal: what it had at installation, then whatever it
// set since through the interposers. Written and read from any context, signal handlers
// included, without a lock: a writer claims the next slot, fills it, and publishes its number;
// a reader copies the published slot and retries if a writer claimed that slot again meanwhile
// (kActionSlots writes during one copy). The slots are copied word by word with atomics:
// release stores after the claim, acquire loads before the claim is re-read, so a reader that
// saw any word of a later writer also sees that writer's claim (a sequence lock without fences,
// which ThreadSanitizer does not model; on x86-64 these are the plain moves a memcpy makes).
constexpr uint64_t kActionSlots = 8;
constexpr size_t kActionWords = sizeof(struct sigaction) / sizeof(uint64_t);
static_assert(sizeof(struct sigaction) % sizeof(uint64_t) == 0, "whole words");
std::atomic<uint64_t> g_program_actions[kActionSlots][kActionWords];
std::atomic<uint64_t> g_actions_claimed{0};
std::atomic<uint64_t> g_actions_published{0};

// initial-exec: %fs-relative accesses, no call into the dynamic loader, safe in the handler.
__attribute__((tls_model("initial-exec"))) thread_local std::atomic<void*> t_thread_context{
    nullptr};
__attribute__((tls_model("initial-exec"))) thread_local std::atomic<
    const SamplingEventDescriptors*>
    t_event_descriptors{nullptr};
__attribute__((tls_model("initial-exec"))) thread_local uintptr_t t_stack_low = 0;
__attribute__((tls_model("initial-exec"))) thread_local uintptr_t t_stack_high = 0;
// Nesting depth of our handler's own work on this thread (not of a program's chained handler).
__attribute__((tls_model("initial-exec"))) thread_local int t_in_handler = 0;
// Sampling signals taken on this thread (SamplingSignalsTakenOnCurrentThread). Written only by
// this thread's handler, which no signal interrupts (every signal is blocked in it), and read
// by the thread itself: a relaxed load and store, no read-modify-write needed. In the handler
// it is an initial-exec TLS access (%fs-relative): no call, lock, allocation or fault.
__attribute__((tls_model("initial-exec"))) thread_local std::atomic<uint64_t>
    t_sampling_signals_taken{0};

void SamplingSignalHandler(int signal_number, siginfo_t* info, void* context);

#if STRATA_TSAN_BUILD
// OwnSigaction's calls under way on this thread (sampling_signal.h).
__attribute__((tls_model("initial-exec"))) thread_local int t_own_sigaction_calls = 0;
std::atomic<SigactionFunction> g_first_sigaction{nullptr};

int SigactionThroughTsan(int signal_number, const struct sigaction* action,
                         struct sigaction* old_action) {
  ++t_own_sigaction_calls;
  const int result =
      g_first_sigaction.load(std::memory_order_acquire)(signal_number, action, old_action);
  --t_own_sigaction_calls;
  return result;
}
#endif

SigactionFunction RealSigaction() {
  SigactionFunction real = g_real_sigaction.load(std::memory_order_acquire);
  if (real == nullptr) {
#if STRATA_TSAN_BUILD
    void* first = dlsym(RTLD_DEFAULT, "sigaction");
    g_first_sigaction.store(first ? reinterpret_cast<SigactionFunction>(first) : &::sigaction,
                            std::memory_order_release);
    real = &SigactionThroughTsan;
#else
    // Not `&::sigaction`: inside libstrata_base.so that is the preload tier's interposer.
    real = reinterpret_cast<SigactionFunction>(NextDefinition("sigaction"));
    if (real == nullptr) real = &::sigaction;
#endif
    g_real_sigaction.store(real, std::memory_order_release);
  }
  return real;
}

bool IsOurHandler(const struct sigaction& action) {
  return (action.sa_flags & SA_SIGINFO) != 0 && action.sa_sigaction == &SamplingSignalHandler;
}

// The thread's signal mask through the system call: not interposed, and it may name glibc's
// internal signals. Async-signal-safe (errno is saved by the handler).
void SetThreadMask(int how, const sigset_t* set, sigset_t* old) {
  syscall(SYS_rt_sigprocmask, how, set, old, _NSIG / 8);
}

void WriteProgramAction(const struct sigaction& action) {
  const uint64_t claimed = g_actions_claimed.fetch_add(1, std::memory_order_relaxed) + 1;
  std::atomic<uint64_t>* slot = g_program_actions[claimed % kActionSlots];
  const char* from = reinterpret_cast<const char*>(&action);
  for (size_t i = 0; i < kActionWords; ++i) {
    uint64_t word;
    std::memcpy(&word, from + i * sizeof(word), sizeof(word));
    slot[i].store(word, std::memory_order_release);
  }
  uint64_t published = g_actions_published.load(std::memory_order_relaxed);
  while (published < claimed &&
         !g_actions_published.compare_exchange_weak(published, claimed,
                                                     std::memory_order_release,
                                                     std::memory_order_relaxed)) {
  }
}

void ReadProgramAction(struct sigaction* action) {
  for (;;) {
    const uint64_t published = g_actions_published.load(std::memory_order_acquire);
    const std::atomic<uint64_t>* slot = g_program_actions[published % kActionSlots];
    char* to = reinterpret_cast<char*>(action);
    for (size_t i = 0; i < kActionWords; ++i) {
      const uint64_t word = slot[i].load(std::memory_order_acquire);
      std::memcpy(to + i * sizeof(word), &word, sizeof(word));
    }
    if (g_actions_claimed.load(std::memory_order_relaxed) - published < kActionSlots) return;
  }
}

// ---- Signal handler: async-signal-safe from here to the end of SamplingSignalHandler. ----

void TakeDefaultAction(int signal_number) {
  struct sigaction default_action;
  std::memset(&default_action, 0, sizeof(default_action));
  default_action.sa_handler = SIG_DFL;
  const SigactionFunction real = g_real_sigaction.load(std::memory_order_acquire);
  if (real != nullptr) real(signal_number, &default_action, nullptr);
  // The signal is blocked while this handler runs: it stays pending, and the default action
  // happens when the handler returns and the interrupted mask is restored.
  raise(signal_number);
}

// Calls what the program set for the signal, as the kernel would have: with the thread's mask
// set to the interrupted one plus the action's sa_mask (plus the signal unless SA_NODEFER),
// after resetting the action to SIG_DFL for SA_RESETHAND.
void ChainToProgramAction(int signal_number, siginfo_t* info, void* context) {
  struct sigaction program;
  ReadProgramAction(&program);
  const bool has_info = (program.sa_flags & SA_SIGINFO) != 0;
  if (!has_info && program.sa_handler == SIG_IGN) return;
  if (!has_info && program.sa_handler == SIG_DFL) {
    // A notification the kernel generated for a descriptor (F_SETSIG: si_code POLL_IN..
    // POLL_HUP, the only positive codes for the signals we accept) or a timer (SI_TIMER),
    // carrying a signal the program leaves at SIG_DFL, is a late signal of one of our own
    // closed perf events or timers that its thread no longer names (a thread past its
    // unregistration, seen under load as a program killed by the sampling signal): dropped
    // and counted. A signal sent by a process (kill, tgkill, sigqueue: SI_USER, SI_TKILL,
    // SI_QUEUE) keeps the program's default action.
    if (info != nullptr && ((info->si_code >= POLL_IN && info->si_code <= POLL_HUP) ||
                            info->si_code == SI_TIMER)) {
      g_stray_notifications_dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    // The default action of every signal we accept (SIGPROF, SIGVTALRM, SIGUSR1/2, real-time
    // signals) is to terminate the process.
    TakeDefaultAction(signal_number);
    return;
  }
  if (has_info && (program.sa_sigaction == nullptr || IsOurHandler(program))) return;
  if ((program.sa_flags & SA_RESETHAND) != 0) {
    struct sigaction reset;
    std::memset(&reset, 0, sizeof(reset));
    reset.sa_handler = SIG_DFL;
    WriteProgramAction(reset);
  }
  sigset_t mask = program.sa_mask;
  if (context != nullptr) {
    const sigset_t& interrupted = static_cast<ucontext_t*>(context)->uc_sigmask;
    sigorset(&mask, &mask, &interrupted);
  }
  if ((program.sa_flags & SA_NODEFER) == 0) sigaddset(&mask, signal_number);
  SetThreadMask(SIG_SETMASK, &mask, nullptr);
  if (has_info) {
    program.sa_sigaction(signal_number, info, context);
  } else {
    program.sa_handler(signal_number);
  }
  // Returning restores the interrupted mask (sigreturn); a handler that longjmps out keeps
  // the mask it ran with, as without us.
}

void RunSamplingCallback(const siginfo_t& info, void* context) {
  // Fail safe on a thread with little stack left: the walk would run into the guard page.
  const uintptr_t low = t_stack_low;
  if (low != 0) {
    const uintptr_t sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    if (sp < low || sp >= t_stack_high || sp - low < kSamplingHandlerStackNeed) {
      g_samples_skipped_low_stack.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  // seq_cst pairs with WaitForCallbacksOfPreviousEpoch: either the waiter sees this increment,
  // or the callback loaded below is the one stored before the epoch was flipped (or later).
  std::atomic<int>& running =
      g_callbacks_running[g_callback_epoch.load(std::memory_order_seq_cst) & 1];
  running.fetch_add(1, std::memory_order_seq_cst);
  const SamplingCallback callback = g_callback.load(std::memory_order_seq_cst);
  void* const thread_context = t_thread_context.load(std::memory_order_relaxed);
  if (callback != nullptr && thread_context != nullptr) {
    callback(thread_context, static_cast<ucontext_t*>(context),
             ThreadSamplingTimer::Overruns(info));
  }
  // The last handler of a slot wakes a waiter (only while one waits: a retirement, a few per
  // session). FUTEX_WAKE on a static word neither blocks, faults nor allocates, and a raw
  // syscall() is not a cancellation point; errno is restored by our caller.
  if (running.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
      g_callback_waiters.load(std::memory_order_seq_cst) != 0) {
    syscall(SYS_futex, reinterpret_cast<int*>(&running), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
            nullptr, 0);
  }
}

// A timer's signal, or an overflow of this thread's own perf event. Runs in the handler: it
// reads the siginfo and two relaxed atomics the thread registered (initial-exec TLS, set
// outside signal context), so it cannot block, allocate, fault or be a cancellation point,
// and it makes no system call (a descriptor number is compared, never used).
bool IsSamplingSignal(const siginfo_t& info) {
  if (ThreadSamplingTimer::IsSamplingTimerSignal(info)) return true;
  const SamplingEventDescriptors* descriptors =
      t_event_descriptors.load(std::memory_order_relaxed);
  return descriptors != nullptr && PerfTaskClockEvent::IsEventSignal(info, *descriptors);
}

void SamplingSignalHandler(int signal_number, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  if (info != nullptr && IsSamplingSignal(*info)) {
    t_sampling_signals_taken.store(t_sampling_signals_taken.load(std::memory_order_relaxed) + 1,
                                   std::memory_order_relaxed);
    ++t_in_handler;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    RunSamplingCallback(*info, context);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    --t_in_handler;
  } else {
    // Not inside t_in_handler: the program's handler is the program's (its calls are served as
    // the program's), and it may longjmp out.
    ChainToProgramAction(signal_number, info, context);
  }
  errno = saved_errno;
}
// ---- End of signal handler. ----

// Every signal, glibc's internal ones too: sigfillset leaves out SIGCANCEL (32) and SIGSETXID
// (33), and sigaddset refuses them, so their bits are set by hand. Blocked while the handler
// runs, asynchronous cancellation and setxid broadcasts wait until it returns (a few
// microseconds); nothing can interrupt a callback.
void FillEverySignal(sigset_t* set) {
  sigfillset(set);
  for (int internal = 32; internal < SIGRTMIN; ++internal) {
    const int bit = internal - 1;
    constexpr int kBitsPerWord = 8 * sizeof(unsigned long);
    set->__val[bit / kBitsPerWord] |= 1UL << (bit % kBitsPerWord);
  }
}

int64_t MonotonicNs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec * int64_t{1000000000} + now.tv_nsec;
}

// Sleeps until `running` reads 0 or the deadline passes; returns whether it read 0. Woken by
// the handler that empties it (g_callback_waiters), so it takes no CPU while it waits.
bool WaitForSlotToDrain(std::atomic<int>& running, int64_t deadline_ns) {
  if (running.load(std::memory_order_seq_cst) == 0) return true;
  g_callback_waiters.fetch_add(1, std::memory_order_seq_cst);
  bool drained = false;
  while (true) {
    const int count = running.load(std::memory_order_seq_cst);
    if (count == 0) {
      drained = true;
      break;
    }
    const int64_t left_ns = deadline_ns - MonotonicNs();
    if (left_ns <= 0) break;
    const timespec timeout{static_cast<time_t>(left_ns / 1000000000),
                           static_cast<long>(left_ns % 1000000000)};
    // Returns at a wake, a change of the count (EAGAIN), a signal of the program's (EINTR:
    // only this internal wait is cut short, and it waits again) or the timeout.
    syscall(SYS_futex, reinterpret_cast<int*>(&running), FUTEX_WAIT_PRIVATE, count, &timeout,
            nullptr, 0);
  }
  g_callback_waiters.fetch_sub(1, std::memory_order_seq_cst);
  return drained;
}

// Waits until no handler runs a callback it may have loaded before the caller's last change
// of g_callback. Flips the epoch and sleeps until the previous epoch's slot is empty: handlers
// that begin after the flip count in the other slot and load the new callback, so the wait
// lasts as long as the handlers already under way, however many threads are sampled. No
// polling: a polling loop here (sched_yield, then 1 ms sleeps) was seen to stretch detaches
// under load to 100-550 ms. The slot that new handlers will use is drained first: it can
// still hold a handler counted under an older epoch (one that read the epoch just before a
// flip, or one a timed-out wait left behind), and that handler may run an old callback.
// Bounded at about a second in all; false if a handler may still run the old callback then.
// Not signal-safe. Callers are serialized (Install/Uninstall's contract, the session mutex).
bool WaitForCallbacksOfPreviousEpoch() {
  const int64_t deadline_ns = MonotonicNs() + 1000000000;
  const uint32_t epoch = g_callback_epoch.load(std::memory_order_seq_cst);
  if (!WaitForSlotToDrain(g_callbacks_running[(epoch + 1) & 1], deadline_ns)) return false;
  g_callback_epoch.store(epoch + 1, std::memory_order_seq_cst);
  return WaitForSlotToDrain(g_callbacks_running[epoch & 1], deadline_ns);
}

}  // namespace

bool IsAllowedSamplingSignal(int signal_number) {
  return signal_number == SIGPROF || signal_number == SIGVTALRM || signal_number == SIGUSR1 ||
         signal_number == SIGUSR2 || (signal_number >= SIGRTMIN && signal_number <= SIGRTMAX);
}

int ChooseSamplingSignal() {
  const SigactionFunction real = RealSigaction();
  sigset_t blocked;
  sigemptyset(&blocked);
  SetThreadMask(SIG_BLOCK, nullptr, &blocked);
  // A thread that blocks every real-time signal (a profiler thread starting a session, the
  // program's sigfillset pattern) says nothing about any one of them: its mask is ignored.
  bool blocks_every_realtime_signal = true;
  for (int candidate = SIGRTMIN; candidate <= SIGRTMAX; ++candidate) {
    if (sigismember(&blocked, candidate) != 1) blocks_every_realtime_signal = false;
  }
  if (blocks_every_realtime_signal) sigemptyset(&blocked);
  for (int candidate = SIGRTMAX; candidate >= SIGRTMIN + kLowestChoosableRealtimeOffset;
       --candidate) {
    struct sigaction current;
    if (real(candidate, nullptr, &current) != 0) continue;
    if ((current.sa_flags & SA_SIGINFO) != 0 || current.sa_handler != SIG_DFL) continue;
    if (sigismember(&blocked, candidate)) continue;
    return candidate;
  }
  return 0;
}

int InstallSamplingSignalHandler(int signal_number, SamplingCallback callback) {
  if (callback == nullptr || !IsAllowedSamplingSignal(signal_number)) return EINVAL;
  const SigactionFunction real = RealSigaction();
  int expected = 0;
  if (!g_installed_signal.compare_exchange_strong(expected, signal_number)) {
    // An earlier Uninstall gave up and left our handler (and the program's action) in place.
    if (expected == signal_number && g_uninstall_abandoned.exchange(false)) {
      g_callback.store(callback, std::memory_order_seq_cst);
      return 0;
    }
    return EBUSY;
  }
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_sigaction = &SamplingSignalHandler;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  FillEverySignal(&action.sa_mask);
  // The program's action is recorded before our handler can run; the interposers record every
  // later change (g_installed_signal is already set).
  struct sigaction previous;
  if (real(signal_number, nullptr, &previous) != 0) {
    const int error = errno;
    g_installed_signal.store(0);
    return error;
  }
  if (!IsOurHandler(previous)) WriteProgramAction(previous);
  g_callback.store(callback, std::memory_order_seq_cst);
  struct sigaction replaced;
  if (real(signal_number, &action, &replaced) != 0) {
    const int error = errno;
    g_callback.store(nullptr);
    g_installed_signal.store(0);
    return error;
  }
  // Changed by a raw system call between the two calls: that is the program's action too.
  if (!IsOurHandler(replaced) && std::memcmp(&replaced, &previous, sizeof(replaced)) != 0) {
    WriteProgramAction(replaced);
  }
  return 0;
}

int UninstallSamplingSignalHandler() {
  const int signal_number = g_installed_signal.load();
  if (signal_number == 0) return 0;
  g_callback.store(nullptr, std::memory_order_seq_cst);
  // A handler that loaded the callback before the store above may still be running it.
  if (!WaitForCallbacksOfPreviousEpoch()) {
    g_uninstall_abandoned.store(true);
    return ETIMEDOUT;
  }
  const SigactionFunction real = RealSigaction();
  g_installed_signal.store(0);  // From here the interposers forward the program's calls.
  struct sigaction program;
  ReadProgramAction(&program);
  int result = 0;
  struct sigaction current;
  if (real(signal_number, nullptr, &current) != 0) {
    result = errno;
  } else if (IsOurHandler(current)) {
    // Instances still queued for a thread that has not run since its event or timer was
    // closed would reach the program's action. When that action is SIG_DFL (terminate the
    // process), setting SIG_IGN first discards every pending instance of the signal,
    // process-wide and per thread (POSIX; the kernel flushes them in sigaction), whatever the
    // scheduler does; nothing of ours can queue a new one now. An instance the program sent
    // itself and left pending would have killed it: discarding it changes nothing it could
    // rely on. With a handler of the program's, nothing is discarded (its own pending signals
    // are its data): a late instance of ours reaches that handler, as it could during the
    // session. SIG_IGN discards them by itself.
    const bool has_handler = (program.sa_flags & SA_SIGINFO) != 0 ||
                             (program.sa_handler != SIG_DFL && program.sa_handler != SIG_IGN);
    if (!has_handler && program.sa_handler == SIG_DFL) {
      struct sigaction ignore;
      std::memset(&ignore, 0, sizeof(ignore));
      ignore.sa_handler = SIG_IGN;
      (void)real(signal_number, &ignore, nullptr);
    }
    if (real(signal_number, &program, nullptr) != 0) result = errno;
  }
  return result;
}

SamplingCallback ReplaceSamplingCallback(SamplingCallback callback) {
  if (callback == nullptr || g_installed_signal.load() == 0) return nullptr;
  const SamplingCallback previous = g_callback.exchange(callback, std::memory_order_seq_cst);
  // Handlers that loaded the previous callback before the exchange may still be running it;
  // once they are done, it is never called again.
  if (!WaitForCallbacksOfPreviousEpoch()) return nullptr;
  return previous;
}

SamplingCallback ExchangeSamplingCallback(SamplingCallback callback) {
  if (callback == nullptr || g_installed_signal.load() == 0) return nullptr;
  return g_callback.exchange(callback, std::memory_order_seq_cst);
}

int InstalledSamplingSignal() { return g_installed_signal.load(std::memory_order_relaxed); }

bool SamplingHandlerInstalled() {
  const int signal_number = g_installed_signal.load();
  if (signal_number == 0) return false;
  struct sigaction current;
  if (RealSigaction()(signal_number, nullptr, &current) != 0) return true;  // Unknown: assume.
  return IsOurHandler(current);
}

bool RecordProgramAction(int signal_number, const struct sigaction* action,
                         struct sigaction* old_action) {
  if (signal_number == 0 || signal_number != g_installed_signal.load(std::memory_order_acquire)) {
    return false;
  }
  if (old_action != nullptr) ReadProgramAction(old_action);
  if (action != nullptr) WriteProgramAction(*action);
  return true;
}

bool IsInSamplingHandler() { return t_in_handler > 0; }

int OwnSigaction(int signal_number, const struct sigaction* action,
                 struct sigaction* old_action) {
  return RealSigaction()(signal_number, action, old_action);
}

#if STRATA_TSAN_BUILD
bool InOwnSigactionCall() { return t_own_sigaction_calls > 0; }
#endif

void BlockSamplingSignalOnCurrentThread() {
  const int signal_number = g_installed_signal.load();
  if (signal_number == 0) return;
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, signal_number);
  SetThreadMask(SIG_BLOCK, &block, nullptr);
}

void SetSamplingThreadContext(void* thread_context) {
  t_thread_context.store(thread_context, std::memory_order_relaxed);
  // Orders the store with the timer calls that follow it in program order, as seen by this
  // thread's own handler.
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

void SetSamplingThreadEventDescriptors(const SamplingEventDescriptors* descriptors) {
  t_event_descriptors.store(descriptors, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

void* GetSamplingThreadContext() { return t_thread_context.load(std::memory_order_relaxed); }

void SetSamplingThreadStackBounds(uintptr_t low, uintptr_t high) {
  t_stack_low = 0;  // Never a low limit with a stale high one, as seen by the handler.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_stack_high = high;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_stack_low = low;
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

uint64_t StrayNotificationsDropped() {
  return g_stray_notifications_dropped.load(std::memory_order_relaxed);
}

uint64_t SamplingSignalsTakenOnCurrentThread() {
  return t_sampling_signals_taken.load(std::memory_order_relaxed);
}

uint64_t SamplesSkippedForLowStack() {
  return g_samples_skipped_low_stack.load(std::memory_order_relaxed);
}

}  // namespace strata
