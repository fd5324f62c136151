// A program whose base-tier session (started by STRATA_STARTUP=1 at load) is taken over by
// the full tier in the middle of its run: by dlopen (default build) or with the full tier
// linked (TAKEOVER_LINKED). It checks in-process that the buffer was adopted in place, and
// leaves the profile checks to takeover_check.
//
//   takeover_program <profile-after-restart.json>
// The profile of the taken-over session is written through ProfilerSaveProfile to
// $TAKEOVER_PROFILE before the full tier is stopped and restarted (linked build: the
// restarted session is saved at exit by STRATA_SHUTDOWN).
#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "base/internal/core.h"
#include "base/markers.h"
#include "base/profiler.h"
#include "shared/buffer/entry_kinds.h"
#include "shared/profile/marker_entry.h"
#ifdef TAKEOVER_LINKED
#include "full/full.h"
#endif

namespace {

std::atomic<bool> g_stop{false};

__attribute__((noinline)) uint64_t BusyTakeoverLeaf(uint64_t x) {
  return x * 6364136223846793005ull + 1442695040888963407ull;
}
__attribute__((noinline)) void BusyTakeoverLoop() {
  uint64_t x = 1;
  while (!g_stop.load(std::memory_order_relaxed)) {
    for (int i = 0; i < 1000; ++i) x = BusyTakeoverLeaf(x) ^ (x >> 7);
  }
  if (x == 42) std::puts("");
}

void Fail(const char* what) {
  std::fprintf(stderr, "takeover_program: FAIL: %s\n", what);
  std::exit(3);
}

void Spin(double seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

// The block index of the first marker named `name` in the session buffer.
strata::BlockIndex FindMarker(const std::string& name) {
  strata::base_internal::FlushStagedMarkers();  // Markers just recorded are still staged.
  strata::BlockIndex found;
  strata::base_internal::SessionBuffer().ReadEach([&](strata::EntryReader& reader) {
    if (found || reader.ReadObject<strata::EntryKind>() != strata::EntryKind::kMarker) return;
    const auto header = reader.ReadObject<strata::profile::MarkerHeader>();
    if (!reader.Failed() && header.name.View() == name) found = reader.CurrentBlockIndex();
  });
  return found;
}

std::string MarkerNameAt(strata::BlockIndex index) {
  return strata::base_internal::SessionBuffer().ReadAt(index, [](strata::EntryReader* reader) {
    if (!reader || reader->ReadObject<strata::EntryKind>() != strata::EntryKind::kMarker) {
      return std::string();
    }
    return std::string(reader->ReadObject<strata::profile::MarkerHeader>().name.View());
  });
}

void PrintState(const char* when) {
  const strata::ChunkedBuffer::State s = strata::base_internal::SessionBuffer().GetState();
  std::printf("buffer %s: range [%llu, %llu) pushed %llu cleared %llu chunks_taken %llu\n", when,
              static_cast<unsigned long long>(s.range_start),
              static_cast<unsigned long long>(s.range_end),
              static_cast<unsigned long long>(s.pushed_block_count),
              static_cast<unsigned long long>(s.cleared_block_count),
              static_cast<unsigned long long>(s.chunks_taken));
}

}  // namespace

int main() {
  if (!strata::ProfilerIsActive()) Fail("the base session is not running (STRATA_STARTUP=1?)");
  const double before_s = std::getenv("TAKEOVER_BEFORE_S") ? std::atof(std::getenv("TAKEOVER_BEFORE_S")) : 0.6;
  const int filler_markers = std::getenv("TAKEOVER_FILLER") ? std::atoi(std::getenv("TAKEOVER_FILLER")) : 0;

  std::thread busy([] {
    pthread_setname_np(pthread_self(), "busy-worker");
    BusyTakeoverLoop();
  });

  STRATA_MARKER_TEXT("base-before-1", kOther, {}, "base API before takeover");
  // Optionally fill the buffer until it recycles its oldest chunks.
  for (int i = 0; i < filler_markers; ++i) {
    STRATA_MARKER_TEXT("filler", kOther, {}, std::string(200, 'x'));
  }
  Spin(before_s);
  STRATA_MARKER_TEXT("base-before-2", kOther, {}, "base API just before takeover");
  const strata::BlockIndex before_index = FindMarker("base-before-2");
  if (!before_index) Fail("marker base-before-2 not found in the buffer");
  PrintState("before takeover");
  const uint64_t chunks_before = strata::base_internal::SessionBuffer().GetState().chunks_taken;

  // --- The takeover ---
  STRATA_MARKER_UNTYPED("takeover", kProfiler);
#ifdef TAKEOVER_LINKED
  const strata::full::StartReport report = strata::full::StartFull();
  if (!report.took_over_base_session) Fail("StartFull did not take over the base session");
  std::printf("takeover: linked, sampler hand-over %.3f ms\n", report.sampler_handover_ms);
  auto add_full_marker = [](const char* name, const char* text) {
    strata_full_add_text_marker(name, text);
  };
#else
  void* full = dlopen("libstrata_full.so", RTLD_NOW);
  if (!full) Fail(dlerror());
  auto start = reinterpret_cast<int (*)()>(dlsym(full, "strata_full_start"));
  auto add_full_marker =
      reinterpret_cast<void (*)(const char*, const char*)>(dlsym(full, "strata_full_add_text_marker"));
  if (!start || !add_full_marker) Fail("strata_full_* entry points missing");
  if (start() != 0) Fail("strata_full_start did not take over the base session");
  std::printf("takeover: dlopen\n");
#endif
  PrintState("after takeover");
  // In place: the block written before the takeover is still at the same index, and the
  // buffer did not take a batch of new chunks to hold a copy.
  if (MarkerNameAt(before_index) != "base-before-2") Fail("pre-takeover block moved or lost");
  const uint64_t chunks_after = strata::base_internal::SessionBuffer().GetState().chunks_taken;
  if (chunks_after > chunks_before + 1) Fail("the takeover took new chunks: data was copied");

  STRATA_MARKER_TEXT("base-after-1", kOther, {}, "base API after takeover");
  add_full_marker("full-after-1", "full API after takeover");
  Spin(0.6);
  STRATA_MARKER_TEXT("base-after-2", kOther, {}, "base API at the end");
  add_full_marker("full-after-2", "full API at the end");
  // Some allocations for the memory counter.
  std::vector<std::vector<char>> blocks;
  for (int i = 0; i < 200; ++i) blocks.emplace_back(64 * 1024, 'm');
  Spin(0.1);
  blocks.clear();
  Spin(0.05);

  const char* path = std::getenv("TAKEOVER_PROFILE");
  std::string error;
  if (path && !strata::ProfilerSaveProfile(path, &error)) Fail(error.c_str());

#ifdef TAKEOVER_LINKED
  // Stop and restart the full tier: a fresh session, saved at exit by STRATA_SHUTDOWN.
  strata::full::StopFull();
  if (strata::ProfilerIsActive()) Fail("StopFull left the session running");
  strata::full::StartFull();
  if (!strata::ProfilerIsActive()) Fail("StartFull did not restart a session");
  STRATA_MARKER_TEXT("restarted", kOther, {}, "after StopFull + StartFull");
  Spin(0.4);
#endif
  g_stop = true;
  busy.join();
  std::printf("takeover_program: ok\n");
  return 0;
}
