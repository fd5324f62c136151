// callgrind_driver: runs one label or marker fast path N times between callgrind's
// START/STOP_INSTRUMENTATION requests, so that `valgrind --tool=callgrind --instr-atstart=no`
// counts only the loop's instructions (tools/bench.sh divides them by N). Instruction counts do
// not depend on the machine's load, unlike timings. Outside valgrind the requests are no-ops.
//
// Usage: callgrind_driver CASE N
//   CASE: empty             the loop alone (its count is subtracted from the others)
//         label_inactive    STRATA_LABEL without a session
//         marker_inactive   STRATA_MARKER_UNTYPED without a session
//         label_active      STRATA_LABEL push + pop in a session
//         marker_instant    untyped instant marker in a session
//         marker_interval   untyped interval marker (start given, end read now) in a session
//         marker_typed3     typed marker with three fields (int64, double, literal string)
// The session (active cases) samples at 1 s and is paused, so the sampler neither interrupts
// the loop nor runs beside it; markers are still recorded while paused (base/profiler.h).
// Linked with the base implementation statically, like base/base_benchmark.cc.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/labels.h"
#include "base/markers.h"
#include "base/profiler.h"
#include "base/testing/three_field_marker.h"
#include "platform/strata_clock.h"
#include "valgrind/callgrind.h"

namespace {

using strata::testing::ThreeFieldMarker;

inline void Barrier() { asm volatile("" ::: "memory"); }

__attribute__((noinline)) void LoopEmpty(long n) {
  for (long i = 0; i < n; ++i) Barrier();
}
__attribute__((noinline)) void LoopLabel(long n) {
  for (long i = 0; i < n; ++i) {
    STRATA_LABEL("label", kOther);
    Barrier();
  }
}
__attribute__((noinline)) void LoopMarkerUntyped(long n) {
  for (long i = 0; i < n; ++i) {
    STRATA_MARKER_UNTYPED("marker", kOther);
    Barrier();
  }
}
__attribute__((noinline)) void LoopMarkerInterval(long n, strata::TimeStamp start) {
  for (long i = 0; i < n; ++i) {
    STRATA_MARKER_UNTYPED("marker", kOther,
                          strata::MarkerOptions::Interval(start, strata::TimeStamp::Now()));
  }
}
__attribute__((noinline)) void LoopMarkerTyped(long n) {
  for (long i = 0; i < n; ++i) {
    STRATA_MARKER("typed", kOther, {}, ThreeFieldMarker, int64_t{i}, 2.5,
                  strata::ProfilerString::Literal("text"));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s CASE N\n", argv[0]);
    return 2;
  }
  const std::string which = argv[1];
  const long n = std::atol(argv[2]);
  const bool active = which == "label_active" || which == "marker_instant" ||
                      which == "marker_interval" || which == "marker_typed3";
  if (active) {
    strata::ProfilerSettings settings;
    settings.interval_ms = 1000;
    // Wall-clock timers, not perf events: the event's descriptor is moved above the soft
    // limit by a helper made with clone(CLONE_VM | CLONE_VFORK), which valgrind refuses.
    settings.features |= strata::kFeaturePrecise;
    settings.buffer_megabytes = 512;
    strata::ProfilerStart(settings);
    strata::ProfilerPause();
    if (!strata::ProfilerIsActive()) {
      std::fprintf(stderr, "callgrind_driver: the session did not start\n");
      return 1;
    }
    // The sampler switches the clock to the TSC at its second loop (1 s here), when the TSC
    // is usable: count the steady state.
    for (int i = 0; i < 100 && !strata::StrataClockUsesTsc(); ++i) usleep(50 * 1000);
  }
  const strata::TimeStamp start = strata::TimeStamp::Now();
  // Warm-up outside the count: first-use work (marker type registration, the first chunk).
  const long warm = 1000;
  auto run = [&](long count) {
    if (which == "empty") {
      LoopEmpty(count);
    } else if (which == "label_inactive" || which == "label_active") {
      LoopLabel(count);
    } else if (which == "marker_inactive" || which == "marker_instant") {
      LoopMarkerUntyped(count);
    } else if (which == "marker_interval") {
      LoopMarkerInterval(count, start);
    } else if (which == "marker_typed3") {
      LoopMarkerTyped(count);
    } else {
      return false;
    }
    return true;
  };
  if (!run(warm)) {
    std::fprintf(stderr, "callgrind_driver: unknown case %s\n", which.c_str());
    return 2;
  }
  CALLGRIND_START_INSTRUMENTATION;
  run(n);
  CALLGRIND_STOP_INSTRUMENTATION;
  std::printf("callgrind_driver: case=%s iterations=%ld active=%d tsc_clock=%d\n",
              which.c_str(), n, strata::ProfilerIsActive() ? 1 : 0,
              strata::StrataClockUsesTsc() ? 1 : 0);
  return 0;
}
