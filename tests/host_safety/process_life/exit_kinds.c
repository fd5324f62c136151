// Issue 33, "every way a process ends": a program with two busy threads (a profile worth
// saving) that ends as MODE says. Not linked to Strata: run plain and preloaded
// (exit_kinds_test.sh).
//
//   exit_kinds MODE [DELAY_MS]
//   exit          main returns 0 after the work (the control);
//   _exit         _exit(5) after the work;
//   exec          execl("/bin/sh", "sh", "-c", "exit 6") after the work (the new image ends);
//   exit_threads  8 threads and main call exit(7) at the same moment;
//   kill_thread   main calls exit(0); another thread, DELAY_MS (default 15) later, sends the
//                 process SIGKILL
//                 (plain: the process has ended by then; preloaded: during the exit save);
//   term_thread   the same with SIGTERM (default action);
//   _exit_thread  the same with _exit(9) from the other thread.
// Prints "exit_kinds: MODE work done" before ending (stdout, flushed).
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// Written by every thread: atomic (relaxed), so that the sink is no data race (TSan).
static atomic_ulong g_sink;
static atomic_int g_go;
static atomic_int g_stop;

static double ThreadCpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void Work(double seconds) {
  const double end = ThreadCpu() + seconds;
  while (ThreadCpu() < end) {
    unsigned long sum = atomic_load_explicit(&g_sink, memory_order_relaxed);
    for (int i = 0; i < 2000; ++i) sum += (unsigned long)i * 2654435761u;
    atomic_store_explicit(&g_sink, sum, memory_order_relaxed);
  }
}

static void* Busy(void* arg) {
  (void)arg;
  while (!atomic_load(&g_stop)) Work(0.005);
  return NULL;
}

static void* ExitAtOnce(void* arg) {
  (void)arg;
  while (!atomic_load(&g_go)) {
  }
  exit(7);
}

static const char* g_killer_mode;
static long g_delay_ms = 15;
static void* Killer(void* arg) {
  (void)arg;
  while (!atomic_load(&g_go)) {
    struct timespec t = {0, 100000};
    nanosleep(&t, NULL);
  }
  struct timespec t = {g_delay_ms / 1000, (g_delay_ms % 1000) * 1000L * 1000L};
  nanosleep(&t, NULL);
  if (strcmp(g_killer_mode, "kill_thread") == 0) kill(getpid(), SIGKILL);
  if (strcmp(g_killer_mode, "term_thread") == 0) kill(getpid(), SIGTERM);
  if (strcmp(g_killer_mode, "_exit_thread") == 0) _exit(9);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: exit_kinds MODE [DELAY_MS]\n");
    return 2;
  }
  if (argc == 3) g_delay_ms = atol(argv[2]);
  const char* mode = argv[1];
  pthread_t busy;
  pthread_create(&busy, NULL, Busy, NULL);
  Work(0.4);
  atomic_store(&g_stop, 1);
  pthread_join(busy, NULL);
  printf("exit_kinds: %s work done\n", mode);
  fflush(stdout);
  if (strcmp(mode, "exit") == 0) return 0;
  if (strcmp(mode, "_exit") == 0) _exit(5);
  if (strcmp(mode, "exec") == 0) {
    execl("/bin/sh", "sh", "-c", "exit 6", (char*)NULL);
    return 127;
  }
  if (strcmp(mode, "exit_threads") == 0) {
    pthread_t threads[8];
    for (int i = 0; i < 8; ++i) pthread_create(&threads[i], NULL, ExitAtOnce, NULL);
    atomic_store(&g_go, 1);
    exit(7);
  }
  if (strstr(mode, "_thread")) {
    g_killer_mode = mode;
    pthread_t killer;
    pthread_create(&killer, NULL, Killer, NULL);
    atomic_store(&g_go, 1);
    exit(0);
  }
  fprintf(stderr, "unknown mode %s\n", mode);
  return 2;
}
