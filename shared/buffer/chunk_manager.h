// ChunkManager: where a ChunkedBuffer gets its chunks and gives them back
// (Firefox: ProfileBufferChunkManager).
//
// A manager hands out chunks (GetChunk), takes back full ones (ReleaseChunk) and owns them
// from then on: it may destroy or recycle the oldest released chunks to respect a memory
// limit, telling its user first (the chunk-destroyed callback), and it gives readers
// temporary access to the released chunks that still exist (PeekExtantReleasedChunks).
//
// Pre-allocation: RequestChunk() says "a GetChunk() is coming"; FulfillChunkRequests(),
// called off the hot path (the sampler loop), prepares that chunk, so the writer that fills
// a chunk swaps in a ready one instead of allocating. Without a fulfil call GetChunk() still
// works; it just allocates on the caller's thread.
//
// Thread safety: depends on the implementation (see each one). The released-chunk callback
// and peek callbacks run with the manager's lock held: they must not call back into it.
#ifndef STRATA_SHARED_BUFFER_CHUNK_MANAGER_H_
#define STRATA_SHARED_BUFFER_CHUNK_MANAGER_H_

#include <cstddef>
#include <functional>
#include <memory>

#include "shared/buffer/chunk.h"

namespace strata {

class ChunkManager {
 public:
  virtual ~ChunkManager() = default;

  // Most bytes of storage all chunks of this manager should use together.
  virtual size_t MaxTotalSize() const = 0;

  // A chunk ready for SetRangeStart() (new or recycled), or nullptr when none can be had.
  // The caller owns it until it gives it back with ReleaseChunk().
  virtual std::unique_ptr<BufferChunk> GetChunk() = 0;

  // Asks for a chunk to be prepared for the next GetChunk(). Cheap; never allocates.
  virtual void RequestChunk() = 0;
  // Prepares requested chunks. May allocate; call from a thread where that is fine.
  virtual void FulfillChunkRequests() = 0;

  // Gives back done chunks (a chain, oldest first). The manager owns them from now on.
  virtual void ReleaseChunk(std::unique_ptr<BufferChunk> chunks) = 0;

  // Called (under the manager's lock) just before a released chunk is destroyed or
  // recycled, so the user can forget what it held. Pass nullptr to remove.
  virtual void SetChunkDestroyedCallback(std::function<void(const BufferChunk&)> callback) = 0;

  // Takes all released chunks out of the manager (oldest first), e.g. to move them
  // elsewhere. The manager forgets them.
  virtual std::unique_ptr<BufferChunk> GetExtantReleasedChunks() = 0;

  // The user drops every chunk it had not released (end of a session): stop counting them.
  virtual void ForgetUnreleasedChunks() = 0;

  // Bytes of storage currently held in chunks: handed out, released, and spare.
  virtual size_t TotalBufferBytes() const = 0;

  // Calls `f(const BufferChunk* oldest_released)` (nullptr when there is none) while the
  // released chunks are guaranteed to stay alive and unchanged; returns what `f` returns.
  template <typename F>
  decltype(auto) PeekExtantReleasedChunks(F&& f) {
    struct Unlocker {
      ChunkManager* manager;
      ~Unlocker() { manager->UnlockAfterPeekExtantReleasedChunks(); }
    } unlocker{this};
    return std::forward<F>(f)(PeekExtantReleasedChunksAndLock());
  }

 protected:
  virtual const BufferChunk* PeekExtantReleasedChunksAndLock() = 0;
  virtual void UnlockAfterPeekExtantReleasedChunks() = 0;
};

}  // namespace strata

#endif  // STRATA_SHARED_BUFFER_CHUNK_MANAGER_H_
