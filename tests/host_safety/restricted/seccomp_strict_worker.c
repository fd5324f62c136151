// A thread enters seccomp strict mode (only read, write, _exit and sigreturn allowed from
// then on; strict mode also forbids rdtsc), computes for a while (it would be sampled),
// writes its result with write() and ends with syscall(SYS_exit). The main thread joins it
// (the kernel clears the thread id and wakes the joiner) and exits with status 0. No Strata
// include or call.
//   seccomp_strict_worker [ITERATIONS]   prints "worker result=<n>" then "main done"
#define _GNU_SOURCE
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static uint64_t g_iterations = 300000000;

// Decimal digits of `value` into `out`; returns the length.
static int FormatUnsigned(uint64_t value, char* out) {
  char digits[24];
  int count = 0;
  do {
    digits[count++] = (char)('0' + value % 10);
    value /= 10;
  } while (value != 0);
  for (int i = 0; i < count; ++i) out[i] = digits[count - 1 - i];
  return count;
}

static void* Work(void* unused) {
  (void)unused;
  char line[64] = "worker result=";
  int length = 14;
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT) != 0) {
    perror("prctl(PR_SET_SECCOMP)");
    exit(2);
  }
  volatile uint64_t sum = 0;
  for (uint64_t i = 0; i < g_iterations; ++i) sum += i * i ^ (i >> 3);
  length += FormatUnsigned(sum, line + length);
  line[length++] = '\n';
  if (write(STDOUT_FILENO, line, (size_t)length) != length) syscall(SYS_exit, 1);
  syscall(SYS_exit, 0);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc > 1) g_iterations = strtoull(argv[1], NULL, 10);
  pthread_t thread;
  if (pthread_create(&thread, NULL, &Work, NULL) != 0) return 3;
  pthread_join(thread, NULL);
  printf("main done\n");
  return 0;
}
