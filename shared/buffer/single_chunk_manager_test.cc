#include "shared/buffer/single_chunk_manager.h"

#include "catch2/catch.hpp"

namespace strata {
namespace {

TEST_CASE("SingleChunkManager hands out its one chunk once, until reset") {
  SingleChunkManager manager(100);
  REQUIRE(manager.HasChunk());
  CHECK(manager.MaxTotalSize() == 104);
  std::unique_ptr<BufferChunk> chunk = manager.GetChunk();
  REQUIRE(chunk);
  BufferChunk* const raw = chunk.get();
  CHECK(manager.GetChunk() == nullptr);  // Only one.

  chunk->SetRangeStart(1);
  chunk->ReserveBlock(10);
  chunk->MarkDone(TimeStamp::Now());
  manager.ReleaseChunk(std::move(chunk));
  const size_t blocks = manager.PeekExtantReleasedChunks(
      [](const BufferChunk* released) { return released ? released->BlockCount() : 0u; });
  CHECK(blocks == 1);

  manager.Reset(nullptr);  // Takes the released chunk back.
  std::unique_ptr<BufferChunk> again = manager.GetChunk();
  CHECK(again.get() == raw);  // The same storage, recycled.
  CHECK(again->state() == BufferChunk::State::kRecycled);
  CHECK(again->BlockCount() == 0);

  // Reset with the chunk still in use works too.
  again->SetRangeStart(200);
  manager.Reset(std::move(again));
  CHECK(manager.GetChunk().get() == raw);
}

}  // namespace
}  // namespace strata
