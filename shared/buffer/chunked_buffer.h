// ChunkedBuffer: the profile buffer both tiers write into (Firefox: ProfileChunkedBuffer).
//
// Entries of any size (up to one chunk) are stored as blocks, [ULEB128 entry size][entry],
// one after the other in chunks obtained from a ChunkManager; a block that does not fit at
// the end of a chunk continues in the next one. Full chunks are released to the manager,
// which may destroy the oldest to respect its memory limit: the buffer then always holds the
// most recent data. Every block has a global BlockIndex that stays valid as long as the
// block exists, and readers can start at any block.
//
// Writing is ReserveAndPut(size_callback, write_callback): the size is asked first (out of
// session it is not asked at all), a block is reserved, and the writer fills it with exactly
// that many bytes. A write that cannot be stored (no manager, entry larger
// than a chunk, no memory) calls the write callback with nullptr and is counted in
// State::failed_put_*; it is never undefined behaviour.
//
// In session / out of session: the buffer is in session while it has a chunk manager; out
// of session every write fails cheaply and reads see nothing.
//
// Thread safety: with ThreadSafety::kThreadSafe, every member is thread-safe (a Mutex;
// chunk managers have their own; lock order: buffer, then manager). Callbacks run with the
// buffer's lock held: they must not call this buffer. kSingleThreaded skips the lock.
// Async-signal safety: none. Never call from a signal handler or while another thread is
// suspended (it locks, and may allocate when no prepared chunk is ready).
#ifndef STRATA_SHARED_BUFFER_CHUNKED_BUFFER_H_
#define STRATA_SHARED_BUFFER_CHUNKED_BUFFER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include "platform/maybe_mutex.h"
#include "platform/time_stamp.h"
#include "shared/buffer/block_index.h"
#include "shared/buffer/chunk.h"
#include "shared/buffer/chunk_manager.h"
#include "shared/buffer/entry_serialization.h"

namespace strata {

class ChunkedBuffer {
 public:
  // Out of session until SetChunkManager().
  ChunkedBuffer(ThreadSafety safety);
  // In session with a manager the caller keeps alive longer than the session.
  ChunkedBuffer(ThreadSafety safety, ChunkManager& manager);
  // In session with a manager the buffer owns.
  ChunkedBuffer(ThreadSafety safety, std::unique_ptr<ChunkManager> manager);
  ~ChunkedBuffer();
  ChunkedBuffer(const ChunkedBuffer&) = delete;
  ChunkedBuffer& operator=(const ChunkedBuffer&) = delete;

  // Starts a session with `manager` (ending any current one).
  void SetChunkManager(ChunkManager& manager);
  void SetChunkManager(std::unique_ptr<ChunkManager> manager);
  // Ends the session: the chunk being written is dropped; released chunks stay with the
  // manager (whose owner may still read them).
  void ResetChunkManager();
  bool IsInSession() const;
  // True when the calling thread holds this (thread-safe) buffer's lock: it is inside one of
  // the buffer's calls, or a chunk manager's callback made from one. Exact for the caller.
  bool IsLockedOnCurrentThread() const {
    return mutex_.IsThreadSafe() && mutex_.IsLockedOnCurrentThread();
  }

  // Drops all data (released chunks are destroyed), keeps the session.
  void Clear();

  // The global index range of what can be read: [range_start, range_end).
  struct State {
    BufferIndex range_start = kFirstBufferIndex;
    BufferIndex range_end = kFirstBufferIndex;
    uint64_t pushed_block_count = 0;   // Blocks ever stored.
    uint64_t cleared_block_count = 0;  // Blocks destroyed since (with their chunks).
    uint64_t failed_put_count = 0;     // Writes refused.
    uint64_t failed_put_bytes = 0;
    uint64_t chunks_taken = 0;  // Chunks taken from the manager.
  };
  State GetState() const;

  // Reserves a block of `size_callback()` bytes and calls `write_callback(EntryWriter*)`
  // with a writer for exactly that many bytes (the writer must fill them all), or with
  // nullptr when nothing can be stored. Returns what `write_callback` returns.
  template <typename SizeCallback, typename WriteCallback>
  decltype(auto) ReserveAndPut(SizeCallback&& size_callback, WriteCallback&& write_callback) {
    MaybeAutoLock lock(mutex_);
    return ReserveAndPutLocked(std::forward<SizeCallback>(size_callback),
                               std::forward<WriteCallback>(write_callback));
  }

