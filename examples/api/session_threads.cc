// docs/api.md, "Sessions and threads": a session started from code, a registered worker
// thread, pause and resume, the profile saved to a file. Base tier (strata-base, Strata::base).
//   ./session_threads profile.json
#include <strata/labels.h>
#include <strata/profiler.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>

namespace {

__attribute__((noinline)) uint64_t Spin(uint64_t iterations) {
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
  strata::ProfilerSettings settings;
  settings.interval_ms = 1.0;
  settings.buffer_megabytes = 16;
  strata::ProfilerStart(settings);                   // Or STRATA_STARTUP=1 in the environment.

  uint64_t result = 0;
  std::thread worker([&result] {
    // Threads made with pthread_create are registered by themselves (feature "threads");
    // this names it and keeps it registered for the scope.
    strata::AutoProfilerRegisterThread registration("api-worker");
    STRATA_LABEL("Worker loop", kOther);
    result = Spin(30'000'000);
  });
  worker.join();

  strata::ProfilerPause();  // No samples; markers are still recorded.
  Spin(1'000'000);
  strata::ProfilerResume();

  std::string error;
  if (!strata::ProfilerSaveProfile(argv[1], &error)) {
    std::fprintf(stderr, "session_threads: %s\n", error.c_str());
    return 1;
  }
  strata::ProfilerStop();
  std::printf("session_threads: saved %s (%llu)\n", argv[1], static_cast<unsigned long long>(result));
  return 0;
}
