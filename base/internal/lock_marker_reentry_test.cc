// A lock that Strata's own code waits for under the session buffer's lock makes no "Awaiting
// lock" marker. A chunk manager's update callback runs under that lock when a chunk is
// released, and the full tier's IPC link takes a std::mutex there. When a thread's full
// staging area was being moved into the buffer, the marker for that wait took the staging
// area's lock again and aborted the program ("mutex 'strata staging area' locked
// recursively": fork_full_test in a fresh-clone CI run). Here the callback's mutex is held by
// another thread until the callback has waited on it for 2 ms, on a thread that records
// markers until its own staging flush released a chunk.
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "base/internal/core.h"
#include "base/internal/tier_extension.h"
#include "base/markers.h"
#include "base/profiler.h"
#include "catch2/catch.hpp"
#include "shared/buffer/controlled_chunk_manager.h"

namespace {

std::mutex g_contended;
std::atomic<pid_t> g_recorder_tid{0};
std::atomic<bool> g_callback_waiting{false};
std::atomic<int> g_contended_waits{0};  // Callback waits on the recorder thread.

void OnChunkUpdate(strata::ControlledChunkManager::Update&&) {
  if (static_cast<pid_t>(syscall(SYS_gettid)) != g_recorder_tid.load()) return;
  if (g_contended_waits.load() > 0) return;
  g_callback_waiting.store(true);
  std::lock_guard<std::mutex> lock(g_contended);  // Interposed pthread_mutex_lock.
  g_contended_waits.fetch_add(1);
}

}  // namespace

TEST_CASE("a lock waited for under the buffer's lock does not abort the program") {
  strata::ProfilerSettings settings;  // Wait stacks on (default features).
  strata::ProfilerStart(settings);
  REQUIRE(strata::ProfilerIsActive());
  {
    strata::base_internal::SessionLock session;
    strata::ControlledChunkManager* manager =
        strata::base_internal::SessionControlledChunkManager();
    REQUIRE(manager != nullptr);
    manager->SetUpdateCallback(&OnChunkUpdate);
  }

  std::atomic<bool> holding{false};
  std::thread holder([&] {
    std::unique_lock<std::mutex> lock(g_contended);
    holding.store(true);
    while (!g_callback_waiting.load()) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // >= 1 ms: a marked wait.
  });
  while (!holding.load()) std::this_thread::yield();

  std::thread recorder([] {
    strata::AutoProfilerRegisterThread registration("recorder");
    g_recorder_tid.store(static_cast<pid_t>(syscall(SYS_gettid)));
    // Staged text markers until one of this thread's staging flushes released a chunk.
    for (int i = 0; i < 50'000'000 && g_contended_waits.load() == 0; ++i) {
      strata::AddTextMarker(strata::ProfilerString::Literal("filler"), strata::Category::kOther,
                            strata::MarkerOptions(), "some text to fill the staging area");
    }
  });
  recorder.join();
  holder.join();
  CHECK(g_contended_waits.load() == 1);
  {
    strata::base_internal::SessionLock session;
    strata::ControlledChunkManager* manager =
        strata::base_internal::SessionControlledChunkManager();
    if (manager) manager->SetUpdateCallback([](strata::ControlledChunkManager::Update&&) {});
  }
  strata::ProfilerStop();
}
