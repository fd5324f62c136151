// A daemon's start-up: every signal's disposition reset to SIG_DFL (with signal() or, with
// --sigaction, sigaction()) and every signal unblocked, then work. Prints "done" and exits 0.
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "burn.h"

int main(int argc, char** argv) {
  const int use_sigaction = argc > 1 && strcmp(argv[1], "--sigaction") == 0;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    if (use_sigaction) {
      struct sigaction action;
      memset(&action, 0, sizeof(action));
      action.sa_handler = SIG_DFL;
      sigaction(sig, &action, NULL);
    } else {
      signal(sig, SIG_DFL);
    }
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  BurnCpu(0.6);
  printf("done\n");
  return 0;
}
