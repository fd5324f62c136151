#define _GNU_SOURCE
// A real-time thread whose short waits end while a profiler's sampler may be walking its
// stack (issue 33: a SCHED_FIFO thread spun in sched_yield after such a wait, keeping the
// sampler off its CPU: 949-950 ms stalls pinned, 3/3). Run it pinned to one CPU (taskset -c
// N), so that the sampler thread shares that CPU.
//
// A SCHED_FIFO (priority 10) thread makes 600 waits, 200 frames deep, of 1-3 ms, alternating nanosleep,
// clock_nanosleep and pthread_cond_timedwait (wrapped calls of wait stacks), each to an
// absolute deadline it computed, and measures how late it woke (CLOCK_MONOTONIC). A
// SCHED_OTHER main thread burns CPU meanwhile (the sampler samples it). Bounds, so that a
// spinning bug cannot hang the machine: a SCHED_FIFO watchdog thread of a higher priority
// (20) ends the process with status 3 if the worker has not finished after 20 s; the worker
// stops early after 10 s of waits.
//
// stdout: "rt_waits waits=<n>" (the same in every run); stderr:
// "lateness_us p50=<a> p90=<b> p99=<c> max=<d>" (what this run observed). Exit 0; 2 when
// SCHED_FIFO is not permitted; 3 from the watchdog.
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { kWaits = 600 };
static int64_t g_lateness_ns[kWaits];
static int g_done_waits = 0;
// Set by the worker, read by main and the watchdog: atomic, so that the flag is no data race
// (TSan reported it).
static atomic_int g_worker_done;
static volatile int g_stop_burning = 0;
static pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond;  // CLOCK_MONOTONIC; never signalled: every wait times out.

static int64_t NowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct timespec ToTimespec(int64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
  return ts;
}

static void WaitLoop(void);

// The waits happen 200 frames deep, so that a walk of the waiting thread's stack takes a while
// (~0.6 us a frame with libunwind) and a wait often ends during one.
static int __attribute__((noinline)) Deep(int depth) {
  volatile char pad[64];
  pad[0] = (char)depth;
  if (depth == 0) {
    WaitLoop();
    return pad[0];
  }
  return Deep(depth - 1) + pad[0];
}

static void* Worker(void* arg) {
  (void)arg;
  Deep(200);
  atomic_store(&g_worker_done, 1);
  return NULL;
}

static void WaitLoop(void) {
  const int64_t give_up = NowNs() + 10LL * 1000000000;
  for (int i = 0; i < kWaits && NowNs() < give_up; ++i) {
    const int64_t deadline = NowNs() + 1000000 + (i % 5) * 500000;  // 1-3 ms.
    const struct timespec at = ToTimespec(deadline);
    switch (i % 3) {
      case 0: {
        const int64_t left = deadline - NowNs();
        const struct timespec duration = ToTimespec(left > 0 ? left : 0);
        while (nanosleep(&duration, NULL) == -1 && errno == EINTR) {
        }
        break;
      }
      case 1:
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR) {
        }
        break;
      default:
        pthread_mutex_lock(&g_mutex);
        while (pthread_cond_timedwait(&g_cond, &g_mutex, &at) != ETIMEDOUT) {
        }
        pthread_mutex_unlock(&g_mutex);
        break;
    }
    g_lateness_ns[i] = NowNs() - deadline;
    g_done_waits = i + 1;
  }
}

static void* Watchdog(void* arg) {
  (void)arg;
  for (int tenths = 0; tenths < 200; ++tenths) {
    if (atomic_load(&g_worker_done)) return NULL;
    const struct timespec step = {0, 100000000};
    nanosleep(&step, NULL);
  }
  static const char kMessage[] = "rt_waits: watchdog: the real-time worker did not finish\n";
  (void)!write(2, kMessage, sizeof(kMessage) - 1);
  _exit(3);
}

static int CompareInt64(const void* a, const void* b) {
  const int64_t x = *(const int64_t*)a, y = *(const int64_t*)b;
  return x < y ? -1 : x > y;
}

static int StartFifo(pthread_t* thread, int priority, void* (*start)(void*)) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
  pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
  struct sched_param param = {.sched_priority = priority};
  pthread_attr_setschedparam(&attr, &param);
  const int error = pthread_create(thread, &attr, start, NULL);
  pthread_attr_destroy(&attr);
  return error;
}

int main(void) {
  pthread_condattr_t cond_attr;
  pthread_condattr_init(&cond_attr);
  pthread_condattr_setclock(&cond_attr, CLOCK_MONOTONIC);
  pthread_cond_init(&g_cond, &cond_attr);
  pthread_t watchdog, worker;
  if (StartFifo(&watchdog, 20, &Watchdog) != 0 || StartFifo(&worker, 10, &Worker) != 0) {
    fprintf(stderr, "rt_waits: SCHED_FIFO not permitted\n");
    return 2;
  }
  volatile uint64_t sink = 0;
  while (!atomic_load(&g_worker_done)) {
    for (int i = 0; i < 100000; ++i) sink += (uint64_t)i * 2654435761u;
  }
  pthread_join(worker, NULL);
  pthread_join(watchdog, NULL);
  const int n = g_done_waits;
  qsort(g_lateness_ns, (size_t)n, sizeof(int64_t), &CompareInt64);
  if (n > 0) {
    fprintf(stderr, "lateness_us p50=%lld p90=%lld p99=%lld max=%lld\n",
            (long long)(g_lateness_ns[n / 2] / 1000), (long long)(g_lateness_ns[n * 9 / 10] / 1000),
            (long long)(g_lateness_ns[n * 99 / 100] / 1000), (long long)(g_lateness_ns[n - 1] / 1000));
  }
  printf("rt_waits waits=%d\n", n);
  return 0;
}
