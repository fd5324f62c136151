// A real program (no Strata include): main calls HotLoop, which spins; built with -g and
// split by BUILD.bazel into a stripped binary with a .gnu_debuglink to its debug file.
#include <cstdio>
#include <cstdlib>

static volatile unsigned long sink;

__attribute__((noinline)) static void HotLoop(unsigned long iterations) {
  for (unsigned long i = 0; i < iterations; ++i) sink += i * 7;
}

int main(int argc, char** argv) {
  const unsigned long iterations = argc > 1 ? strtoul(argv[1], nullptr, 10) : 300000000UL;
  HotLoop(iterations);
  printf("hot_loop: done\n");
  return 0;
}
