// StagingArea: one writer thread's private staging in front of a shared ChunkedBuffer, so
// that the thread writes entries without taking the buffer's lock per entry.
//
// Why: every ChunkedBuffer put takes the buffer's mutex: two locked instructions per entry,
// and from two threads on two CPUs the lock's and the current chunk's cache lines move
// between the CPUs at every entry (two writers then store less than one alone:
// docs/benchmarks.md, "Buffer with two writers"). The owner serializes each entry here with
// plain stores (the commit is one release store, a plain `mov` on x86-64), and staged
// entries move into the buffer in batches (ChunkedBuffer::PutBlocks: one buffer lock, one
// copy per chunk): by the owner when the area is full (or explicitly), and by any other
// thread that wants the buffer complete (FlushInto). The base tier gives each registered
// thread one for its markers (base/internal/markers/markers.cc; flushed also on every sampler loop, at
// capture and when the thread unregisters).
//
// Staged bytes are blocks exactly as the buffer stores them ([ULEB128 size][entry]), so the
// buffer ends up with the same entries direct puts would have written, each owner's in its
// order; only their position moves later, and entries of different owners interleave by
// batch. A staged entry's BlockIndex is not known when it is written: put entries that
// others must refer to directly.
//
// Layout: one linear area. The owner appends at `head`; consumers move [tail, head) out.
// When an entry does not fit at the end, the owner flushes everything and starts again at
// offset 0 (under the consumer mutex, so no consumer reads meanwhile).
//
// Memory: the area (object and bytes, one block) is Strata's own pages when made with `new`
// (platform/page_allocation.h), never the program's allocator: a thread makes its area at
// its first marker, which may be recorded inside the program's own locked `operator new`.
//
// Thread safety: one owner (TryReserveEntry, CommitEntry, PutObjects, PutFrom,
// FlushAndRewind); any number of consumers (FlushInto, Discard), serialized by the area's
// own mutex.
// Lock order: area -> buffer. Async-signal safety: none.
#ifndef STRATA_SHARED_BUFFER_STAGING_AREA_H_
#define STRATA_SHARED_BUFFER_STAGING_AREA_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

#include "platform/mutex.h"
#include "platform/page_allocation.h"
#include "shared/buffer/chunked_buffer.h"
#include "shared/buffer/entry_serialization.h"
#include "shared/buffer/leb128.h"

namespace strata {

class StagingArea {
 public:
  static constexpr size_t kBytes = 16 * 1024;
  // Larger entries are not staged (they go straight to the buffer, after a flush).
  static constexpr size_t kMaxStagedEntryBytes = kBytes / 4;

  StagingArea() = default;
  // `new StagingArea` maps pages of Strata's own (async-signal-safe; nullptr when the kernel
  // refuses, never an exception); `delete` unmaps them.
  static void* operator new(size_t bytes, const std::nothrow_t&) noexcept {
    return AllocateSizedPages(bytes);
  }
  static void* operator new(size_t bytes) noexcept { return AllocateSizedPages(bytes); }
  static void operator delete(void* p) { FreeSizedPages(p); }
  StagingArea(const StagingArea&) = delete;
  StagingArea& operator=(const StagingArea&) = delete;

