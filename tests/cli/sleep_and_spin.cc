// sleep_and_spin: an unmodified program (no Strata include or call) with two threads that
// run at the same time: "sleeper" waits --sleep-ms in sleeper_wait (clock_nanosleep to an
// absolute deadline, resumed after EINTR so the wait is whole whatever interrupts it) and
// "spinner" burns --spin-ms of its own CPU time in spinner_burn. The main thread joins both.
//
// Prints one line per thread with what it measured itself:
//   thread=sleeper wall_ms=W cpu_ms=C
//   thread=spinner wall_ms=W cpu_ms=C
// (wall: CLOCK_MONOTONIC from the thread's start to its end; cpu: CLOCK_THREAD_CPUTIME_ID.)
#include <pthread.h>
#include <time.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

double Now(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct Work {
  const char* name;
  double ms;
  double wall_ms = 0;
  double cpu_ms = 0;
};

__attribute__((noinline)) void sleeper_wait(double ms) {
  timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  const long long ns = deadline.tv_nsec + static_cast<long long>(ms * 1e6);
  deadline.tv_sec += ns / 1000000000;
  deadline.tv_nsec = ns % 1000000000;
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nullptr) == EINTR) {
  }
  asm volatile("" ::: "memory");  // Not a tail call: sleeper_wait stays on the stack.
}

volatile unsigned long long sink;

// Reads its CPU clock (a system call, ~0.5 us here) every ~2 ms of work, not every ~20 us:
// on this VM precise mode's timer signals are taken at the thread's next return from the
// kernel, which put 20-53 % of the CPU on clock_gettime when it ran every 20 us (2.4 % of the
// time; docs/sampling.md, "Precise mode's skid").
__attribute__((noinline)) void spinner_burn(double ms) {
  const double end = Now(CLOCK_THREAD_CPUTIME_ID) + ms;
  unsigned long long x = 1;
  while (Now(CLOCK_THREAD_CPUTIME_ID) < end) {
    for (int i = 0; i < 2000000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  }
  sink = x;
}

void* Run(void* arg) {
  Work* work = static_cast<Work*>(arg);
  pthread_setname_np(pthread_self(), work->name);
  const double wall0 = Now(CLOCK_MONOTONIC), cpu0 = Now(CLOCK_THREAD_CPUTIME_ID);
  if (std::strcmp(work->name, "sleeper") == 0) {
    sleeper_wait(work->ms);
  } else {
    spinner_burn(work->ms);
  }
  work->wall_ms = Now(CLOCK_MONOTONIC) - wall0;
  work->cpu_ms = Now(CLOCK_THREAD_CPUTIME_ID) - cpu0;
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  double sleep_ms = 500, spin_ms = 300;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--sleep-ms") == 0) sleep_ms = std::atof(argv[i + 1]);
    if (std::strcmp(argv[i], "--spin-ms") == 0) spin_ms = std::atof(argv[i + 1]);
  }
  Work works[2] = {{"sleeper", sleep_ms}, {"spinner", spin_ms}};
  pthread_t threads[2];
  for (int i = 0; i < 2; ++i) {
    if (pthread_create(&threads[i], nullptr, Run, &works[i]) != 0) return 1;
  }
  for (pthread_t t : threads) pthread_join(t, nullptr);
  for (const Work& w : works) std::printf("thread=%s wall_ms=%.2f cpu_ms=%.2f\n", w.name, w.wall_ms, w.cpu_ms);
  return 0;
}
