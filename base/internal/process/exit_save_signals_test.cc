#include "base/internal/process/exit_save_signals.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ctime>

#include "catch2/catch.hpp"

namespace strata {
namespace base_internal {
namespace {

// Runs `body` in a forked child and returns its wait status.
template <typename Body>
int StatusOfChild(Body body) {
  const pid_t child = fork();
  if (child == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  return status;
}

void SleepMs(long ms) {
  timespec step{ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&step, &step) != 0) {
  }
}

TEST_CASE("a terminating signal during the exit save is dropped; the process ends with its own status",
          "[base][exit]") {
  for (int signal_number : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGALRM, SIGRTMIN + 3}) {
    const int status = StatusOfChild([signal_number] {
      signal(signal_number, SIG_DFL);
      DeferTerminatingSignalsDuringExitSave();
      kill(getpid(), signal_number);
      SleepMs(20);  // The "save" goes on.
      RestoreTerminatingSignalsAfterExitSave();
      struct sigaction after;
      sigaction(signal_number, nullptr, &after);
      _exit(TerminatingSignalsDeferredDuringExitSave() == 1 && after.sa_handler == SIG_DFL ? 7 : 3);
    });
    INFO("signal " << signal_number);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 7);
  }
}

TEST_CASE("without the deferral the same signal kills (the test's control)", "[base][exit]") {
  const int status = StatusOfChild([] {
    signal(SIGTERM, SIG_DFL);
    kill(getpid(), SIGTERM);
    SleepMs(20);
  });
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
}

TEST_CASE("a repeat a second or more after the first kills at once, by that signal",
          "[base][exit]") {
  const int status = StatusOfChild([] {
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    DeferTerminatingSignalsDuringExitSave();
    kill(getpid(), SIGTERM);
    SleepMs(100);
    kill(getpid(), SIGTERM);  // Within the second: the same request.
    SleepMs(1100);
    kill(getpid(), SIGINT);  // Later: dies by it.
    SleepMs(200);
    _exit(9);
  });
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGINT);
}

void ProgramHandler(int) {}

TEST_CASE("the program's own handlers and SIG_IGN are left alone, and one set during the save stays",
          "[base][exit]") {
  const int status = StatusOfChild([] {
    signal(SIGUSR1, &ProgramHandler);
    signal(SIGUSR2, SIG_IGN);
    signal(SIGTERM, SIG_DFL);
    DeferTerminatingSignalsDuringExitSave();
    struct sigaction usr1, usr2;
    sigaction(SIGUSR1, nullptr, &usr1);
    sigaction(SIGUSR2, nullptr, &usr2);
    signal(SIGTERM, &ProgramHandler);  // The program's action, set during the save.
    RestoreTerminatingSignalsAfterExitSave();
    struct sigaction term;
    sigaction(SIGTERM, nullptr, &term);
    _exit(usr1.sa_handler == &ProgramHandler && usr2.sa_handler == SIG_IGN &&
                  term.sa_handler == &ProgramHandler
              ? 7
              : 3);
  });
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 7);
}

}  // namespace
}  // namespace base_internal
}  // namespace strata
