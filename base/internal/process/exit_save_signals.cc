#include "base/internal/process/exit_save_signals.h"

#include <signal.h>
#include <sys/syscall.h>
#include <time.h>

#include <atomic>
#include <cstdint>

#include "platform/next_definition.h"
#include "platform/raw_syscall.h"
#include "platform/tsan_startup.h"

namespace strata {
namespace base_internal {
namespace {

constexpr int kLastSignal = 64;
using SigactionFunction = int (*)(int, const struct sigaction*, struct sigaction*);

// Written by the saving thread before the handler is installed, read by the handler.
struct sigaction g_saved[kLastSignal + 1];
bool g_taken[kLastSignal + 1];
SigactionFunction g_sigaction = nullptr;

std::atomic<int> g_deferred{0};
std::atomic<int64_t> g_first_ns{0};
constexpr int64_t kSameRequestNs = 1'000'000'000;

// Unused in a TSan build (DeferTerminatingSignalsDuringExitSave takes nothing there).
[[maybe_unused]] bool EndsProcessByDefault(int signal_number) {
  switch (signal_number) {
    case SIGHUP: case SIGINT: case SIGQUIT: case SIGUSR1: case SIGUSR2: case SIGPIPE:
    case SIGALRM: case SIGTERM: case SIGSTKFLT: case SIGXCPU: case SIGXFSZ: case SIGVTALRM:
    case SIGPROF: case SIGIO: case SIGPWR:
      return true;
    default:
      return signal_number >= 32 && signal_number <= kLastSignal;  // Real-time signals.
  }
}

int64_t MonotonicNs() {
  timespec now{};
  RawSyscall(SYS_clock_gettime, CLOCK_MONOTONIC, reinterpret_cast<long>(&now));
  return now.tv_sec * 1'000'000'000LL + now.tv_nsec;
}

void PutBackDefaults() {
  for (int signal_number = 1; signal_number <= kLastSignal; ++signal_number) {
    if (!g_taken[signal_number]) continue;
    g_taken[signal_number] = false;
    g_sigaction(signal_number, &g_saved[signal_number], nullptr);
  }
}

// Async-signal-safe: an atomic note; for a later repeat, libc's sigaction (async-signal-safe)
// and raw system calls.
void OnTerminatingSignal(int signal_number) {
  const int64_t now = MonotonicNs();
  int64_t first = 0;
  g_deferred.fetch_add(1, std::memory_order_relaxed);
  if (g_first_ns.compare_exchange_strong(first, now, std::memory_order_relaxed) ||
      now - first < kSameRequestNs) {
    return;  // Noted: the save goes on, the process ends with the program's status.
  }
  // A later request: the save is taking too long for whoever sends it. Die by it, now.
  PutBackDefaults();
  uint64_t unblock = uint64_t{1} << (signal_number - 1);
  RawSyscall(SYS_rt_sigprocmask, SIG_UNBLOCK, reinterpret_cast<long>(&unblock), 0, 8);
  RawSyscall(SYS_tgkill, RawSyscall(SYS_getpid), RawSyscall(SYS_gettid), signal_number);
}

}  // namespace

void DeferTerminatingSignalsDuringExitSave() {
#if !STRATA_TSAN_BUILD
  if (g_sigaction == nullptr) {
    // Not `&::sigaction`: inside libstrata_base.so that is the preload tier's interposer.
    g_sigaction = reinterpret_cast<SigactionFunction>(NextDefinition("sigaction"));
    if (g_sigaction == nullptr) return;
  }
  struct sigaction ours = {};
  ours.sa_handler = &OnTerminatingSignal;
  ours.sa_flags = SA_RESTART;
  sigemptyset(&ours.sa_mask);
  for (int signal_number = 1; signal_number <= kLastSignal; ++signal_number) {
    if (EndsProcessByDefault(signal_number)) sigaddset(&ours.sa_mask, signal_number);
  }
  for (int signal_number = 1; signal_number <= kLastSignal; ++signal_number) {
    if (!EndsProcessByDefault(signal_number)) continue;
    struct sigaction current;
    if (g_sigaction(signal_number, nullptr, &current) != 0) continue;
    if ((current.sa_flags & SA_SIGINFO) || current.sa_handler != SIG_DFL) continue;
    g_saved[signal_number] = current;
    g_taken[signal_number] = true;
    // Between the read and this write the program (another thread) could set its own action:
    // exchanged, and put back if so.
    struct sigaction replaced;
    if (g_sigaction(signal_number, &ours, &replaced) != 0) {
      g_taken[signal_number] = false;
      continue;
    }
    if ((replaced.sa_flags & SA_SIGINFO) || replaced.sa_handler != SIG_DFL) {
      g_sigaction(signal_number, &replaced, nullptr);
      g_taken[signal_number] = false;
    }
  }
#endif
}

void RestoreTerminatingSignalsAfterExitSave() {
  if (g_sigaction == nullptr) return;
  for (int signal_number = 1; signal_number <= kLastSignal; ++signal_number) {
    if (!g_taken[signal_number]) continue;
    g_taken[signal_number] = false;
    struct sigaction current;
    if (g_sigaction(signal_number, &g_saved[signal_number], &current) != 0) continue;
    // The program set its own action during the save: it stays.
    if ((current.sa_flags & SA_SIGINFO) || current.sa_handler != &OnTerminatingSignal) {
      g_sigaction(signal_number, &current, nullptr);
    }
  }
}

int TerminatingSignalsDeferredDuringExitSave() {
  return g_deferred.load(std::memory_order_relaxed);
}

}  // namespace base_internal
}  // namespace strata
