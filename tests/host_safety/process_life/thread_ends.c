// Issue 33, "every way a thread ends": N threads, each working ~1 ms of CPU (so that it is
// sampled), end by MODE -- return, pthread_exit, cancel (deferred, at pthread_testcancel) or
// a raw SYS_exit system call (no pthread cleanup, no thread-specific-data destructor) -- 50 at
// a time, each joined. Then, after 100 ms, a thread named "late-worker" works 200 ms of CPU
// (it must still be sampled). Not linked to Strata: run plain and preloaded.
//
//   thread_ends MODE N [BATCH]
// BATCH: threads alive at a time (50 when not given).
// stdout: "thread_ends: mode=MODE threads=N" (the same plain and preloaded); stderr:
// "measure: fds_before=A fds_after=B rss_before_kb=C rss_after_kb=D" (descriptors open and
// resident size before the first thread and 100 ms after the last one ended).
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

// Written by every thread: atomic (relaxed), so that the sink is no data race (TSan).
static atomic_ulong g_sink;
enum { kBatchMax = 50 };
static const char* g_mode;

static double ThreadCpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void Work(double seconds, int cancellable) {
  const double end = ThreadCpu() + seconds;
  while (ThreadCpu() < end) {
    unsigned long sum = atomic_load_explicit(&g_sink, memory_order_relaxed);
    for (int i = 0; i < 2000; ++i) sum += (unsigned long)i * 2654435761u;
    atomic_store_explicit(&g_sink, sum, memory_order_relaxed);
    if (cancellable) pthread_testcancel();
  }
}

static void* Ending(void* arg) {
  (void)arg;
  if (strcmp(g_mode, "cancel") == 0) {
    Work(0.001, 0);
    for (;;) Work(0.001, 1);  // Until cancelled.
  }
  Work(0.001, 0);
  if (strcmp(g_mode, "pthread_exit") == 0) pthread_exit(NULL);
  if (strcmp(g_mode, "sys_exit") == 0) {
    // The kernel still clears the thread's tid word (CLONE_CHILD_CLEARTID): pthread_join works.
    for (;;) syscall(SYS_exit, 0);
  }
  return NULL;
}

static void* LateWorker(void* arg) {
  (void)arg;
  Work(0.2, 0);
  return NULL;
}

static int OpenDescriptors(void) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  while (readdir(d)) ++n;
  closedir(d);
  return n - 3;  // ".", ".." and the directory's own descriptor.
}

static long ResidentKb(void) {
  FILE* f = fopen("/proc/self/status", "re");
  if (!f) return -1;
  char line[256];
  long kb = -1;
  while (fgets(line, sizeof(line), f)) {
    if (strncmp(line, "VmRSS:", 6) == 0) kb = strtol(line + 6, NULL, 10);
  }
  fclose(f);
  return kb;
}

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: thread_ends return|pthread_exit|cancel|sys_exit N [BATCH]\n");
    return 2;
  }
  g_mode = argv[1];
  const int n = atoi(argv[2]);
  int batch = argc == 4 ? atoi(argv[3]) : 50;
  if (batch < 1 || batch > kBatchMax) batch = kBatchMax;
  // One thread first, so that what a first thread costs once (stacks cached by libc, the
  // profiler's first allocations) is in the "before" figures.
  pthread_t warm;
  pthread_create(&warm, NULL, LateWorker, NULL);
  pthread_join(warm, NULL);
  const int fds_before = OpenDescriptors();
  const long rss_before = ResidentKb();
  for (int done = 0; done < n;) {
    pthread_t threads[kBatchMax];
    int made = 0;
    for (; made < batch && done + made < n; ++made) {
      if (pthread_create(&threads[made], NULL, Ending, NULL) != 0) {
        perror("pthread_create");
        return 1;
      }
    }
    if (strcmp(g_mode, "cancel") == 0) {
      for (int i = 0; i < made; ++i) pthread_cancel(threads[i]);
    }
    for (int i = 0; i < made; ++i) pthread_join(threads[i], NULL);
    done += made;
  }
  struct timespec pause = {0, 100 * 1000 * 1000};
  nanosleep(&pause, NULL);
  const int fds_after = OpenDescriptors();
  const long rss_after = ResidentKb();
  pthread_t late;
  pthread_create(&late, NULL, LateWorker, NULL);
  pthread_setname_np(late, "late-worker");
  pthread_join(late, NULL);
  printf("thread_ends: mode=%s threads=%d\n", g_mode, n);
  fprintf(stderr, "measure: fds_before=%d fds_after=%d rss_before_kb=%ld rss_after_kb=%ld\n",
          fds_before, fds_after, rss_before, rss_after);
  return 0;
}
