// LocalLimitChunkManager: the session's chunk manager, keeping all its chunks under one
// memory limit (Firefox: ProfileBufferChunkManagerWithLocalLimit).
//
// Memory accounting, in bytes of chunk storage:
//   unreleased  chunks handed out by GetChunk() and not released yet, plus the spare;
//   released    full chunks given back, oldest first; destroyable;
//   recycled    at most one emptied chunk kept for reuse.
// Before a chunk is handed out or prepared, the oldest released chunks are destroyed (the
// first one recycled) until unreleased + released + recycled + the new chunk fits in
// `max_total_bytes`. Only released chunks can be destroyed, so the limit holds as long as
// the user releases full chunks promptly and the limit allows at least two chunks (the one
// being written and the spare); the total never passes the limit by more than that.
//
// Pre-allocation: RequestChunk() marks a spare as wanted; FulfillChunkRequests() prepares
// it (recycling or allocating) off the hot path; the next GetChunk() hands it out at the
// cost of a pointer swap.
//
// It is also a ControlledChunkManager: DestroyChunksAtOrBefore() lets a global controller
// free chunks (freed, never recycled: the controller counts on the memory going), and
// updates go to the update callback. The updates' unreleased bytes include the recycled chunk
// (held, and not destroyable).
//
// When updates are sent: never from the writers' paths. GetChunk() and ReleaseChunk() run on
// whatever thread filled a chunk, often a program's thread recording a marker, maybe inside
// the program's own locked allocator; the update callback is someone else's code (the full
// tier's IPC link takes a std::mutex and allocates). So those two only note that an update
// is due; it is sent by the next FulfillChunkRequests() (the sampler loop, every interval)
// or SendDeferredUpdate(), and at once by the calls a Strata thread makes
// (SetUpdateCallback, DestroyChunksAtOrBefore, GetExtantReleasedChunks,
// ForgetUnreleasedChunks). A deferred update's newly released chunks are all those released
// since the previous update that still exist. The chunk-destroyed callback does run on the
// writers' paths: it must only touch atomics (the buffer's is).
//
// Memory: chunks are Strata's own pages (BufferChunk::Create), or the chunk storage's.
//
// Thread safety: thread-safe (one internal Mutex). Callbacks run with that mutex held.
// Async-signal safety: none; never call it from a signal handler.
#ifndef STRATA_SHARED_BUFFER_LOCAL_LIMIT_CHUNK_MANAGER_H_
#define STRATA_SHARED_BUFFER_LOCAL_LIMIT_CHUNK_MANAGER_H_

#include <cstddef>
#include <functional>
#include <memory>

#include "platform/mutex.h"
#include "shared/buffer/chunk_manager.h"
#include "shared/buffer/controlled_chunk_manager.h"

namespace strata {

class LocalLimitChunkManager final : public ChunkManager, public ControlledChunkManager {
 public:
  // `max_total_bytes`: limit for all chunk storage. `chunk_min_buffer_bytes`: storage of
  // each new chunk (rounded up to a multiple of 8).
  LocalLimitChunkManager(size_t max_total_bytes, BufferChunk::Length chunk_min_buffer_bytes);
  ~LocalLimitChunkManager() override;

  // ChunkManager.
  size_t MaxTotalSize() const override { return max_total_bytes_; }
  std::unique_ptr<BufferChunk> GetChunk() override;
  void RequestChunk() override;
  void FulfillChunkRequests() override;
  void ReleaseChunk(std::unique_ptr<BufferChunk> chunks) override;
  void SetChunkDestroyedCallback(std::function<void(const BufferChunk&)> callback) override;
  std::unique_ptr<BufferChunk> GetExtantReleasedChunks() override;
  void ForgetUnreleasedChunks() override;
  size_t TotalBufferBytes() const override;

  // ControlledChunkManager.
  void SetUpdateCallback(UpdateCallback callback) override;
  void DestroyChunksAtOrBefore(TimeStamp done) override;

  // Sends the update that releases and destructions on the writers' paths left due, if any
  // (FulfillChunkRequests() does too). Call from a Strata thread.
  void SendDeferredUpdate();

  // Statistics, for tests and the profile's own accounting.
  struct Stats {
    size_t unreleased_bytes;
    size_t released_bytes;
    size_t recycled_bytes;
    size_t chunks_allocated;  // BufferChunk::Create() calls that succeeded.
    size_t chunks_recycled;   // Chunks reused instead of allocated.
    size_t chunks_destroyed;  // Released chunks dropped (recycled or freed).
    size_t spare_hits;        // GetChunk() served by a prepared spare.
  };
  Stats GetStats() const;

  BufferChunk::Length ChunkMinBufferBytes() const { return chunk_min_buffer_bytes_; }

  // New chunks come from `storage` (the flight recorder's file) rather than the heap, falling
  // back to the heap when it has no room. Call before the first GetChunk(); `storage` must
  // outlive every chunk.
  void SetChunkStorage(ChunkStorage* storage) { storage_ = storage; }

 protected:
  const BufferChunk* PeekExtantReleasedChunksAndLock() override;
  void UnlockAfterPeekExtantReleasedChunks() override;

 private:
  // All below: mutex_ held.
  // A chunk for the user: the recycled one or a new one, after making room.
  std::unique_ptr<BufferChunk> TakeOrMakeChunkLocked();
  // Drops released chunks, oldest first, until one more chunk fits under the limit.
  void MakeRoomForOneChunkLocked();
  // Drops the oldest released chunk: tells the user, then recycles it (when allowed and
  // none is kept yet) or frees it.
  void DropOldestReleasedLocked(bool may_recycle);
  size_t RecycledBytesLocked() const;
  // Sends an update now; its newly released chunks start at the oldest one a deferred
  // update held, else at `newly_released`.
  void NotifyUpdateLocked(const BufferChunk* newly_released);
  // Notes that an update is due (writers' paths): sent later by a Strata thread.
  void DeferUpdateLocked(const BufferChunk* newly_released);

  const size_t max_total_bytes_;
  const BufferChunk::Length chunk_min_buffer_bytes_;
  ChunkStorage* storage_ = nullptr;

  mutable Mutex mutex_{"LocalLimitChunkManager"};
  size_t unreleased_bytes_ = 0;
  size_t released_bytes_ = 0;
  std::unique_ptr<BufferChunk> released_chunks_;  // Oldest first.
  // The last chunk of released_chunks_ (null when empty): releasing appends without
  // walking a chain that holds the whole memory limit.
  BufferChunk* newest_released_ = nullptr;
  std::unique_ptr<BufferChunk> recycled_chunk_;   // At most one.
  std::unique_ptr<BufferChunk> spare_chunk_;      // Prepared by FulfillChunkRequests().
  bool spare_requested_ = false;
  std::function<void(const BufferChunk&)> chunk_destroyed_callback_;
  UpdateCallback update_callback_;
  // An update is due (DeferUpdateLocked); its oldest newly released chunk, if any is left.
  bool update_deferred_ = false;
  const BufferChunk* deferred_newly_released_ = nullptr;
  Stats stats_{};
};

}  // namespace strata

#endif  // STRATA_SHARED_BUFFER_LOCAL_LIMIT_CHUNK_MANAGER_H_
