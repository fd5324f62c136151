// Loaded and unloaded in a loop by libunwind_walker_test while its thread is being sampled.
#include <cstdint>

extern "C" __attribute__((visibility("default"))) uint64_t strata_test_dlopen_target(uint64_t x) {
  for (int i = 0; i < 1000; ++i) x = x * 2862933555777941757ULL + 3037000493ULL;
  return x;
}
