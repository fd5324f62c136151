// Demo of the foundation: several threads record marker-like entries into one session
// buffer under a memory limit while a "sampler" prepares chunks; then the buffer is read
// back and summarised. Later issues replace this with a real profile.
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "platform/process_thread_ids.h"
#include "platform/time_stamp.h"
#include "shared/buffer/chunked_buffer.h"
#include "shared/buffer/entry_kinds.h"
#include "shared/buffer/local_limit_chunk_manager.h"

int main() {
  using namespace strata;
  constexpr size_t kLimit = 1 << 20;
  LocalLimitChunkManager manager(kLimit, 64 * 1024);
  ChunkedBuffer buffer(ThreadSafety::kThreadSafe, manager);
  const TimeStamp start = TimeStamp::Now();

  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&buffer, t]() {
      const std::string name = "work item of thread " + std::to_string(t);
      for (int i = 0; i < 100000; ++i) {
        buffer.PutObjects(EntryKind::kMarker, TimeStamp::Now(), CurrentThreadId(), name, i);
      }
    });
  }
  std::thread sampler([&]() {
    for (int i = 0; i < 200; ++i) {
      buffer.PrepareNextChunk();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  for (auto& th : threads) th.join();
  sampler.join();

  size_t entries = 0;
  TimeStamp oldest, newest;
  buffer.ReadEach([&](EntryReader& reader) {
    if (reader.ReadObject<EntryKind>() != EntryKind::kMarker) return;
    const TimeStamp time = reader.ReadObject<TimeStamp>();
    if (oldest.IsNull()) oldest = time;
    newest = time;
    ++entries;
  });
  const ChunkedBuffer::State state = buffer.GetState();
  const LocalLimitChunkManager::Stats stats = manager.GetStats();
  std::printf("recorded %llu entries in %.1f ms from 3 threads\n",
              static_cast<unsigned long long>(state.pushed_block_count),
              (TimeStamp::Now() - start).ToMilliseconds());
  std::printf("kept the most recent %zu entries (%.1f ms of history) under a %zu KiB limit\n",
              entries, (newest - oldest).ToMilliseconds(), kLimit / 1024);
  std::printf("chunks: %zu allocated, %zu recycled, %zu destroyed, %zu served pre-allocated\n",
              stats.chunks_allocated, stats.chunks_recycled, stats.chunks_destroyed,
              stats.spare_hits);
  std::printf("failed writes: %llu\n", static_cast<unsigned long long>(state.failed_put_count));
  return state.failed_put_count == 0 && entries > 0 ? 0 : 1;
}
