#include "platform/sampling/sampling_signal.h"

#include <dlfcn.h>
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstddef>
#include <cstring>

#include "platform/next_definition.h"
#include "platform/sampling/held_sampling_signals.h"
#include "platform/raw_syscall.h"
#include "platform/sampling/libunwind_imports.h"
#include "platform/sampling/thread_sampling_timer.h"
#include "platform/time_stamp.h"

// Code that runs once per session or only for the program's own instances of the signal:
// optimised for size, out of the hot text (the library's size goal: .bazelrc, "-Os").
#define STRATA_COLD __attribute__((cold))

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
// The sa_restorer of our installed action (libc's signal return trampoline), which the
// kernel makes the entry's return address (InstallSamplingSignalHandler).
std::atomic<void*> g_kernel_restorer{nullptr};
// Uninstall gave up waiting for a callback: our handler is still the kernel disposition.
std::atomic<bool> g_uninstall_abandoned{false};
std::atomic<uint64_t> g_samples_skipped_low_stack[static_cast<int>(LowStack::kCount)] = {};
// The main thread's stack (SetSamplingMainStackLimits); 0 while unknown.
std::atomic<uintptr_t> g_main_stack_floor{0};
std::atomic<uintptr_t> g_main_stack_top{0};
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
// Nesting depth of our handler's own work on this thread (not of a program's chained handler).
__attribute__((tls_model("initial-exec"))) thread_local int t_in_handler = 0;
// Sampling signals taken on this thread (SamplingSignalsTakenOnCurrentThread). Written only by
// this thread's handler, which no signal interrupts (every signal is blocked in it), and read
// by the thread itself: a relaxed load and store, no read-modify-write needed. In the handler
// it is an initial-exec TLS access (%fs-relative): no call, lock, allocation or fault.
__attribute__((tls_model("initial-exec"))) thread_local std::atomic<uint64_t>
    t_sampling_signals_taken{0};

void SamplingSignalHandler(int signal_number, siginfo_t* info, void* context, bool from_kernel);

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

}  // namespace

// The handler the kernel calls (the assembly stub below), and what it jumps to and counts.
extern "C" {
__attribute__((visibility("hidden"))) void strata_sampling_signal_entry(int, siginfo_t*, void*);
__attribute__((visibility("hidden"))) void strata_sampling_signal_handler(int signal_number,
                                                                          siginfo_t* info,
                                                                          void* context) {
  // The entry jumped here: the return address is its caller's, the kernel's trampoline when
  // the kernel delivered the signal.
  const bool from_kernel =
      __builtin_return_address(0) == g_kernel_restorer.load(std::memory_order_relaxed);
  SamplingSignalHandler(signal_number, info, context, from_kernel);
}
// Skips counted by the assembly entry: on the program's alternate stack, on the thread's own.
__attribute__((visibility("hidden"))) uint64_t strata_samples_skipped_at_entry = 0;
// Instances of the sampling signal the entry found on the program's alternate stack
// (SamplingSignalsOnAlternateStack), skipped or not.
__attribute__((visibility("hidden"))) uint64_t strata_sampling_signals_on_alternate_stack = 0;
__attribute__((visibility("hidden"))) uint64_t strata_samples_skipped_at_entry_thread = 0;
__attribute__((visibility("hidden"))) uint64_t strata_samples_skipped_at_entry_main = 0;
// The main stack's end and the lowest address it can grow to whatever the limit
// (SetSamplingMainStackLimits), for the entry; 0: unknown. The entry reads the limit into the
// thread's scratch (a raw prlimit64: it has no stack to put it on).
__attribute__((visibility("hidden"))) uintptr_t strata_main_stack_top = 0;
__attribute__((visibility("hidden"))) uintptr_t strata_main_stack_reach_low = 0;
// Words 0-1: the limit (struct rlimit); 2-4: the handler's three arguments across the system
// call (thread-local memory, so that the entry touches no callee-saved register: see below).
__attribute__((visibility("hidden"), tls_model("initial-exec"))) __thread uint64_t
    strata_t_rlimit_scratch[5] = {0, 0, 0, 0, 0};
// The calling thread's stack bounds (SetSamplingThreadStackBounds), read by the handler and
// by the assembly entry (initial-exec: %fs-relative, no call, no allocation).
__attribute__((visibility("hidden"), tls_model("initial-exec"))) __thread uintptr_t
    strata_t_stack_low = 0;
__attribute__((visibility("hidden"), tls_model("initial-exec"))) __thread uintptr_t
    strata_t_stack_high = 0;
}

