// Strata's threads take the signals sent to them alone, never the process's
// (profiler_thread_signals.h).
#include "base/internal/signals/profiler_thread_signals.h"

#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "catch2/catch.hpp"

namespace strata {
namespace base_internal {
namespace {

TEST_CASE("ParsePendingSignalMasks reads SigPnd and ShdPnd") {
  const char* status =
      "Name:\tStrataSampler\nSigQ:\t1/1000\nSigPnd:\t0000000000000200\n"
      "ShdPnd:\t0000000000000800\nSigBlk:\tfffffffe7ffbfeff\n";
  uint64_t thread_pending = 0, shared_pending = 0;
  REQUIRE(ParsePendingSignalMasks(status, &thread_pending, &shared_pending));
  CHECK(thread_pending == 0x200);  // SIGUSR1 (10): bit 9.
  CHECK(shared_pending == 0x800);  // SIGUSR2 (12): bit 11.
  CHECK_FALSE(ParsePendingSignalMasks("Name:\tx\n", &thread_pending, &shared_pending));
}

std::atomic<int> g_usr1{0};
std::atomic<int> g_usr2{0};

TEST_CASE("A blocked thread-directed signal is delivered; a process-directed one stays") {
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = [](int) { g_usr1.fetch_add(1); };
  REQUIRE(sigaction(SIGUSR1, &action, nullptr) == 0);
  action.sa_handler = [](int) { g_usr2.fetch_add(1); };
  REQUIRE(sigaction(SIGUSR2, &action, nullptr) == 0);
  sigset_t all, previous;
  sigfillset(&all);
  REQUIRE(pthread_sigmask(SIG_BLOCK, &all, &previous) == 0);
  ThreadDirectedSignalCheck check;
  CHECK(AnswerThreadDirectedSignals(&check) == 0);  // Nothing pending.
  // SIGUSR2 to the process: every thread of this test blocks it now, so it stays pending.
  REQUIRE(kill(getpid(), SIGUSR2) == 0);
  REQUIRE(syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGUSR1) == 0);
  CHECK(AnswerThreadDirectedSignals(&check) == 1);
  CHECK(g_usr1.load() == 1);
  CHECK(g_usr2.load() == 0);
  CHECK(AnswerThreadDirectedSignals(&check) == 0);  // Only the process's is left.
  CHECK(AnswerThreadDirectedSignals(&check) == 0);  // Seen: /proc is not read again.
  // The process's SIGUSR2 goes where the program takes it: here, at the unblock.
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  CHECK(g_usr2.load() == 1);
  action.sa_handler = SIG_DFL;
  sigaction(SIGUSR1, &action, nullptr);
  sigaction(SIGUSR2, &action, nullptr);
}

}  // namespace
}  // namespace base_internal
}  // namespace strata
