#include "platform/sampling/sampling_signal.h"

#include <errno.h>
#include <sched.h>

#include <atomic>
#include <cstring>

#include "platform/sampling/thread_sampling_timer.h"

namespace strata {
namespace {

std::atomic<SamplingCallback> g_callback{nullptr};
// Handler invocations between loading g_callback and returning from the callback.
std::atomic<int> g_callbacks_running{0};
std::atomic<int> g_installed_signal{0};
// The disposition before ours. Written by Install before our handler can run (and, if the
// disposition changed between reading and replacing it, once more right after).
struct sigaction g_previous_action;

// initial-exec: a %fs-relative load, no call into the dynamic loader, safe in the handler.
__attribute__((tls_model("initial-exec"))) thread_local std::atomic<void*> t_thread_context{
    nullptr};

void SamplingSignalHandler(int signal_number, siginfo_t* info, void* context);

bool IsOurHandler(const struct sigaction& action) {
  return (action.sa_flags & SA_SIGINFO) != 0 && action.sa_sigaction == &SamplingSignalHandler;
}

bool IsAllowedSamplingSignal(int signal_number) {
  return signal_number == SIGPROF || signal_number == SIGVTALRM || signal_number == SIGUSR1 ||
         signal_number == SIGUSR2 || (signal_number >= SIGRTMIN && signal_number <= SIGRTMAX);
}

// Every allowed signal's default action is to terminate the process.
void TakeDefaultAction(int signal_number) {
  struct sigaction default_action;
  std::memset(&default_action, 0, sizeof(default_action));
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  sigaction(signal_number, &default_action, nullptr);
  // The signal is blocked while this handler runs: it stays pending, and the default action
  // happens when the handler returns and the interrupted mask is restored.
  raise(signal_number);
}

void ChainToPreviousAction(int signal_number, siginfo_t* info, void* context) {
  const struct sigaction& previous = g_previous_action;
  if ((previous.sa_flags & SA_SIGINFO) != 0) {
    if (previous.sa_sigaction != nullptr && previous.sa_sigaction != &SamplingSignalHandler) {
      previous.sa_sigaction(signal_number, info, context);
    }
    return;
  }
  if (previous.sa_handler == SIG_IGN) return;
  if (previous.sa_handler == SIG_DFL) {
    TakeDefaultAction(signal_number);
    return;
  }
  previous.sa_handler(signal_number);
}

// ---- Signal handler: async-signal-safe from here to the end of the function. ----
void SamplingSignalHandler(int signal_number, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  if (info != nullptr && ThreadSamplingTimer::IsSamplingTimerSignal(*info)) {
    // seq_cst pairs with Uninstall: either it sees this increment, or we see its null.
    g_callbacks_running.fetch_add(1, std::memory_order_seq_cst);
    const SamplingCallback callback = g_callback.load(std::memory_order_seq_cst);
    void* const thread_context = t_thread_context.load(std::memory_order_relaxed);
    if (callback != nullptr && thread_context != nullptr) {
      callback(thread_context, static_cast<ucontext_t*>(context),
               ThreadSamplingTimer::Overruns(*info));
    }
    g_callbacks_running.fetch_sub(1, std::memory_order_release);
  } else {
    ChainToPreviousAction(signal_number, info, context);
  }
  errno = saved_errno;
}
// ---- End of signal handler. ----

bool SameAction(const struct sigaction& a, const struct sigaction& b) {
  return a.sa_flags == b.sa_flags &&
         ((a.sa_flags & SA_SIGINFO) != 0 ? a.sa_sigaction == b.sa_sigaction
                                         : a.sa_handler == b.sa_handler);
}

}  // namespace

int InstallSamplingSignalHandler(int signal_number, SamplingCallback callback) {
  if (callback == nullptr || !IsAllowedSamplingSignal(signal_number)) return EINVAL;
  int expected = 0;
  if (!g_installed_signal.compare_exchange_strong(expected, signal_number)) return EBUSY;

  struct sigaction previous;
  if (sigaction(signal_number, nullptr, &previous) != 0) {
    const int error = errno;
    g_installed_signal.store(0);
    return error;
  }
  // Left behind by an earlier installation that could not restore (see Uninstall): keep the
  // disposition recorded then, never chain to ourselves.
  if (!IsOurHandler(previous)) g_previous_action = previous;
  g_callback.store(callback, std::memory_order_seq_cst);

  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_sigaction = &SamplingSignalHandler;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  struct sigaction replaced;
  if (sigaction(signal_number, &action, &replaced) != 0) {
    const int error = errno;
    g_callback.store(nullptr);
    g_installed_signal.store(0);
    return error;
  }
  if (!IsOurHandler(replaced) && !SameAction(replaced, previous)) g_previous_action = replaced;
  return 0;
}

int UninstallSamplingSignalHandler() {
  const int signal_number = g_installed_signal.load();
  if (signal_number == 0) return 0;
  g_callback.store(nullptr, std::memory_order_seq_cst);

  int result = 0;
  struct sigaction current;
  if (sigaction(signal_number, nullptr, &current) != 0) {
    result = errno;
  } else if (IsOurHandler(current)) {
    if (sigaction(signal_number, &g_previous_action, nullptr) != 0) result = errno;
  }
  // A handler that loaded the callback before the store above may still be running it.
  while (g_callbacks_running.load(std::memory_order_seq_cst) != 0) sched_yield();
  g_installed_signal.store(0);
  return result;
}

SamplingCallback ReplaceSamplingCallback(SamplingCallback callback) {
  if (callback == nullptr || g_installed_signal.load() == 0) return nullptr;
  const SamplingCallback previous = g_callback.exchange(callback, std::memory_order_seq_cst);
  // Handlers that loaded the previous callback before the exchange may still be running it;
  // once they are done, it is never called again.
  while (g_callbacks_running.load(std::memory_order_seq_cst) != 0) sched_yield();
  return previous;
}

int InstalledSamplingSignal() { return g_installed_signal.load(std::memory_order_relaxed); }

void SetSamplingThreadContext(void* thread_context) {
  t_thread_context.store(thread_context, std::memory_order_relaxed);
  // Orders the store with the timer calls that follow it in program order, as seen by this
  // thread's own handler.
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

void* GetSamplingThreadContext() { return t_thread_context.load(std::memory_order_relaxed); }

}  // namespace strata
