// wait_stacks: a worker thread ("ws-worker") that waits in each kind of blocking call the base
// tier wraps, each from a distinctively named function called by RunWaitPhases, with a short
// CPU burst (BurnBetweenWaits) before each wait; a helper thread ("ws-helper") ends each wait
// after kWaitMs. Then two threads ("ws-fighter") fight over one std::mutex. The main thread
// waits for them all in pthread_join (MainJoinsThreads). No Strata include: run it plain,
// preloaded, or under `strata record` (tests/wait_stacks_test.sh).
//
// Output, one line each:
//   wait_stacks: wait=NAME function=WaitInNAME real_ms=X   (the last one, after_siglongjmp:
//                WaitInReadAgain, after a read left by siglongjmp from a signal handler)
//   wait_stacks: contention waited_ms=X waits=N      (lock() calls that took >= 1 ms)
//   wait_stacks: done status=ok|failed
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace {

constexpr int kWaitMs = 200;

double NowMs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

void SleepMs(double ms) {
  timespec t{static_cast<time_t>(ms / 1000), static_cast<long>((ms - 1000 * (long)(ms / 1000)) * 1e6)};
  while (nanosleep(&t, &t) != 0) {
  }
}

bool g_failed = false;
void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "wait_stacks: %s failed\n", what);
    g_failed = true;
  }
}

// What the helper does next, and when the worker asked for it.
std::atomic<int> g_request{0};
int g_pipe[2];
int g_listen_fd = -1;
sockaddr_in g_address{};
sem_t g_semaphore;
std::mutex g_cond_mutex;
std::condition_variable g_cond;
bool g_cond_ready = false;
std::mutex g_held_mutex;
std::atomic<bool> g_mutex_held{false};

// Set by the worker itself before it makes any request (main's copy after pthread_create
// came too late: the worker could ask for the interrupt first; TSan reported the race).
std::atomic<pthread_t> g_worker{};
sigjmp_buf g_jump;

enum Request { kNone, kWritePipe, kSignalCond, kPostSem, kConnect, kHoldMutex, kInterrupt, kQuit };

void* HelperMain(void*) {
  pthread_setname_np(pthread_self(), "ws-helper");
  for (;;) {
    int request;
    while ((request = g_request.exchange(kNone)) == kNone) SleepMs(1);
    if (request == kQuit) return nullptr;
    if (request == kInterrupt) {  // A signal whose handler siglongjmps out of the worker's read.
      SleepMs(50);
      pthread_kill(g_worker.load(), SIGUSR1);
      continue;
    }
    if (request == kHoldMutex) {
      std::lock_guard<std::mutex> hold(g_held_mutex);
      g_mutex_held = true;
      SleepMs(kWaitMs);
      continue;
    }
    SleepMs(kWaitMs);
    switch (request) {
      case kWritePipe: Check(write(g_pipe[1], "x", 1) == 1, "write"); break;
      case kSignalCond: {
        std::lock_guard<std::mutex> lock(g_cond_mutex);
        g_cond_ready = true;
        g_cond.notify_one();
        break;
      }
      case kPostSem: sem_post(&g_semaphore); break;
      case kConnect: {
        const int fd = socket(AF_INET, SOCK_STREAM, 0);
        Check(connect(fd, reinterpret_cast<sockaddr*>(&g_address), sizeof(g_address)) == 0,
              "connect");
        close(fd);
        break;
      }
    }
  }
}

__attribute__((noinline)) void BurnBetweenWaits() {
  const double end = NowMs() + 5;
  volatile unsigned long x = 0;
  while (NowMs() < end) ++x;
}

char g_byte;

