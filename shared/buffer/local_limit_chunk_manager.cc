#include "shared/buffer/local_limit_chunk_manager.h"

#include <utility>

#include "platform/check.h"

namespace strata {

LocalLimitChunkManager::LocalLimitChunkManager(size_t max_total_bytes,
                                               BufferChunk::Length chunk_min_buffer_bytes)
    : max_total_bytes_(max_total_bytes),
      // The size BufferChunk::Create() really gives, so accounting is exact.
      chunk_min_buffer_bytes_((chunk_min_buffer_bytes + 7u) & ~BufferChunk::Length{7}) {
  STRATA_CHECK(chunk_min_buffer_bytes > 0, "chunks need some storage");
}

LocalLimitChunkManager::~LocalLimitChunkManager() {
  AutoLock lock(mutex_);
  if (update_callback_) update_callback_(Update::Final());
}

std::unique_ptr<BufferChunk> LocalLimitChunkManager::GetChunk() {
  AutoLock lock(mutex_);
  if (spare_chunk_) {
    // Already counted in unreleased_bytes_ when it was prepared.
    ++stats_.spare_hits;
    return std::move(spare_chunk_);
  }
  return TakeOrMakeChunkLocked();
}

void LocalLimitChunkManager::RequestChunk() {
  AutoLock lock(mutex_);
  spare_requested_ = true;
}

void LocalLimitChunkManager::FulfillChunkRequests() {
  AutoLock lock(mutex_);
  if (spare_requested_ && !spare_chunk_) {
    spare_requested_ = false;
    spare_chunk_ = TakeOrMakeChunkLocked();
  }
  // This is a Strata thread's call (the sampler loop): the update the writers left due.
  if (update_deferred_) NotifyUpdateLocked(nullptr);
}

std::unique_ptr<BufferChunk> LocalLimitChunkManager::TakeOrMakeChunkLocked() {
  MakeRoomForOneChunkLocked();
  std::unique_ptr<BufferChunk> chunk;
  if (recycled_chunk_) {
    chunk = std::move(recycled_chunk_);
    ++stats_.chunks_recycled;
  } else {
    chunk = BufferChunk::Create(chunk_min_buffer_bytes_, storage_);
    if (!chunk) return nullptr;
    ++stats_.chunks_allocated;
  }
  unreleased_bytes_ += chunk->BufferBytes();
  return chunk;
}

size_t LocalLimitChunkManager::RecycledBytesLocked() const {
  return recycled_chunk_ ? recycled_chunk_->BufferBytes() : 0;
}

void LocalLimitChunkManager::MakeRoomForOneChunkLocked() {
  bool dropped_any = false;
  for (;;) {
    // A recycled chunk is the one that will be used, so it is not counted twice.
    const size_t incoming = recycled_chunk_ ? 0 : chunk_min_buffer_bytes_;
    const size_t total = unreleased_bytes_ + released_bytes_ + RecycledBytesLocked() + incoming;
    if (!released_chunks_ || total <= max_total_bytes_) break;
    DropOldestReleasedLocked(/*may_recycle=*/true);
    dropped_any = true;
  }
  // On the writer's path when GetChunk() got here: the update is sent later.
  if (dropped_any) DeferUpdateLocked(nullptr);
}

void LocalLimitChunkManager::DropOldestReleasedLocked(bool may_recycle) {
  std::unique_ptr<BufferChunk> oldest = std::move(released_chunks_);
  released_chunks_ = oldest->TakeNext();
  if (!released_chunks_) newest_released_ = nullptr;
  // A deferred update's newly released chain is the newest part of the released chain: its
  // first chunk goes first.
  if (deferred_newly_released_ == oldest.get()) deferred_newly_released_ = released_chunks_.get();
  released_bytes_ -= oldest->BufferBytes();
  ++stats_.chunks_destroyed;
  if (chunk_destroyed_callback_) chunk_destroyed_callback_(*oldest);
  if (may_recycle && !recycled_chunk_ && oldest->BufferBytes() >= chunk_min_buffer_bytes_) {
    oldest->MarkRecycled();
    recycled_chunk_ = std::move(oldest);
  }
  // Otherwise `oldest` is freed here.
}

void LocalLimitChunkManager::ReleaseChunk(std::unique_ptr<BufferChunk> chunks) {
  if (!chunks) return;
  AutoLock lock(mutex_);
  size_t bytes = 0;
  for (const BufferChunk* c = chunks.get(); c; c = c->Next()) {
    STRATA_DCHECK(c->state() == BufferChunk::State::kDone, "only done chunks are released");
    bytes += c->BufferBytes();
  }
  STRATA_DCHECK(bytes <= unreleased_bytes_, "released more than was handed out");
  unreleased_bytes_ = bytes <= unreleased_bytes_ ? unreleased_bytes_ - bytes : 0;
  released_bytes_ += bytes;
  const BufferChunk* newly_released = chunks.get();
  BufferChunk* newest = chunks->Last();
  if (newest_released_) {
    newest_released_->AppendToChain(std::move(chunks));
  } else {
    released_chunks_ = std::move(chunks);
  }
  newest_released_ = newest;
  DeferUpdateLocked(newly_released);
}

void LocalLimitChunkManager::SetChunkDestroyedCallback(
    std::function<void(const BufferChunk&)> callback) {
  AutoLock lock(mutex_);
  chunk_destroyed_callback_ = std::move(callback);
}

std::unique_ptr<BufferChunk> LocalLimitChunkManager::GetExtantReleasedChunks() {
  AutoLock lock(mutex_);
  released_bytes_ = 0;
  newest_released_ = nullptr;
  deferred_newly_released_ = nullptr;  // Taken out: no longer the manager's to report.
  std::unique_ptr<BufferChunk> chunks = std::move(released_chunks_);
  NotifyUpdateLocked(nullptr);
  return chunks;
}

void LocalLimitChunkManager::ForgetUnreleasedChunks() {
  AutoLock lock(mutex_);
  // The spare was never given out: keep it, and keep counting it.
  unreleased_bytes_ = spare_chunk_ ? spare_chunk_->BufferBytes() : 0;
  NotifyUpdateLocked(nullptr);
}

size_t LocalLimitChunkManager::TotalBufferBytes() const {
  AutoLock lock(mutex_);
  return unreleased_bytes_ + released_bytes_ + RecycledBytesLocked();
}

void LocalLimitChunkManager::SetUpdateCallback(UpdateCallback callback) {
  AutoLock lock(mutex_);
  if (update_callback_) update_callback_(Update::Final());
  update_callback_ = std::move(callback);
  // The new callback's first update has every released chunk as newly released.
  update_deferred_ = false;
  deferred_newly_released_ = nullptr;
  if (update_callback_) {
    // The current state, with every released chunk as newly released.
    update_callback_(Update(unreleased_bytes_ + RecycledBytesLocked(), released_bytes_,
                            released_chunks_.get(), released_chunks_.get()));
  }
}

void LocalLimitChunkManager::DestroyChunksAtOrBefore(TimeStamp done) {
  AutoLock lock(mutex_);
  bool dropped_any = false;
  while (released_chunks_ && released_chunks_->header().done_time_stamp <= done) {
    // Freed, not recycled: the controller counts on this memory going.
    DropOldestReleasedLocked(/*may_recycle=*/false);
    dropped_any = true;
  }
  if (dropped_any) NotifyUpdateLocked(nullptr);
}

void LocalLimitChunkManager::SendDeferredUpdate() {
  AutoLock lock(mutex_);
  if (update_deferred_) NotifyUpdateLocked(nullptr);
}

void LocalLimitChunkManager::DeferUpdateLocked(const BufferChunk* newly_released) {
  if (!update_callback_) return;
  update_deferred_ = true;
  if (deferred_newly_released_ == nullptr) deferred_newly_released_ = newly_released;
}

void LocalLimitChunkManager::NotifyUpdateLocked(const BufferChunk* newly_released) {
  if (deferred_newly_released_ != nullptr) newly_released = deferred_newly_released_;
  update_deferred_ = false;
  deferred_newly_released_ = nullptr;
  if (!update_callback_) return;
  // The recycled chunk is memory held that no controller can destroy: it counts as
  // unreleased (it becomes the next chunk handed out or prepared).
  update_callback_(Update(unreleased_bytes_ + RecycledBytesLocked(), released_bytes_,
                          released_chunks_.get(), newly_released));
}

LocalLimitChunkManager::Stats LocalLimitChunkManager::GetStats() const {
  AutoLock lock(mutex_);
  Stats stats = stats_;
  stats.unreleased_bytes = unreleased_bytes_;
  stats.released_bytes = released_bytes_;
  stats.recycled_bytes = RecycledBytesLocked();
  return stats;
}

const BufferChunk* LocalLimitChunkManager::PeekExtantReleasedChunksAndLock() {
  mutex_.Lock();
  return released_chunks_.get();
}

void LocalLimitChunkManager::UnlockAfterPeekExtantReleasedChunks() { mutex_.Unlock(); }

}  // namespace strata
