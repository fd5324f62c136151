// ControlledChunkManager: the face a chunk manager shows to a controller that keeps the
// memory of many managers (one per process) under one global limit
// (Firefox: ProfileBufferControlledChunkManager).
//
// The manager reports every change as an Update: bytes in use but not released, bytes
// released (destroyable), the done time stamp of its oldest released chunk, and the chunks
// released since the previous update. The controller may then ask it to destroy released
// chunks at or before a done time stamp. A chunk is identified within its process by its
// done time stamp (strictly increasing per buffer).
//
// Updates fold: a.Fold(b) gives the update equivalent to receiving a then b, so a child
// process can accumulate updates between the parent's polls and send one.
//
// Thread safety: Update is a value type. Manager implementations document their own
// locking; the update callback is called with the manager's lock held, so it must not call
// the manager back.
#ifndef STRATA_SHARED_BUFFER_CONTROLLED_CHUNK_MANAGER_H_
#define STRATA_SHARED_BUFFER_CONTROLLED_CHUNK_MANAGER_H_

#include <cstddef>
#include <functional>
#include <vector>

#include "platform/time_stamp.h"
#include "shared/buffer/chunk.h"

namespace strata {

class ControlledChunkManager {
 public:
  // What a controller needs to know about one released chunk.
  struct ChunkMetadata {
    TimeStamp done_time_stamp;
    BufferChunk::Length buffer_bytes = 0;
    bool operator==(const ChunkMetadata& o) const {
      return done_time_stamp == o.done_time_stamp && buffer_bytes == o.buffer_bytes;
    }
  };

  class Update {
   public:
    // The empty "no update yet" value; folding anything into it gives that thing.
    Update() = default;
    // The final update: the manager is going away; no update follows.
    static Update Final() {
      Update u;
      u.unreleased_bytes_ = kFinal;
      return u;
    }
    // A regular update. `newly_released` is the chain of chunks released since the last
    // update (may be null); `oldest_released` the manager's oldest released chunk (or null).
    Update(size_t unreleased_bytes, size_t released_bytes, const BufferChunk* oldest_released,
           const BufferChunk* newly_released);
    // From raw parts (deserialization).
    Update(size_t unreleased_bytes, size_t released_bytes, TimeStamp oldest_done_time_stamp,
           std::vector<ChunkMetadata> newly_released);

    bool IsNotUpdate() const { return unreleased_bytes_ == kNoUpdate; }
    bool IsFinal() const { return unreleased_bytes_ == kFinal; }
    // The accessors below are for regular updates only (neither empty nor final).
    size_t UnreleasedBytes() const;
    size_t ReleasedBytes() const;
    TimeStamp OldestDoneTimeStamp() const;
    const std::vector<ChunkMetadata>& NewlyReleasedChunks() const;

    // Folds `later` into this update: the result equals applying this, then `later`.
    void Fold(Update&& later);
    void Clear() { *this = Update(); }

    bool operator==(const Update& o) const {
      return unreleased_bytes_ == o.unreleased_bytes_ && released_bytes_ == o.released_bytes_ &&
             oldest_done_time_stamp_ == o.oldest_done_time_stamp_ &&
             newly_released_ == o.newly_released_;
    }

   private:
    static constexpr size_t kNoUpdate = static_cast<size_t>(-1);
    static constexpr size_t kFinal = static_cast<size_t>(-2);
    void CheckRegular() const;

    size_t unreleased_bytes_ = kNoUpdate;
    size_t released_bytes_ = 0;
    TimeStamp oldest_done_time_stamp_;
    std::vector<ChunkMetadata> newly_released_;
  };

  using UpdateCallback = std::function<void(Update&&)>;

  virtual ~ControlledChunkManager() = default;

  // Sets (or, with nullptr, removes) the one update callback. A new callback is called at
  // once with the current state (all released chunks as "newly released"); a callback that
  // is replaced or removed gets a final update first.
  virtual void SetUpdateCallback(UpdateCallback callback) = 0;

  // Destroys (or recycles) released chunks whose done time stamp is at or before `done`.
  virtual void DestroyChunksAtOrBefore(TimeStamp done) = 0;
};

}  // namespace strata

#endif  // STRATA_SHARED_BUFFER_CONTROLLED_CHUNK_MANAGER_H_