namespace {

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
  return (action.sa_flags & SA_SIGINFO) != 0 &&
         (action.sa_sigaction == &strata_sampling_signal_entry ||
          action.sa_sigaction == &strata_sampling_signal_handler);
}

// The thread's signal mask through the system call: not interposed, and it may name glibc's
// internal signals. Async-signal-safe (errno is saved by the handler).
void SetThreadMask(int how, const sigset_t* set, sigset_t* old) {
  RawSyscall(SYS_rt_sigprocmask, how, reinterpret_cast<long>(set), reinterpret_cast<long>(old),
             _NSIG / 8);
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

STRATA_COLD void TakeDefaultAction(int signal_number) {
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
STRATA_COLD void ChainToProgramAction(int signal_number, siginfo_t* info, void* context) {
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

// Room below `sp` on [base, ...): at least kSamplingHandlerStackNeed bytes?
bool RoomAbove(uintptr_t base, uintptr_t sp) {
  return sp >= base && sp - base >= kSamplingHandlerStackNeed;
}

// -1 when the handler, whose frame is at `sp`, has kSamplingHandlerStackNeed bytes below it;
// else why not (a LowStack). Raw system calls only (errno untouched; no vDSO, no interposable
// symbol): prlimit64 on the main stack, sigaltstack when off every known stack.
int LowStackAt(uintptr_t sp) {
  const uintptr_t low = strata_t_stack_low;
  if (low != 0 && sp >= low && sp < strata_t_stack_high) {
    return RoomAbove(low, sp) ? -1 : static_cast<int>(LowStack::kThreadStack);
  }
  const uintptr_t main_top = g_main_stack_top.load(std::memory_order_relaxed);
  const uintptr_t main_floor = g_main_stack_floor.load(std::memory_order_relaxed);
  if (main_top != 0 && sp >= main_floor && sp < main_top) {
    uintptr_t floor = main_floor;
    struct rlimit limit;  // The kernel's struct rlimit64 (two 64-bit words) on x86-64.
    if (RawSyscall(SYS_prlimit64, 0, RLIMIT_STACK, 0, reinterpret_cast<long>(&limit)) == 0 &&
        limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < main_top - main_floor) {
      floor = std::max<uintptr_t>(floor, main_top - limit.rlim_cur);
    }
    return RoomAbove(floor, sp) ? -1 : static_cast<int>(LowStack::kMainStack);
  }
  stack_t alternate;
  if (RawSyscall(SYS_sigaltstack, 0, reinterpret_cast<long>(&alternate)) == 0 &&
      (alternate.ss_flags & SS_ONSTACK) != 0) {
    return RoomAbove(reinterpret_cast<uintptr_t>(alternate.ss_sp), sp)
               ? -1
               : static_cast<int>(LowStack::kAlternateStack);
  }
  // A thread whose stack is known, running on another one (a coroutine's, say): room unknown.
  // A thread without known bounds (they could not be read) is not checked, as before.
  if (low != 0) return static_cast<int>(LowStack::kUnknownStack);
  if (main_top != 0 && RawSyscall(SYS_gettid) == RawSyscall(SYS_getpid)) {
    return static_cast<int>(LowStack::kUnknownStack);  // The main thread, off its stack.
  }
  return -1;
}

void RunSamplingCallback(const siginfo_t& info, void* context, bool from_kernel) {
  // Before any work: enough stack below this frame for the callback (sampling_signal.h)?
  const int low_stack = LowStackAt(reinterpret_cast<uintptr_t>(__builtin_frame_address(0)));
  if (low_stack >= 0) {
    g_samples_skipped_low_stack[low_stack].fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // seq_cst pairs with WaitForCallbacksOfPreviousEpoch: either the waiter sees this increment,
  // or the callback loaded below is the one stored before the epoch was flipped (or later).
  std::atomic<int>& running =
      g_callbacks_running[g_callback_epoch.load(std::memory_order_seq_cst) & 1];
  running.fetch_add(1, std::memory_order_seq_cst);
  const SamplingCallback callback = g_callback.load(std::memory_order_seq_cst);
  // Acquire: an adopted thread's context is stored by another thread (attach's worker,
  // SetSamplingStateOfOtherThread), in memory that thread wrote; a plain load on x86-64.
  void* const thread_context = t_thread_context.load(std::memory_order_acquire);
  if (callback != nullptr && thread_context != nullptr) {
    // Delivered by the kernel, the handler runs with its sa_mask, every signal
    // (FillEverySignal): libunwind's own blocking around its lock, two system calls a
    // frame, is skipped (libunwind_imports.h). Not when another runtime called the entry as a
    // function from a handler of its own (TSan's deferred delivery, a signal-chaining
    // runtime), with a mask of its choosing.
    ScopedEverySignalBlocked every_signal_blocked(from_kernel);
    callback(thread_context, static_cast<ucontext_t*>(context),
             ThreadSamplingTimer::Overruns(info));
  }
  // The last handler of a slot wakes a waiter (only while one waits: a retirement, a few per
  // session). FUTEX_WAKE on a static word neither blocks, faults nor allocates, and a raw
  // syscall() is not a cancellation point; errno is restored by our caller.
  if (running.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
      g_callback_waiters.load(std::memory_order_seq_cst) != 0) {
    RawSyscall(SYS_futex, reinterpret_cast<long>(&running), FUTEX_WAKE_PRIVATE, INT_MAX);
  }
}

// A timer's signal, or an overflow of this thread's own perf event. Runs in the handler: it
// reads the siginfo and atomics the thread registered (initial-exec TLS, set outside signal
// context), so it cannot block, allocate, fault or be a cancellation point,
// and it makes no system call (a descriptor number is compared, never used).
bool IsSamplingSignal(const siginfo_t& info) {
  if (ThreadSamplingTimer::IsSamplingTimerSignal(info)) return true;
  // Acquire, as the thread context in RunSamplingCallback: set by another thread for an
  // adopted one (TSan: a race report on the descriptors of a thread adopted by attach).
  const SamplingEventDescriptors* descriptors =
      t_event_descriptors.load(std::memory_order_acquire);
  return descriptors != nullptr && PerfTaskClockEvent::IsEventSignal(info, *descriptors);
}

// A late notification of one of our own closed perf events or timers that no thread names
// any more (see ChainToProgramAction): one the program's action, SIG_DFL, would turn into a
// termination. The program's own descriptor or timer notifications on S (a handler of its
// own) are not strays.
bool IsStrayNotification(const siginfo_t& info) {
  if (!((info.si_code >= POLL_IN && info.si_code <= POLL_HUP) || info.si_code == SI_TIMER)) {
    return false;
  }
  struct sigaction program;
  ReadProgramAction(&program);
  return (program.sa_flags & SA_SIGINFO) == 0 && program.sa_handler == SIG_DFL;
}

// Whether the program's action for S is SIG_DFL (terminate the process).
bool ProgramActionIsDefault() {
  struct sigaction program;
  ReadProgramAction(&program);
  return (program.sa_flags & SA_SIGINFO) == 0 && program.sa_handler == SIG_DFL;
}

void SamplingSignalHandler(int signal_number, siginfo_t* info, void* context, bool from_kernel) {
  const int saved_errno = errno;
  if (info != nullptr && IsSamplingSignal(*info)) {
    t_sampling_signals_taken.store(t_sampling_signals_taken.load(std::memory_order_relaxed) + 1,
                                   std::memory_order_relaxed);
    ++t_in_handler;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    RunSamplingCallback(*info, context, from_kernel);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    --t_in_handler;
  } else if (info != nullptr && !IsStrayNotification(*info) &&
             (ProgramBlocksSamplingSignalNow() ||
              (!ProgramSamplingSignalViewKnown() && ProgramActionIsDefault()))) {
    // A foreign instance on a thread where the program blocks S: plain, it would stay pending
    // for the program's wait or its unblock (held_sampling_signals.h). The rule: a foreign S
    // reaches a SIG_DFL action only on a thread whose view is known to leave S unblocked (then
    // the program dies as plain). On a thread whose view is not known (a thread not seen), the
    // program may block S there: held too, so handed to a thread that takes it (a waiter, an
    // acceptor, where SIG_DFL is the plain outcome) or kept for a wait or an unblock.
    HoldForeignSamplingSignal(signal_number, *info);
  } else {
    // Not inside t_in_handler: the program's handler is the program's (its calls are served as
    // the program's), and it may longjmp out.
    ChainToProgramAction(signal_number, info, context);
  }
  errno = saved_errno;
}
// ---- End of signal handler. ----

// The entry the kernel calls: a check that uses no stack at all, before any C++ frame. When
// the signal frame lies on the program's alternate signal stack (inside the kernel's saved
// uc_stack, [ss_sp, ss_sp + ss_size]: its ss_flags are the configured ones, not SS_ONSTACK),
// or else on the thread's own stack (strata_t_stack_low/high), or on the main stack (against
// max(the reach below it, its end - the soft RLIMIT_STACK read here by a raw prlimit64 into
// a thread-local scratch)), and fewer than
// kSamplingHandlerStackNeed bytes remain between the kernel's frame and that stack's base, a
// notification of a timer or a descriptor (si_code SI_TIMER or POLL_IN..POLL_HUP: our
// sampling sources) is skipped and counted right here, and `ret` goes to the kernel's
// sigreturn. Even the smallest C++ prologue there wrote below the stack: 48 heap bytes of the
// program's below a 7 KiB alternate stack (issue 33), or into a thread's guard page (a thread
// 3.4-3.9 KiB above its guard page: SIGSEGV, as the kernel's frame alone still fit).
// On the alternate stack, skipped or not, the thread was running there: in a handler of the
// program's whose kernel mask lacks S (one installed by a raw rt_sigaction system call, which
// no wrapper saw: signal_interposers.h). S is added to the interrupted mask (uc_sigmask,
// which sigreturn restores), so S stays blocked until that handler returns, as if its
// sa_mask named S -- no further sample lands below it -- and the instance is counted
// (SamplingSignalsOnAlternateStack: the sampler then adds S to that handler's sa_mask).
// Everything else jumps to the handler, whose own checks (LowStackAt: the main stack, the
// unknown ones) then run. It writes no memory below the stack pointer (the ucontext and
// siginfo lie above it) and changes only the registers a called function may change (rax,
// rcx, rdx, rsi, rdi, r8-r11; the handler's three arguments are put back before the jump),
// never a callee-saved one (rbx, rbp, r12-r15): the kernel would restore those at sigreturn,
// but the entry is also called as a plain function -- by ThreadSanitizer's deferred delivery
// (CallUserSignalHandler, from ProcessPendingSignals at an interceptor's exit), or by a
// runtime that forwards signals to the handler it found with a raw rt_sigaction -- and its
// caller then relies on them (r12-r15 kept the arguments across the system call once: TSan's
// caller crashed on its clobbered ThreadState pointer in every preloaded exit save). The
// arguments stay in the thread's scratch instead, which only this thread's entry touches, and
// no signal interrupts it (the handler's mask blocks every signal).
static_assert(offsetof(ucontext_t, uc_stack) + offsetof(stack_t, ss_sp) == 16, "ss_sp");
static_assert(offsetof(ucontext_t, uc_stack) + offsetof(stack_t, ss_size) == 32, "ss_size");
static_assert(offsetof(siginfo_t, si_code) == 8, "si_code");
static_assert(offsetof(ucontext_t, uc_sigmask) == 296, "uc_sigmask");
static_assert(SI_TIMER == -2 && POLL_IN == 1 && POLL_HUP == 6, "constants");
static_assert(kSamplingHandlerStackNeed == 6144, "the stub's constant below");
static_assert(SYS_prlimit64 == 302 && RLIMIT_STACK == 3 && sizeof(struct rlimit) == 16,
              "the stub's prlimit64 call");
__asm__(R"(
  .text
  .p2align 4
  .type strata_sampling_signal_entry, @function
strata_sampling_signal_entry:
  .cfi_startproc
  testq %rsi, %rsi
  jz 9f
  testq %rdx, %rdx
  jz 2f
  movq %rsp, %rcx
  subq 16(%rdx), %rcx
  cmpq 32(%rdx), %rcx
  ja 2f
  leal -1(%rdi), %eax
  cmpl $63, %eax
  ja 8f
  btsq %rax, 296(%rdx)
8:
  lock incq strata_sampling_signals_on_alternate_stack(%rip)
  cmpq $6144, %rcx
  jae 9f
  movl 8(%rsi), %ecx
  cmpl $-2, %ecx
  je 1f
  subl $1, %ecx
  cmpl $5, %ecx
  ja 9f
1:
  lock incq strata_samples_skipped_at_entry(%rip)
  ret
2:
  movq strata_t_stack_low@gottpoff(%rip), %rcx
  movq %fs:(%rcx), %rax
  testq %rax, %rax
  jz 4f
  cmpq %rax, %rsp
  jb 9f
  movq strata_t_stack_high@gottpoff(%rip), %rcx
  cmpq %fs:(%rcx), %rsp
  jae 9f
  addq $6144, %rax
  cmpq %rax, %rsp
  jae 9f
  movl 8(%rsi), %ecx
  cmpl $-2, %ecx
  je 3f
  subl $1, %ecx
  cmpl $5, %ecx
  ja 9f
3:
  lock incq strata_samples_skipped_at_entry_thread(%rip)
  ret
4:
  movq strata_main_stack_top(%rip), %rax
  testq %rax, %rax
  jz 9f
  cmpq %rax, %rsp
  jae 9f
  movq strata_main_stack_reach_low(%rip), %r8
  cmpq %r8, %rsp
  jb 9f
  movq strata_t_rlimit_scratch@gottpoff(%rip), %r10
  addq %fs:0, %r10
  movq %rdi, 16(%r10)
  movq %rsi, 24(%r10)
  movq %rdx, 32(%r10)
  movl $302, %eax
  xorl %edi, %edi
  movl $3, %esi
  xorl %edx, %edx
  syscall
  movq 16(%r10), %rdi
  movq 24(%r10), %rsi
  movq 32(%r10), %rdx
  testq %rax, %rax
  jnz 9f
  movq (%r10), %rcx
  movq strata_main_stack_top(%rip), %rax
  movq %rax, %r9
  subq %r8, %r9
  cmpq %r9, %rcx
  jae 6f
  subq %rcx, %rax
  cmpq %r8, %rax
  jb 6f
  movq %rax, %r8
6:
  cmpq %r8, %rsp
  jb 7f
  addq $6144, %r8
  cmpq %r8, %rsp
  jae 9f
7:
  movl 8(%rsi), %ecx
  cmpl $-2, %ecx
  je 5f
  subl $1, %ecx
  cmpl $5, %ecx
  ja 9f
5:
  lock incq strata_samples_skipped_at_entry_main(%rip)
  ret
9:
  jmp strata_sampling_signal_handler
  .cfi_endproc
  .size strata_sampling_signal_entry, .-strata_sampling_signal_entry
)");


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

STRATA_COLD int64_t MonotonicNs() {
  timespec now{};
  ReadClock(CLOCK_MONOTONIC, &now);  // May run on a program thread (an exit save).
  return now.tv_sec * int64_t{1000000000} + now.tv_nsec;
}

// Sleeps until `running` reads 0 or the deadline passes; returns whether it read 0. Woken by
// the handler that empties it (g_callback_waiters), so it takes no CPU while it waits.
STRATA_COLD bool WaitForSlotToDrain(std::atomic<int>& running, int64_t deadline_ns) {
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
STRATA_COLD bool WaitForCallbacksOfPreviousEpoch() {
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

STRATA_COLD int ChooseSamplingSignal() {
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

STRATA_COLD int InstallSamplingSignalHandler(int signal_number, SamplingCallback callback) {
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
  action.sa_sigaction = &strata_sampling_signal_entry;
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
  // The return address the kernel gives the entry (libc's signal return trampoline): the
  // handler tells a delivery by the kernel, whose mask is the full sa_mask, from a call of
  // the entry as a function by another runtime (RunSamplingCallback).
  struct sigaction installed;
  if (real(signal_number, nullptr, &installed) == 0) {
    g_kernel_restorer.store(reinterpret_cast<void*>(installed.sa_restorer),
                            std::memory_order_relaxed);
  }
  return 0;
}

STRATA_COLD int UninstallSamplingSignalHandler() {
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

bool IsStrataSamplingSignal(const siginfo_t& info) {
  return IsSamplingSignal(info) || IsStrayNotification(info);
}

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

uintptr_t ThreadLocalAddressInThread(const void* local_tls_address, uintptr_t thread_pointer) {
  uintptr_t own_pointer;
  __asm__("mov %%fs:0, %0" : "=r"(own_pointer));
  return thread_pointer + (reinterpret_cast<uintptr_t>(local_tls_address) - own_pointer);
}

void SetSamplingStateOfOtherThread(uintptr_t thread_pointer, void* thread_context,
                                   const SamplingEventDescriptors* descriptors, uintptr_t low,
                                   uintptr_t high) {
  auto in_thread = [thread_pointer](auto* local) {
    return reinterpret_cast<decltype(local)>(ThreadLocalAddressInThread(local, thread_pointer));
  };
  __atomic_store_n(in_thread(&strata_t_stack_low), 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(in_thread(&strata_t_stack_high), high, __ATOMIC_SEQ_CST);
  __atomic_store_n(in_thread(&strata_t_stack_low), low, __ATOMIC_SEQ_CST);
  in_thread(&t_event_descriptors)->store(descriptors, std::memory_order_seq_cst);
  in_thread(&t_thread_context)->store(thread_context, std::memory_order_seq_cst);
}

void* GetSamplingThreadContext() { return t_thread_context.load(std::memory_order_relaxed); }

void SetSamplingThreadStackBounds(uintptr_t low, uintptr_t high) {
  strata_t_stack_low = 0;  // Never a low limit with a stale high one, as seen by the handler.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  strata_t_stack_high = high;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  strata_t_stack_low = low;
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

uint64_t StrayNotificationsDropped() {
  return g_stray_notifications_dropped.load(std::memory_order_relaxed);
}

uint64_t SamplingSignalsTakenOnCurrentThread() {
  return t_sampling_signals_taken.load(std::memory_order_relaxed);
}

void SetSamplingMainStackLimits(uintptr_t floor, uintptr_t top) {
  g_main_stack_top.store(0, std::memory_order_relaxed);  // Never a new floor with an old top.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  g_main_stack_floor.store(floor, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  g_main_stack_top.store(top, std::memory_order_relaxed);
  // The entry's copies (it reads the limit itself).
  __atomic_store_n(&strata_main_stack_top, 0, __ATOMIC_RELAXED);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  __atomic_store_n(&strata_main_stack_reach_low, floor, __ATOMIC_RELAXED);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  __atomic_store_n(&strata_main_stack_top, top, __ATOMIC_RELAXED);
}

uint64_t SamplingSignalsOnAlternateStack() {
  return __atomic_load_n(&strata_sampling_signals_on_alternate_stack, __ATOMIC_RELAXED);
}

uint64_t SamplesSkippedForLowStack() {
  uint64_t total = __atomic_load_n(&strata_samples_skipped_at_entry, __ATOMIC_RELAXED) +
                   __atomic_load_n(&strata_samples_skipped_at_entry_thread, __ATOMIC_RELAXED) +
                   __atomic_load_n(&strata_samples_skipped_at_entry_main, __ATOMIC_RELAXED);
  for (const auto& count : g_samples_skipped_low_stack) {
    total += count.load(std::memory_order_relaxed);
  }
  return total;
}

uint64_t SamplesSkippedForLowStack(LowStack reason) {
  const int index = static_cast<int>(reason);
  if (index < 0 || index >= static_cast<int>(LowStack::kCount)) return 0;
  const uint64_t at_entry =
      reason == LowStack::kAlternateStack
          ? __atomic_load_n(&strata_samples_skipped_at_entry, __ATOMIC_RELAXED)
          : reason == LowStack::kThreadStack
                ? __atomic_load_n(&strata_samples_skipped_at_entry_thread, __ATOMIC_RELAXED)
          : reason == LowStack::kMainStack
                ? __atomic_load_n(&strata_samples_skipped_at_entry_main, __ATOMIC_RELAXED)
                : 0;
  return at_entry + g_samples_skipped_low_stack[index].load(std::memory_order_relaxed);
}

}  // namespace strata
