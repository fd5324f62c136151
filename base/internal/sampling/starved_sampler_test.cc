// A starved sampler thread loses no sample (issue 17): the sampler thread, an ordinary
// thread, was once kept off the CPU ~30 ms beside busy processes on 2 CPUs, and the 8 slots
// of a busy thread's ring (8 ms at 1 kHz) dropped 7 samples. Here the sampler is stopped by
// holding the registry mutex, which its loop takes to drain the rings, while a busy thread
// (a few tens of frames, labels) uses 80 ms of CPU: 80 samples at the default 1 kHz wait in
// its ring, and none is dropped. Bounded by the busy thread's CPU, not wall time: the same
// on a loaded machine (the wait gives up after 60 s of wall time, and says so).
//
// A capture taken while the sampler thread is stalled between two loops (in a test tier
// extension's on_sampling_loop, base/internal/session/tier_extension.h) keeps a thread's samples in time order: the thread waited in a
// wrapped poll the sampler tracked, the wait ended, the thread then ran (its handler's samples
// in its ring), and the capture's snapshot drained that ring. The samples still due for the
// wait go into the buffer before them (the sampler's next loop wrote them after them, as
// copies of the ring's last sample: a GeckoMain in takeover_dlopen_test showed "3 repeated"
// time stamps, the writer clamping the late copies to the time before them).
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <sys/syscall.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <algorithm>
#include <string>
#include <thread>

#include "base/internal/session/core.h"
#include "base/internal/session/tier_extension.h"
#include "base/internal/registry/thread_registry.h"
#include "base/labels.h"
#include "base/profiler.h"
#include "catch2/catch.hpp"
#include "rapidjson/document.h"
#include "tools/testing/profile_stacks.h"

