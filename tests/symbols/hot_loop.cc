// A real program (no Strata include): main calls HotLoop, which spins; built with -g and
// split by BUILD.bazel into a stripped binary with a .gnu_debuglink to its debug file.
#include <cstdio>
#include <cstdlib>
#include <ctime>

static volatile unsigned long sink;

__attribute__((noinline)) static void HotLoop(unsigned long iterations) {
  for (unsigned long i = 0; i < iterations; ++i) {
    sink += i * 7;
#if defined(__SANITIZE_THREAD__)
    // TSan runs a signal's handler at the thread's next intercepted call: without one the
    // loop is sampled once, when it ends. A cheap one now and then, from inside HotLoop, so
    // that samples land here (with HotLoop and main as callers) under TSan too.
    if ((i & 0xffff) == 0) {
      timespec now;
      clock_gettime(CLOCK_MONOTONIC, &now);
    }
#endif
  }
}

int main(int argc, char** argv) {
  const unsigned long iterations = argc > 1 ? strtoul(argv[1], nullptr, 10) : 300000000UL;
  HotLoop(iterations);
  printf("hot_loop: done\n");
  return 0;
}
