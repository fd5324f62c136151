// A thread forbids itself the time-stamp counter (prctl(PR_SET_TSC, PR_TSC_SIGSEGV)), then
// computes for a while (it is sampled meanwhile) and ends normally; the main thread joins it
// and prints the result. No clock is read by the program after the prctl (the vDSO's
// clock_gettime would fault there too). No Strata include or call.
//   tsc_forbidding_worker [ITERATIONS]   exit status 0, prints "result=<n>"
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>

static uint64_t g_iterations = 300000000;

static void* Work(void* out) {
  if (prctl(PR_SET_TSC, PR_TSC_SIGSEGV) != 0) {
    perror("prctl(PR_SET_TSC)");
    exit(2);
  }
  volatile uint64_t sum = 0;
  for (uint64_t i = 0; i < g_iterations; ++i) sum += i * i ^ (i >> 3);
  *(uint64_t*)out = sum;
  return NULL;
}

int main(int argc, char** argv) {
  if (argc > 1) g_iterations = strtoull(argv[1], NULL, 10);
  uint64_t result = 0;
  pthread_t thread;
  if (pthread_create(&thread, NULL, &Work, &result) != 0) return 3;
  pthread_join(thread, NULL);
  printf("result=%llu\n", (unsigned long long)result);
  return 0;
}
