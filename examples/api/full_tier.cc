// docs/api.md, "Full tier": StartFull (taking over a running base session), the performance
// monitor, and a child process profiled into the same session. Full tier (strata-full,
// Strata::full).
//   ./full_tier profile.json
#include <strata/full.h>
#include <strata/markers.h>
#include <strata/multiprocess.h>
#include <strata/perfmon.h>
#include <strata/profiler.h>

#include <sys/types.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace {

__attribute__((noinline)) uint64_t HandleEvent(uint64_t iterations) {
  uint64_t value = 1;
  for (uint64_t i = 0; i < iterations; ++i) {
    value = value * 6364136223846793005ULL + 1;
    __asm__ volatile("" : "+r"(value));
  }
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PROFILE.json\n", argv[0]);
    return 2;
  }
  // Takes over the base session if one runs (STRATA_STARTUP=1), else starts its own.
  const strata::full::StartReport report = strata::full::StartFull();
  std::printf("full_tier: took over a base session: %s\n", report.took_over_base_session ? "yes" : "no");

  // The performance monitor: CPU cost per group, measured around each event.
  strata::perfmon::EnableMonitoring();
  strata::perfmon::PerformanceGroup layout("layout");
  uint64_t result = 0;
  for (int event = 0; event < 20; ++event) {
    {
      strata::perfmon::AutoStopwatch watch({&layout});
      result ^= HandleEvent(500'000);
    }
    strata::perfmon::IterationDone();
  }
  std::printf("full_tier: monitor snapshot %s\n", strata::perfmon::TakeSnapshot().ToJson().c_str());

  // A child process in the same session (it joins when it links the full tier itself).
  pid_t child = 0;
  char program[] = "/bin/true";
  char* child_argv[] = {program, nullptr};
  if (strata::full::SpawnProfiledChild(&child, program, child_argv) == 0) {
    int status = 0;
    waitpid(child, &status, 0);
  }

  STRATA_MARKER_TEXT("Done", kOther, {}, "full tier example");
  std::string error;
  if (!strata::ProfilerSaveProfile(argv[1], &error)) {  // This process and its children.
    std::fprintf(stderr, "full_tier: %s\n", error.c_str());
    return 1;
  }
  strata::full::ShutdownFull();
  std::printf("full_tier: saved %s (%llu)\n", argv[1], static_cast<unsigned long long>(result));
  return 0;
}
