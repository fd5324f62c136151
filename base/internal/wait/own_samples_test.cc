// The samples a thread writes itself at the end of a wait the sampler never walked
// (wait/own_samples.h), in a real session: short sleeps, each shorter than the sampler's
// period, are in the profile as the sleeping function's samples.
//
// Also the regression test of platform/tsan_sync.h. This test is linked dynamically, so in a
// TSan build libtsan comes before libstrata_base and the waiter's nanosleep runs TSan's
// interceptor first, which calls Strata's wrapper as its real function with the atomics'
// synchronisation ignored (a blocking call): the record written into the ring at the wait's
// end then had no happens-before edge to the sampler's read of it. Under --config=tsan the
// code before the fix failed here with a race report (SampleRing::CommitWriteKeepingSlot
// against SampleRing::TryRead), as ipc_limit_test and clock_order_test did.
#include <pthread.h>
#include <time.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "base/profiler.h"
#include "catch2/catch.hpp"
#include "rapidjson/document.h"
#include "tools/testing/profile_stacks.h"

namespace {

int64_t MonotonicNs() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
}

__attribute__((noinline)) void SleepInShortWait(int64_t ns) {
  const timespec duration{0, static_cast<long>(ns)};
  nanosleep(&duration, nullptr);
  __asm__ __volatile__("" ::: "memory");  // Not a tail call: this frame stays on the stack.
}

}  // namespace

TEST_CASE("Short waits the sampler did not walk are in the profile, written at their end") {
  strata::ProfilerSettings settings;
  settings.interval_ms = 1;
  settings.features = strata::kFeatureStackWalk | strata::kFeatureThreads |
                      strata::kFeatureCpu | strata::kFeatureWaitStacks;
  strata::ProfilerStart(settings);
  REQUIRE(strata::ProfilerIsActive());
  std::atomic<int64_t> waited_ns{0};
  std::thread waiter([&waited_ns] {
    strata::ProfilerRegisterThread("short-waits");  // Names it (registered at its creation).
    for (int i = 0; i < 300; ++i) {
      const int64_t start = MonotonicNs();
      SleepInShortWait(2000000);  // 2 ms: under the sampler's period, most are not walked.
      waited_ns.fetch_add(MonotonicNs() - start);
    }
  });
  waiter.join();
  rapidjson::Document profile;
  const std::string json = strata::ProfilerGetProfile();
  profile.Parse(json.c_str(), json.size());
  strata::ProfilerStop();
  REQUIRE_FALSE(profile.HasParseError());
  const rapidjson::Value* thread = nullptr;
  for (const auto& t : profile["threads"].GetArray()) {
    if (std::string(t["name"].GetString()) == "short-waits") thread = &t;
  }
  REQUIRE(thread != nullptr);
  // One sample per interval point inside a wait: the samples in SleepInShortWait stand for
  // its time (1 ms each). At least half of what the thread measured (the waits' own ends and
  // starts, outside the wrapped call, are not in it; a sample the ring had no room for is
  // dropped), and never more than it plus one interval per wait.
  const int in_waits = strata::testing::SamplesWithFrameContaining(*thread, "SleepInShortWait");
  const double waited_ms = static_cast<double>(waited_ns.load()) / 1e6;
  INFO("samples in the waits: " << in_waits << ", waited " << waited_ms << " ms");
  CHECK(in_waits >= waited_ms / 2);
  CHECK(in_waits <= waited_ms + 300);
}
