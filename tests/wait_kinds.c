// Each wait charged to the call that waited (issue 34; docs/sampling.md "Unknown waits"):
// one thread waits in turn in different calls, each ~1 s, each after a different one, and
// prints how long each took by its own clock:
//   select (wrapped), then a nanosleep made with an inline `syscall` instruction (no libc
//   function: Strata cannot know it), then poll (wrapped), then sem_timedwait (wrapped),
//   then the raw nanosleep again, then sem_clockwait, then pthread_cond_timedwait (wrapped),
//   then 400 short waits in clock_nanosleep (wrapped), 2.5 ms each with 0.2 ms of CPU between
//   them: shorter than the sampler's period (4 ms), so most of them end before the sampler
//   has seen them, and their samples are the thread's own to write (wait/own_samples.h).
// stdout: "wait KIND MS" per call (KIND: select, unknown, poll, sem_timedwait, sem_clockwait,
// pthread_cond_timedwait) and for all the short waits together (clock_nanosleep), then
// "wait_kinds: done".
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <time.h>

static double NowMs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static struct timespec Deadline(long ms) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec += 1;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

// nanosleep without libc: no wrapper, no symbol anyone can interpose.
static void RawSleep(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  struct timespec rest;
  for (;;) {
    long rc;
    __asm__ volatile("syscall"
                     : "=a"(rc)
                     : "0"((long)SYS_nanosleep), "D"(&ts), "S"(&rest)
                     : "rcx", "r11", "memory");
    if (rc != -4) break;  // EINTR: sleep what is left.
    ts = rest;
  }
}

static void Report(const char* kind, double start) { printf("wait %s %.1f\n", kind, NowMs() - start); }

// Spins for `ms` of the thread's own CPU time.
static void Spin(double ms) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  const double end = ts.tv_sec * 1e3 + ts.tv_nsec / 1e6 + ms;
  volatile unsigned long x = 0;
  do {
    for (int i = 0; i < 1000; ++i) x = x + 1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  } while (ts.tv_sec * 1e3 + ts.tv_nsec / 1e6 < end);
}

int main(void) {
  const long ms = 1000;
  double start = NowMs();
  struct timeval tv = {ms / 1000, 0};
  select(0, NULL, NULL, NULL, &tv);
  Report("select", start);

  start = NowMs();
  RawSleep(ms);
  Report("unknown", start);

  start = NowMs();
  poll(NULL, 0, (int)ms);
  Report("poll", start);

  sem_t semaphore;
  sem_init(&semaphore, 0, 0);
  struct timespec deadline = Deadline(ms);
  start = NowMs();
  while (sem_timedwait(&semaphore, &deadline) != 0 && NowMs() - start < ms) {
  }
  Report("sem_timedwait", start);

  start = NowMs();
  RawSleep(ms);
  Report("unknown", start);

  // Python 3.11's timed Event.wait, Lock.acquire(timeout=), Queue.get(timeout=).
  struct timespec monotonic_deadline;
  clock_gettime(CLOCK_MONOTONIC, &monotonic_deadline);
  monotonic_deadline.tv_sec += ms / 1000;
  start = NowMs();
  while (sem_clockwait(&semaphore, CLOCK_MONOTONIC, &monotonic_deadline) != 0 && NowMs() - start < ms) {
  }
  Report("sem_clockwait", start);

  pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t condition = PTHREAD_COND_INITIALIZER;
  pthread_mutex_lock(&mutex);
  deadline = Deadline(ms);
  start = NowMs();
  while (pthread_cond_timedwait(&condition, &mutex, &deadline) == 0) {
  }
  Report("pthread_cond_timedwait", start);
  pthread_mutex_unlock(&mutex);

  double short_waits_ms = 0;
  for (int i = 0; i < 400; ++i) {
    Spin(0.2);
    const struct timespec short_wait = {0, 2500000L};
    start = NowMs();
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &short_wait, NULL) != 0) {
    }
    short_waits_ms += NowMs() - start;
  }
  printf("wait clock_nanosleep %.1f\n", short_waits_ms);
  printf("wait_kinds: done\n");
  return 0;
}