  // ReserveAndPut where the size may depend on the chunk the block starts in:
  // `size_callback(BufferIndex chunk_start)` gets that chunk's RangeStart() (the current
  // chunk's, or the next chunk's when the current one is full or absent). A chunk is
  // destroyed with every block that starts in it, and readers start at a chunk's first block
  // or at a given block: so an entry may refer to an earlier block that started in the same
  // chunk, and every reader that sees the entry has seen that block (docs/buffer.md,
  // "References between entries"; kSampleSharedPrefix). Range starts are never reused by a
  // buffer (they keep growing across Clear() and sessions).
  template <typename SizeCallback, typename WriteCallback>
  decltype(auto) ReserveAndPutInChunk(SizeCallback&& size_callback, WriteCallback&& write_callback) {
    MaybeAutoLock lock(mutex_);
    const BufferIndex chunk_start = current_chunk_ && current_chunk_->RemainingBytes() > 0
                                        ? current_chunk_->RangeStart()
                                        : next_range_start_;
    return ReserveAndPutLocked([&] { return size_callback(chunk_start); },
                               std::forward<WriteCallback>(write_callback));
  }

  // Appends `bytes` of complete blocks, each [ULEB128 entry size][entry] exactly as this
  // buffer stores them (a writer's private staging, see staging_area.h).
  // Same result as putting each entry in turn, but with one copy per chunk, made after the
  // buffer's lock is released (BufferChunk's copies in flight), so that several writers
  // copy their batches at once. The blocks must be well-formed (written by this process)
  // and stay unchanged until the call returns. `block_count` is how many blocks they are
  // (the staging counts them as it commits them: no walk over the sizes here).
  void PutBlocks(const uint8_t* blocks, size_t bytes, size_t block_count);
  // The same, counting the blocks first.
  void PutBlocks(const uint8_t* blocks, size_t bytes) {
    size_t block_count = 0;
    for (const uint8_t* q = blocks; q < blocks + bytes; ++block_count) {
      const uint64_t entry_bytes = ReadULEB128<uint64_t>(q);
      q += entry_bytes;
    }
    PutBlocks(blocks, bytes, block_count);
  }

  // Stores `values` as one entry (see entry_serialization.h). Returns the block's index,
  // or a null BlockIndex when the write failed.
  template <typename... Ts>
  BlockIndex PutObjects(const Ts&... values) {
    return ReserveAndPut([&]() { return SumBytes(values...); },
                         [&](EntryWriter* writer) {
                           if (!writer) return BlockIndex();
                           writer->WriteObjects(values...);
                           return writer->CurrentBlockIndex();
                         });
  }
  template <typename T>
  BlockIndex PutObject(const T& value) {
    return PutObjects(value);
  }
  // Stores raw bytes as one entry.
  BlockIndex PutFrom(const void* source, size_t bytes);

  // Readers of this buffer are untrusted (entries recovered from a file), with `resolver`
  // for literal-string addresses (entry_serialization.h). Call before reading.
  void SetUntrustedReading(const LiteralResolver* resolver) {
    untrusted_reading_ = true;
    literal_resolver_ = resolver;
  }

  // Calls `f(const BufferChunk* current)` (null when there is no current chunk) under the
  // buffer's lock, once the current chunk's copies in flight are in: its storage bytes up to
  // OffsetPastLastBlock() are final while `f` runs (the flight recorder publishes them).
  template <typename F>
  void WithSettledCurrentChunk(F&& f) {
    MaybeAutoLock lock(mutex_);
    if (current_chunk_) current_chunk_->WaitForCopiesInFlight();
    std::forward<F>(f)(static_cast<const BufferChunk*>(current_chunk_.get()));
  }

  // Prepares the next chunk ahead of need (the manager's FulfillChunkRequests), so that
  // writers do not allocate. Call from a thread where allocation is fine (the sampler loop).
  void PrepareNextChunk();

  // Calls `f(EntryReader&)` for every block, oldest first. The reader also knows the
  // block's index (CurrentBlockIndex) and the next one's (NextBlockIndex).
  template <typename F>
  void ReadEach(F&& f) const {
    ReadEachFrom(BlockIndex(), std::forward<F>(f));
  }
  // Same, starting at `start` (or at the oldest block if `start` is null or was destroyed).
  template <typename F>
  void ReadEachFrom(BlockIndex start, F&& f) const {
    BlockVisitor visitor(std::forward<F>(f));
    VisitBlocks(start, /*only_first=*/false, visitor);
  }
  // Calls `f(EntryReader*)` with a reader of the block at `index`, or with nullptr when that
  // block no longer exists (or never did). Returns what `f` returns.
  template <typename F>
  decltype(auto) ReadAt(BlockIndex index, F&& f) const {
    std::optional<EntryReader> found;
    auto capture = [&](EntryReader& reader) { found.emplace(reader); };
    BlockVisitor<decltype(capture)&> visitor(capture);
    // The reader points into chunks that stay alive only while the buffer is locked.
    MaybeAutoLock lock(mutex_);
    VisitBlocksLocked(index, /*only_first=*/true, visitor);
    if (found && found->CurrentBlockIndex() != index) found.reset();
    return std::forward<F>(f)(found ? &*found : nullptr);
  }

 private:
  // Type-erased per-block callback, so that the walk over chunks is compiled once.
  class BlockVisitorBase {
   public:
    virtual void Visit(EntryReader& reader) = 0;

