// StagedWriter: one writer thread's private staging area in front of a shared ChunkedBuffer,
// so that several threads writing many entries do not take the buffer's lock per entry.
//
// Why: every ChunkedBuffer::ReserveAndPut takes the buffer's mutex. From one thread that is
// one uncontended compare-and-swap per entry; from two threads on two CPUs the lock's and the
// current chunk's cache lines move between the CPUs at every entry, and two writers together
// store less than one alone (docs/benchmarks.md, "Buffer"). A StagedWriter serializes each
// entry into its own area with plain stores, exactly as the buffer would store it
// ([ULEB128 size][entry]), and moves whole batches into the buffer with
// ChunkedBuffer::PutBlocks (one lock and one copy per chunk): the lock is taken once per
// `capacity` bytes instead of once per entry.
//
// Semantics: the buffer ends up with the same entries, in the same order per writer, as
// direct puts would give; they reach it only at Flush() (explicit, when the area is full, or
// at destruction), so a reader sees a writer's entries up to one area late, and entries of
// different writers interleave by batch. An entry's BlockIndex is not known when it is
// written (EntryWriter::CurrentBlockIndex() is null): use direct puts for entries that
// other entries must refer to. Entries larger than capacity / 4 are not staged: the area is
// flushed first (order kept), then the entry is put directly.
// base/internal/marker_staging.h is the same idea for markers, with consumers on other
// threads; this one is flushed only by its owner.
//
// Thread safety: thread-compatible. One owner thread uses it; the buffer must outlive it and
// be kThreadSafe if other threads write it too. Async-signal safety: none (Flush locks the
// buffer, and entries that are not staged go through ReserveAndPut).
#ifndef STRATA_SHARED_BUFFER_STAGED_WRITER_H_
#define STRATA_SHARED_BUFFER_STAGED_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "shared/buffer/chunked_buffer.h"
#include "shared/buffer/entry_serialization.h"
#include "shared/buffer/leb128.h"

namespace strata {

class StagedWriter {
 public:
  static constexpr size_t kDefaultCapacity = 16 * 1024;

  // `capacity` bytes of staging (at least 64), allocated here.
  explicit StagedWriter(ChunkedBuffer& buffer, size_t capacity = kDefaultCapacity)
      : buffer_(buffer),
        capacity_(capacity < 64 ? 64 : capacity),
        bytes_(new uint8_t[capacity_]) {}
  ~StagedWriter() { Flush(); }
  StagedWriter(const StagedWriter&) = delete;
  StagedWriter& operator=(const StagedWriter&) = delete;

  // As ChunkedBuffer::ReserveAndPut: asks the size, then calls `write_callback(EntryWriter*)`
  // with a writer for exactly that many bytes (staged: its CurrentBlockIndex() is null), or
  // with nullptr when the entry cannot be stored. Returns what `write_callback` returns.
  template <typename SizeCallback, typename WriteCallback>
  decltype(auto) ReserveAndPut(SizeCallback&& size_callback, WriteCallback&& write_callback) {
    const size_t entry_bytes = size_callback();
    const size_t block_bytes = ULEB128Size(uint64_t{entry_bytes}) + entry_bytes;
    if (__builtin_expect(block_bytes > capacity_ - used_, 0)) {
      Flush();
      if (entry_bytes > capacity_ / 4) {
        return buffer_.ReserveAndPut([entry_bytes]() { return entry_bytes; },
                                     std::forward<WriteCallback>(write_callback));
      }
    }
    uint8_t* p = bytes_.get() + used_;
    WriteULEB128(uint64_t{entry_bytes}, p);
    used_ += block_bytes;
    EntryWriter writer(p, entry_bytes, nullptr, 0);
    return std::forward<WriteCallback>(write_callback)(&writer);
  }

  // Stages `values` as one entry (see entry_serialization.h).
  template <typename... Ts>
  void PutObjects(const Ts&... values) {
    ReserveAndPut([&]() { return SumBytes(values...); },
                  [&](EntryWriter* writer) {
                    if (writer) writer->WriteObjects(values...);
                  });
  }
  // Stages raw bytes as one entry.
  void PutFrom(const void* source, size_t bytes) {
    ReserveAndPut([bytes]() { return bytes; },
                  [&](EntryWriter* writer) {
                    if (writer) writer->WriteBytes(source, bytes);
                  });
  }

  // Moves everything staged into the buffer (one PutBlocks) and empties the area.
  void Flush() {
    if (used_ == 0) return;
    buffer_.PutBlocks(bytes_.get(), used_);
    used_ = 0;
  }

  size_t StagedBytes() const { return used_; }
  size_t capacity() const { return capacity_; }

 private:
  ChunkedBuffer& buffer_;
  const size_t capacity_;
  std::unique_ptr<uint8_t[]> bytes_;
  size_t used_ = 0;
};

}  // namespace strata

#endif  // STRATA_SHARED_BUFFER_STAGED_WRITER_H_
