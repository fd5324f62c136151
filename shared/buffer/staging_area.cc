#include "shared/buffer/staging_area.h"

namespace strata {

void StagingArea::FlushLocked(ChunkedBuffer& buffer) {
  const uint64_t tail = tail_.load(std::memory_order_relaxed);
  const uint64_t head = head_.load(std::memory_order_acquire);
  if (tail == head) return;
  buffer.PutBlocks(bytes_ + OffsetOf(tail), OffsetOf(head) - OffsetOf(tail),
                   BlocksBefore(head) - BlocksBefore(tail));
  tail_.store(head, std::memory_order_relaxed);
}

// The consumers (the sampler thread, a capture, an unregistering thread) at -Os: the
// library's size limit (docs/benchmarks.md, "Library size"); the batch copy is PutBlocks'.
__attribute__((optimize("Os"))) void StagingArea::FlushInto(ChunkedBuffer& buffer) {
  AutoLock lock(consumer_mutex_);
  FlushLocked(buffer);
}

void StagingArea::FlushAndRewind(ChunkedBuffer& buffer) {
  AutoLock lock(consumer_mutex_);
  FlushLocked(buffer);
  // Nobody reads while we hold the mutex, and only this thread writes: start over.
  tail_.store(0, std::memory_order_relaxed);
  head_.store(0, std::memory_order_relaxed);
}

__attribute__((optimize("Os"))) void StagingArea::Discard() {
  AutoLock lock(consumer_mutex_);
  tail_.store(head_.load(std::memory_order_acquire), std::memory_order_relaxed);
}

}  // namespace strata
