// cpu_accounting: threads whose own CPU clocks the profile's CPU deltas must add up to
// (issue 17, "CPU accounting"; tests/cpu_accounting_test.sh). Linked with the base tier for
// ProfilerPause/ProfilerResume; run with STRATA_STARTUP=1 and STRATA_SHUTDOWN=PROFILE.
//
// Threads (each prints `thread name=N tid=T cpu_ms=C paused_ms=P` as its last act, where C is
// its CPU clock then and P the CPU it used while the session was paused):
//   acct-busy    burns 300 ms of CPU in one go.
//   acct-bursty  40 times: burns 2 ms, sleeps 3 ms (runs, blocks, runs: copies in between).
//   acct-short   20 times: burns 0.6 ms, sleeps 20 ms (less than an interval of CPU each time).
//   acct-pause   after the others: burns 100 ms, pauses the session, burns 100 ms, resumes,
//                burns 100 ms (the paused 100 ms must not be in its samples).
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>

#include "base/profiler.h"

namespace {

std::atomic<uint64_t> g_sink{0};

int64_t ThreadCpuNs() {
  timespec now;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

void BurnCpuNs(int64_t ns) {
  const int64_t end = ThreadCpuNs() + ns;
  uint64_t x = 1;
  while (ThreadCpuNs() < end) {
    for (int i = 0; i < 20000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  }
  g_sink.fetch_add(x, std::memory_order_relaxed);
}

void SleepNs(int64_t ns) {
  timespec t{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  while (nanosleep(&t, &t) != 0) {
  }
}

void Report(const char* name, double paused_ms) {
  const int64_t cpu = ThreadCpuNs();
  std::printf("thread name=%s tid=%ld cpu_ms=%.3f paused_ms=%.3f\n", name,
              static_cast<long>(syscall(SYS_gettid)), cpu / 1e6, paused_ms);
}

void* Busy(void*) {
  pthread_setname_np(pthread_self(), "acct-busy");
  BurnCpuNs(300 * 1000000LL);
  Report("acct-busy", 0);
  return nullptr;
}

void* Bursty(void*) {
  pthread_setname_np(pthread_self(), "acct-bursty");
  for (int i = 0; i < 40; ++i) {
    BurnCpuNs(2 * 1000000LL);
    SleepNs(3 * 1000000LL);
  }
  Report("acct-bursty", 0);
  return nullptr;
}

void* Short(void*) {
  pthread_setname_np(pthread_self(), "acct-short");
  for (int i = 0; i < 20; ++i) {
    BurnCpuNs(600 * 1000LL);
    SleepNs(20 * 1000000LL);
  }
  Report("acct-short", 0);
  return nullptr;
}

void* Pauser(void*) {
  pthread_setname_np(pthread_self(), "acct-pause");
  BurnCpuNs(100 * 1000000LL);
  const int64_t before_pause = ThreadCpuNs();
  strata::ProfilerPause();
  BurnCpuNs(100 * 1000000LL);
  strata::ProfilerResume();
  const int64_t after_resume = ThreadCpuNs();
  BurnCpuNs(100 * 1000000LL);
  Report("acct-pause", (after_resume - before_pause) / 1e6);
  return nullptr;
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (!strata::ProfilerIsActive()) {
    std::fprintf(stderr, "cpu_accounting: no session (run with STRATA_STARTUP=1)\n");
    return 2;
  }
  pthread_t threads[3];
  pthread_create(&threads[0], nullptr, Busy, nullptr);
  pthread_create(&threads[1], nullptr, Bursty, nullptr);
  pthread_create(&threads[2], nullptr, Short, nullptr);
  for (pthread_t t : threads) pthread_join(t, nullptr);
  pthread_t pauser;
  pthread_create(&pauser, nullptr, Pauser, nullptr);
  pthread_join(pauser, nullptr);
  return 0;
}