  // Owner only. Reserves a block for an entry of `entry_bytes` at the end of the area and
  // returns where the entry's bytes go (write exactly `entry_bytes` there, then
  // CommitEntry()), or null: no room left (call FlushAndRewind(), then try again; still
  // null: the entry is too large to stage). Until CommitEntry() no consumer sees the block.
  uint8_t* TryReserveEntry(size_t entry_bytes) {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    const size_t offset = OffsetOf(head);
    const size_t block_bytes = ULEB128Size(uint64_t{entry_bytes}) + entry_bytes;
    if (__builtin_expect(block_bytes > kBytes - offset || entry_bytes > kMaxStagedEntryBytes, 0)) {
      return nullptr;
    }
    uint8_t* p = bytes_ + offset;
    WriteULEB128(uint64_t{entry_bytes}, p);
    reserved_head_ = head + kOneBlock + block_bytes;
    return p;
  }
  // TryReserveEntry() for an entry under 128 bytes (the caller checked), whose size is one
  // byte: no ULEB128 loops (the marker fast path).
  uint8_t* TryReserveSmallEntry(size_t entry_bytes) {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    const size_t offset = OffsetOf(head);
    if (__builtin_expect(entry_bytes + 1 > kBytes - offset, 0)) return nullptr;
    uint8_t* p = bytes_ + offset;
    *p = static_cast<uint8_t>(entry_bytes);
    reserved_head_ = head + kOneBlock + 1 + entry_bytes;
    return p + 1;
  }
  // Owner only: publishes the block TryReserveEntry() returned last (one release store,
  // a plain `mov` on x86-64).
  void CommitEntry() { head_.store(reserved_head_, std::memory_order_release); }
  // True while the calling thread moves this area's entries into a buffer (FlushInto,
  // FlushAndRewind) or discards them. Exact for the calling thread.
  bool IsBeingMovedOnCurrentThread() const { return consumer_mutex_.IsLockedOnCurrentThread(); }

  // Owner only: `values` as one entry (entry_serialization.h) — staged, or, when too large
  // to stage, put directly into `buffer` after everything staged (order kept).
  template <typename... Ts>
  void PutObjects(ChunkedBuffer& buffer, const Ts&... values) {
    Put(buffer, SumBytes(values...), [&](EntryWriter& writer) { writer.WriteObjects(values...); });
  }
  // Owner only: `bytes` of `source` as one entry, the same way.
  void PutFrom(ChunkedBuffer& buffer, const void* source, size_t bytes) {
    Put(buffer, bytes, [&](EntryWriter& writer) { writer.WriteBytes(source, bytes); });
  }

  // Owner only: moves everything into `buffer` and starts again at the beginning.
  void FlushAndRewind(ChunkedBuffer& buffer);
  // Any thread: moves every committed block into `buffer`.
  void FlushInto(ChunkedBuffer& buffer);
  // Any thread: drops every committed block (the session ended).
  void Discard();

 private:
  template <typename Write>
  void Put(ChunkedBuffer& buffer, size_t entry_bytes, Write&& write) {
    uint8_t* entry = TryReserveEntry(entry_bytes);
    if (__builtin_expect(entry == nullptr, 0)) {
      FlushAndRewind(buffer);
      entry = TryReserveEntry(entry_bytes);
    }
    if (__builtin_expect(entry == nullptr, 0)) {
      buffer.ReserveAndPut([entry_bytes] { return entry_bytes; },
                           [&](EntryWriter* writer) {
                             if (writer) write(*writer);
                           });
      return;
    }
    EntryWriter writer(entry, entry_bytes, nullptr, 0);
    write(writer);
    CommitEntry();
  }
  void FlushLocked(ChunkedBuffer& buffer);

  // A position: an offset into bytes_ (low 32 bits) and the number of blocks before it (high
  // 32 bits; at most kBytes / 2 between rewinds), so that a flush knows how many blocks it
  // moves (ChunkedBuffer::PutBlocks) without reading their sizes, from the one value the
  // commit stores.
  static constexpr uint64_t kOneBlock = uint64_t{1} << 32;
  static size_t OffsetOf(uint64_t position) { return static_cast<uint32_t>(position); }
  static size_t BlocksBefore(uint64_t position) { return static_cast<size_t>(position >> 32); }

  uint8_t bytes_[kBytes];
  // Positions: [tail_, head_) is committed and not yet moved. head_ is written by the owner;
  // tail_ under consumer_mutex_; both reset to 0 by the owner under it.
  std::atomic<uint64_t> head_{0};
  std::atomic<uint64_t> tail_{0};
  // The head after the block reserved last (owner only).
  uint64_t reserved_head_ = 0;
  Mutex consumer_mutex_{"strata staging area"};
};

}  // namespace strata

#endif  // STRATA_SHARED_BUFFER_STAGING_AREA_H_
