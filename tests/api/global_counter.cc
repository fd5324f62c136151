// A program with the footguns of issue 39 for tests/api/footguns_test.sh: a global
// strata::ProfilerCounter (destroyed when main returns, before the exit save) beside one
// allocated and never destroyed (the documented way, docs/api.md "Counters"). Linked with the
// base tier; profiled only when the environment says so (STRATA_STARTUP=1).
//
//   global_counter [--ms N] [--session]
//       spins N ms (default 60) adding to both counters; prints "done counting". --session:
//       around the spin, a session of its own (ProfilerStart, ProfilerStop).
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/counters.h"
#include "base/profiler.h"

namespace {

strata::ProfilerCounter g_global_counter("Global counter", "Other", "A global object: destroyed at exit");
strata::ProfilerCounter* const g_kept_counter =
    new strata::ProfilerCounter("Kept counter", "Other", "Allocated, never destroyed");

double NowMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  double ms = 60;
  bool session = false;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--ms") == 0 && i + 1 < argc) ms = atof(argv[i + 1]);
    if (strcmp(argv[i], "--session") == 0) session = true;
  }
  if (session) strata::ProfilerStart(strata::ProfilerSettings());
  long additions = 0;
  const double end = NowMs() + ms;
  while (NowMs() < end) {
    g_global_counter.Add(1);
    g_kept_counter->Add(1);
    ++additions;
  }
  if (session) strata::ProfilerStop();
  std::printf("done %s\n", additions > 0 ? "counting" : "nothing");
  return 0;
}
