// A negative control for the signal-safety stress scenario, not a profiler: preloaded into
// `signal_stress`, it does what a sampler must never do. Its SIGPROF handler allocates and
// frees a 40 KiB block (above the tcache sizes, so malloc takes its arena lock), and a thread
// sends SIGPROF to every other thread of the process every 0.2 ms. A signal that lands while
// its thread holds the arena lock deadlocks that thread (glibc's lock is not recursive);
// under it the scenario's watchdog must report a hang (or the process crashes). If it did
// not, the scenario could not detect an unsafe handler.

#include <cstdlib>

#include "tests/sigprof_injector.h"

namespace {

volatile char g_sink;

void OnSigprof(int) {
  // Deliberately not async-signal-safe.
  char* block = static_cast<char*>(std::malloc(40 * 1024));
  if (block) {
    block[0] = 1;
    g_sink = block[0];
  }
  std::free(block);
}

__attribute__((constructor)) void StartInjector() {
  strata_tests::StartSigprofInjector(&OnSigprof, 200000);  // every 0.2 ms
}

}  // namespace
