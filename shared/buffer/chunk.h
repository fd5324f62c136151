// BufferChunk: one variable-size piece of a ChunkedBuffer (Firefox: ProfileBufferChunk).
//
// A chunk is a header followed by `BufferBytes()` bytes of block storage. Blocks are laid one
// after the other; a block that does not fit in the rest of a chunk continues at the start
// of the next chunk, so a chunk may begin with the tail of a block (`OffsetFirstBlock()`
// skips it) and end in the middle of one.
//
//   chunk N:   [hdr][..tail of a block from N-1..|block|block|block|first part of block..]
//   chunk N+1: [hdr][..rest of that block..|block|block| ...unused... ]
//                    ^ OffsetFirstBlock()               ^ OffsetPastLastBlock()
//
// Global indexes: the chunk's first byte has index RangeStart(); chunks are used end to end,
// so the next chunk's RangeStart() is this one's RangeStart() + BufferBytes().
//
// Life cycle (checked in debug builds):
//   Create() -> kCreated --(SetRangeStart)--> kInUse --(MarkDone)--> kDone
//   kDone --(MarkRecycled)--> kRecycled --(SetRangeStart)--> kInUse ...
// A chunk in use is written by one owner (the buffer, under its lock); once done it is
// immutable and may be read from any thread while its manager keeps it alive.
//
// Chunks form singly-linked chains through an owning `next` pointer (released chunks in a
// manager, oldest first).
//
// Thread safety: not thread-safe; owners serialize access. Async-signal safety: none of the
// functions allocate except Create() and destruction, but nothing here is meant to be
// called from a signal handler.
#ifndef STRATA_SHARED_BUFFER_CHUNK_H_
#define STRATA_SHARED_BUFFER_CHUNK_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "platform/check.h"
#include "platform/page_allocation.h"
#include "platform/process_thread_ids.h"
#include "platform/time_stamp.h"
#include "shared/buffer/block_index.h"

namespace strata {

class BufferChunk;

// Where a chunk's memory can come from instead of the heap: the flight recorder's slots in a
// file-backed shared mapping (base/internal/flight/flight_recorder.h). The storage is told of each
// step of a chunk's life so that it can describe the chunk to a reader of its memory.
// Its memory must stay mapped as long as any chunk of it lives (in practice: until the
// process ends). Registered storages are found by address when a chunk is deleted.
// Thread safety: implementations must be thread-safe; the hooks run under the buffer's or
// the manager's lock (lock order: buffer, manager, storage). Not async-signal-safe.
class ChunkStorage {
 public:
  // At most this many storages can be registered in a process.
  static constexpr int kMaxRegistered = 4;
  // Registers `storage` for the address lookup of BufferChunk's operator delete; false when
  // the table is full (the storage must then not be used).
  static bool Register(ChunkStorage* storage);
  // Removes `storage` from the lookup once no chunk of it is left (its object must stay
  // valid: a concurrent lookup may still call its Contains()).
  static void Unregister(ChunkStorage* storage);
  // The registered storage whose memory holds `p`, or null.
  static ChunkStorage* Owner(const void* p);

  // `bytes` of memory for one chunk (object + storage), 8-byte aligned, or null.
  virtual void* Allocate(size_t bytes) = 0;
  // Whether [p, p+1) lies in this storage's memory (from the storage object's own fields:
  // called also after its memory is gone).
  virtual bool Contains(const void* p) const = 0;
  // Life of a chunk made in this storage: its storage bytes are final up to its
  // OffsetPastLastBlock() (MarkDone); it is emptied for reuse (MarkRecycled); it is being
  // destroyed (its memory is free again once this returns).
  virtual void OnChunkDone(const BufferChunk& chunk) = 0;
  virtual void OnChunkRecycled(const BufferChunk& chunk) = 0;
  virtual void OnChunkDestroyed(const BufferChunk& chunk) = 0;

 protected:
  ~ChunkStorage() = default;
};

class BufferChunk {
 public:
  using Length = uint32_t;
  using Byte = uint8_t;

