// The process-wide handler of the sampling signal: it runs a registered callback, with the
// interrupted thread's context, for every signal that a ThreadSamplingTimer sends, and passes
// every other instance of the signal on to the disposition the program wants for it.
//
// Which signal, and why (docs/sampling.md, "The signal and the handler"):
//   - A real-time signal that nobody uses, chosen at start: ChooseSamplingSignal() returns
//     the highest of SIGRTMIN+kLowestChoosableRealtimeOffset..SIGRTMAX whose disposition is
//     SIG_DFL and that the calling thread does not block (a caller may impose one instead,
//     e.g. from STRATA_SAMPLING_SIGNAL). SIGPROF, the traditional choice, is the program's own:
//     programs use it with ITIMER_PROF, signalfd, or in cleanup handlers that reset and
//     re-raise it (GNU sort), and every one of those broke when Strata shared it.
//   - The price: gdb stops and prints at every real-time signal by default; debug a profiled
//     program with `handle SIGnn nostop noprint pass` (the profile's meta says which).
//   - Sampling-timer signals are still recognised by their siginfo (SI_TIMER plus a fixed
//     si_value, see ThreadSamplingTimer), and perf-event signals by si_code POLL_IN/POLL_HUP
//     with si_fd naming the thread's own event (SetSamplingThreadEventDescriptors), never by
//     the number alone, so a program that does use
//     the signal (kill, sigqueue, its own timers) gets its instances as without Strata.
//
// Ownership (the preload tier's interposers, base/internal/signals/signal_interposers.cc, route the
// program's calls here): while installed, the kernel disposition of the signal stays ours.
// What the program sets with sigaction/signal is recorded as the *program's action*
// (RecordProgramAction): foreign instances of the signal go to it, `oldact` reports it, and
// Uninstall restores it -- except on a thread where the program blocks the signal (its view,
// held_sampling_signals.h), where a foreign instance is held for the program's wait, its
// sigpending or its unblock instead, as the kernel would have kept it pending. The handler runs with every signal blocked, glibc's internal
// SIGCANCEL and SIGSETXID included, so no other handler, longjmp, pthread_exit or
// asynchronous cancellation can interrupt a callback. A raw rt_sigaction system call bypasses
// all this: SamplingHandlerInstalled() tells the sampler.
//
// Chaining to the program's action: the handler it set is called with the thread's mask set
// as the kernel would have set it (the interrupted mask, plus its sa_mask, plus the signal
// unless SA_NODEFER); SA_RESETHAND resets the recorded action to SIG_DFL first; SIG_IGN drops
// the signal; SIG_DFL takes the default action (the kernel disposition is reset to SIG_DFL and
// the signal re-raised, so the process terminates as it would have without us).
//
// Stack: before any work, the handler checks its headroom: it needs kSamplingHandlerStackNeed
// bytes below the kernel's frame (measured, see below). The kernel calls an entry written in
// assembly that checks first, writing nothing below the stack pointer (a C++ prologue there
// already wrote below small stacks); the C++ handler checks again. Where it runs decides
// against what: the thread's own stack against its low end (SetSamplingThreadStackBounds);
// the main thread's growable stack against the lowest address the soft RLIMIT_STACK allows
// (read at each sample with a raw prlimit64, so a limit the program lowers counts at once)
// and the mappings below it (SetSamplingMainStackLimits); the program's alternate signal
// stack (a raw sigaltstack(NULL, &ss): SS_ONSTACK) against its base. With less room, or on a
// stack it cannot size (a thread with bounds running elsewhere: a coroutine's stack), it
// skips the sample, counted by reason (SamplesSkippedForLowStack) instead of overflowing
// into a guard page or the memory below the alternate stack.
//
// Thread safety: Install and Uninstall are NOT thread-safe: call them from one thread at a
// time, once each, at start and stop (a second Install fails with EBUSY). Calls of
// ReplaceSamplingCallback must not overlap each other or Install/Uninstall (the base tier
// holds its session mutex): they stay correct, but the wait may then last its bound. The handler may
// run on any thread at any time. Set/GetSamplingThreadContext and the stack bounds act on the
// calling thread.
// Async-signal safety: the handler itself; Set/GetSamplingThreadContext,
// SetSamplingThreadStackBounds, SetSamplingMainStackLimits, IsInSamplingHandler,
// RecordProgramAction,
// SamplesSkippedForLowStack, SamplingSignalsTakenOnCurrentThread and InstalledSamplingSignal are
// async-signal-safe (a program's
// handler may call sigaction). Install, Uninstall, ReplaceSamplingCallback and
// ChooseSamplingSignal are NOT (they wait or resolve symbols).
#ifndef STRATA_PLATFORM_SAMPLING_SAMPLING_SIGNAL_H_
#define STRATA_PLATFORM_SAMPLING_SAMPLING_SIGNAL_H_

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <ucontext.h>

