// Each wait charged to the call that waited (issue 34; docs/sampling.md "Unknown waits"):
// one thread waits in turn in different calls, each ~1 s, each after a different one, and
// prints how long each took by its own clock:
//   select (wrapped), then a nanosleep made with an inline `syscall` instruction (no libc
//   function: Strata cannot know it), then poll (wrapped), then sem_timedwait (wrapped),
//   then the raw nanosleep again, then sem_clockwait, then pthread_cond_timedwait (wrapped),
//   then a futex wait through syscall() (the syscall interposer marks it), the fortified
//   poll a _FORTIFY_SOURCE build calls (__poll_chk), C11's thrd_sleep and mtx_timedlock on a
//   mutex the thread holds (times out), then 400 short waits in clock_nanosleep (wrapped),
//   2.5 ms each with 0.2 ms of CPU between them: shorter than the sampler's period (4 ms), so
//   most of them end before the sampler has seen them, and their samples are the thread's own
//   to write (wait/own_samples.h).
// Then the waits a signal or another thread ends: sigwaitinfo, sigsuspend and sigpause (a
// helper thread signals the waiting one after ~1 s), pthread_once and C11's call_once while a
// helper thread runs the initializer (which sleeps ~1 s in nanosleep: the helper's own
// pthread_once must not be charged with it), fgets and getc on a pipe a helper thread writes
// a line to after ~1 s (and getline, which this -O2 build calls as __getdelim); then getrandom (kernel CPU, 64 MiB) and ioctl
// (FIONREAD on a pipe, 200 000 calls), timed call by call, on a thread named kernel_calls.
// stdout: "wait KIND MS" per call (KIND: select, unknown, poll, sem_timedwait, sem_clockwait,
// pthread_cond_timedwait, syscall, __poll_chk, thrd_sleep, mtx_timedlock, sigwaitinfo,
// sigsuspend, sigpause, pthread_once, call_once, fgets, getc, getline, getrandom, ioctl) and for all the short
// waits together (clock_nanosleep, and clock_nanosleep_between: the wall time between them),
// and main's time runnable but not running over the whole run (run_queue), the main thread's printed at its end (PrintReports), then
// "wait_kinds: done".
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/select.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

// What a -D_FORTIFY_SOURCE build calls for poll() with a known array size (glibc exports it;
// its headers declare it only under _FORTIFY_SOURCE).
extern int __poll_chk(struct pollfd* fds, nfds_t count, int timeout_ms, size_t fds_size);

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

// The measures are printed at the end (PrintReports), not between the waits: a CPU sample
// taken in printf between a wait and the raw (unknown) call after it would make the sampler
// write copies of that sample for the unknown call's time (a thread whose latest sample was a
// CPU sample may be waiting for a CPU: docs/sampling.md, "Unknown waits"), which a loaded CI
// run showed once (`__vfprintf_internal` 1 s). Between two waits only a clock read runs.
// Called by one thread at a time.
enum { kMaxReports = 64 };
static struct {
  const char* kind;
  double ms;
} g_reports[kMaxReports];
static int g_report_count = 0;

static void ReportMs(const char* kind, double ms) {
  if (g_report_count < kMaxReports) {
    g_reports[g_report_count].kind = kind;
    g_reports[g_report_count].ms = ms;
    ++g_report_count;
  }
}

static void Report(const char* kind, double start) { ReportMs(kind, NowMs() - start); }

static void PrintReports(void) {
  for (int i = 0; i < g_report_count; ++i) printf("wait %s %.1f\n", g_reports[i].kind, g_reports[i].ms);
}

// The calling thread's time spent runnable but waiting for a CPU, ms (the kernel's
// /proc/thread-self/schedstat, second field); -1 when the kernel does not say.
static double RunQueueWaitMs(void) {
  FILE* file = fopen("/proc/thread-self/schedstat", "r");
  if (file == NULL) return -1;
  unsigned long long run_ns = 0, waited_ns = 0;
  const int fields = fscanf(file, "%llu %llu", &run_ns, &waited_ns);
  fclose(file);
  return fields == 2 ? waited_ns / 1e6 : -1;
}

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

// --- Waits another thread ends. The helper starts its ~1 s only once the waiting thread says
// it is about to wait, so that the wait is ~1 s however the machine schedules the two.
static pthread_t g_waiter;
static atomic_int g_about_to_wait;
static int g_wake_signal;

