// A chunk manager's update callback never runs on a thread that records markers: it is
// someone else's code (the full tier's IPC link takes a std::mutex and allocates), and a
// marker may be recorded inside the program's own locked allocator, where such a callback
// could deadlock the thread on itself (issue 33; docs/host-contract.md). The writer's paths
// only note that an update is due; the sampler thread sends it at its next loop.
//
// Before: the callback ran on the thread whose staging flush released a chunk (the former
// lock_marker_reentry_test made it wait for a contended std::mutex there).
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "base/internal/session/core.h"
#include "base/internal/session/tier_extension.h"
#include "base/markers.h"
#include "base/profiler.h"
#include "catch2/catch.hpp"
#include "shared/buffer/controlled_chunk_manager.h"

namespace {

std::atomic<pid_t> g_recorder_tid{0};
std::atomic<int> g_calls_on_recorder{0};
std::atomic<int> g_updates_with_releases{0};  // On any other thread.

void OnChunkUpdate(strata::ControlledChunkManager::Update&& update) {
  if (update.IsFinal()) return;
  if (static_cast<pid_t>(syscall(SYS_gettid)) == g_recorder_tid.load()) {
    g_calls_on_recorder.fetch_add(1);
  } else if (update.ReleasedBytes() > 0) {
    g_updates_with_releases.fetch_add(1);
  }
}

}  // namespace

TEST_CASE("chunk updates reach the callback on the sampler thread, never the recorder's") {
  strata::ProfilerSettings settings;
  settings.buffer_megabytes = 1;  // Small chunks: many releases.
  strata::ProfilerStart(settings);
  REQUIRE(strata::ProfilerIsActive());
  {
    strata::base_internal::SessionLock session;
    strata::ControlledChunkManager* manager =
        strata::base_internal::SessionControlledChunkManager();
    REQUIRE(manager != nullptr);
    manager->SetUpdateCallback(&OnChunkUpdate);
  }

  std::thread recorder([] {
    strata::AutoProfilerRegisterThread registration("recorder");
    g_recorder_tid.store(static_cast<pid_t>(syscall(SYS_gettid)));
    // Markers until the sampler has sent a few updates with released chunks (each staging
    // flush of this thread fills chunks), or 60 s of this thread's own clock.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (g_updates_with_releases.load() < 3 && std::chrono::steady_clock::now() < give_up) {
      for (int i = 0; i < 1000; ++i) {
        strata::AddTextMarker(strata::ProfilerString::Literal("filler"),
                              strata::Category::kOther, strata::MarkerOptions(),
                              "some text to fill the staging area and the chunks");
      }
    }
  });
  recorder.join();
  {
    strata::base_internal::SessionLock session;
    strata::ControlledChunkManager* manager =
        strata::base_internal::SessionControlledChunkManager();
    if (manager) manager->SetUpdateCallback(nullptr);
  }
  strata::ProfilerStop();
  CHECK(g_updates_with_releases.load() >= 3);
  CHECK(g_calls_on_recorder.load() == 0);
}
