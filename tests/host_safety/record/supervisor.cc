// A supervisor, as init systems and job runners are: runs a command, optionally sends it
// SIGTERM once it is ready, and reports how it ended the way such tools do ("exited N" or
// "killed by signal N"). No Strata include or call.
//
//   supervisor --term-when-ready CMD [ARGS...]
//       once CMD's stdout has shown "ready", SIGTERM goes to CMD's process (the supervisor's
//       direct child).
//   supervisor CMD [ARGS...]
//       just waits.
// CMD's stdout is passed through to the supervisor's as it comes. At the end the supervisor
// prints "supervisor: child exited N" or "supervisor: child killed by signal N" (exactly
// what waitpid said, which a shell's $? cannot tell apart: exit(143) and SIGTERM are both
// 143 there) and exits 0.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  int first = 1;
  bool term_when_ready = false;
  if (argc > 1 && std::strcmp(argv[1], "--term-when-ready") == 0) {
    term_when_ready = true;
    first = 2;
  }
  if (first >= argc) {
    std::fprintf(stderr, "usage: supervisor [--term-when-ready] CMD [ARGS...]\n");
    return 2;
  }
  int output[2];
  if (pipe(output) != 0) return 2;
  const pid_t child = fork();
  if (child < 0) return 2;
  if (child == 0) {
    dup2(output[1], STDOUT_FILENO);
    close(output[0]);
    close(output[1]);
    execvp(argv[first], argv + first);
    _exit(127);
  }
  close(output[1]);
  std::string seen;
  bool sent = false;
  char buffer[512];
  ssize_t n;
  while ((n = read(output[0], buffer, sizeof(buffer))) != 0) {
    if (n < 0) continue;  // EINTR
    seen.append(buffer, static_cast<size_t>(n));
    for (ssize_t done = 0; done < n;) {
      const ssize_t written = write(STDOUT_FILENO, buffer + done, static_cast<size_t>(n - done));
      if (written <= 0) break;
      done += written;
    }
    if (term_when_ready && !sent && seen.find("ready") != std::string::npos) {
      kill(child, SIGTERM);
      sent = true;
    }
  }
  close(output[0]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
  }
  if (WIFSIGNALED(status)) {
    std::printf("supervisor: child killed by signal %d%s\n", WTERMSIG(status),
                WCOREDUMP(status) ? " (core dumped)" : "");
  } else if (WIFEXITED(status)) {
    std::printf("supervisor: child exited %d\n", WEXITSTATUS(status));
  } else {
    std::printf("supervisor: child status 0x%x\n", status);
  }
  return 0;
}