static void SleepMs(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static void* SignalLater(void* unused) {
  (void)unused;
  while (!atomic_load(&g_about_to_wait)) sched_yield();
  SleepMs(1000);
  pthread_kill(g_waiter, g_wake_signal);
  return NULL;
}

static pthread_t StartSignaller(int signal_number) {
  pthread_t helper;
  atomic_store(&g_about_to_wait, 0);
  g_wake_signal = signal_number;
  pthread_create(&helper, NULL, SignalLater, NULL);
  return helper;
}

static void NoteSignal(int signal_number) { (void)signal_number; }

static sem_t g_initializer_started;
static void SlowInitializer(void) {
  sem_post(&g_initializer_started);
  SleepMs(1000);
}
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static once_flag g_c11_once = ONCE_FLAG_INIT;
static void* RunOnce(void* unused) {
  (void)unused;
  pthread_once(&g_once, SlowInitializer);
  return NULL;
}
static void* RunCallOnce(void* unused) {
  (void)unused;
  call_once(&g_c11_once, SlowInitializer);
  return NULL;
}

static void SignalWaits(void) {
  g_waiter = pthread_self();
  sigset_t usr1, usr2, old;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  struct sigaction action = {0};
  action.sa_handler = NoteSignal;
  sigaction(SIGUSR2, &action, NULL);

  pthread_sigmask(SIG_BLOCK, &usr1, &old);
  pthread_t helper = StartSignaller(SIGUSR1);
  atomic_store(&g_about_to_wait, 1);
  double start = NowMs();
  siginfo_t info;
  sigwaitinfo(&usr1, &info);
  Report("sigwaitinfo", start);
  pthread_join(helper, NULL);

  pthread_sigmask(SIG_BLOCK, &usr2, NULL);
  sigset_t without_usr2;
  pthread_sigmask(SIG_BLOCK, NULL, &without_usr2);
  sigdelset(&without_usr2, SIGUSR2);
  helper = StartSignaller(SIGUSR2);
  atomic_store(&g_about_to_wait, 1);
  start = NowMs();
  sigsuspend(&without_usr2);
  Report("sigsuspend", start);
  pthread_join(helper, NULL);

  helper = StartSignaller(SIGUSR2);
  atomic_store(&g_about_to_wait, 1);
  start = NowMs();
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  sigpause(SIGUSR2);  // X/Open: the thread's mask without SIGUSR2, then suspended.
#pragma GCC diagnostic pop
  Report("sigpause", start);
  pthread_join(helper, NULL);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}

// stdio reads of a pipe another thread writes a line to ~1 s after the reader says it is
// about to read: fgets, then getc.
static int g_pipe_write_end;
static void* WriteLater(void* unused) {
  (void)unused;
  while (!atomic_load(&g_about_to_wait)) sched_yield();
  SleepMs(1000);
  if (write(g_pipe_write_end, "line\n", 5) != 5) perror("write");
  return NULL;
}
static void StdioWaits(void) {
  int pipe_ends[2];
  if (pipe(pipe_ends) != 0) return;
  g_pipe_write_end = pipe_ends[1];
  FILE* input = fdopen(pipe_ends[0], "r");
  char line[64];
  const char* kinds[] = {"fgets", "getc", "getline"};
  char* whole_line = NULL;
  size_t whole_line_size = 0;
  for (int i = 0; i < 3; ++i) {
    pthread_t helper;
    atomic_store(&g_about_to_wait, 0);
    pthread_create(&helper, NULL, WriteLater, NULL);
    atomic_store(&g_about_to_wait, 1);
    const double start = NowMs();
    if (i == 0) {
      if (fgets(line, sizeof(line), input) == NULL) perror("fgets");
    } else if (i == 1) {
      if (getc(input) == EOF) perror("getc");
    } else {
      // Built with -O2: <bits/stdio.h> inlines getline into a call of __getdelim.
      if (getline(&whole_line, &whole_line_size, input) < 0) perror("getline");
    }
    Report(kinds[i], start);
    pthread_join(helper, NULL);
    if (i == 1 && fgets(line, sizeof(line), input) == NULL) {  // The rest of the line: buffered.
      perror("fgets");
    }
  }
  free(whole_line);
  fclose(input);
  close(pipe_ends[1]);
}

static void OnceWaits(void) {
  sem_init(&g_initializer_started, 0, 0);
  pthread_t helper;
  pthread_create(&helper, NULL, RunOnce, NULL);
  sem_wait(&g_initializer_started);
  double start = NowMs();
  pthread_once(&g_once, SlowInitializer);
  Report("pthread_once", start);
  pthread_join(helper, NULL);

  pthread_create(&helper, NULL, RunCallOnce, NULL);
  sem_wait(&g_initializer_started);
  start = NowMs();
  call_once(&g_c11_once, SlowInitializer);
  Report("call_once", start);
  pthread_join(helper, NULL);
}

// Calls whose time is mostly the kernel's CPU, timed call by call, on a thread of their own
// ("kernel_calls"): the time it is preempted between calls under load is an unknown wait of
// its own, not main's.
static void* KernelCpuCalls(void* unused) {
  (void)unused;
  pthread_setname_np(pthread_self(), "kernel_calls");
  static char buffer[1 << 20];
  double total = 0;
  for (int i = 0; i < 64; ++i) {
    const double start = NowMs();
    if (getrandom(buffer, sizeof(buffer), 0) < 0) break;
    total += NowMs() - start;
  }
  printf("wait getrandom %.1f\n", total);

  int pipe_ends[2];
  if (pipe(pipe_ends) != 0) return NULL;
  total = 0;
  for (int i = 0; i < 200000; ++i) {
    int queued;
    const double start = NowMs();
    ioctl(pipe_ends[0], FIONREAD, &queued);
    total += NowMs() - start;
  }
  printf("wait ioctl %.1f\n", total);
  close(pipe_ends[0]);
  close(pipe_ends[1]);
  return NULL;
}

int main(void) {
  const long ms = 1000;
  const double run_queue_start_ms = RunQueueWaitMs();
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

  // A futex wait through syscall(), as hand-written locks and runtimes make it.
  uint32_t futex_word = 0;
  struct timespec relative = {ms / 1000, (ms % 1000) * 1000000L};
  start = NowMs();
  while (NowMs() - start < ms - 1) {
    const double left = ms - (NowMs() - start);
    relative.tv_sec = (long)(left / 1000);
    relative.tv_nsec = (long)((left - relative.tv_sec * 1000.0) * 1e6);
    syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0, &relative, NULL, 0);
  }
  Report("syscall", start);

  start = NowMs();
  __poll_chk(NULL, 0, (int)ms, 0);
  Report("__poll_chk", start);

  struct timespec duration = {ms / 1000, (ms % 1000) * 1000000L};
  start = NowMs();
  thrd_sleep(&duration, NULL);
  Report("thrd_sleep", start);

  mtx_t c11_mutex;
  mtx_init(&c11_mutex, mtx_timed);
  mtx_lock(&c11_mutex);  // Held by this thread: the timed lock below waits until its deadline.
  deadline = Deadline(ms);
  start = NowMs();
  if (mtx_timedlock(&c11_mutex, &deadline) == thrd_success) mtx_unlock(&c11_mutex);
  Report("mtx_timedlock", start);
  mtx_unlock(&c11_mutex);
  mtx_destroy(&c11_mutex);

  double short_waits_ms = 0;
  const double short_waits_start = NowMs();
  for (int i = 0; i < 400; ++i) {
    Spin(0.2);
    const struct timespec short_wait = {0, 2500000L};
    start = NowMs();
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &short_wait, NULL) != 0) {
    }
    short_waits_ms += NowMs() - start;
  }
  ReportMs("clock_nanosleep", short_waits_ms);
  // The wall time between the short waits (the spins, and any preemption there): a sample
  // stands for the time to the thread's next one, so a spin the sampler misses goes to the
  // wait before it.
  ReportMs("clock_nanosleep_between", NowMs() - short_waits_start - short_waits_ms);

  SignalWaits();
  OnceWaits();
  StdioWaits();
  pthread_t kernel_calls;
  pthread_create(&kernel_calls, NULL, KernelCpuCalls, NULL);
  pthread_join(kernel_calls, NULL);
  // Main's time off CPU while runnable (preempted): right after a wrapped wait it reads as
  // an unknown wait (docs/sampling.md, "Unknown waits": the sampler cannot tell it from a
  // blocked thread), so the test allows that much more of them.
  const double run_queue_end_ms = RunQueueWaitMs();
  if (run_queue_start_ms >= 0 && run_queue_end_ms >= 0) {
    ReportMs("run_queue", run_queue_end_ms - run_queue_start_ms);
  }
  PrintReports();
  printf("wait_kinds: done\n");
  return 0;
}
