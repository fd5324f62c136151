// Sets SIG_IGN for SIGPROF and every real-time signal with the raw rt_sigaction system call
// (bypassing libc's sigaction, as some runtimes do) after 0.3 s of CPU (in BurnBefore), then
// burns 0.3 s more (in BurnAfter). Prints "done" and exits 0.
//   raw_ignore        through libc's syscall(SYS_rt_sigaction, ...): a profiler that wraps
//                     syscall() records the program's action and samples on
//   raw_ignore asm    an inline `syscall` instruction, which nothing can wrap: a profiler
//                     whose handler it replaced must notice and say so
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

static int g_inline;

static long InlineRtSigaction(int sig, const struct KernelSigaction* action) {
  long result;
  register long r10 __asm__("r10") = 8;
  __asm__ volatile("syscall"
                   : "=a"(result)
                   : "0"((long)SYS_rt_sigaction), "D"((long)sig), "S"(action), "d"(0L),
                     "r"(r10)
                   : "rcx", "r11", "memory");
  return result;
}

static void IgnoreRaw(int sig) {
  struct KernelSigaction action;
  memset(&action, 0, sizeof(action));
  action.handler = SIG_IGN;
  if (g_inline) {
    InlineRtSigaction(sig, &action);
  } else {
    syscall(SYS_rt_sigaction, sig, &action, NULL, sizeof(action.mask));
  }
}

static void __attribute__((noinline)) BurnBefore(void) { BurnCpu(0.3); }
static void __attribute__((noinline)) BurnAfter(void) { BurnCpu(0.3); }

int main(int argc, char** argv) {
  g_inline = argc > 1 && strcmp(argv[1], "asm") == 0;
  BurnBefore();
  IgnoreRaw(SIGPROF);
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) IgnoreRaw(sig);
  BurnAfter();
  printf("done\n");
  return 0;
}
