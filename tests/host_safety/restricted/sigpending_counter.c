// Counts how many queued-signal entries (RLIMIT_SIGPENDING) the program gets: POSIX timers
// created until timer_create fails with EAGAIN, then all deleted, then real-time signals
// queued to itself (blocked) with sigqueue until EAGAIN. Prints both counts, capped at
// MAX each. Run it at a low `ulimit -i` in a fresh user namespace (the count is per user
// and per namespace). No Strata include or call.
//   sigpending_counter   prints "timers=<n> timer_error=<errno name> queued=<n> ..."
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { kMax = 4096 };

static timer_t g_timers[kMax];

int main(void) {
  sigset_t blocked;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGRTMIN);
  sigaddset(&blocked, SIGUSR1);
  sigprocmask(SIG_BLOCK, &blocked, NULL);

  int timers = 0, timer_error = 0;
  struct sigevent event;
  memset(&event, 0, sizeof(event));
  event.sigev_notify = SIGEV_SIGNAL;
  event.sigev_signo = SIGUSR1;
  while (timers < kMax) {
    if (timer_create(CLOCK_MONOTONIC, &event, &g_timers[timers]) != 0) {
      timer_error = errno;
      break;
    }
    ++timers;
  }
  for (int i = 0; i < timers; ++i) timer_delete(g_timers[i]);

  int queued = 0, queue_error = 0;
  const union sigval value = {.sival_int = 42};
  while (queued < kMax) {
    if (sigqueue(getpid(), SIGRTMIN, value) != 0) {
      queue_error = errno;
      break;
    }
    ++queued;
  }
  printf("timers=%d timer_error=%s queued=%d queue_error=%s\n", timers,
         timer_error ? strerrorname_np(timer_error) : "none", queued,
         queue_error ? strerrorname_np(queue_error) : "none");
  return 0;
}
