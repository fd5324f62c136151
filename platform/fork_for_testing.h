// Test support: run a function in a real fork()ed child and report how the child ended, with
// everything it wrote to stderr. Death checks ("this misuse aborts with this message") and
// fork checks ("the child sees a fresh pid") use it.
//
// The child runs `body`, then _exit(0) if it returned; an exception escaping `body` exits
// with kExitUncaughtException. The child must not use the test framework (a failed REQUIRE
// there would unwind into a copy of the parent's test runner): report through the exit code
// and let the parent check it. The child gets an alarm (kChildTimeoutSeconds) so that a
// deadlock shows up as death by SIGALRM rather than a hung test, and core dumps are off.
//
// Thread safety: call from one thread at a time. In the child only the forking thread
// exists: keep `body` to async-signal-safe work plus the code under test.
// Async-signal safety: not async-signal-safe (testing only).
#ifndef STRATA_PLATFORM_FORK_FOR_TESTING_H_
#define STRATA_PLATFORM_FORK_FOR_TESTING_H_

#include <functional>
#include <string>

namespace strata {
namespace testing {

struct ChildResult {
  bool exited = false;    // ended through exit/_exit; exit_code is set
  int exit_code = -1;
  bool signaled = false;  // killed by a signal; signal is set
  int signal = 0;
  std::string stderr_output;

  bool ExitedWith(int code) const { return exited && exit_code == code; }
  bool KilledBy(int sig) const { return signaled && signal == sig; }
  // For failure messages: "exit 3", "signal 6 (Aborted)", plus the child's stderr.
  std::string Describe() const;
};

inline constexpr int kExitUncaughtException = 120;
inline constexpr unsigned kChildTimeoutSeconds = 20;

// Forks, runs `body` in the child, waits for it. Aborts the caller if fork() fails.
ChildResult RunInForkedChild(const std::function<void()>& body);

inline constexpr int kExitCheckFailed = 121;

// For use in the child: when `ok` is false, writes "check failed: <what>" to stderr and
// _exit(kExitCheckFailed). Async-signal-safe (write(2) and _exit only).
void ChildCheck(bool ok, const char* what);

}  // namespace testing
}  // namespace strata

#endif  // STRATA_PLATFORM_FORK_FOR_TESTING_H_
