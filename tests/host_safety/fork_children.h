// The fork scenarios' shared harness (fork_api_program, fork_full_program): sleeping without
// the program's signals cutting it short, and reaping the forked children with a deadline.
// Test code; not thread-safe beyond what each function says.
#ifndef STRATA_TESTS_HOST_SAFETY_FORK_CHILDREN_H_
#define STRATA_TESTS_HOST_SAFETY_FORK_CHILDREN_H_

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

#include <cstdio>
#include <vector>

namespace fork_children {

// Sleeps `ms` milliseconds in full (a signal's EINTR resumes the rest).
inline void SleepMilliseconds(long ms) {
  timespec t{ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&t, &t) != 0) {
  }
}

inline double SecondsSince(const timespec& start) {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9;
}

struct Outcome {
  int exited = 0;        // Reaped before the deadline.
  int wrong_status = 0;  // Of those, not exit status 0 (each printed on stderr).
  int hung = 0;          // Still running at the deadline: killed (SIGKILL) and reaped.
};

// Waits up to `deadline_s` seconds for every child in `pids` (polling every 10 ms), then
// kills and reaps the ones left. `label` prefixes the stderr lines.
inline Outcome ReapChildren(const std::vector<pid_t>& pids, const char* label, double deadline_s) {
  timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  Outcome outcome;
  std::vector<bool> done(pids.size(), false);
  while (outcome.exited < static_cast<int>(pids.size()) && SecondsSince(start) < deadline_s) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (done[i]) continue;
      int status = 0;
      if (waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        done[i] = true;
        ++outcome.exited;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
          ++outcome.wrong_status;
          std::fprintf(stderr, "%s: child %zu: status 0x%x\n", label, i, status);
        }
      }
    }
    SleepMilliseconds(10);
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    if (done[i]) continue;
    ++outcome.hung;
    kill(pids[i], SIGKILL);
    waitpid(pids[i], nullptr, 0);
  }
  return outcome;
}

}  // namespace fork_children

#endif  // STRATA_TESTS_HOST_SAFETY_FORK_CHILDREN_H_
