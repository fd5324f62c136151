#include "shared/buffer/local_limit_chunk_manager.h"

#include <vector>

#include "catch2/catch.hpp"

namespace strata {
namespace {

using Update = ControlledChunkManager::Update;

// Uses and releases one chunk, like a buffer does.
void FillAndRelease(LocalLimitChunkManager& manager, std::unique_ptr<BufferChunk> chunk,
                    BufferIndex range_start, TimeStamp done) {
  chunk->SetRangeStart(range_start);
  chunk->ReserveBlock(chunk->BufferBytes());
  chunk->MarkDone(done);
  manager.ReleaseChunk(std::move(chunk));
}

TEST_CASE("Released chunks are destroyed oldest first to stay under the limit") {
  LocalLimitChunkManager manager(/*max_total_bytes=*/400, /*chunk_min_buffer_bytes=*/100);
  std::vector<BufferIndex> destroyed_starts;
  manager.SetChunkDestroyedCallback(
      [&](const BufferChunk& c) { destroyed_starts.push_back(c.RangeStart()); });

  BufferIndex start = 1;
  for (int i = 0; i < 10; ++i) {
    std::unique_ptr<BufferChunk> chunk = manager.GetChunk();
    REQUIRE(chunk);
    FillAndRelease(manager, std::move(chunk), start, TimeStamp::FromNanoseconds(1000 + i));
    start += 100;
    CHECK(manager.TotalBufferBytes() <= 400);
  }
  // 10 chunks went through a 4-chunk limit: the oldest were dropped in order.
  REQUIRE(destroyed_starts.size() >= 6);
  for (size_t i = 0; i < destroyed_starts.size(); ++i) {
    CHECK(destroyed_starts[i] == 1 + 100 * i);
  }
  const size_t oldest_left = manager.PeekExtantReleasedChunks(
      [](const BufferChunk* c) { return c ? c->RangeStart() : 0; });
  CHECK(oldest_left == 1 + 100 * destroyed_starts.size());
}

TEST_CASE("Destroyed chunks are recycled rather than freed and reallocated") {
  LocalLimitChunkManager manager(320, 100);  // Chunks of 104 bytes: three fit.
  std::vector<const BufferChunk*> seen;
  for (int i = 0; i < 20; ++i) {
    std::unique_ptr<BufferChunk> chunk = manager.GetChunk();
    REQUIRE(chunk);
    seen.push_back(chunk.get());
    FillAndRelease(manager, std::move(chunk), 1 + 100 * i, TimeStamp::FromNanoseconds(10 + i));
  }
  const LocalLimitChunkManager::Stats stats = manager.GetStats();
  CHECK(stats.chunks_allocated == 3);  // Only what the limit allows...
  CHECK(stats.chunks_recycled == 17);  // ...and everything else reused.
  CHECK(stats.chunks_destroyed == 17);
  // Recycled means the same storage comes back.
  CHECK(seen[3] == seen[0]);
}

TEST_CASE("A requested chunk is prepared ahead and handed out without allocation") {
  LocalLimitChunkManager manager(1000, 100);
  manager.RequestChunk();
  CHECK(manager.GetStats().chunks_allocated == 0);  // Requests never allocate.
  manager.FulfillChunkRequests();
  CHECK(manager.GetStats().chunks_allocated == 1);
  CHECK(manager.GetStats().unreleased_bytes == 104);  // The spare counts.
  std::unique_ptr<BufferChunk> chunk = manager.GetChunk();
  REQUIRE(chunk);
  CHECK(manager.GetStats().spare_hits == 1);
  CHECK(manager.GetStats().chunks_allocated == 1);
  manager.FulfillChunkRequests();  // Nothing requested: nothing prepared.
  CHECK(manager.GetStats().chunks_allocated == 1);
}

TEST_CASE("Updates report releases and destruction; DestroyChunksAtOrBefore frees") {
  LocalLimitChunkManager manager(10000, 100);
  std::vector<Update> updates;
  manager.SetUpdateCallback([&](Update&& u) { updates.push_back(std::move(u)); });
  REQUIRE(updates.size() == 1);  // The current state at once.
  CHECK(updates[0].ReleasedBytes() == 0);

  for (int i = 0; i < 3; ++i) {
    FillAndRelease(manager, manager.GetChunk(), 1 + 104 * i, TimeStamp::FromNanoseconds(100 + i));
    if (i == 1) manager.FulfillChunkRequests();  // The sampler loop: sends what is due.
  }
  // Releases never call the callback on the writer's thread: the update waits for a Strata
  // thread's call.
  REQUIRE(updates.size() == 2);
  CHECK(updates.back().ReleasedBytes() == 2 * 104);
  REQUIRE(updates.back().NewlyReleasedChunks().size() == 2);
  manager.SendDeferredUpdate();
  REQUIRE(updates.size() == 3);
  manager.SendDeferredUpdate();  // Nothing more due.
  REQUIRE(updates.size() == 3);
  CHECK(updates.back().ReleasedBytes() == 3 * 104);
  CHECK(updates.back().OldestDoneTimeStamp() == TimeStamp::FromNanoseconds(100));
  REQUIRE(updates.back().NewlyReleasedChunks().size() == 1);
  CHECK(updates.back().NewlyReleasedChunks()[0].done_time_stamp == TimeStamp::FromNanoseconds(102));

  manager.DestroyChunksAtOrBefore(TimeStamp::FromNanoseconds(101));
  CHECK(updates.back().ReleasedBytes() == 104);
  CHECK(updates.back().OldestDoneTimeStamp() == TimeStamp::FromNanoseconds(102));
  CHECK(manager.GetStats().chunks_destroyed == 2);

  // Replacing the callback sends a final update to the old one.
  std::vector<Update> second;
  manager.SetUpdateCallback([&](Update&& u) { second.push_back(std::move(u)); });
  CHECK(updates.back().IsFinal());
  REQUIRE(second.size() == 1);
  REQUIRE(second[0].NewlyReleasedChunks().size() == 1);  // Current state: all released.
  manager.SetUpdateCallback(nullptr);
  CHECK(second.back().IsFinal());
}

TEST_CASE("A deferred update drops the newly released chunks destroyed meanwhile") {
  LocalLimitChunkManager manager(/*max_total_bytes=*/320, /*chunk_min_buffer_bytes=*/100);
  std::vector<Update> updates;
  manager.SetUpdateCallback([&](Update&& u) { updates.push_back(std::move(u)); });
  // Ten chunks through a three-chunk limit with no Strata-thread call in between: the oldest
  // newly released chunks were destroyed before the update could name them.
  for (int i = 0; i < 10; ++i) {
    FillAndRelease(manager, manager.GetChunk(), 1 + 104 * i, TimeStamp::FromNanoseconds(10 + i));
  }
  REQUIRE(updates.size() == 1);
  manager.SendDeferredUpdate();
  REQUIRE(updates.size() == 2);
  const Update& update = updates.back();
  CHECK(update.ReleasedBytes() == manager.GetStats().released_bytes);
  const auto& released = update.NewlyReleasedChunks();
  REQUIRE(!released.empty());
  // Exactly the chunks still held, oldest first, ending with the last one released.
  CHECK(released.back().done_time_stamp == TimeStamp::FromNanoseconds(19));
  CHECK(released.front().done_time_stamp == update.OldestDoneTimeStamp());
  CHECK(released.size() * 104 == update.ReleasedBytes());
  manager.SetUpdateCallback(nullptr);  // Its final update goes to `updates` while it lives.
}

TEST_CASE("GetExtantReleasedChunks hands over all released chunks") {
  LocalLimitChunkManager manager(10000, 100);
  for (int i = 0; i < 3; ++i) {
    FillAndRelease(manager, manager.GetChunk(), 1 + 104 * i, TimeStamp::FromNanoseconds(1 + i));
  }
  std::unique_ptr<BufferChunk> all = manager.GetExtantReleasedChunks();
  REQUIRE(all);
  CHECK(all->ChainLength() == 3);
  CHECK(manager.GetStats().released_bytes == 0);
  CHECK(manager.PeekExtantReleasedChunks([](const BufferChunk* c) { return c == nullptr; }));
}

}  // namespace
}  // namespace strata
