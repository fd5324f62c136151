// CPU burning shared by the signal-ownership test programs (no Strata includes).
#ifndef STRATA_TESTS_HOST_SAFETY_SIGNALS_BURN_H_
#define STRATA_TESTS_HOST_SAFETY_SIGNALS_BURN_H_

#include <time.h>

static inline double ThreadCpuSeconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

// Spins until the calling thread has used `seconds` more of CPU time.
static inline unsigned long BurnCpu(double seconds) {
  volatile unsigned long sink = 0;
  const double end = ThreadCpuSeconds() + seconds;
  while (ThreadCpuSeconds() < end) {
    for (int i = 0; i < 10000; ++i) sink += (unsigned long)i * 2654435761u;
  }
  return sink;
}

#endif  // STRATA_TESTS_HOST_SAFETY_SIGNALS_BURN_H_
