// The classic signal-thread pattern: main blocks every signal (sigfillset + pthread_sigmask)
// before creating two CPU-bound workers, which inherit the mask, and a signal thread that waits
// for every signal with sigwait. When the workers are done, main sends SIGUSR1 to the process;
// the signal thread prints what it got ("sigwait=10" for SIGUSR1) and main checks that the mask
// it reads back is the full one it set ("mask_full=1"). Exits 0.
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "burn.h"

static void* Worker(void* arg) {
  (void)arg;
  BurnCpu(0.5);
  return NULL;
}

static void* SignalThread(void* arg) {
  sigset_t* all = (sigset_t*)arg;
  int sig = 0;
  if (sigwait(all, &sig) != 0) sig = -1;
  printf("sigwait=%d\n", sig);
  return NULL;
}

int main(void) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  pthread_t workers[2], signal_thread;
  pthread_create(&signal_thread, NULL, &SignalThread, &all);
  for (int i = 0; i < 2; ++i) pthread_create(&workers[i], NULL, &Worker, NULL);
  for (int i = 0; i < 2; ++i) pthread_join(workers[i], NULL);
  sigset_t current;
  pthread_sigmask(SIG_BLOCK, NULL, &current);
  int full = 1;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;  // Never blocked.
    if (sigismember(&all, sig) == 1 && sigismember(&current, sig) != 1) full = 0;
  }
  printf("mask_full=%d\n", full);
  fflush(stdout);
  kill(getpid(), SIGUSR1);
  pthread_join(signal_thread, NULL);
  return 0;
}
