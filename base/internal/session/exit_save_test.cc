// The exit save (ProfilerShutdown) is not sampled into the profile it writes: a fresh-clone CI
// run under load once found a sample of ProfilerShutdown > SaveSessionProfile on the saving
// thread. Here the save is made long on purpose: a tier extension's capture hook (which the
// multi-process capture uses to gather children's profiles) spins 40 ms of the saving thread's
// CPU. The thread's samples in the saved profile must cover no more CPU than the thread had
// used when it called ProfilerShutdown (plus an interval). Bounded by CPU time, not wall time.
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "base/internal/session/core.h"
#include "base/internal/session/tier_extension.h"
#include "base/profiler.h"
#include "catch2/catch.hpp"
#include "rapidjson/document.h"

namespace {

std::atomic<uint64_t> g_sink{0};

int64_t ThreadCpuNs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

__attribute__((noinline)) void SpinCpu(int64_t ns) {
  const int64_t end = ThreadCpuNs() + ns;
  uint64_t x = 1;
  while (ThreadCpuNs() < end) {
    for (int i = 0; i < 10000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  }
  g_sink.store(x, std::memory_order_relaxed);
}

void SpinInCapture(strata::profile::CaptureInputs&) { SpinCpu(40 * 1000000); }

}  // namespace

TEST_CASE("ProfilerShutdown's own work is not sampled into the profile it saves") {
  char directory[] = "/tmp/strata-exit-save-XXXXXX";
  REQUIRE(mkdtemp(directory) != nullptr);
  const std::string path = std::string(directory) + "/exit.json";
  int64_t cpu_at_shutdown_ns = 0;
  pid_t saver_tid = 0;
  strata::ProfilerSettings settings;  // 1 ms: perf task-clock events where allowed.
  strata::ProfilerStart(settings);
  std::thread saver([&] {
    // (Also registered when created, by the pthread_create wrapper: it keeps that name.)
    strata::AutoProfilerRegisterThread registration("saver");
    saver_tid = static_cast<pid_t>(syscall(SYS_gettid));
    SpinCpu(30 * 1000000);  // Samples of the program's own work.
    static strata::base_internal::TierExtension extension;
    extension.name = "exit-save-test";
    extension.adjust_capture = &SpinInCapture;
    strata::base_internal::AttachTierExtension(&extension);
    strata::base_internal::SetShutdownPath(path);
    cpu_at_shutdown_ns = ThreadCpuNs();
    strata::ProfilerShutdown();
    strata::base_internal::DetachTierExtension(&extension);
    strata::base_internal::SetShutdownPath("");
  });
  saver.join();
  REQUIRE_FALSE(strata::ProfilerIsActive());

  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  rapidjson::Document profile;
  profile.Parse(text.str().c_str());
  REQUIRE_FALSE(profile.HasParseError());
  double sampled_cpu_ns = 0;
  size_t samples = 0;
  bool found = false;
  for (const auto& thread : profile["threads"].GetArray()) {
    if (!thread["tid"].IsNumber() || thread["tid"].GetInt64() != saver_tid) continue;
    found = true;
    const auto& table = thread["samples"];
    const int cpu_column = table["schema"]["threadCPUDelta"].GetInt();
    for (const auto& sample : table["data"].GetArray()) {
      ++samples;
      if (sample[cpu_column].IsNumber()) sampled_cpu_ns += sample[cpu_column].GetDouble();
    }
  }
  REQUIRE(found);
  INFO("saver: " << samples << " samples covering " << sampled_cpu_ns / 1e6
                 << " ms of CPU; it had used " << cpu_at_shutdown_ns / 1e6
                 << " ms when it called ProfilerShutdown");
  CHECK(samples >= 5);
  // The save's 40 ms spin would add ~40 ms here; an interval of slack for the last sample.
  CHECK(sampled_cpu_ns <= cpu_at_shutdown_ns + 2e6);
  std::remove(path.c_str());
  rmdir(directory);
}
