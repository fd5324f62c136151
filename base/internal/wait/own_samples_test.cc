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
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "base/internal/wait/own_samples.h"
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

int64_t ThreadCpuNs() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
}

std::atomic<uint64_t> g_spin_sink{0};
std::atomic<int64_t> g_blocked_ns{0};

__attribute__((noinline)) void SpinInsideTheCall(int64_t cpu_ns) {
  const int64_t end = ThreadCpuNs() + cpu_ns;
  uint64_t x = 1;
  while (ThreadCpuNs() < end) {
    for (int i = 0; i < 1000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  }
  g_spin_sink.store(x);
}

// A fopencookie read function: inside the program's fgets (a wrapped wait), runs 20 ms of
// CPU (signal samples taken inside the wrapped call), then blocks 300 ms in a raw nanosleep
// (no wrapper of its own), then returns a line; end of file after that.
ssize_t SpinThenBlockRead(void* cookie, char* buffer, size_t size) {
  bool* done = static_cast<bool*>(cookie);
  if (*done || size < 5) return 0;
  *done = true;
  SpinInsideTheCall(20 * 1000000);
  const int64_t start = MonotonicNs();
  const timespec duration{0, 300 * 1000000};
  syscall(SYS_nanosleep, &duration, nullptr);
  g_blocked_ns.store(MonotonicNs() - start);
  std::copy_n("line\n", 5, buffer);
  return 5;
}

// A session at 1 ms with wait stacks (and the default stack walk, threads and CPU).
void StartWaitStackSession() {
  strata::ProfilerSettings settings;
  settings.interval_ms = 1;
  settings.features = strata::kFeatureStackWalk | strata::kFeatureThreads |
                      strata::kFeatureCpu | strata::kFeatureWaitStacks;
  strata::ProfilerStart(settings);
}

}  // namespace

// A thread that runs inside a wrapped call before it blocks (here the program's own code in
// a stdio cookie; in the CI run that found it, a waitpid preempted between the wrapper's mark
// and its system call) took signal samples while the sampler already tracked the wait. The
// sampler took that for a thread that had left the wait by siglongjmp and wrote copies of the
// spin's sample for the rest of the wait (wait_stacks_test: 55 of 204 ms). A sample whose walk
// passes through the wrapper's caller frame shows the thread is still inside: the blocked
// time is the wait's (fgets as leaf), not the spin's.
TEST_CASE("A wait's samples are the interval grid's points in (start, end], the k-th dated k-th") {
  using strata::base_internal::FirstWaitGridPoint;
  using strata::base_internal::WaitGridPoint;
  using strata::base_internal::WaitGridPoints;
  constexpr int64_t kMs = 1000000;
  CHECK(WaitGridPoints(500, 3 * kMs, kMs) == 3);  // 1, 2 and 3 ms.
  CHECK(FirstWaitGridPoint(500, kMs) == kMs);
  CHECK(WaitGridPoint(500, 3, kMs) == 3 * kMs);
  CHECK(WaitGridPoints(kMs, kMs, kMs) == 0);  // Empty, and a start on a point is not in it.
  CHECK(WaitGridPoints(kMs, 2 * kMs, kMs) == 1);
  CHECK(WaitGridPoint(kMs, 1, kMs) == 2 * kMs);
  CHECK(WaitGridPoints(3 * kMs, kMs, kMs) == 0);  // An end before the start.
  // Whatever the wait, its last sample lies in it, less than an interval before its end.
  for (int64_t start = 0; start < 3 * kMs; start += 137 * 1000) {
    for (int64_t end = start; end < start + 5 * kMs; end += 91 * 1000) {
      const int64_t points = WaitGridPoints(start, end, kMs);
      if (points == 0) {
        CHECK(end - start < kMs);
        continue;
      }
      const int64_t last = WaitGridPoint(start, points, kMs);
      CHECK(last > start);
      CHECK(last <= end);
      CHECK(end - last < kMs);
      CHECK(last % kMs == 0);
    }
  }
}

TEST_CASE("CPU samples inside a wrapped call before it blocks do not end its wait") {
  StartWaitStackSession();
  REQUIRE(strata::ProfilerIsActive());
  std::thread reader([] {
    strata::ProfilerRegisterThread("spin-then-block");
    bool done = false;
    cookie_io_functions_t functions{};
    functions.read = SpinThenBlockRead;
    FILE* file = fopencookie(&done, "r", functions);
    if (!file) return;
    char line[16];
    if (fgets(line, sizeof(line), file) == nullptr) line[0] = '\0';
    fclose(file);
  });
  reader.join();
  const std::string json = strata::ProfilerGetProfile();
  strata::ProfilerStop();
  rapidjson::Document profile;
  profile.Parse(json.c_str(), json.size());
  REQUIRE_FALSE(profile.HasParseError());
  const rapidjson::Value* thread = nullptr;
  for (const auto& t : profile["threads"].GetArray()) {
    if (std::string(t["name"].GetString()) == "spin-then-block") thread = &t;
  }
  REQUIRE(thread != nullptr);
  // The blocked part's samples: the wait's (its stack ends at fgets: no frame of the spin);
  // copies of a spin sample would have SpinInsideTheCall.
  int wait_samples = 0;
  int spin_samples = 0;
  for (const auto& frames : strata::testing::SampleStacks(*thread)) {
    if (strata::testing::HasFrameContaining(frames, "SpinInsideTheCall")) {
      ++spin_samples;
    } else if (!frames.empty() && frames.back().location.find("fgets") != std::string::npos) {
      ++wait_samples;
    }
  }
  const double blocked_ms = static_cast<double>(g_blocked_ns.load()) / 1e6;
  INFO("samples ending at fgets: " << wait_samples << ", in the spin: " << spin_samples
                                   << ", blocked " << blocked_ms << " ms");
  CHECK(wait_samples >= 0.9 * blocked_ms);
}

TEST_CASE("Short waits the sampler did not walk are in the profile, written at their end") {
  StartWaitStackSession();
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
