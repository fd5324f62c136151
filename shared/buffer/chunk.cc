#include "shared/buffer/chunk.h"

#include <time.h>

#include <atomic>
#include <new>

#include "platform/check.h"
#include "platform/page_allocation.h"

namespace strata {
namespace {
std::atomic<size_t> g_live_buffer_bytes{0};
std::atomic<std::atomic<int64_t>*> g_live_bytes_total_too{nullptr};

void AddLiveBytes(int64_t delta) {
  g_live_buffer_bytes.fetch_add(static_cast<size_t>(delta), std::memory_order_relaxed);
  std::atomic<int64_t>* total = g_live_bytes_total_too.load(std::memory_order_relaxed);
  if (total != nullptr) total->fetch_add(delta, std::memory_order_relaxed);
}
// The storage follows the object; keep it 8-byte aligned.
constexpr size_t StorageOffset() { return sizeof(BufferChunk); }
static_assert(sizeof(BufferChunk) % 8 == 0, "storage must stay 8-byte aligned");

std::atomic<ChunkStorage*> g_storages[ChunkStorage::kMaxRegistered];
}  // namespace

bool ChunkStorage::Register(ChunkStorage* storage) {
  for (std::atomic<ChunkStorage*>& slot : g_storages) {
    ChunkStorage* expected = nullptr;
    if (slot.compare_exchange_strong(expected, storage, std::memory_order_acq_rel)) return true;
  }
  return false;
}

void ChunkStorage::Unregister(ChunkStorage* storage) {
  for (std::atomic<ChunkStorage*>& slot : g_storages) {
    ChunkStorage* expected = storage;
    if (slot.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel)) return;
  }
}

ChunkStorage* ChunkStorage::Owner(const void* p) {
  for (const std::atomic<ChunkStorage*>& slot : g_storages) {
    ChunkStorage* storage = slot.load(std::memory_order_acquire);
    if (storage != nullptr && storage->Contains(p)) return storage;
  }
  return nullptr;
}

std::unique_ptr<BufferChunk> BufferChunk::Create(Length min_buffer_bytes, ChunkStorage* storage) {
  STRATA_CHECK(min_buffer_bytes > 0, "a chunk needs some storage");
  // Round the storage up so the allocation is a multiple of 8 bytes.
  const size_t buffer_bytes = (static_cast<size_t>(min_buffer_bytes) + 7) & ~size_t{7};
  if (buffer_bytes > UINT32_MAX) return nullptr;
  void* memory = storage ? storage->Allocate(StorageOffset() + buffer_bytes) : nullptr;
  if (memory == nullptr) {
    storage = nullptr;
    // Strata's own pages, not the program's allocator: a chunk may be taken on a program's
    // thread (its marker filled the current chunk) inside the program's locked operator new.
    memory = AllocateSizedPages(StorageOffset() + buffer_bytes);
  }
  if (memory == nullptr) return nullptr;
  auto chunk =
      std::unique_ptr<BufferChunk>(new (memory) BufferChunk(static_cast<Length>(buffer_bytes)));
  chunk->storage_ = storage;
  return chunk;
}

BufferChunk::BufferChunk(Length buffer_bytes) {
  header_.buffer_bytes = buffer_bytes;
  AddLiveBytes(static_cast<int64_t>(buffer_bytes));
}

BufferChunk::~BufferChunk() {
  STRATA_DCHECK(copies_in_flight_.load(std::memory_order_relaxed) == 0,
                "chunk destroyed with a copy in flight");
  AddLiveBytes(-static_cast<int64_t>(header_.buffer_bytes));
  // Destroy a long chain iteratively, not by recursion through next_.
  std::unique_ptr<BufferChunk> next = std::move(next_);
  while (next) next = std::move(next->next_);
  if (storage_) storage_->OnChunkDestroyed(*this);
}

size_t BufferChunk::AllocationBytes() const { return StorageOffset() + header_.buffer_bytes; }

void BufferChunk::SetRangeStart(BufferIndex range_start) {
  STRATA_DCHECK(state_ == State::kCreated || state_ == State::kRecycled,
                "SetRangeStart on a chunk already in use");
  STRATA_DCHECK(range_start >= kFirstBufferIndex, "global index 0 is reserved");
  header_.range_start = range_start;
  header_.start_time_stamp = TimeStamp::Now();
  header_.process_id = CurrentProcessId();
  state_ = State::kInUse;
}

BufferChunk::Byte* BufferChunk::ReserveInitialBlockAsTail(Length tail_bytes) {
  STRATA_DCHECK(state_ == State::kInUse, "chunk not in use");
  STRATA_DCHECK(header_.offset_past_last_block == 0, "tail must come first");
  STRATA_DCHECK(tail_bytes <= header_.buffer_bytes, "tail longer than the chunk");
  header_.offset_first_block = tail_bytes;
  header_.offset_past_last_block = tail_bytes;
  return Data();
}

void BufferChunk::WaitForCopiesInFlight() const {
  // A copy in flight is one memcpy of at most a chunk (microseconds): spin that long. Past
  // that its writer was preempted, and the wait sleeps in short steps rather than yielding:
  // with real-time threads of equal priority (SCHED_FIFO), a waiter that only yields keeps
  // its CPU busy, so a copier queued behind another CPU's busy thread would not be pulled
  // over to it.
  for (int spins = 0; copies_in_flight_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < 4096) {
      __builtin_ia32_pause();
    } else {
      const timespec step{0, 50 * 1000};
      nanosleep(&step, nullptr);
    }
  }
}

void BufferChunk::MarkDone(TimeStamp done) {
  STRATA_DCHECK(state_ == State::kInUse, "only a chunk in use can be done");
  STRATA_DCHECK(copies_in_flight_.load(std::memory_order_relaxed) == 0,
                "a chunk is done only once its copies are in");
  header_.done_time_stamp = done;
  state_ = State::kDone;
  if (storage_) storage_->OnChunkDone(*this);
}

void BufferChunk::MarkRecycled() {
  STRATA_DCHECK(state_ == State::kDone, "only a done chunk can be recycled");
  if (storage_) storage_->OnChunkRecycled(*this);
  const Length buffer_bytes = header_.buffer_bytes;
  header_ = Header{};
  header_.buffer_bytes = buffer_bytes;
  state_ = State::kRecycled;
}

void BufferChunk::AppendToChain(std::unique_ptr<BufferChunk> chain) {
  Last()->next_ = std::move(chain);
}

BufferChunk* BufferChunk::Last() {
  BufferChunk* chunk = this;
  while (chunk->next_) chunk = chunk->next_.get();
  return chunk;
}

size_t BufferChunk::ChainLength() const {
  size_t n = 0;
  for (const BufferChunk* c = this; c; c = c->Next()) ++n;
  return n;
}

size_t BufferChunk::LiveBufferBytes() {
  return g_live_buffer_bytes.load(std::memory_order_relaxed);
}

void BufferChunk::AlsoCountLiveBytesIn(std::atomic<int64_t>* total) {
  if (total != nullptr) {
    total->fetch_add(static_cast<int64_t>(LiveBufferBytes()), std::memory_order_relaxed);
  }
  g_live_bytes_total_too.store(total, std::memory_order_relaxed);
}

}  // namespace strata
