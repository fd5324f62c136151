// An unmodified program (no Strata include, no Strata call) that blocks in the calls a
// sampling profiler's signals are known to cut short (shared/design/sampling-mechanisms.md,
// "SA_RESTART / EINTR"), while another thread burns CPU.
//
// Each blocking call runs in its own thread (named "sl-<call>"), except one nanosleep in the
// main thread. Every thread first burns a little CPU (so that a CPU-time sampler has seen it
// running and armed whatever it arms), then blocks for a known duration:
//
//   nanosleep, usleep, clock_nanosleep (relative), sleep(1), poll, select, epoll_wait (all
//   timeouts), read on a pipe, sem_wait, pthread_cond_wait (woken by a helper thread at an
//   absolute deadline), waitpid (of a child that exits at the deadline), and nanosleep in main.
//
// A call fails when it returns an error (EINTR or any other), or returns before its duration
// (1 ms tolerance; for sleep(1), a return of 0 before 1 s is also a failure: the caller would
// believe it slept fully). One machine-readable line per call, with the call's return value
// (`result`; for waitpid the child's exit status when it returned the child, else -1), so that
// runs with and without a profiler can be compared (tests/sleeper_test.sh):
//
//   sleeper: call=poll expected_ms=300 elapsed_ms=300.2 result=0 status=ok
//   sleeper: call=nanosleep expected_ms=300 elapsed_ms=1.1 result=-1 status=EINTR
//
// and a summary line "sleeper: result calls=N failures=F". Exit status 0 when F == 0, else 1.
//
// Usage: sleeper [--duration-ms N]   (default 300; sleep(1) always sleeps one second)
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

long g_duration_ms = 300;
std::atomic<bool> g_stop_burning{false};
std::atomic<int> g_failures{0};
std::atomic<int> g_calls{0};
// Keeps the work from being optimised away; written by every thread (relaxed atomic).
std::atomic<uint64_t> g_sink{0};

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

timespec ToTimespec(int64_t ns) {
  timespec ts;
  ts.tv_sec = ns / 1000000000LL;
  ts.tv_nsec = ns % 1000000000LL;
  return ts;
}

// Sleeps until an absolute CLOCK_MONOTONIC deadline, resuming after EINTR (a helper must wake
// its waiter on time even if it is itself interrupted; such an interruption is counted).
void SleepUntil(int64_t deadline_ns, const char* who) {
  timespec ts = ToTimespec(deadline_ns);
  int interruptions = 0;
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    ++interruptions;
  }
  if (interruptions > 0) {
    std::printf("sleeper: call=%s-helper interruptions=%d status=EINTR\n", who, interruptions);
    g_failures.fetch_add(1);
  }
}

void BurnCpuMs(int ms) {
  timespec start;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
  uint64_t x = 1;
  for (;;) {
    for (int i = 0; i < 100000; ++i) x = x * 6364136223846793005ULL + 1;
    timespec now;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    if ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 >= ms) break;
  }
  g_sink.store(x, std::memory_order_relaxed);
}

// Records one call's outcome. `rc_ok` says whether the call's return value meant "completed
// normally"; `err` is errno after it (when !rc_ok).
void Report(const char* call, long expected_ms, int64_t start_ns, long result, bool rc_ok,
            int err) {
  double elapsed_ms = (NowNs() - start_ns) / 1e6;
  const char* status = "ok";
  if (!rc_ok) {
    status = err == EINTR ? "EINTR" : "error";
  } else if (elapsed_ms + 1.0 < static_cast<double>(expected_ms)) {
    status = "early";
  }
  g_calls.fetch_add(1);
  if (std::strcmp(status, "ok") != 0) g_failures.fetch_add(1);
  if (std::strcmp(status, "error") == 0) {
    std::printf(
        "sleeper: call=%s expected_ms=%ld elapsed_ms=%.1f result=%ld status=error errno=%d (%s)\n",
        call, expected_ms, elapsed_ms, result, err, std::strerror(err));
  } else {
    std::printf("sleeper: call=%s expected_ms=%ld elapsed_ms=%.1f result=%ld status=%s\n", call,
                expected_ms, elapsed_ms, result, status);
  }
}

