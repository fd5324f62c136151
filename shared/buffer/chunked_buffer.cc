#include "shared/buffer/chunked_buffer.h"

#include <algorithm>
#include <cstring>

#include "platform/check.h"

namespace strata {

ChunkedBuffer::ChunkedBuffer(ThreadSafety safety) : mutex_(safety, "ChunkedBuffer") {}

ChunkedBuffer::ChunkedBuffer(ThreadSafety safety, ChunkManager& manager)
    : ChunkedBuffer(safety) {
  SetChunkManager(manager);
}

ChunkedBuffer::ChunkedBuffer(ThreadSafety safety, std::unique_ptr<ChunkManager> manager)
    : ChunkedBuffer(safety) {
  SetChunkManager(std::move(manager));
}

ChunkedBuffer::~ChunkedBuffer() { ResetChunkManager(); }

void ChunkedBuffer::SetChunkManager(ChunkManager& manager) {
  MaybeAutoLock lock(mutex_);
  DetachManagerLocked();
  AttachManagerLocked(manager);
}

void ChunkedBuffer::SetChunkManager(std::unique_ptr<ChunkManager> manager) {
  STRATA_CHECK(manager != nullptr, "SetChunkManager needs a manager");
  MaybeAutoLock lock(mutex_);
  DetachManagerLocked();
  owned_manager_ = std::move(manager);
  AttachManagerLocked(*owned_manager_);
}

void ChunkedBuffer::ResetChunkManager() {
  MaybeAutoLock lock(mutex_);
  DetachManagerLocked();
}

bool ChunkedBuffer::IsInSession() const {
  MaybeAutoLock lock(mutex_);
  return manager_ != nullptr;
}

void ChunkedBuffer::AttachManagerLocked(ChunkManager& manager) {
  manager_ = &manager;
  // Indexes keep growing across sessions, so an old BlockIndex never aliases new data.
  range_start_.store(next_range_start_, std::memory_order_relaxed);
  manager_->SetChunkDestroyedCallback([this](const BufferChunk& chunk) {
    // Everything up to the end of the destroyed chunk is gone.
    BufferIndex start = range_start_.load(std::memory_order_relaxed);
    while (start < chunk.RangeEnd() &&
           !range_start_.compare_exchange_weak(start, chunk.RangeEnd(),
                                               std::memory_order_relaxed)) {
    }
    cleared_block_count_.fetch_add(chunk.BlockCount(), std::memory_order_relaxed);
  });
  // Have a chunk ready for the first write.
  manager_->RequestChunk();
}

void ChunkedBuffer::DetachManagerLocked() {
  if (!manager_) return;
  manager_->SetChunkDestroyedCallback(nullptr);
  manager_->ForgetUnreleasedChunks();
  if (current_chunk_) {
    current_chunk_->WaitForCopiesInFlight();
    next_range_start_ = std::max(next_range_start_, current_chunk_->RangeEnd());
    cleared_block_count_.fetch_add(current_chunk_->BlockCount(), std::memory_order_relaxed);
  }
  current_chunk_.reset();
  filled_chunk_.reset();
  manager_ = nullptr;
  owned_manager_.reset();
  range_start_.store(next_range_start_, std::memory_order_relaxed);
}

void ChunkedBuffer::Clear() {
  MaybeAutoLock lock(mutex_);
  if (!manager_) return;
  if (current_chunk_) {
    current_chunk_->WaitForCopiesInFlight();
    current_chunk_->MarkDone(NextDoneTimeStampLocked());
    manager_->ReleaseChunk(std::move(current_chunk_));
  }
  std::unique_ptr<BufferChunk> released = manager_->GetExtantReleasedChunks();
  for (const BufferChunk* c = released.get(); c; c = c->Next()) {
    cleared_block_count_.fetch_add(c->BlockCount(), std::memory_order_relaxed);
    next_range_start_ = std::max(next_range_start_, c->RangeEnd());
  }
  range_start_.store(next_range_start_, std::memory_order_relaxed);
}

ChunkedBuffer::State ChunkedBuffer::GetState() const {
  MaybeAutoLock lock(mutex_);
  State state;
  state.range_start = range_start_.load(std::memory_order_relaxed);
  state.range_end = current_chunk_ ? current_chunk_->RangeStart() +
                                         std::min(current_chunk_->OffsetPastLastBlock(),
                                                  current_chunk_->BufferBytes())
                                   : next_range_start_;
  state.range_start = std::min(state.range_start, state.range_end);
  state.pushed_block_count = pushed_block_count_;
  state.cleared_block_count = cleared_block_count_.load(std::memory_order_relaxed);
  state.failed_put_count = failed_put_count_;
  state.failed_put_bytes = failed_put_bytes_;
  state.chunks_taken = chunks_taken_;
  return state;
}

BlockIndex ChunkedBuffer::PutFrom(const void* source, size_t bytes) {
  return ReserveAndPut([bytes]() { return bytes; },
                       [&](EntryWriter* writer) {
                         if (!writer) return BlockIndex();
                         writer->WriteBytes(source, bytes);
                         return writer->CurrentBlockIndex();
                       });
}

void ChunkedBuffer::PutBlocks(const uint8_t* blocks, size_t bytes, size_t block_count) {
  // Runs of whole blocks that fit in the current chunk are reserved under the lock and
  // copied after it is released (the chunk counts the copy in flight), so that writers on
  // other CPUs reserve and copy their own batches meanwhile: the copy into chunk memory that
  // is not in this CPU's cache is most of a flush's cost. A block that needs a new chunk or
  // straddles two takes the general path under the lock, and only once this call's own
  // copies are in (taking a new chunk retires the current one, which waits for its copies).
  struct CopyInFlight {
    BufferChunk* chunk;
    uint8_t* destination;
    const uint8_t* source;
    size_t bytes;
  };
  constexpr size_t kMaxCopiesPerLock = 4;
  const uint8_t* p = blocks;
  const uint8_t* const end = blocks + bytes;
  // Known, so that a batch that fits whole in the current chunk (the usual case) is reserved
  // without reading its headers.
  size_t blocks_left = block_count;
  while (p < end) {
    CopyInFlight copies[kMaxCopiesPerLock];
    size_t copy_count = 0;
    {
      MaybeAutoLock lock(mutex_);
      while (p < end && copy_count < kMaxCopiesPerLock) {
        if (current_chunk_ && current_chunk_->RemainingBytes() > 0) {
          // The longest run of whole blocks that fits in the current chunk: one copy.
          const size_t room = current_chunk_->RemainingBytes();
          const uint8_t* run_end = end;
          size_t count = blocks_left;
          if (static_cast<size_t>(end - p) > room) {
            run_end = p;
            count = 0;
            for (;;) {
              const uint8_t* q = run_end;
              const uint64_t entry_bytes = ReadULEB128<uint64_t>(q);
              const size_t block_bytes = static_cast<size_t>(q - run_end) + entry_bytes;
              if (static_cast<size_t>(run_end - p) + block_bytes > room) break;
              run_end += block_bytes;
              ++count;
            }
          }
          if (count > 0) {
            const size_t run_bytes = static_cast<size_t>(run_end - p);
            BufferChunk* chunk = current_chunk_.get();
            uint8_t* destination = chunk->ReserveWholeBlocks(
                static_cast<BufferChunk::Length>(run_bytes), static_cast<BufferChunk::Length>(count));
            chunk->BeginCopyInFlight();
            copies[copy_count++] = CopyInFlight{chunk, destination, p, run_bytes};
            pushed_block_count_ += count;
            blocks_left -= count;
            p = run_end;
            continue;
          }
        }
        // The next block needs a new chunk or straddles two.
        if (copy_count > 0) break;  // First put this call's copies in (see above).
        const uint8_t* entry = p;
        const uint64_t entry_bytes = ReadULEB128<uint64_t>(entry);
        if (!manager_) {
          FailPutLocked(entry_bytes);
        } else {
          std::optional<EntryWriter> writer = ReserveBlockLocked(entry_bytes);
          if (writer) writer->WriteBytes(entry, entry_bytes);
          ReleaseFilledChunkLocked();
        }
        --blocks_left;
        p = entry + entry_bytes;
      }
    }
    // Outside the lock. The chunks stay alive: nobody retires them before the counts drop.
    for (size_t i = 0; i < copy_count; ++i) {
      std::memcpy(copies[i].destination, copies[i].source, copies[i].bytes);
      copies[i].chunk->EndCopyInFlight();
    }
  }
}

void ChunkedBuffer::PrepareNextChunk() {
  MaybeAutoLock lock(mutex_);
  if (manager_) manager_->FulfillChunkRequests();
}

TimeStamp ChunkedBuffer::NextDoneTimeStampLocked() {
  // Done time stamps identify chunks: keep them strictly increasing.
  TimeStamp done = TimeStamp::Now();
  if (done <= last_done_time_stamp_) {
    done = last_done_time_stamp_ + TimeDuration::FromNanoseconds(1);
  }
  last_done_time_stamp_ = done;
  return done;
}

std::unique_ptr<BufferChunk> ChunkedBuffer::TakeNewChunkLocked() {
  std::unique_ptr<BufferChunk> chunk = manager_->GetChunk();
  if (chunk) {
    ++chunks_taken_;
    manager_->RequestChunk();  // Ask for the one after, to be prepared off this path.
  }
  return chunk;
}

std::optional<EntryWriter> ChunkedBuffer::ReserveBlockLocked(size_t entry_bytes) {
  const size_t block_bytes = ULEB128Size(uint64_t{entry_bytes}) + entry_bytes;

  if (!current_chunk_ || current_chunk_->RemainingBytes() == 0) {
    // First write, or the last write filled the chunk exactly.
    std::unique_ptr<BufferChunk> chunk = TakeNewChunkLocked();
    if (!chunk) {
      FailPutLocked(entry_bytes);
      return std::nullopt;
    }
    if (current_chunk_) RetireCurrentChunkLocked();
    chunk->SetRangeStart(next_range_start_);
    next_range_start_ = chunk->RangeEnd();
    current_chunk_ = std::move(chunk);
  }

  BufferChunk& current = *current_chunk_;
  const size_t remaining = current.RemainingBytes();
  if (block_bytes <= remaining) return ReserveInCurrentChunkLocked(entry_bytes, block_bytes);

  // The block straddles this chunk and the next. Its remainder must fit in the next chunk.
  if (block_bytes - remaining > current.BufferBytes()) {
    FailPutLocked(entry_bytes);  // Larger than a chunk.
    return std::nullopt;
  }
  std::unique_ptr<BufferChunk> next = TakeNewChunkLocked();
  if (!next) {
    FailPutLocked(entry_bytes);
    return std::nullopt;
  }
  if (block_bytes - remaining > next->BufferBytes()) {
    // A smaller (recycled) chunk: hand it back unused is not possible once counted, so use
    // it for the next writes and refuse this one.
    FailPutLocked(entry_bytes);
    next->SetRangeStart(next_range_start_);
    next_range_start_ = next->RangeEnd();
    next->ReserveInitialBlockAsTail(0);
    RetireCurrentChunkLocked();
    current_chunk_ = std::move(next);
    return std::nullopt;
  }

  const BufferChunk::Reservation r = current.ReserveBlock(static_cast<BufferChunk::Length>(block_bytes));
  next->SetRangeStart(next_range_start_);
  next_range_start_ = next->RangeEnd();
  const size_t tail_bytes = block_bytes - r.bytes_in_this_chunk;
  uint8_t* tail = next->ReserveInitialBlockAsTail(static_cast<BufferChunk::Length>(tail_bytes));

  // The size header itself may straddle: write it through a two-span writer.
  EntryWriter writer(r.start, r.bytes_in_this_chunk, tail, tail_bytes, r.block_index);
  writer.WriteULEB128(uint64_t{entry_bytes});
  ++pushed_block_count_;

  RetireCurrentChunkLocked();
  current_chunk_ = std::move(next);
  return writer;
}

void ChunkedBuffer::RetireCurrentChunkLocked() {
  current_chunk_->WaitForCopiesInFlight();
  filled_chunk_ = std::move(current_chunk_);
}

void ChunkedBuffer::ReleaseFilledChunkLocked() {
  if (!filled_chunk_) return;
  // Done only now: a block that straddles it and the next chunk was written in between, and
  // a done chunk's bytes are final (the flight recorder checksums them off the lock).
  filled_chunk_->MarkDone(NextDoneTimeStampLocked());
  manager_->ReleaseChunk(std::move(filled_chunk_));
}

// ---------------------------------------------------------------------------------------
// Reading.

void ChunkedBuffer::VisitBlocks(BlockIndex start, bool only_first,
                                BlockVisitorBase& visitor) const {
  MaybeAutoLock lock(mutex_);
  VisitBlocksLocked(start, only_first, visitor);
}

const BufferChunk* ChunkedBuffer::NextChunkForReading(const BufferChunk* chunk) const {
  if (chunk == current_chunk_.get()) return nullptr;
  if (chunk->Next()) return chunk->Next();
  return current_chunk_.get();  // After the newest released chunk comes the current one.
}

void ChunkedBuffer::VisitBlocksLocked(BlockIndex start, bool only_first,
                                      BlockVisitorBase& visitor) const {
  if (!manager_) return;
  manager_->PeekExtantReleasedChunks([&](const BufferChunk* oldest_released) {
    // Released chunks are complete; the current one may still receive copies in flight.
    if (current_chunk_) current_chunk_->WaitForCopiesInFlight();
    const BufferChunk* first = oldest_released ? oldest_released : current_chunk_.get();
    if (!first) return;
    // Find where to start: the chunk holding `start`, or the oldest block.
    const BufferChunk* chunk = first;
    size_t offset = first->OffsetFirstBlock();
    if (start && start.ToBufferIndex() >= first->FirstBlockIndex()) {
      for (const BufferChunk* c = first; c; c = NextChunkForReading(c)) {
        if (start.ToBufferIndex() < c->RangeEnd()) {
          chunk = c;
          offset = static_cast<size_t>(start.ToBufferIndex() - c->RangeStart());
          if (offset < c->OffsetFirstBlock()) return;  // Inside another block's tail.
          break;
        }
        if (!NextChunkForReading(c)) return;  // Past the end.
      }
    }
    VisitFromChunk(chunk, offset, only_first, visitor);
  });
}

void ChunkedBuffer::VisitFromChunk(const BufferChunk* chunk, size_t offset, bool only_first,
                                   BlockVisitorBase& visitor) const {
  while (chunk) {
    const size_t chunk_bytes = chunk->BufferBytes();
    const size_t blocks_end = std::min<size_t>(chunk->OffsetPastLastBlock(), chunk_bytes);
    if (offset >= blocks_end) {
      // No more block starts here; continue with the next chunk's first block.
      const BufferChunk* next = NextChunkForReading(chunk);
      if (!next) return;
      // (If `next` does not follow contiguously, as after a session change, its first block
      // is still the right place to resume.)
      chunk = next;
      offset = chunk->OffsetFirstBlock();
      continue;
    }
    // A block starts at `offset`. Its bytes run to the end of this chunk and, if it
    // straddles, into the start of the next chunk (exactly that chunk's first-block offset).
    const BufferChunk* next = NextChunkForReading(chunk);
    const bool contiguous_next = next && next->RangeStart() == chunk->RangeEnd();
    const uint8_t* here = chunk->Data() + offset;
    const size_t here_bytes = chunk_bytes - offset;
    const uint8_t* there = contiguous_next ? next->Data() : nullptr;
    const size_t there_bytes = contiguous_next ? next->OffsetFirstBlock() : 0;

    EntryReader header_reader(here, here_bytes, there, there_bytes);
    const uint64_t entry_bytes = header_reader.ReadULEB128<uint64_t>();
    const size_t header_bytes = ULEB128Size(entry_bytes);
    const size_t block_bytes = header_bytes + static_cast<size_t>(entry_bytes);
    if (header_reader.Failed() || block_bytes > here_bytes + there_bytes) return;  // Torn.

    const BufferIndex block_index = chunk->RangeStart() + offset;
    const BlockIndex this_block = BlockIndex::FromTrustedBufferIndex(block_index);
    const BlockIndex next_block = BlockIndex::FromTrustedBufferIndex(block_index + block_bytes);
    EntryReader reader = [&]() {
      if (header_bytes + entry_bytes <= here_bytes) {
        return EntryReader(here + header_bytes, static_cast<size_t>(entry_bytes), nullptr, 0,
                           this_block, next_block);
      }
      if (header_bytes <= here_bytes) {
        return EntryReader(here + header_bytes, here_bytes - header_bytes, there,
                           block_bytes - here_bytes, this_block, next_block);
      }
      return EntryReader(there + (header_bytes - here_bytes), static_cast<size_t>(entry_bytes),
                         nullptr, 0, this_block, next_block);
    }();
    if (untrusted_reading_) reader.SetUntrustedWithResolver(literal_resolver_);
    visitor.Visit(reader);
    if (only_first) return;

    offset += block_bytes;
    if (offset > chunk_bytes) {
      // The block ended inside the next chunk, right where its first block starts.
      chunk = next;
      offset = chunk->OffsetFirstBlock();
    }
  }
}

}  // namespace strata