  // The copyable header, the part of a chunk that describes it (and that a multi-process
  // controller learns about).
  struct Header {
    // Offset of the first block that starts in this chunk (after any tail of a block begun
    // in the previous chunk). In the oldest chunk, the natural place to start reading.
    Length offset_first_block = 0;
    // Offset past the last reserved block; where the next block goes. May be past
    // buffer_bytes when the last block continues in the next chunk.
    Length offset_past_last_block = 0;
    // When the chunk was first used, and when it was marked done (its identity among the
    // chunks of one process: done time stamps are strictly increasing in a buffer).
    TimeStamp start_time_stamp;
    TimeStamp done_time_stamp;
    // Bytes of block storage.
    Length buffer_bytes = 0;
    // Blocks that start in this chunk.
    Length block_count = 0;
    // Global index of this chunk's first byte.
    BufferIndex range_start = 0;
    // Process that wrote the chunk.
    ProcessId process_id;
  };

  enum class State : uint8_t { kCreated, kInUse, kDone, kRecycled };

  // A chunk with at least `min_buffer_bytes` of storage (rounded up so the whole allocation
  // is a multiple of 8), or nullptr if memory is exhausted.
  // With `storage`, the chunk's memory comes from it (the heap when it has none left).
  static std::unique_ptr<BufferChunk> Create(Length min_buffer_bytes,
                                             ChunkStorage* storage = nullptr);

  ~BufferChunk();
  BufferChunk(const BufferChunk&) = delete;
  BufferChunk& operator=(const BufferChunk&) = delete;

  // Chunks come from Create(); these keep `delete` symmetric with its allocation: Strata's
  // own pages (platform/page_allocation.h), or a storage's memory, given back by the
  // destructor. Neither ever reaches the program's allocator.
  static void operator delete(void* p) {
    if (ChunkStorage::Owner(p) == nullptr) FreeSizedPages(p);
  }

  // Starts using this chunk (created or recycled): its first byte gets global index
  // `range_start`; records the start time and the process id.
  void SetRangeStart(BufferIndex range_start);

  // Reserves `tail_bytes` at the very start of this chunk for the end of a block that began
  // in the previous chunk (at most BufferBytes()). Call right after SetRangeStart(), before
  // any ReserveBlock().
  Byte* ReserveInitialBlockAsTail(Length tail_bytes);

  // Reserves a block of `block_bytes` starting at OffsetPastLastBlock(). Returns where it
  // starts, its global index, and how many of its bytes fit in this chunk (the rest must go
  // to the start of the next chunk with ReserveInitialBlockAsTail()). RemainingBytes() must
  // be non-zero.
  struct Reservation {
    Byte* start;
    Length bytes_in_this_chunk;
    BlockIndex block_index;
  };
  Reservation ReserveBlock(Length block_bytes) {
    STRATA_DCHECK(state_ == State::kInUse, "chunk not in use");
    STRATA_DCHECK(RemainingBytes() > 0, "chunk is full");
    const Length offset = header_.offset_past_last_block;
    const Length remaining = header_.buffer_bytes - offset;
    Reservation r;
    r.start = Data() + offset;
    r.bytes_in_this_chunk = block_bytes < remaining ? block_bytes : remaining;
    r.block_index = BlockIndex::FromTrustedBufferIndex(header_.range_start + offset);
    header_.offset_past_last_block = offset + block_bytes;
    ++header_.block_count;
    return r;
  }

  // Reserves `count` whole blocks totalling `bytes` (each [ULEB128 size][entry]) that fit in
  // RemainingBytes(); returns where to copy them.
  Byte* ReserveWholeBlocks(Length bytes, Length count) {
    STRATA_DCHECK(state_ == State::kInUse, "chunk not in use");
    STRATA_DCHECK(bytes <= RemainingBytes(), "blocks do not fit");
    Byte* start = Data() + header_.offset_past_last_block;
    header_.offset_past_last_block += bytes;
    header_.block_count += count;
    return start;
  }