__attribute__((noinline)) void WaitInRead() {
  g_request = kWritePipe;
  Check(read(g_pipe[0], &g_byte, 1) == 1, "read");
}
__attribute__((noinline)) void WaitInPoll() {
  g_request = kWritePipe;
  pollfd fd{g_pipe[0], POLLIN, 0};
  Check(poll(&fd, 1, -1) == 1, "poll");
  Check(read(g_pipe[0], &g_byte, 1) == 1, "read after poll");
}
__attribute__((noinline)) void WaitInEpoll() {
  const int epoll = epoll_create1(EPOLL_CLOEXEC);
  epoll_event event{};
  event.events = EPOLLIN;
  epoll_ctl(epoll, EPOLL_CTL_ADD, g_pipe[0], &event);
  g_request = kWritePipe;
  Check(epoll_wait(epoll, &event, 1, -1) == 1, "epoll_wait");
  Check(read(g_pipe[0], &g_byte, 1) == 1, "read after epoll");
  close(epoll);
}
__attribute__((noinline)) void WaitInNanosleep() { SleepMs(kWaitMs); }
__attribute__((noinline)) void WaitInCondWait() {
  std::unique_lock<std::mutex> lock(g_cond_mutex);
  g_cond_ready = false;
  g_request = kSignalCond;
  g_cond.wait(lock, [] { return g_cond_ready; });
}
// The helper takes the mutex before the measured wait (a busy machine may delay it).
void HelperTakesMutex() {
  g_mutex_held = false;
  g_request = kHoldMutex;
  while (!g_mutex_held) SleepMs(0.2);
}
__attribute__((noinline)) void WaitInMutex() { std::lock_guard<std::mutex> lock(g_held_mutex); }
__attribute__((noinline)) void WaitInSemWait() {
  g_request = kPostSem;
  Check(sem_wait(&g_semaphore) == 0, "sem_wait");
}
// fork() is outside the measured wait (busy machines took 15 ms to fork this process).
pid_t g_child = -1;
void ForkSleepingChild() {
  g_child = fork();
  if (g_child == 0) {
    SleepMs(kWaitMs);
    _exit(0);
  }
}
__attribute__((noinline)) void WaitInWaitpid() {
  int status = -1;
  Check(waitpid(g_child, &status, 0) == g_child && status == 0, "waitpid");
}
__attribute__((noinline)) void WaitInAccept() {
  g_request = kConnect;
  const int fd = accept(g_listen_fd, nullptr, nullptr);
  Check(fd >= 0, "accept");
  close(fd);
}

// A read left by siglongjmp from a signal handler (its wrapper never returns), then a wait
// elsewhere: that one must be seen as itself.
void JumpOut(int) { siglongjmp(g_jump, 1); }
__attribute__((noinline)) void ReadLeftBySiglongjmp() {
  g_request = kInterrupt;
  char byte;
  (void)!read(g_pipe[0], &byte, 1);
  Check(false, "read left by siglongjmp returned");
}
__attribute__((noinline)) void WaitInReadAgain() {
  g_request = kWritePipe;
  Check(read(g_pipe[0], &g_byte, 1) == 1, "read again");
}
__attribute__((noinline)) void WaitInReadAfterSiglongjmp() {
  struct sigaction action {};
  action.sa_handler = &JumpOut;
  sigaction(SIGUSR1, &action, nullptr);
  if (sigsetjmp(g_jump, 1) == 0) ReadLeftBySiglongjmp();
  signal(SIGUSR1, SIG_DFL);
  BurnBetweenWaits();
  const double start = NowMs();
  WaitInReadAgain();
  std::printf("wait_stacks: wait=after_siglongjmp function=WaitInReadAgain real_ms=%.3f\n",
              NowMs() - start);
}

struct Phase {
  const char* name;
  const char* function;
  void (*wait)();
  void (*prepare)();  // Before the measured wait, or null.
};