struct Helper {
  const char* name;  // Of the call it wakes.
  int64_t deadline_ns;
  int pipe_write_fd = -1;
  sem_t* sem = nullptr;
  pthread_mutex_t* mutex = nullptr;
  pthread_cond_t* cond = nullptr;
  bool* flag = nullptr;
};

void* HelperMain(void* arg) {
  auto* h = static_cast<Helper*>(arg);
  pthread_setname_np(pthread_self(), "sl-helper");
  SleepUntil(h->deadline_ns, h->name);
  if (h->pipe_write_fd >= 0) {
    char c = 'x';
    if (write(h->pipe_write_fd, &c, 1) != 1) std::perror("sleeper: helper write");
  }
  if (h->sem) sem_post(h->sem);
  if (h->cond) {
    pthread_mutex_lock(h->mutex);
    *h->flag = true;
    pthread_cond_signal(h->cond);
    pthread_mutex_unlock(h->mutex);
  }
  return nullptr;
}

pthread_t StartHelper(Helper* h) {
  pthread_t t;
  if (pthread_create(&t, nullptr, HelperMain, h) != 0) {
    std::perror("sleeper: pthread_create helper");
    std::exit(3);
  }
  return t;
}

void DoNanosleep(const char* name) {
  timespec ts = ToTimespec(g_duration_ms * 1000000LL);
  int64_t t0 = NowNs();
  int rc = nanosleep(&ts, nullptr);
  Report(name, g_duration_ms, t0, rc, rc == 0, errno);
}

void DoUsleep() {
  int64_t t0 = NowNs();
  int rc = usleep(static_cast<useconds_t>(g_duration_ms * 1000));
  Report("usleep", g_duration_ms, t0, rc, rc == 0, errno);
}

void DoClockNanosleep() {
  timespec ts = ToTimespec(g_duration_ms * 1000000LL);
  int64_t t0 = NowNs();
  int rc = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, nullptr);  // returns the error number
  Report("clock_nanosleep", g_duration_ms, t0, rc, rc == 0, rc);
}

void DoSleep() {
  int64_t t0 = NowNs();
  unsigned left = sleep(1);
  // sleep() reports an interruption only through its return value (seconds left), and after
  // a very short interruption it may even return 0: the elapsed time check catches that.
  Report("sleep", 1000, t0, static_cast<long>(left), left == 0, EINTR);
}

void DoPoll() {
  int fds[2];
  if (pipe(fds) != 0) std::abort();
  pollfd p = {fds[0], POLLIN, 0};
  int64_t t0 = NowNs();
  int rc = poll(&p, 1, static_cast<int>(g_duration_ms));
  Report("poll", g_duration_ms, t0, rc, rc == 0, errno);
  close(fds[0]);
  close(fds[1]);
}

void DoSelect() {
  timeval tv;
  tv.tv_sec = g_duration_ms / 1000;
  tv.tv_usec = (g_duration_ms % 1000) * 1000;
  int64_t t0 = NowNs();
  int rc = select(0, nullptr, nullptr, nullptr, &tv);
  Report("select", g_duration_ms, t0, rc, rc == 0, errno);
}

void DoEpollWait() {
  int ep = epoll_create1(0);
  int fds[2];
  if (ep < 0 || pipe(fds) != 0) std::abort();
  epoll_event ev = {};
  ev.events = EPOLLIN;
  epoll_ctl(ep, EPOLL_CTL_ADD, fds[0], &ev);
  epoll_event out;
  int64_t t0 = NowNs();
  int rc = epoll_wait(ep, &out, 1, static_cast<int>(g_duration_ms));
  Report("epoll_wait", g_duration_ms, t0, rc, rc == 0, errno);
  close(ep);
  close(fds[0]);
  close(fds[1]);
}

void DoReadPipe() {
  int fds[2];
  if (pipe(fds) != 0) std::abort();
  int64_t t0 = NowNs();
  Helper h;
  h.name = "read";
  h.deadline_ns = t0 + g_duration_ms * 1000000LL;
  h.pipe_write_fd = fds[1];
  pthread_t helper = StartHelper(&h);
  char c = 0;
  ssize_t n = read(fds[0], &c, 1);
  Report("read", g_duration_ms, t0, static_cast<long>(n), n == 1 && c == 'x', errno);
  pthread_join(helper, nullptr);
  close(fds[0]);
  close(fds[1]);
}