  // Copies in flight: a writer may reserve blocks under the buffer's lock and copy their
  // bytes after releasing it (ChunkedBuffer::PutBlocks), so that writers on different CPUs
  // copy at the same time. It counts the copy with BeginCopyInFlight() while holding the
  // buffer's lock and ends it with EndCopyInFlight() once the bytes are in (release).
  // Whoever reads the reserved bytes, marks the chunk done for release, or destroys it must
  // first WaitForCopiesInFlight() (acquire; spins, then sleeps) while holding the buffer's
  // lock, so that no new copy can start meanwhile. A copier never takes a lock to finish.
  void BeginCopyInFlight() { copies_in_flight_.fetch_add(1, std::memory_order_relaxed); }
  void EndCopyInFlight() { copies_in_flight_.fetch_sub(1, std::memory_order_release); }
  void WaitForCopiesInFlight() const;

  // No more writing; stamps the done time. `done` must be later than any earlier chunk's
  // done time in the same buffer (the buffer ensures it).
  void MarkDone(TimeStamp done);
  // Done -> recycled: forget the contents, ready for SetRangeStart().
  void MarkRecycled();

  const Header& header() const { return header_; }
  State state() const { return state_; }
  Length BufferBytes() const { return header_.buffer_bytes; }
  Length OffsetFirstBlock() const { return header_.offset_first_block; }
  Length OffsetPastLastBlock() const { return header_.offset_past_last_block; }
  Length BlockCount() const { return header_.block_count; }
  BufferIndex RangeStart() const { return header_.range_start; }
  // Global index one past this chunk's storage.
  BufferIndex RangeEnd() const { return header_.range_start + header_.buffer_bytes; }
  // Bytes still free for new blocks.
  Length RemainingBytes() const {
    return header_.offset_past_last_block < header_.buffer_bytes
               ? header_.buffer_bytes - header_.offset_past_last_block
               : 0;
  }
  // Global index of the first block starting in this chunk; equal to the index past the
  // chunk's data when no block starts here.
  BufferIndex FirstBlockIndex() const { return header_.range_start + header_.offset_first_block; }

  // The storage, right after the object in the same allocation.
  const Byte* Data() const { return reinterpret_cast<const Byte*>(this + 1); }
  Byte* Data() { return reinterpret_cast<Byte*>(this + 1); }

  // Bytes the whole allocation takes (header + storage).
  size_t AllocationBytes() const;

  // Chain of chunks (owning, oldest first).
  BufferChunk* Next() { return next_.get(); }
  const BufferChunk* Next() const { return next_.get(); }
  std::unique_ptr<BufferChunk> TakeNext() { return std::move(next_); }
  // Appends `chain` after the last chunk of this chain.
  void AppendToChain(std::unique_ptr<BufferChunk> chain);
  BufferChunk* Last();
  size_t ChainLength() const;

  // Storage bytes of all chunks alive in this process (for memory tests and the soak test;
  // one relaxed atomic add per chunk creation and destruction).
  static size_t LiveBufferBytes();
  // From this call on, every change of LiveBufferBytes() is also added to `*total`, and its
  // current value is added at once (null: stop adding). Several processes may add to one
  // counter in shared memory, which then holds the live buffer bytes of the whole tree at
  // every instant, where per-process copies read one after another could be torn (memory
  // tests of the IPC limit). Call it while no chunk is being created or destroyed (before the
  // session starts); `*total` must outlive every chunk. One extra relaxed add per chunk.
  static void AlsoCountLiveBytesIn(std::atomic<int64_t>* total);

 private:
  explicit BufferChunk(Length buffer_bytes);

  Header header_;
  ChunkStorage* storage_ = nullptr;  // Null: on the heap.
  std::unique_ptr<BufferChunk> next_;
  std::atomic<uint32_t> copies_in_flight_{0};
  State state_ = State::kCreated;
  // BufferBytes() of storage follow the object (Create() over-allocates).
};

}  // namespace strata

#endif  // STRATA_SHARED_BUFFER_CHUNK_H_