__attribute__((noinline)) void RunWaitPhases() {
  static const Phase kPhases[] = {
      {"read", "WaitInRead", &WaitInRead, nullptr},
      {"poll", "WaitInPoll", &WaitInPoll, nullptr},
      {"epoll", "WaitInEpoll", &WaitInEpoll, nullptr},
      {"nanosleep", "WaitInNanosleep", &WaitInNanosleep, nullptr},
      {"condwait", "WaitInCondWait", &WaitInCondWait, nullptr},
      {"mutex", "WaitInMutex", &WaitInMutex, &HelperTakesMutex},
      {"semwait", "WaitInSemWait", &WaitInSemWait, nullptr},
      {"waitpid", "WaitInWaitpid", &WaitInWaitpid, &ForkSleepingChild},
      {"accept", "WaitInAccept", &WaitInAccept, nullptr},
  };
  for (const Phase& phase : kPhases) {
    BurnBetweenWaits();
    if (phase.prepare) phase.prepare();
    const double start = NowMs();
    phase.wait();
    const double real_ms = NowMs() - start;
    std::printf("wait_stacks: wait=%s function=%s real_ms=%.3f\n", phase.name, phase.function,
                real_ms);
  }
  // Last: a read left by siglongjmp, then a read (WaitInReadAgain) that must be seen as itself.
  BurnBetweenWaits();
  WaitInReadAfterSiglongjmp();
}

void* WorkerMain(void*) {
  pthread_setname_np(pthread_self(), "ws-worker");
  g_worker.store(pthread_self());
  RunWaitPhases();
  BurnBetweenWaits();
  return nullptr;
}

// Two threads fighting over one std::mutex: each holds it 3 ms, 25 times. They start the
// fight together (a loaded machine once ran the second only after the first had finished:
// no contention at all).
std::mutex g_fought_mutex;
pthread_barrier_t g_fight_start;
std::atomic<double> g_contended_ms{0};
std::atomic<int> g_contended_waits{0};

void* FighterMain(void*) {
  pthread_setname_np(pthread_self(), "ws-fighter");
  pthread_barrier_wait(&g_fight_start);
  for (int i = 0; i < 25; ++i) {
    const double start = NowMs();
    g_fought_mutex.lock();
    const double waited = NowMs() - start;
    if (waited >= 1.0) {
      double total = g_contended_ms.load();
      while (!g_contended_ms.compare_exchange_weak(total, total + waited)) {
      }
      ++g_contended_waits;
    }
    SleepMs(3);
    g_fought_mutex.unlock();
    SleepMs(0.5);
  }
  return nullptr;
}

__attribute__((noinline)) void MainJoinsThreads(pthread_t* threads, int count) {
  for (int i = 0; i < count; ++i) Check(pthread_join(threads[i], nullptr) == 0, "pthread_join");
}

}  // namespace

int main() {
  Check(pipe(g_pipe) == 0, "pipe");
  sem_init(&g_semaphore, 0, 0);
  g_listen_fd = socket(AF_INET, SOCK_STREAM, 0);
  g_address.sin_family = AF_INET;
  g_address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(g_address);
  Check(bind(g_listen_fd, reinterpret_cast<sockaddr*>(&g_address), sizeof(g_address)) == 0 &&
            listen(g_listen_fd, 4) == 0 &&
            getsockname(g_listen_fd, reinterpret_cast<sockaddr*>(&g_address), &size) == 0,
        "listen");

  pthread_t helper, worker;
  pthread_create(&helper, nullptr, &HelperMain, nullptr);
  pthread_create(&worker, nullptr, &WorkerMain, nullptr);
  MainJoinsThreads(&worker, 1);
  g_request = kQuit;
  MainJoinsThreads(&helper, 1);

  pthread_t fighters[2];
  pthread_barrier_init(&g_fight_start, nullptr, 2);
  for (pthread_t& fighter : fighters) pthread_create(&fighter, nullptr, &FighterMain, nullptr);
  MainJoinsThreads(fighters, 2);
  std::printf("wait_stacks: contention waited_ms=%.3f waits=%d\n", g_contended_ms.load(),
              g_contended_waits.load());
  std::printf("wait_stacks: done status=%s\n", g_failed ? "failed" : "ok");
  return g_failed ? 1 : 0;
}
