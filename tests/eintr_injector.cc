// A negative control for the sleeper scenario, not a profiler: preloaded into `sleeper`, it
// sends SIGPROF (handler installed with SA_RESTART, like a sampler's) to every thread of the
// process every millisecond, the way a wall-clock sampler does. Under it, sleeper must report
// EINTR / early returns (sampling-mechanisms.md lists nanosleep, usleep, clock_nanosleep,
// poll, select, epoll_wait and sleep as affected even with SA_RESTART); if it did not, the
// sleeper could not detect what its scenario is meant to catch.

#include <cerrno>
#include <cstdlib>

#include "tests/sigprof_injector.h"

namespace {

void OnSigprof(int) {}

__attribute__((constructor)) void StartInjector() {
  strata_tests::StartSigprofInjector(&OnSigprof, 1000000);  // every 1 ms
}

}  // namespace