   protected:
    ~BlockVisitorBase() = default;
  };
  template <typename F>
  class BlockVisitor final : public BlockVisitorBase {
   public:
    explicit BlockVisitor(F f) : f_(std::forward<F>(f)) {}
    void Visit(EntryReader& reader) override { f_(reader); }

   private:
    F f_;
  };

  void VisitBlocks(BlockIndex start, bool only_first, BlockVisitorBase& visitor) const;
  void VisitBlocksLocked(BlockIndex start, bool only_first, BlockVisitorBase& visitor) const;
  void VisitFromChunk(const BufferChunk* chunk, size_t offset, bool only_first,
                      BlockVisitorBase& visitor) const;
  const BufferChunk* NextChunkForReading(const BufferChunk* chunk) const;

  // All below: mutex_ held.

  template <typename SizeCallback, typename WriteCallback>
  decltype(auto) ReserveAndPutLocked(SizeCallback&& size_callback, WriteCallback&& write_callback) {
    if (__builtin_expect(current_chunk_ != nullptr, 1)) {
      // Fast path, inline: the block fits in the current chunk (current_chunk_ implies a
      // manager). Nothing is released by this write.
      const size_t entry_bytes = size_callback();
      const size_t block_bytes = ULEB128Size(uint64_t{entry_bytes}) + entry_bytes;
      if (__builtin_expect(block_bytes <= current_chunk_->RemainingBytes(), 1)) {
        EntryWriter writer = ReserveInCurrentChunkLocked(entry_bytes, block_bytes);
        return std::forward<WriteCallback>(write_callback)(&writer);
      }
      return WriteWithReservationLocked(entry_bytes, std::forward<WriteCallback>(write_callback));
    }
    if (!manager_) {
      FailPutLocked(0);  // Out of session: the size is not even asked.
      return std::forward<WriteCallback>(write_callback)(static_cast<EntryWriter*>(nullptr));
    }
    return WriteWithReservationLocked(size_callback(),
                                      std::forward<WriteCallback>(write_callback));
  }

  // The general path: may take a new chunk, straddle two, or fail (writer = nullptr).
  template <typename WriteCallback>
  decltype(auto) WriteWithReservationLocked(size_t entry_bytes, WriteCallback&& write_callback) {
    std::optional<EntryWriter> writer = ReserveBlockLocked(entry_bytes);
    struct ReleaseAfterWrite {
      ChunkedBuffer* buffer;
      ~ReleaseAfterWrite() { buffer->ReleaseFilledChunkLocked(); }
    } release_after_write{this};
    return std::forward<WriteCallback>(write_callback)(writer ? &*writer : nullptr);
  }
  // A block of `block_bytes` (size header included) that fits in current_chunk_.
  EntryWriter ReserveInCurrentChunkLocked(size_t entry_bytes, size_t block_bytes) {
    const BufferChunk::Reservation r =
        current_chunk_->ReserveBlock(static_cast<BufferChunk::Length>(block_bytes));
    uint8_t* p = r.start;
    WriteULEB128(uint64_t{entry_bytes}, p);
    ++pushed_block_count_;
    return EntryWriter(p, entry_bytes, nullptr, 0, r.block_index);
  }
  std::optional<EntryWriter> ReserveBlockLocked(size_t entry_bytes);
  std::unique_ptr<BufferChunk> TakeNewChunkLocked();
  // current_chunk_ is full (or set aside): once its copies in flight are in, moves it to
  // filled_chunk_. ReleaseFilledChunkLocked, after the write that retired it (whose block may
  // straddle it and the next chunk), marks it done and hands it to the manager.
  void RetireCurrentChunkLocked();
  void ReleaseFilledChunkLocked();
  TimeStamp NextDoneTimeStampLocked();
  void AttachManagerLocked(ChunkManager& manager);
  void DetachManagerLocked();
  void FailPutLocked(size_t bytes) {
    ++failed_put_count_;
    failed_put_bytes_ += bytes;
  }

  mutable MaybeMutex mutex_;
  ChunkManager* manager_ = nullptr;
  std::unique_ptr<ChunkManager> owned_manager_;
  std::unique_ptr<BufferChunk> current_chunk_;
  // A chunk just filled by the write in progress; released once that write is done so that
  // nobody can destroy it while the writer still writes its end.
  std::unique_ptr<BufferChunk> filled_chunk_;
  BufferIndex next_range_start_ = kFirstBufferIndex;
  TimeStamp last_done_time_stamp_;
  uint64_t pushed_block_count_ = 0;
  uint64_t failed_put_count_ = 0;
  uint64_t failed_put_bytes_ = 0;
  uint64_t chunks_taken_ = 0;
  // Updated from the manager's chunk-destroyed callback (manager lock held, buffer lock
  // possibly not): atomics.
  std::atomic<BufferIndex> range_start_{kFirstBufferIndex};
  std::atomic<uint64_t> cleared_block_count_{0};
  bool untrusted_reading_ = false;
  const LiteralResolver* literal_resolver_ = nullptr;
};

}  // namespace strata

#endif  // STRATA_SHARED_BUFFER_CHUNKED_BUFFER_H_
