// The process-wide handler of the sampling signal: it runs a registered callback, with the
// interrupted thread's context, for every signal that a ThreadSamplingTimer sends, and passes
// every other instance of the signal on to the disposition that was in place before it.
//
// Which signal (kDefaultSamplingSignal = SIGPROF), and why:
//   - Sharing is safe whatever the signal: sampling-timer signals are recognised by their
//     siginfo (SI_TIMER plus a fixed si_value, see ThreadSamplingTimer), never by the signal
//     number alone, so the program's own instances of the signal (kill, raise, setitimer,
//     its own timers) go to its handler as before, to SIG_IGN, or to the default action.
//   - SIGPROF is the signal every Unix profiler uses (the design note measured it; gperftools,
//     Firefox). gdb passes it silently by default ("nostop noprint pass"), whereas gdb stops
//     and prints at every real-time signal: with SIGRTMIN+k, debugging a profiled program
//     would stop at every sample. Programs rarely use SIGPROF unless they profile themselves.
//   - The residual risk is a program that installs its own SIGPROF handler after us: it then
//     receives our samples. A real-time signal avoids that at the cost above; callers may pass
//     one (SIGRTMIN..SIGRTMAX), and should then pick one whose disposition is SIG_DFL.
// The handler is installed with SA_SIGINFO | SA_RESTART and an empty sa_mask (the signal
// itself is blocked while it runs). With CPU-clock timers a sleeping thread is never
// signalled at all, so no sleep is cut short; SA_RESTART covers the calls it can cover
// (read on a pipe, sem_wait, waitpid) when a wall-clock timer is used.
//
// Chaining: the previous disposition is recorded at installation. A signal that is not a
// sampling-timer signal goes to the previous handler (called directly from ours, with the
// signal blocked; its own sa_mask and flags are not re-applied), is dropped if the previous
// disposition was SIG_IGN, or, if it was SIG_DFL, takes the default action (the disposition
// is reset to SIG_DFL and the signal re-raised, so the process terminates as it would have
// without us).
//
// Thread safety: Install and Uninstall are NOT thread-safe: call them from one thread at a
// time, once each, at start and stop (a second Install fails with EBUSY). The handler may
// run on any thread at any time. Set/GetSamplingThreadContext act on the calling thread.
// Async-signal safety: the handler itself is async-signal-safe; so are
// SetSamplingThreadContext() and GetSamplingThreadContext(). Install and Uninstall are NOT
// (Uninstall waits for callbacks that are running on other threads).
#ifndef STRATA_PLATFORM_SAMPLING_SAMPLING_SIGNAL_H_
#define STRATA_PLATFORM_SAMPLING_SAMPLING_SIGNAL_H_

#include <signal.h>
#include <ucontext.h>

namespace strata {

constexpr int kDefaultSamplingSignal = SIGPROF;

// Runs in the signal handler, on the thread that took the sampling-timer signal, with that
// thread's context pointer (never null: signals reaching a thread without a context are
// dropped), the interrupted context (the handler's third argument, for the stack walkers)
// and the timer's overrun count (ThreadSamplingTimer::Overruns). It must be
// async-signal-safe: no allocation, no lock, nothing that another thread's lock guards.
// errno is saved and restored around it.
using SamplingCallback = void (*)(void* thread_context, ucontext_t* context, int overruns);

// Installs the handler for `signal_number` (SIGPROF, SIGVTALRM, SIGUSR1, SIGUSR2, or a
// real-time signal) and makes `callback` the callback. Returns 0 or an errno value: EBUSY if
// already installed, EINVAL for a null callback or another signal, or sigaction's error.
[[nodiscard]] int InstallSamplingSignalHandler(int signal_number, SamplingCallback callback);

// Stops calling the callback, waits until no callback is running on any thread, and puts
// back the disposition that was in place at installation -- unless something else replaced
// our handler since (then it is left alone, and our handler, which it may chain to, keeps
// passing foreign signals on). Idempotent; returns 0 or sigaction's errno. The caller must
// guarantee: it does not run in the callback; every ThreadSamplingTimer that sends this
// signal was destroyed first (an armed one would send the signal to the restored
// disposition, by default terminating the process).
[[nodiscard]] int UninstallSamplingSignalHandler();

// Replaces the callback of the installed handler without a moment uninstalled (the signal
// keeps being handled; no sample is lost). Returns the previous callback once no handler is
// running it any more, so its code may then go away; returns null (and changes nothing) when
// no handler is installed or `callback` is null. Not async-signal-safe (it waits).
SamplingCallback ReplaceSamplingCallback(SamplingCallback callback);

// The installed signal, or 0.
int InstalledSamplingSignal();

// The calling thread's context pointer passed to the callback; null (the default) means the
// thread takes no samples. Set it when the thread registers, before arming its timer, and
// reset it to null after destroying the timer, before the context object goes away.
void SetSamplingThreadContext(void* thread_context);
void* GetSamplingThreadContext();

}  // namespace strata

#endif  // STRATA_PLATFORM_SAMPLING_SAMPLING_SIGNAL_H_
