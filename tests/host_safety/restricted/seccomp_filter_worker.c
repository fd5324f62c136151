// A seccomp filter that kills the process at any clock or timer system call (clock_gettime,
// clock_nanosleep, timer_create/settime/delete), the calls a sampling profiler makes:
//   seccomp_filter_worker thread   a worker thread installs it for itself (prctl), computes,
//                                  prints its result and returns; main joins and prints.
//   seccomp_filter_worker process  main installs it for every thread (seccomp(2) with
//                                  SECCOMP_FILTER_FLAG_TSYNC), then a worker computes.
// Exit status 0, prints "worker result=<n>" then "main done". No Strata include or call.
#define _GNU_SOURCE
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static uint64_t g_iterations = 300000000;
static int g_per_thread = 1;

#define KILL_IF(nr) \
  BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS)

static struct sock_filter g_filter[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    KILL_IF(SYS_clock_gettime),
    KILL_IF(SYS_clock_nanosleep),
    KILL_IF(SYS_timer_create),
    KILL_IF(SYS_timer_settime),
    KILL_IF(SYS_timer_delete),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};

static void InstallFilter(int all_threads) {
  struct sock_fprog program = {(unsigned short)(sizeof(g_filter) / sizeof(g_filter[0])),
                               g_filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    perror("PR_SET_NO_NEW_PRIVS");
    exit(2);
  }
  const long rc = all_threads ? syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
                                        SECCOMP_FILTER_FLAG_TSYNC, &program)
                              : prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0);
  if (rc != 0) {
    perror("seccomp filter");
    exit(2);
  }
}

static void* Work(void* out) {
  if (g_per_thread) InstallFilter(0);
  volatile uint64_t sum = 0;
  for (uint64_t i = 0; i < g_iterations; ++i) sum += i * i ^ (i >> 3);
  *(uint64_t*)out = sum;
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 2 || (strcmp(argv[1], "thread") != 0 && strcmp(argv[1], "process") != 0)) {
    fprintf(stderr, "usage: seccomp_filter_worker thread|process [ITERATIONS]\n");
    return 2;
  }
  g_per_thread = strcmp(argv[1], "thread") == 0;
  if (argc > 2) g_iterations = strtoull(argv[2], NULL, 10);
  if (!g_per_thread) InstallFilter(1);
  uint64_t result = 0;
  pthread_t thread;
  if (pthread_create(&thread, NULL, &Work, &result) != 0) return 3;
  pthread_join(thread, NULL);
  printf("worker result=%llu\nmain done\n", (unsigned long long)result);
  return 0;
}