void DoSemWait() {
  sem_t sem;
  sem_init(&sem, 0, 0);
  int64_t t0 = NowNs();
  Helper h;
  h.name = "sem_wait";
  h.deadline_ns = t0 + g_duration_ms * 1000000LL;
  h.sem = &sem;
  pthread_t helper = StartHelper(&h);
  int rc = sem_wait(&sem);
  Report("sem_wait", g_duration_ms, t0, rc, rc == 0, errno);
  pthread_join(helper, nullptr);
  sem_destroy(&sem);
}

void DoCondWait() {
  pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
  bool flag = false;
  int64_t t0 = NowNs();
  Helper h;
  h.name = "pthread_cond_wait";
  h.deadline_ns = t0 + g_duration_ms * 1000000LL;
  h.mutex = &mutex;
  h.cond = &cond;
  h.flag = &flag;
  pthread_t helper = StartHelper(&h);
  pthread_mutex_lock(&mutex);
  int rc = 0;
  while (!flag && rc == 0) rc = pthread_cond_wait(&cond, &mutex);
  pthread_mutex_unlock(&mutex);
  Report("pthread_cond_wait", g_duration_ms, t0, rc, rc == 0, rc);
  pthread_join(helper, nullptr);
}

void DoWaitpid() {
  int64_t t0 = NowNs();
  int64_t deadline = t0 + g_duration_ms * 1000000LL;
  pid_t child = fork();
  if (child < 0) {
    std::perror("sleeper: fork");
    std::exit(3);
  }
  if (child == 0) {
    // Only async-signal-safe calls in the child of a multi-threaded process.
    timespec ts = ToTimespec(deadline);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
    _exit(0);
  }
  int status = 0;
  pid_t rc = waitpid(child, &status, 0);
  int err = errno;
  const bool exited = rc == child && WIFEXITED(status);
  Report("waitpid", g_duration_ms, t0, exited ? WEXITSTATUS(status) : -1, exited, err);
  if (rc != child) waitpid(child, &status, 0);  // Reap it anyway.
}

struct Call {
  const char* thread_name;
  void (*run)();
};

void DoNanosleepInThread() { DoNanosleep("nanosleep"); }

const Call kCalls[] = {
    {"sl-nanosleep", DoNanosleepInThread},
    {"sl-usleep", DoUsleep},
    {"sl-clocknanosl", DoClockNanosleep},
    {"sl-sleep", DoSleep},
    {"sl-poll", DoPoll},
    {"sl-select", DoSelect},
    {"sl-epoll", DoEpollWait},
    {"sl-read", DoReadPipe},
    {"sl-semwait", DoSemWait},
    {"sl-condwait", DoCondWait},
    {"sl-waitpid", DoWaitpid},
};

void* CallThreadMain(void* arg) {
  const Call* call = static_cast<const Call*>(arg);
  pthread_setname_np(pthread_self(), call->thread_name);
  BurnCpuMs(20);
  call->run();
  return nullptr;
}

void* BurnerMain(void*) {
  pthread_setname_np(pthread_self(), "sl-burner");
  uint64_t x = 3;
  while (!g_stop_burning.load(std::memory_order_relaxed)) {
    for (int i = 0; i < 100000; ++i) x = x * 2862933555777941757ULL + 3037000493ULL;
  }
  g_sink.store(x, std::memory_order_relaxed);
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--duration-ms") == 0 && i + 1 < argc) {
      g_duration_ms = std::atol(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--duration-ms N]\n", argv[0]);
      return 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf("sleeper: start duration_ms=%ld\n", g_duration_ms);

  pthread_t burner;
  pthread_create(&burner, nullptr, BurnerMain, nullptr);
  std::vector<pthread_t> threads;
  for (const Call& call : kCalls) {
    pthread_t t;
    if (pthread_create(&t, nullptr, CallThreadMain, const_cast<Call*>(&call)) != 0) {
      std::perror("sleeper: pthread_create");
      return 3;
    }
    threads.push_back(t);
  }
  BurnCpuMs(20);
  DoNanosleep("nanosleep-main");
  for (pthread_t t : threads) pthread_join(t, nullptr);
  g_stop_burning.store(true);
  pthread_join(burner, nullptr);

  int failures = g_failures.load();
  std::printf("sleeper: result calls=%d failures=%d\n", g_calls.load(), failures);
  return failures == 0 ? 0 : 1;
}