namespace {

std::atomic<bool> g_stop{false};
std::atomic<uint64_t> g_sink{0};

int64_t ThreadCpuNs(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

// Waits until `clock` advanced by `ns` of CPU; false after 60 s of wall time.
bool WaitForCpu(clockid_t clock, int64_t ns) {
  const int64_t target = ThreadCpuNs(clock) + ns;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (ThreadCpuNs(clock) < target) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

__attribute__((noinline)) void Spin() {
  uint64_t x = 1;
  while (!g_stop.load(std::memory_order_relaxed)) {
    for (int i = 0; i < 10000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    g_sink.store(x, std::memory_order_relaxed);
  }
}

// A typical stack: tens of frames, a label every eight of them.
__attribute__((noinline)) void Descend(int depth) {
  if (depth == 0) {
    Spin();
    return;
  }
  if (depth % 8 == 0) {
    strata::AutoLabel label("descend", strata::Category::kOther, "a dynamic part");
    Descend(depth - 1);
  } else {
    Descend(depth - 1);
  }
  g_sink.fetch_add(1, std::memory_order_relaxed);  // Not a tail call.
}

}  // namespace

namespace {

// The registered thread `tid`'s dropped samples, read under the registry mutex; -1 when it
// is not registered.
int64_t DroppedSamplesOf(pid_t tid) {
  auto& registry = strata::base_internal::GetRegistry();
  strata::AutoLock lock(registry.mutex);
  for (strata::base_internal::RegisteredThread* thread : registry.live) {
    if (thread->tid.ToNumber() == tid) {
      return static_cast<int64_t>(thread->dropped_samples.load(std::memory_order_relaxed));
    }
  }
  return -1;
}

}  // namespace

TEST_CASE("A sampler thread kept from draining for 80 ms of a busy thread's samples drops none") {
  strata::ProfilerSettings settings;  // 1 ms: perf task-clock events where allowed.
  strata::AutoProfilerSession session(settings);
  REQUIRE(strata::ProfilerIsActive());
  std::atomic<pid_t> busy_tid{0};
  std::thread busy([&busy_tid] {
    strata::AutoProfilerRegisterThread registration("busy");
    busy_tid.store(static_cast<pid_t>(syscall(SYS_gettid)));
    Descend(32);
  });
  clockid_t busy_clock;
  REQUIRE(pthread_getcpuclockid(busy.native_handle(), &busy_clock) == 0);
  REQUIRE(WaitForCpu(busy_clock, 30 * 1000000));  // Registered and sampled.
  REQUIRE(busy_tid.load() != 0);
  // The busy thread's own count: this thread's sleeps below are waits too, whose samples it
  // writes into its own ring while the sampler is held (own_samples.h); on a loaded machine
  // the 80 ms of the busy thread's CPU can take seconds, and this thread's ring fills
  // (seen: 121-147 dropped at load 20-25, counted session-wide). That is not this case.
  const int64_t dropped_before = DroppedSamplesOf(busy_tid.load());
  REQUIRE(dropped_before >= 0);
  bool waited;
  int64_t stalled_cpu_ns;
  {
    // The sampler's loop waits here: nothing is drained while the busy thread runs.
    auto& registry = strata::base_internal::GetRegistry();
    strata::AutoLock stall(registry.mutex);
    // The busy thread's CPU clock at its latest sample drained: what its ring holds is the
    // CPU it used since (a starved sampler may not have drained it for a while).
    int64_t drained_cpu_ns = ThreadCpuNs(busy_clock);
    for (strata::base_internal::RegisteredThread* thread : registry.live) {
      if (thread->tid.ToNumber() == busy_tid.load() && thread->last_sample_cpu_ns >= 0) {
        drained_cpu_ns = std::min(drained_cpu_ns, thread->last_sample_cpu_ns);
      }
    }
    waited = WaitForCpu(busy_clock, 80 * 1000000);
    // At least 80 ms: this thread, on a loaded machine, can see the clock pass 80 ms late.
    stalled_cpu_ns = ThreadCpuNs(busy_clock) - drained_cpu_ns;
  }
  // Read at once: what a starved sampler, free again but not yet run, lets pile up after is
  // not this case.
  const int64_t dropped_after = DroppedSamplesOf(busy_tid.load());
  if (!waited) WARN("the busy thread did not get 80 ms of CPU in 60 s");
  REQUIRE(WaitForCpu(busy_clock, 10 * 1000000));
  const strata::base_internal::SessionSnapshot snapshot =
      strata::base_internal::TakeSessionSnapshot();
  g_stop.store(true);
  busy.join();
  INFO("sampling source: " << snapshot.sampling_source.description);
  INFO("dropped in the whole session: " << snapshot.dropped_samples);
  // The ring holds SampleRing::kTypicalRecords (119) of these samples: none is dropped while
  // it held up to 100 of them (1 kHz), counted on the busy thread's own clock from its
  // latest sample drained before the stall to the stall's end. More says so instead: at load
  // 7-22 under ASan, 3 of 110 runs dropped 1-7 (this thread saw the 80 ms late, or the
  // sampler had not drained for a while before it).
  INFO("the busy thread's CPU undrained at the stall's end: " << stalled_cpu_ns / 1000000
                                                                << " ms");
  if (stalled_cpu_ns <= 100 * 1000000) {
    CHECK(dropped_after - dropped_before == 0);
  } else if (dropped_after != dropped_before) {
    WARN((dropped_after - dropped_before)
         << " dropped with " << stalled_cpu_ns / 1000000
         << " ms of the busy thread's CPU undrained (over the ring)");
  }
}

namespace {

// The registered thread `tid`'s wait state, read under the registry mutex by `read`; false
// when the thread is not registered.
template <typename Read>
bool ReadWaitState(pid_t tid, Read read) {
  auto& registry = strata::base_internal::GetRegistry();
  strata::AutoLock lock(registry.mutex);
  for (strata::base_internal::RegisteredThread* thread : registry.live) {
    if (thread->tid.ToNumber() == tid) {
      read(thread->wait);
      return true;
    }
  }
  return false;
}

// A tier extension whose on_sampling_loop holds the sampler thread, once asked to, until
// released: the loop has drained the rings and holds no registry lock there.
std::atomic<bool> g_stall_requested{false};
std::atomic<bool> g_stalled{false};
std::atomic<bool> g_released{false};

void StallingLoop(strata::TimeStamp) {
  if (!g_stall_requested.load()) return;
  g_stalled.store(true);
  while (!g_released.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

// Polls `done` every millisecond; false after 60 s of wall time.
template <typename Done>
bool WaitUntil(Done done) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace

TEST_CASE("A capture while the sampler is stalled keeps an ended wait's samples before later ones") {
  g_stop.store(false);
  strata::ProfilerSettings settings;  // 1 ms.
  strata::AutoProfilerSession session(settings);
  REQUIRE(strata::ProfilerIsActive());
  int pipe_fds[2];
  REQUIRE(pipe(pipe_fds) == 0);
  std::atomic<pid_t> waiter_tid{0};
  std::atomic<bool> ran{false};
  std::thread waiter([&] {
    strata::AutoProfilerRegisterThread registration("waiter");
    waiter_tid.store(gettid());
    pollfd fd{pipe_fds[0], POLLIN, 0};
    (void)poll(&fd, 1, -1);  // Wrapped: the sampler tracks the wait.
    // Then runs: its handler's samples wait in its ring (the sampler is stalled).
    const int64_t until = ThreadCpuNs(CLOCK_THREAD_CPUTIME_ID) + 20 * 1000000;
    uint64_t x = 1;
    while (ThreadCpuNs(CLOCK_THREAD_CPUTIME_ID) < until) {
      for (int i = 0; i < 1000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    }
    g_sink.store(x, std::memory_order_relaxed);
    ran.store(true);
    while (!g_stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  REQUIRE(WaitUntil([&] { return waiter_tid.load() != 0; }));
  const pid_t tid = waiter_tid.load();
  // The sampler tracks the poll (and wrote its first samples).
  uint64_t poll_sequence = 0;
  REQUIRE(WaitUntil([&] {
    ReadWaitState(tid, [&](const strata::base_internal::WaitState& wait) {
      const uint64_t sequence = wait.sequence.load();
      if ((sequence & 1) != 0 && wait.tracked_sequence.load() == sequence) {
        poll_sequence = sequence;
      }
    });
    return poll_sequence != 0;
  }));
  strata::base_internal::TierExtension stalling;
  stalling.name = "stalling test tier";
  stalling.on_sampling_loop = &StallingLoop;
  strata::base_internal::AttachTierExtension(&stalling);
  // The sampler's loop waits in StallingLoop from its next loop on.
  g_stall_requested.store(true);
  const bool stalled = WaitUntil([] { return g_stalled.load(); });
  // Grid points of the wait no loop wrote (any time will do; on a loaded machine more).
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const bool woke = write(pipe_fds[1], "x", 1) == 1;  // The wait ends.
  const bool waiter_ran = WaitUntil([&] { return ran.load(); });  // Its CPU, not wall time.
  // A capture's snapshot, the sampler still stalled.
  (void)strata::base_internal::TakeSessionSnapshot();
  g_released.store(true);
  strata::base_internal::DetachTierExtension(&stalling);
  REQUIRE(stalled);
  REQUIRE(woke);
  if (!waiter_ran) WARN("the waiter did not get 20 ms of CPU in 60 s");
  // The sampler's next loop finished the poll (if the snapshot did not): it tracks none, or
  // a later wait of the thread's.
  REQUIRE(WaitUntil([&] {
    bool finished = false;
    ReadWaitState(tid, [&](const strata::base_internal::WaitState& wait) {
      finished = wait.tracked_sequence.load() != poll_sequence;
    });
    return finished;
  }));
  const std::string json = strata::ProfilerGetProfile();
  g_stop.store(true);
  waiter.join();
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  rapidjson::Document profile;
  profile.Parse(json.c_str(), json.size());
  REQUIRE_FALSE(profile.HasParseError());
  const rapidjson::Value* samples = nullptr;
  const rapidjson::Value* waiter_thread = nullptr;
  for (const auto& thread : profile["threads"].GetArray()) {
    if (std::string(thread["name"].GetString()) == "waiter") {
      samples = &thread["samples"];
      waiter_thread = &thread;
    }
  }
  REQUIRE(samples != nullptr);
  const int time_column = (*samples)["schema"]["time"].GetInt();
  const int stack_column = (*samples)["schema"]["stack"].GetInt();
  const auto& data = (*samples)["data"];
  REQUIRE(data.Size() >= 2);
  // The writer clamps a sample older than the one before it to that one's time: strictly
  // increasing times mean the buffer had them in order.
  int repeated = 0;
  std::string around;  // The samples around each repeat: time and leaf frame.
  auto describe = [&](rapidjson::SizeType i) {
    const auto frames = strata::testing::StackFrames(*waiter_thread, data[i][stack_column]);
    return "  #" + std::to_string(i) + " " + std::to_string(data[i][time_column].GetDouble()) +
           " ms " + (frames.empty() ? std::string("(no stack)") : frames.back().location) + "\n";
  };
  for (rapidjson::SizeType i = 1; i < data.Size(); ++i) {
    if (data[i][time_column].GetDouble() <= data[i - 1][time_column].GetDouble()) {
      ++repeated;
      for (rapidjson::SizeType k = i > 3 ? i - 3 : 0; k < data.Size() && k <= i + 2; ++k) {
        around += describe(k);
      }
    }
  }
  INFO(data.Size() << " samples of the waiter; around each repeat:\n" << around);
  // Under a sanitizer (a slow handler) this failed in 2-3 of 30-40 runs beside load, always a
  // CPU sample of the 1 ms sleeps (leaf clock_nanosleep or clock_gettime) taken as the call
  // returned, after which the wait's later grid points were written: the wait now ends where
  // such a sample begins (wait_wrappers.cc, WaitSpanAroundOwnSample), and the sampler writes
  // no wait point while the thread's handler is capturing. 0 of 90 ASan runs since.
#if defined(__SANITIZE_THREAD__)
  // TSan runs the handler late (at the thread's next intercepted call), with times of its own:
  // not measured under TSan since the fix; reported there.
  if (repeated != 0) WARN("out of time order under TSan: " << around);
#else
  CHECK(repeated == 0);
#endif
}
