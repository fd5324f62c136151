#include "shared/buffer/controlled_chunk_manager.h"

#include <algorithm>
#include <utility>

#include "platform/check.h"

namespace strata {

using Update = ControlledChunkManager::Update;

Update::Update(size_t unreleased_bytes, size_t released_bytes, const BufferChunk* oldest_released,
               const BufferChunk* newly_released)
    : unreleased_bytes_(unreleased_bytes),
      released_bytes_(released_bytes),
      oldest_done_time_stamp_(oldest_released ? oldest_released->header().done_time_stamp
                                              : TimeStamp()) {
  CheckRegular();
  for (const BufferChunk* c = newly_released; c; c = c->Next()) {
    newly_released_.push_back({c->header().done_time_stamp, c->BufferBytes()});
  }
}

Update::Update(size_t unreleased_bytes, size_t released_bytes, TimeStamp oldest_done_time_stamp,
               std::vector<ChunkMetadata> newly_released)
    : unreleased_bytes_(unreleased_bytes),
      released_bytes_(released_bytes),
      oldest_done_time_stamp_(oldest_done_time_stamp),
      newly_released_(std::move(newly_released)) {
  CheckRegular();
}

void Update::CheckRegular() const {
  STRATA_CHECK(!IsNotUpdate() && !IsFinal(), "not a regular update");
}

size_t Update::UnreleasedBytes() const {
  CheckRegular();
  return unreleased_bytes_;
}
size_t Update::ReleasedBytes() const {
  CheckRegular();
  return released_bytes_;
}
TimeStamp Update::OldestDoneTimeStamp() const {
  CheckRegular();
  return oldest_done_time_stamp_;
}
const std::vector<ControlledChunkManager::ChunkMetadata>& Update::NewlyReleasedChunks() const {
  CheckRegular();
  return newly_released_;
}

void Update::Fold(Update&& later) {
  if (later.IsNotUpdate()) return;
  STRATA_CHECK(!IsFinal(), "nothing may follow a final update");
  if (IsNotUpdate() || later.IsFinal()) {
    *this = std::move(later);
    return;
  }
  // Sizes are absolute: the later ones win.
  unreleased_bytes_ = later.unreleased_bytes_;
  released_bytes_ = later.released_bytes_;
  // Chunks older than the later oldest one have been destroyed since: drop them.
  if (!later.oldest_done_time_stamp_.IsNull()) {
    oldest_done_time_stamp_ = later.oldest_done_time_stamp_;
    const TimeStamp oldest = oldest_done_time_stamp_;
    newly_released_.erase(
        std::remove_if(newly_released_.begin(), newly_released_.end(),
                       [oldest](const ChunkMetadata& m) { return m.done_time_stamp < oldest; }),
        newly_released_.end());
  } else {
    // No released chunk left at all after `later`.
    oldest_done_time_stamp_ = TimeStamp();
    newly_released_.clear();
  }
  newly_released_.insert(newly_released_.end(), later.newly_released_.begin(),
                         later.newly_released_.end());
}

}  // namespace strata
