// MarkerStaging: a registered thread's private staging area for the markers it records.
//
// Why: the session buffer is shared, so writing a marker there takes its lock: two locked
// instructions per marker and a cache line that bounces between writer threads. Instead a
// registered thread serializes each marker here with plain stores (the commit is one release
// store, a plain `mov` on x86-64), and staged entries move into the session buffer in
// batches (ChunkedBuffer::PutBlocks: one buffer lock, one copy per chunk):
//   - by the thread itself when the area is full,
//   - by the sampler thread on every sampling loop (markers reach the buffer within about
//     one interval),
//   - at capture (TakeSessionSnapshot) and when the thread unregisters.
// Staged bytes are blocks exactly as the buffer stores them ([ULEB128 size][entry]), so the
// buffer ends up with the same entries PutObjects() would have written; only their position
// moves later (by up to one interval). A thread's own markers keep their order.
//
// Layout: one linear area. The producer appends at `head`; consumers move [tail, head) out.
// When an entry does not fit at the end, the producer flushes everything and starts again
// at offset 0 (under the consumer mutex, so no consumer reads meanwhile).
//
// Thread safety: one producer (the owning thread: TryReserveEntry, CommitEntry,
// FlushAndRewind); any number of consumers (FlushInto/Discard), serialized by the staging's
// own mutex.
// Lock order: registry -> staging -> buffer. Async-signal safety: none.
#ifndef STRATA_BASE_INTERNAL_MARKER_STAGING_H_
#define STRATA_BASE_INTERNAL_MARKER_STAGING_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "platform/mutex.h"
#include "shared/buffer/chunked_buffer.h"
#include "shared/buffer/entry_serialization.h"
#include "shared/buffer/leb128.h"

namespace strata {
namespace base_internal {

class MarkerStaging {
 public:
  static constexpr size_t kBytes = 16 * 1024;
  // Larger entries are not staged (they go straight to the buffer, after a flush).
  static constexpr size_t kMaxStagedEntryBytes = kBytes / 4;

  MarkerStaging() : bytes_(new uint8_t[kBytes]) {}
  MarkerStaging(const MarkerStaging&) = delete;
  MarkerStaging& operator=(const MarkerStaging&) = delete;

  // Producer only. Reserves a block for an entry of `entry_bytes` at the end of the area and
  // returns where the entry's bytes go (write exactly `entry_bytes` there, then
  // CommitEntry()), or null: no room left (call FlushAndRewind(), then try again; still
  // null: the entry is too large to stage). Until CommitEntry() no consumer sees the block.
  uint8_t* TryReserveEntry(size_t entry_bytes) {
    const size_t head = head_.load(std::memory_order_relaxed);
    const size_t block_bytes = ULEB128Size(uint64_t{entry_bytes}) + entry_bytes;
    if (__builtin_expect(block_bytes > kBytes - head || entry_bytes > kMaxStagedEntryBytes, 0)) {
      return nullptr;
    }
    uint8_t* p = bytes_.get() + head;
    WriteULEB128(uint64_t{entry_bytes}, p);
    reserved_head_ = head + block_bytes;
    return p;
  }
  // Producer only: publishes the block TryReserveEntry() returned last (one release store,
  // a plain `mov` on x86-64).
  void CommitEntry() { head_.store(reserved_head_, std::memory_order_release); }

  // Producer only: moves everything into `buffer` and starts again at the beginning.
  void FlushAndRewind(ChunkedBuffer& buffer);
  // Any thread: moves every committed block into `buffer`.
  void FlushInto(ChunkedBuffer& buffer);
  // Any thread: drops every committed block (the session ended).
  void Discard();

 private:
  void FlushLocked(ChunkedBuffer& buffer);

  const std::unique_ptr<uint8_t[]> bytes_;
  // Offsets into bytes_: [tail_, head_) is committed and not yet moved. head_ is written by
  // the producer; tail_ under consumer_mutex_; both reset to 0 by the producer under it.
  std::atomic<size_t> head_{0};
  std::atomic<size_t> tail_{0};
  // The head after the block reserved last (producer only).
  size_t reserved_head_ = 0;
  Mutex consumer_mutex_{"strata marker staging"};
};

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_MARKER_STAGING_H_
