// A thread forbids itself the time-stamp counter (prctl(PR_SET_TSC, PR_TSC_SIGSEGV)) after
// the session started, then computes for a while (it is sampled meanwhile), creates a thread
// that inherits the flag and computes too, and ends normally; the program prints the result
// and exits through exit() (so an exit save runs on the main thread). No clock is read by the
// program after the prctl (the vDSO's clock_gettime would fault there too). No Strata include
// or call.
//   tsc_forbidding_worker [thread|main|term] [ITERATIONS]   exit status 0, prints "result=<n>"
//     thread (default): a worker thread forbids the TSC; main joins it.
//     main: the main thread forbids it, and runs the exit save with the flag set (issue 33:
//           SIGSEGV 3/3 in the vDSO's clock_gettime(CLOCK_REALTIME) of the exit save).
//     term: as main, then raise(SIGTERM) instead of returning (status 143): under
//           `strata record` the record hook's handler runs on that thread (issue 33: it read
//           CLOCK_MONOTONIC through the vDSO: SIGSEGV, status 139).
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>

static uint64_t g_iterations = 300000000;

static uint64_t Compute(uint64_t iterations) {
  volatile uint64_t sum = 0;
  for (uint64_t i = 0; i < iterations; ++i) sum += i * i ^ (i >> 3);
  return sum;
}

static void* Child(void* out) {
  *(uint64_t*)out = Compute(g_iterations / 2);
  return NULL;
}

static void ForbidTsc(void) {
  if (prctl(PR_SET_TSC, PR_TSC_SIGSEGV) != 0) {
    perror("prctl(PR_SET_TSC)");
    exit(2);
  }
}

// Forbids the TSC on the calling thread, computes, and joins a child that inherited the flag.
static uint64_t ForbidAndCompute(void) {
  ForbidTsc();
  uint64_t child_result = 0;
  pthread_t child;
  if (pthread_create(&child, NULL, &Child, &child_result) != 0) exit(3);
  const uint64_t own = Compute(g_iterations / 2);
  pthread_join(child, NULL);
  return own + 3 * child_result;
}

static void* Work(void* out) {
  *(uint64_t*)out = ForbidAndCompute();
  return NULL;
}

int main(int argc, char** argv) {
  int on_main = 0;
  int terminate = 0;
  int arg = 1;
  if (arg < argc && strcmp(argv[arg], "main") == 0) on_main = 1, ++arg;
  else if (arg < argc && strcmp(argv[arg], "term") == 0) on_main = 1, terminate = 1, ++arg;
  else if (arg < argc && strcmp(argv[arg], "thread") == 0) ++arg;
  if (arg < argc) g_iterations = strtoull(argv[arg], NULL, 10);
  uint64_t result = 0;
  if (on_main) {
    result = ForbidAndCompute();
  } else {
    pthread_t thread;
    if (pthread_create(&thread, NULL, &Work, &result) != 0) return 3;
    pthread_join(thread, NULL);
  }
  printf("result=%llu\n", (unsigned long long)result);
  if (terminate) {
    fflush(stdout);
    raise(SIGTERM);
  }
  return 0;
}
