// A program that ends by SIGTERM, its disposition left at the default. No Strata include or
// call.
//
//   term_target wait   spins about 0.3 s of CPU, prints "term_target: ready pid=N", then
//                      spins until a signal ends it (at most 60 s, then exits 9).
//   term_target self   spins about 0.3 s of CPU, then sends itself SIGTERM (kill(getpid())).
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace {

volatile unsigned long g_sink = 0;

double CpuSeconds() {
  struct timespec now;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + now.tv_nsec / 1e9;
}

double WallSeconds() {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<double>(now.tv_sec) + now.tv_nsec / 1e9;
}

__attribute__((noinline)) void term_target_spin(double cpu_seconds, double wall_limit) {
  const double cpu_start = CpuSeconds(), wall_start = WallSeconds();
  while (CpuSeconds() - cpu_start < cpu_seconds && WallSeconds() - wall_start < wall_limit) {
    for (int i = 0; i < 10000; ++i) g_sink = g_sink * 31 + i;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "wait") == 0) {
    term_target_spin(0.3, 60);
    std::printf("term_target: ready pid=%d\n", getpid());
    std::fflush(stdout);
    term_target_spin(1e9, 60);
    return 9;
  }
  if (argc == 2 && std::strcmp(argv[1], "self") == 0) {
    term_target_spin(0.3, 60);
    kill(getpid(), SIGTERM);
    return 9;
  }
  std::fprintf(stderr, "usage: term_target wait|self\n");
  return 2;
}
