#include "platform/fork_for_testing.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace strata {
namespace testing {

std::string ChildResult::Describe() const {
  std::string out;
  if (exited) {
    out = "exit " + std::to_string(exit_code);
  } else if (signaled) {
    out = "signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  } else {
    out = "unknown end";
  }
  out += "; stderr: \"" + stderr_output + "\"";
  return out;
}

ChildResult RunInForkedChild(const std::function<void()>& body) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    perror("strata: RunInForkedChild: pipe2");
    abort();
  }
  // Flush the parent's stdio so the child does not write its buffered output a second time.
  fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    perror("strata: RunInForkedChild: fork");
    abort();
  }
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDERR_FILENO);  // dup2 clears O_CLOEXEC on the new descriptor
    close(fds[1]);
    const rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    // The test framework's fatal-signal handlers (inherited) would print a failure report
    // from the child: a death the parent expects must be a plain death.
    for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTERM, SIGINT, SIGALRM}) {
      signal(sig, SIG_DFL);
    }
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_UNBLOCK, &all, nullptr);
    alarm(kChildTimeoutSeconds);
    try {
      body();
    } catch (...) {
      _exit(kExitUncaughtException);
    }
    _exit(0);
  }
  close(fds[1]);
  ChildResult result;
  char buffer[512];
  for (;;) {
    const ssize_t n = read(fds[0], buffer, sizeof(buffer));
    if (n > 0) {
      result.stderr_output.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      perror("strata: RunInForkedChild: waitpid");
      abort();
    }
  }
  if (WIFEXITED(status)) {
    result.exited = true;
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signaled = true;
    result.signal = WTERMSIG(status);
  }
  return result;
}

void ChildCheck(bool ok, const char* what) {
  if (ok) return;
  const char prefix[] = "check failed: ";
  (void)!write(STDERR_FILENO, prefix, sizeof(prefix) - 1);
  (void)!write(STDERR_FILENO, what, strlen(what));
  (void)!write(STDERR_FILENO, "\n", 1);
  _exit(kExitCheckFailed);
}

}  // namespace testing
}  // namespace strata