#include "platform/sampling/perf_task_clock_event.h"
#include "platform/tsan_startup.h"

namespace strata {

// ChooseSamplingSignal() never picks below SIGRTMIN + this: the lowest real-time signals are
// the ones programs and libraries take first (SIGRTMIN, SIGRTMIN+1...).
constexpr int kLowestChoosableRealtimeOffset = 4;

// Bytes of stack the handler needs below its own frame (the kernel's signal frame is already
// below the interrupted code then): measured 3.6 KiB with a libunwind walk of a 1 MiB-deep
// stack, 0.6 KiB without a walk (docs/sampling.md, "Stack"); with a margin for deeper DWARF
// programs and another libunwind build.
constexpr size_t kSamplingHandlerStackNeed = 6 * 1024;

// Why a sample was skipped for want of stack (SamplesSkippedForLowStack).
enum class LowStack {
  kThreadStack,     // Near the low end of the thread's own stack.
  kMainStack,       // Near the soft RLIMIT_STACK (or the mapping below) of the main stack.
  kAlternateStack,  // Near the base of the program's alternate signal stack.
  kUnknownStack,    // On a stack the handler cannot size (neither of the above).
  kCount,
};

// Runs in the signal handler, on the thread that took the sampling-timer signal, with that
// thread's context pointer (never null: signals reaching a thread without a context are
// dropped), the interrupted context (the handler's third argument, for the stack walkers)
// and the timer's overrun count (ThreadSamplingTimer::Overruns). It must be
// async-signal-safe: no allocation, no lock, nothing that another thread's lock guards.
// errno is saved and restored around it. Every signal is blocked while it runs.
using SamplingCallback = void (*)(void* thread_context, ucontext_t* context, int overruns);

// The highest real-time signal in [SIGRTMIN + kLowestChoosableRealtimeOffset, SIGRTMAX] whose
// disposition is SIG_DFL and that the calling thread does not block (unless it blocks every
// real-time signal: a profiler thread, or a program's sigfillset); 0 if there is none.
int ChooseSamplingSignal();

// Whether InstallSamplingSignalHandler accepts `signal_number`: SIGPROF, SIGVTALRM, SIGUSR1,
// SIGUSR2, or SIGRTMIN..SIGRTMAX.
bool IsAllowedSamplingSignal(int signal_number);

// Installs the handler for `signal_number` and makes `callback` the callback. The disposition
// in place becomes the program's action. Returns 0 or an errno value: EBUSY if already
// installed, EINVAL for a null callback or a signal IsAllowedSamplingSignal refuses, or
// sigaction's error. After an Uninstall that timed out (our handler left in place), installing
// the same signal again succeeds.
[[nodiscard]] int InstallSamplingSignalHandler(int signal_number, SamplingCallback callback);

// Stops calling the callback, waits (bounded: ~1 s) until no handler runs the callback any
// more (the handlers under way when the callback changed, and any that read the epoch just
// before; the wait sleeps, woken by the last of them), and
// gives the kernel the program's action back -- unless something else replaced our handler
// since (a raw system call: then it is left alone). Instances of the signal still pending
// (queued by a closed event for a thread that has not run since) are discarded first, so
// they never reach the program's action. Idempotent; returns 0, sigaction's errno,
// or ETIMEDOUT when a callback was still running after the wait: then our handler stays
// installed with no callback (sampling signals are dropped, foreign ones still chained) and
// the program's calls keep being served. The caller must guarantee: it does not run in the
// callback; every ThreadSamplingTimer that sends this signal was destroyed first.
[[nodiscard]] int UninstallSamplingSignalHandler();

// Replaces the callback of the installed handler without a moment uninstalled. Returns the
// previous callback once no handler is running it any more (bounded wait, ~1 s, for the
// handlers under way when the callback changed, and any that read the epoch just before: it
// sleeps until the last of them wakes it; a handler stuck in an older callback past an earlier
// timeout makes this wait time out too), so its code
// may then go away; returns null when no handler is installed, `callback` is null (nothing
// changed then), or the wait timed out (the new callback is in place, the old one may still
// be running somewhere: keep its code). Not async-signal-safe (it waits).
SamplingCallback ReplaceSamplingCallback(SamplingCallback callback);

// Replaces the callback of the installed handler without a moment uninstalled and without
// waiting: the next signal on any thread runs `callback`; handlers that loaded the previous
// one just before may still be running it. For a previous callback whose code never goes
// away (the base tier's own, when a tier takes over). Returns the previous callback, or null
// when no handler is installed or `callback` is null (nothing changed then). Never waits for
// another thread (one atomic exchange). Thread-safe and async-signal-safe.
SamplingCallback ExchangeSamplingCallback(SamplingCallback callback);

// The installed signal, or 0.
int InstalledSamplingSignal();

// Whether the kernel disposition of the installed signal is still our handler (one sigaction
// query). False when nothing is installed. For the sampler's periodic check.
bool SamplingHandlerInstalled();

// For the interposers of sigaction/signal. When `signal_number` is the installed sampling
// signal, records `action` (if not null) as the program's action, reports the previous
// program's action in `old_action` (if not null), and returns true; the kernel disposition is
// not touched. Otherwise returns false and does nothing (the caller forwards the call).
bool RecordProgramAction(int signal_number, const struct sigaction* action,
                         struct sigaction* old_action);

// True on a thread that is running the sampling handler (its callback, or a program's handler
// it chained to): the interposers then forward calls unchanged.
bool IsInSamplingHandler();

// Whether `info`, an instance of the installed signal that the calling thread dequeued itself
// (an interposed sigwait-style call), is one of Strata's: a sample of this thread (its timer's
// or its perf event's), or a stray of a closed one (which the handler drops and counts in
// StrayNotificationsDropped when it is given back to it). Everything else is the program's.
// Async-signal-safe.
bool IsStrataSamplingSignal(const siginfo_t& info);

// Strata's own sigaction calls (installing its handlers, reading their dispositions): the
// definition after base's interposer, libc's (or a sanitizer's interceptor that comes after
// libstrata). In ThreadSanitizer builds, the first definition in the lookup order instead,
// with base's interposer forwarding the call unchanged (InOwnSigactionCall), so that TSan's
// interceptor sees it also where libtsan comes before libstrata (a program linked with
// -fsanitize=thread): a handler TSan does not know runs in the middle of TSan's bookkeeping
// and its synchronisation is lost (false races on the sample ring, a live lock in TSan's
// thread registry). TSan then runs the handler at the thread's next safe point
// (sampled_thread_for_testing.h, kHandlerRunsWhereSignalled).
// Thread-safe; async-signal-safe once InstallSamplingSignal or ChooseSamplingSignal has run.
int OwnSigaction(int signal_number, const struct sigaction* action,
                 struct sigaction* old_action);
#if STRATA_TSAN_BUILD
bool InOwnSigactionCall();  // On the calling thread, inside OwnSigaction.
#else
constexpr bool InOwnSigactionCall() { return false; }
#endif

// Blocks the installed sampling signal on the calling thread, bypassing the interposers (for
// threads of the profiler itself). No-op when nothing is installed.
void BlockSamplingSignalOnCurrentThread();

// The calling thread's context pointer passed to the callback; null (the default) means the
// thread takes no samples. Set it when the thread registers, before arming its timer, and
// reset it to null after destroying the timer, before the context object goes away.
void SetSamplingThreadContext(void* thread_context);
void* GetSamplingThreadContext();

// For another thread of this process (attach, issue 36: threads that existed before the
// library was loaded cannot register themselves): sets that thread's context, perf event
// descriptors and stack bounds, as the three setters here would on it. `thread_pointer` is
// the thread's %fs base (its pthread_t under glibc); the library's thread-local storage is
// static (initial-exec), so each variable lies at the same offset from every thread's
// pointer. The thread must be alive and not yet sampled (no signal of ours reaches it while
// this runs); the caller orders these stores before it arms the thread's sampling source (a
// system call). Not async-signal-safe; thread-safe for distinct threads.
void SetSamplingStateOfOtherThread(uintptr_t thread_pointer, void* thread_context,
                                   const SamplingEventDescriptors* descriptors, uintptr_t low,
                                   uintptr_t high);

// The address `local_tls_address` (a thread-local variable of the calling thread, static TLS)
// has in the thread whose thread pointer is `thread_pointer`.
uintptr_t ThreadLocalAddressInThread(const void* local_tls_address, uintptr_t thread_pointer);

// The calling thread's perf event descriptors (perf_task_clock_event.h): a signal with
// si_code POLL_IN/POLL_HUP whose si_fd is their current or retired number is a sampling
// signal of this thread; every other instance still goes to the program. Null (the default):
// no event. The object must outlive the setting: reset it to null before it goes away, as
// for the context.
void SetSamplingThreadEventDescriptors(const SamplingEventDescriptors* descriptors);

// The calling thread's stack [low, high), for the handler's free-stack check; {0, 0} (the
// default) turns it off for the thread (the main thread: see SetSamplingMainStackLimits).
void SetSamplingThreadStackBounds(uintptr_t low, uintptr_t high);

// The main thread's stack, process-wide: `top` is the end of its mapping (what RLIMIT_STACK
// is counted from), `floor` the lowest address it could grow to whatever the limit (the
// mapping below it plus the kernel's stack guard gap). The handler then checks a stack
// pointer in [floor, top) against max(floor, top - soft RLIMIT_STACK). {0, 0}: unknown.
// Async-signal-safe; thread-safe.
void SetSamplingMainStackLimits(uintptr_t floor, uintptr_t top);

// Sampling signals (a timer's or the thread's own perf event's) the handler has taken on the
// calling thread since it started, whatever became of them: a sample, a skip for want of
// stack, or nothing (no callback or no context). A signal the kernel never sent is not
// counted, so comparing it with the thread's samples tells a signal that reached the handler
// and left no sample from one that never came (tests/takeover). It cannot tell a signal the
// kernel sent late from one held back while the thread blocked it. The program's own
// instances of the signal, and strays (StrayNotificationsDropped), are not counted.
// Async-signal-safe; one thread-local load.
uint64_t SamplingSignalsTakenOnCurrentThread();

// Samples skipped because the handler had less than kSamplingHandlerStackNeed bytes of stack
// below it (see "Stack" above): in all, or for one reason. Thread-safe.
uint64_t SamplesSkippedForLowStack();
uint64_t SamplesSkippedForLowStack(LowStack reason);

// Instances of the sampling signal (samples or not) whose kernel frame the assembly entry found
// on the program's alternate signal stack: each interrupted a handler of the program's whose
// kernel mask did not block S (installed by a raw rt_sigaction, which no wrapper saw), and S
// was added to the interrupted mask (the ucontext's uc_sigmask, restored at sigreturn), so it
// stays blocked on that thread until that handler returns. A count that grows tells the
// session to add S to that handler's sa_mask (signal_interposers.h). Thread-safe.
uint64_t SamplingSignalsOnAlternateStack();

// Descriptor or timer notifications (si_code POLL_* or SI_TIMER) of the sampling signal that
// reached our handler while the program's action is SIG_DFL and no thread named them: late
// signals of our own closed events, dropped instead of terminating the process. Signals sent
// by a process (kill, tgkill, sigqueue) still take the program's default action. Thread-safe.
uint64_t StrayNotificationsDropped();

}  // namespace strata

#endif  // STRATA_PLATFORM_SAMPLING_SAMPLING_SIGNAL_H_
