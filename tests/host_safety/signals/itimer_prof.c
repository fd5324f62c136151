// Profiles itself: a SIGPROF handler that counts, ITIMER_PROF every 10 ms, 1 s of CPU. Prints
// "sigprof=N expected=M" (M: the process's CPU time meanwhile / 10 ms, what ITIMER_PROF
// measures: a profiler's own threads count too) and exits 0.
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include "burn.h"

static volatile sig_atomic_t g_sigprof_count = 0;

static void OnSigprof(int sig) {
  (void)sig;
  g_sigprof_count = g_sigprof_count + 1;
}

static double ProcessCpuSeconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(void) {
  struct sigaction action;
  memset(&action, 0, sizeof(action));
  action.sa_handler = &OnSigprof;
  action.sa_flags = SA_RESTART;
  sigaction(SIGPROF, &action, NULL);
  struct itimerval timer = {{0, 10000}, {0, 10000}};
  setitimer(ITIMER_PROF, &timer, NULL);
  const double start = ProcessCpuSeconds();
  BurnCpu(1.0);
  const double used = ProcessCpuSeconds() - start;
  struct itimerval off;
  memset(&off, 0, sizeof(off));
  setitimer(ITIMER_PROF, &off, NULL);
  printf("sigprof=%d expected=%d\n", (int)g_sigprof_count, (int)(used / 0.010 + 0.5));
  return 0;
}
