// The profile capture's progress, whole-system: the base tier runs in process (linked
// statically, as base/profiler_test.cc) with sampled threads and markers; the session's
// buffer is captured by shared/profile's WriteProfile() with a ProgressLogger while the
// sampler keeps writing, and another thread polls the progress: it rises monotonically from
// 0 to 1 through the capture's phases.
#include <pthread.h>
#include <time.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "base/internal/session/core.h"
#include "base/markers.h"
#include "base/profiler.h"
#include "catch2/catch.hpp"
#include "rapidjson/document.h"
#include "shared/profile/profile_capture.h"
#include "shared/progress/failure_latch.h"
#include "shared/progress/progress_logger.h"

namespace {

struct Step {
  static constexpr const char* MarkerTypeName() { return "Step"; }
  static void StreamJSONMarkerData(strata::JsonWriter& w, int64_t index) {
    w.IntProperty("index", index);
  }
};

std::atomic<bool> g_spin{true};

__attribute__((noinline)) uint64_t Spin(uint64_t x) {
  while (g_spin.load(std::memory_order_relaxed)) x = x * 6364136223846793005ull + 1;
  return x;
}

TEST_CASE("a capture of a running base session reports monotonic progress from 0 to 1") {
  const strata::TimeStamp start = strata::TimeStamp::Now();
  strata::ProfilerSettings settings;
  settings.interval_ms = 1;
  strata::ProfilerStart(settings);
  REQUIRE(strata::ProfilerIsActive());
  std::thread worker([] {
    pthread_setname_np(pthread_self(), "spinner");
    Spin(1);
  });
  constexpr int kMarkers = 50000;
  for (int i = 0; i < kMarkers; ++i) {
    STRATA_MARKER("step", kOther, {}, Step, int64_t{i});
  }
  // The spinner's samples: let it use 40 ms of its own CPU (~10 CPU-clock ticks), however
  // long a loaded machine takes to give it that (60 s at most); then move every thread's
  // staged markers and ring samples into the buffer, which WriteProfile reads directly. (It
  // was a 300 ms sleep, trusting a sampler loop to run meanwhile; issue 35.)
  clockid_t spinner_clock;
  REQUIRE(pthread_getcpuclockid(worker.native_handle(), &spinner_clock) == 0);
  const strata::TimeStamp give_up = strata::TimeStamp::Now() + strata::TimeDuration::FromSeconds(60);
  for (;;) {
    timespec ts{};
    clock_gettime(spinner_clock, &ts);
    if (ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6 >= 40 || give_up < strata::TimeStamp::Now()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  (void)strata::base_internal::TakeSessionSnapshot();

  strata::profile::CaptureInputs inputs;
  inputs.start_time = start;
  inputs.meta.start_time = start;
  inputs.meta.product = "capture_progress_test";
  inputs.process_name = "capture_progress_test";
  inputs.marker_type = [](uint8_t tag) { return strata::base_internal::MarkerTypeForTag(tag); };

  strata::SharedProgress progress;
  std::atomic<bool> done{false};
  std::atomic<bool> polling{false};
  std::vector<double> seen;
  std::vector<std::string> locations;
  std::thread poller([&] {
    auto look = [&] {
      const double p = progress.Progress().ToDouble();
      if (seen.empty() || seen.back() != p) seen.push_back(p);
      const char* l = progress.LastLocation();
      if (l && (locations.empty() || locations.back() != l)) locations.push_back(l);
    };
    look();  // 0: nothing reported yet.
    polling.store(true, std::memory_order_release);
    while (!done.load(std::memory_order_acquire)) look();
    look();
  });
  while (!polling.load(std::memory_order_acquire)) std::this_thread::yield();

  strata::ChunkedJsonWriter writer;
  strata::FailureLatch failure;
  std::string error;
  bool ok = false;
  {
    strata::ProgressLogger logger(&progress, "test: capture", "test: captured");
    inputs.progress = &logger;
    inputs.failure = &failure;
    ok = strata::profile::WriteProfile(inputs, strata::base_internal::SessionBuffer(), writer,
                                       &error);
  }
  done.store(true, std::memory_order_release);
  poller.join();
  g_spin = false;
  worker.join();
  strata::ProfilerStop();

  REQUIRE(ok);
  CHECK(error.empty());
  CHECK_FALSE(failure.Failed());

  INFO("distinct progress values seen: " << seen.size());
  REQUIRE(seen.size() >= 2);
  CHECK(seen.front() == 0.0);
  CHECK(seen.back() == 1.0);
  for (size_t i = 1; i < seen.size(); ++i) REQUIRE(seen[i] > seen[i - 1]);
  size_t intermediate = 0;
  for (double p : seen) intermediate += (p > 0 && p < 1);
  CHECK(intermediate >= 10);
  // The capture's phases in order, between the test's own start and end locations (a short
  // phase may be missed by the poller).
  const std::vector<std::string> expected = {
      "test: capture", "capture: collecting addresses", "capture: symbolicating",
      "capture: writing threads", "capture: finishing",
      "test: captured"};
  size_t next = 0;
  for (const std::string& l : locations) {
    while (next < expected.size() && expected[next] != l) ++next;
    INFO("location " << l);
    REQUIRE(next < expected.size());
  }
  CHECK(locations.back() == "test: captured");

  // And the profile is the session's.
  const std::string json = writer.TakeString();
  rapidjson::Document profile;
  profile.Parse(json.c_str(), json.size());
  REQUIRE_FALSE(profile.HasParseError());
  size_t markers = 0, samples = 0;
  for (const auto& t : profile["threads"].GetArray()) {
    markers += t["markers"]["data"].Size();
    samples += t["samples"]["data"].Size();
  }
  CHECK(markers == kMarkers);
  CHECK(samples > 0);
}

}  // namespace
