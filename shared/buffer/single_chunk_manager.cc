#include "shared/buffer/single_chunk_manager.h"

#include "platform/check.h"

namespace strata {

void SingleChunkManager::Reset(std::unique_ptr<BufferChunk> chunk) {
  if (!chunk) chunk = std::move(released_chunk_);
  STRATA_CHECK(chunk != nullptr, "Reset needs the manager's one chunk back");
  STRATA_CHECK(chunk->Next() == nullptr, "a single-chunk manager has one chunk");
  if (chunk->state() == BufferChunk::State::kInUse) chunk->MarkDone(TimeStamp::Now());
  if (chunk->state() == BufferChunk::State::kDone) chunk->MarkRecycled();
  released_chunk_.reset();
  initial_chunk_ = std::move(chunk);
}

void SingleChunkManager::ReleaseChunk(std::unique_ptr<BufferChunk> chunks) {
  if (!chunks) return;
  STRATA_CHECK(!released_chunk_ && chunks->Next() == nullptr,
               "a single-chunk manager gets back at most its one chunk");
  released_chunk_ = std::move(chunks);
}

}  // namespace strata
