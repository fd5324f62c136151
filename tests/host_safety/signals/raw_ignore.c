// Sets SIG_IGN for SIGPROF and every real-time signal with the raw rt_sigaction system call
// (bypassing libc, as some runtimes do) after 0.3 s of CPU, then burns 0.3 s more. Prints
// "done" and exits 0. A profiler whose handler it replaced must notice and say so.
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "burn.h"

struct KernelSigaction {
  void (*handler)(int);
  unsigned long flags;
  void (*restorer)(void);
  unsigned long mask;
};

static void IgnoreRaw(int sig) {
  struct KernelSigaction action;
  memset(&action, 0, sizeof(action));
  action.handler = SIG_IGN;
  syscall(SYS_rt_sigaction, sig, &action, NULL, sizeof(action.mask));
}

int main(void) {
  BurnCpu(0.3);
  IgnoreRaw(SIGPROF);
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) IgnoreRaw(sig);
  BurnCpu(0.3);
  printf("done\n");
  return 0;
}
