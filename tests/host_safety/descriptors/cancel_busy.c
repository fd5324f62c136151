// A program that cancels busy threads (no Strata include): each round starts a few threads
// that spin (in code without unwind information, spin_without_unwind_info.h) and reach a
// cancellation point, pthread_testcancel(), between spins; the main thread lets them run,
// cancels them (deferred cancellation, the default) and joins them. A sampling profiler
// interrupts the threads all the time; whatever its signal handler calls must not be a
// cancellation point, or a thread is cancelled inside the handler.
//
// Prints "cancel_busy: rounds=R cancelled=C" and exits 0 when every thread ended cancelled.
// Usage: cancel_busy [ROUNDS]   (default 80)
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tests/host_safety/descriptors/spin_without_unwind_info.h"

enum { kThreadsPerRound = 6 };

static void* BusyThread(void* unused) {
  (void)unused;
  for (;;) {
    spin_without_unwind_info(60000000);  // ~30 ms: samples land while a cancel is pending.
    pthread_testcancel();
  }
  return NULL;
}

int main(int argc, char** argv) {
  const long rounds = argc > 1 ? atol(argv[1]) : 80;
  long cancelled = 0;
  for (long round = 0; round < rounds; ++round) {
    pthread_t threads[kThreadsPerRound];
    for (int i = 0; i < kThreadsPerRound; ++i) {
      if (pthread_create(&threads[i], NULL, BusyThread, NULL) != 0) return 2;
    }
    const struct timespec run = {0, 10 * 1000 * 1000};
    nanosleep(&run, NULL);
    for (int i = 0; i < kThreadsPerRound; ++i) pthread_cancel(threads[i]);
    for (int i = 0; i < kThreadsPerRound; ++i) {
      void* status = NULL;
      if (pthread_join(threads[i], &status) != 0) return 2;
      if (status == PTHREAD_CANCELED) ++cancelled;
    }
  }
  printf("cancel_busy: rounds=%ld cancelled=%ld\n", rounds, cancelled);
  return cancelled == rounds * kThreadsPerRound ? 0 : 3;
}
