// SingleChunkManager: exactly one chunk, never destroyed while the manager lives
// (Firefox: ProfileBufferChunkManagerSingle).
//
// For short-lived private buffers, e.g. one stack sample captured before it is copied into
// the session's buffer. The first GetChunk() returns the chunk, later ones nullptr, until
// Reset() takes it back (recycled) for another round.
//
// Thread safety: NOT thread-safe; one user thread. Async-signal safety: none needed; it
// never allocates after construction.
#ifndef STRATA_SHARED_BUFFER_SINGLE_CHUNK_MANAGER_H_
#define STRATA_SHARED_BUFFER_SINGLE_CHUNK_MANAGER_H_

#include "shared/buffer/chunk_manager.h"

namespace strata {

class SingleChunkManager final : public ChunkManager {
 public:
  // Allocates the chunk now (BufferChunk::Create; check HasChunk() on memory exhaustion).
  explicit SingleChunkManager(BufferChunk::Length buffer_bytes)
      : initial_chunk_(BufferChunk::Create(buffer_bytes)),
        buffer_bytes_(initial_chunk_ ? initial_chunk_->BufferBytes() : 0) {}

  bool HasChunk() const { return buffer_bytes_ != 0; }

  // Takes the chunk back (released or not; the user must not touch it any more) and makes
  // it available again.
  void Reset(std::unique_ptr<BufferChunk> chunk);

  size_t MaxTotalSize() const override { return buffer_bytes_; }
  std::unique_ptr<BufferChunk> GetChunk() override { return std::move(initial_chunk_); }
  void RequestChunk() override {}
  void FulfillChunkRequests() override {}
  void ReleaseChunk(std::unique_ptr<BufferChunk> chunks) override;
  void SetChunkDestroyedCallback(std::function<void(const BufferChunk&)>) override {}
  std::unique_ptr<BufferChunk> GetExtantReleasedChunks() override {
    return std::move(released_chunk_);
  }
  void ForgetUnreleasedChunks() override {}
  size_t TotalBufferBytes() const override { return buffer_bytes_; }

 protected:
  const BufferChunk* PeekExtantReleasedChunksAndLock() override { return released_chunk_.get(); }
  void UnlockAfterPeekExtantReleasedChunks() override {}

 private:
  std::unique_ptr<BufferChunk> initial_chunk_;
  std::unique_ptr<BufferChunk> released_chunk_;
  const BufferChunk::Length buffer_bytes_;
};

}  // namespace strata

#endif  // STRATA_SHARED_BUFFER_SINGLE_CHUNK_MANAGER_H_
