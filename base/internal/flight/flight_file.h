// The flight recorder's file (flight_recorder.cc; format: shared/flight/flight_format.h): one
// session's file-backed shared mapping, a ChunkStorage whose slots hold the session buffer's
// chunks, with the chunk descriptors and the two metadata logs a reader needs.
//
// Internal to flight_recorder.cc, the only file that includes it: FlightFile lives in an
// anonymous namespace, so the library's code and symbols are those of one translation unit.
// Thread safety: a FlightFile's methods take its mutexes (methods named ...Locked expect
// mutex_ held); Allocate, OnChunkDone and Publish run on whatever thread takes or fills a
// chunk, maybe a program's: raw syscalls there (docs/host-contract.md).
#ifndef STRATA_BASE_INTERNAL_FLIGHT_FLIGHT_FILE_H_
#define STRATA_BASE_INTERNAL_FLIGHT_FLIGHT_FILE_H_

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "platform/mutex.h"
#include "platform/page_allocation.h"
#include "platform/private_fd.h"
#include "platform/raw_syscall.h"
#include "platform/time_stamp.h"
#include "shared/buffer/chunk.h"
#include "shared/flight/flight_format.h"

namespace strata {
namespace base_internal {
namespace {

// Orders the file's earlier stores before its later ones for a reader in another process (or
// after this one died); in the process every access is under FlightFile's mutex. GCC rejects
// atomic_thread_fence under ThreadSanitizer, which has nothing to check here: a compiler
// barrier there, the same code on x86-64 (stores are not reordered with stores).
inline void FileStoreFence() {
#if defined(__SANITIZE_THREAD__)
  std::atomic_signal_fence(std::memory_order_release);
#else
  std::atomic_thread_fence(std::memory_order_release);
#endif
}

using flight::ChunkDescriptor;
using flight::FileHeader;
using flight::PayloadWriter;
using flight::RecordType;
using flight::SlotState;

// Data sealed (checksummed) per sampler loop at most: ~0.1 ms of hashing, so ~2-3 % of a CPU
// at a 4 ms period however fast the program writes (docs/flight-recorder.md, "Costs").
constexpr size_t kSealBudgetBytesPerLoop = 1 << 20;

// madvise(kMadvisePopulateWrite) (platform/page_allocation.h) on a shared file mapping also
// reserves its blocks: a full disk is an error (EFAULT) instead of a SIGBUS.

// The metadata logs are reserved in steps of this many bytes as they fill.
constexpr uint64_t kMetadataReserveStep = 64 * 1024;

// Bytes of a slot before its block storage: the descriptors and the BufferChunk object.
constexpr size_t kSlotOverheadBytes = flight::kSlotHeaderBytes + sizeof(BufferChunk);

// One session's file, mapped. A ChunkStorage: chunks of the session's manager live in its
// slots. Unmapped only by ReleaseIfUnused, once no chunk lives in it (chunks may outlive the
// session in a reader's hands; a new session makes a new file); the object is never freed.
class FlightFile final : public ChunkStorage {
 public:
  static FlightFile* Create(const std::string& directory, size_t limit_bytes, size_t chunk_bytes,
                            TimeStamp start_time, std::string* path, std::string* error) {
    const size_t slot_count = (limit_bytes + chunk_bytes - 1) / chunk_bytes + 1;
    const size_t stride = (kSlotOverheadBytes + chunk_bytes + 63) & ~size_t{63};
    const size_t metadata_offset = flight::kFileHeaderBytes;
    const size_t slots_offset = metadata_offset + 2 * flight::kMetadataHalfBytes;
    const size_t file_bytes = slots_offset + slot_count * stride;
    if (slot_count > UINT32_MAX || stride > UINT32_MAX) {
      *error = "buffer too large for a flight recorder file";
      return nullptr;
    }
    // Past RLIMIT_FSIZE (ulimit -f) sizing the file would raise SIGXFSZ, killing the program.
    rlimit fsize{};
    if (getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur < file_bytes) {
      *error = "the file size limit (ulimit -f) is " + std::to_string(fsize.rlim_cur) +
               " bytes, the file needs " + std::to_string(file_bytes);
      return nullptr;
    }
    *path = directory + "/strata-" + std::to_string(getpid()) + "-" +
            std::to_string(start_time.ToNanoseconds()) + ".flight";
    PrivateDescriptor fd(open(path->c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (fd.empty()) {
      *error = "cannot create " + *path + ": " + strerror(errno);
      return nullptr;
    }
    // A write into the mapping must never meet a full disk (that would be a SIGBUS in the
    // program): every block is reserved before it is written. The file gets its full size
    // sparse (no block, no tmpfs page), the header its block now, each chunk slot its blocks
    // when a chunk first takes it (Allocate) and the metadata logs theirs 64 KiB at a time as
    // they fill (ReserveLogLocked), both with MADV_POPULATE_WRITE, which reports a full disk
    // as an error instead of a SIGBUS, so the disk (or the tmpfs
    // memory) used grows with what is written, not with the buffer limit (issue 33: 67 MB per
    // process before, 618 MB for 8 sleeping children on a tmpfs /tmp). A kernel without
    // MADV_POPULATE_WRITE (before 5.14) gets the whole file reserved at once, as before.
    int allocate_error = ftruncate(fd.Get(), static_cast<off_t>(file_bytes)) == 0 ? 0 : errno;
    if (allocate_error == 0) {
      allocate_error = posix_fallocate(fd.Get(), 0, static_cast<off_t>(flight::kFileHeaderBytes));
    }
    void* memory = allocate_error == 0 ? mmap(nullptr, file_bytes, PROT_READ | PROT_WRITE,
                                              MAP_SHARED, fd.Get(), 0)
                                       : MAP_FAILED;
    int map_errno = errno;
    bool grow_by_slot = false;
    if (memory != MAP_FAILED) {
      grow_by_slot = madvise(memory, flight::kFileHeaderBytes, kMadvisePopulateWrite) == 0;
      if (!grow_by_slot) {
        allocate_error = posix_fallocate(fd.Get(), 0, static_cast<off_t>(file_bytes));
        if (allocate_error != 0) {
          munmap(memory, file_bytes);
          memory = MAP_FAILED;
        }
      }
    }
    fd.Close();
    if (memory == MAP_FAILED) {
      *error = "cannot reserve " + std::to_string(file_bytes >> 20) + " MiB for " + *path + ": " +
               strerror(allocate_error != 0 ? allocate_error : map_errno);
      unlink(path->c_str());
      return nullptr;
    }
    auto* file = new FlightFile(static_cast<uint8_t*>(memory), file_bytes);
    file->grow_by_slot_ = grow_by_slot;
    FileHeader& h = *file->header_;
    std::memcpy(h.magic, flight::kMagic, sizeof(h.magic));
    h.version = flight::kVersion;
    h.header_bytes = flight::kFileHeaderBytes;
    h.file_bytes = file_bytes;
    h.metadata_offset = metadata_offset;
    h.metadata_half_bytes = flight::kMetadataHalfBytes;
    h.slots_offset = slots_offset;
    h.slot_count = static_cast<uint32_t>(slot_count);
    h.slot_stride = static_cast<uint32_t>(stride);
    h.data_offset_in_slot = static_cast<uint32_t>(kSlotOverheadBytes);
    h.slot_data_capacity = static_cast<uint32_t>(stride - kSlotOverheadBytes);
    h.buffer_limit_bytes = limit_bytes;
    h.pid = getpid();
    h.start_ns = start_time.ToNanoseconds();
    h.fixed_checksum = flight::Checksum(&h, flight::kFixedHeaderChecksummedBytes);
    if (!file->ReserveLogLocked(0, flight::kLogHeaderBytes)) {
      *error = "cannot reserve the first metadata page of " + *path;
      munmap(memory, file_bytes);
      unlink(path->c_str());
      delete file;
      return nullptr;
    }
    file->LogAt(0)->used_bytes = flight::kLogHeaderBytes;
    file->LogAt(0)->generation = 1;
    file->SetSlotsBegin();
    file->slots_.resize(slot_count);
    for (size_t i = slot_count; i > 0; --i) file->free_.push_back(static_cast<uint32_t>(i - 1));
    return file;
  }

  // Reserves the blocks of metadata log `half` up to `end` bytes from its start, in steps of
  // kMetadataReserveStep (grow_by_slot_; a no-op when the whole file was reserved at start).
  // False when the disk is full. Mutex held (or the file not yet shared).
  bool ReserveLogLocked(uint32_t half, uint64_t end) {
    if (!grow_by_slot_ || end <= log_reserved_[half]) return true;
    const uint64_t target =
        std::min<uint64_t>((end + kMetadataReserveStep - 1) / kMetadataReserveStep *
                               kMetadataReserveStep,
                           header_->metadata_half_bytes);
    uint8_t* log = reinterpret_cast<uint8_t*>(LogAt(half));
    if (!Reserve(log + log_reserved_[half], target - log_reserved_[half])) return false;
    log_reserved_[half] = target;
    return true;
  }

  // ChunkStorage.
  void* Allocate(size_t bytes) override {
    AutoLock lock(mutex_);
    if (free_.empty() || bytes > header_->slot_stride - flight::kSlotHeaderBytes) {
      header_->heap_chunks = header_->heap_chunks + 1;
      return nullptr;
    }
    const uint32_t slot = free_.back();
    if (grow_by_slot_ && !slots_[slot].reserved) {
      // The slot's blocks (or tmpfs pages), before anything is written into it: a full disk
      // is then this error (the chunk goes to the heap, counted), never a SIGBUS.
      if (!Reserve(SlotBase(slot), header_->slot_stride)) {
        header_->heap_chunks = header_->heap_chunks + 1;
        return nullptr;
      }
      slots_[slot].reserved = true;
    }
    free_.pop_back();
    return SlotBase(slot) + flight::kSlotHeaderBytes;
  }
  bool Contains(const void* p) const override {
    const uint8_t* byte = static_cast<const uint8_t*>(p);
    return byte >= slots_begin_ && byte < base_ + bytes_;
  }

  // Unmaps the file once no chunk lives in it (a later session has its own); false when
  // chunks remain (the mapping then stays for good). The object stays (see Unregister).
  bool ReleaseIfUnused() {
    AutoLock lock(mutex_);
    if (free_.size() != slots_.size() || unmapped_) return unmapped_;
    ChunkStorage::Unregister(this);
    munmap(base_, bytes_);
    unmapped_ = true;
    // The object itself stays (a lock-free ChunkStorage::Owner lookup may still hold it, and
    // the recorder keeps it reachable); what it owns goes now.
    std::vector<Slot>().swap(slots_);
    std::vector<uint32_t>().swap(free_);
    std::map<RecordType, std::string>().swap(latest_);
    return true;
  }
  void OnChunkDone(const BufferChunk& chunk) override {
    AutoLock lock(mutex_);
    const uint32_t slot = SlotOf(chunk);
    WriteChunkDescriptorLocked(slot, SlotState::kDone, chunk);
    slots_[slot].seal_pending = true;
  }
  void OnChunkRecycled(const BufferChunk& chunk) override { FreeSlot(chunk, false); }
  void OnChunkDestroyed(const BufferChunk& chunk) override { FreeSlot(chunk, true); }

  // The chunk being written: its storage is final up to OffsetPastLastBlock() (buffer lock
  // held, copies in flight waited for).
  void Publish(const BufferChunk& chunk) {
    if (!Contains(&chunk)) return;
    AutoLock lock(mutex_);
    const uint32_t slot = SlotOf(chunk);
    const ChunkDescriptor& last = slots_[slot].last;
    if (last.state == static_cast<uint32_t>(SlotState::kInUse) &&
        last.range_start == chunk.RangeStart() && last.committed_bytes == Committed(chunk)) {
      return;  // Nothing new: no page touched.
    }
    WriteChunkDescriptorLocked(slot, SlotState::kInUse, chunk);
  }

  // Checksums the data of done chunks (off every hot path: the sampler loop), at most
  // `budget_bytes` of it per call, so that a program writing very fast does not make the
  // sampler thread hash without end: a done chunk left unsealed is still read (its bytes are
  // final), only without the check against scribbles.
  void SealDoneChunks(size_t budget_bytes) {
    struct Work {
      uint32_t slot;
      uint64_t generation;
      ChunkDescriptor descriptor;
    };
    std::vector<Work> work;
    {
      AutoLock lock(mutex_);
      size_t bytes = 0;
      for (uint32_t i = 0; i < slots_.size() && bytes < budget_bytes; ++i) {
        if (!slots_[i].seal_pending) continue;
        work.push_back({i, slots_[i].generation, slots_[i].last});
        bytes += slots_[i].last.committed_bytes;
      }
    }
    for (Work& w : work) {
      // A done chunk's storage does not change until its slot is freed (generation), and
      // FreeSlot waits for seal_mutex_: the chunk is hashed whole or not at all, never while
      // a writer refills it (ThreadSanitizer saw that race when the check came only after).
      AutoLock sealing(seal_mutex_);
      {
        AutoLock lock(mutex_);
        if (slots_[w.slot].generation != w.generation || !slots_[w.slot].seal_pending) continue;
      }
      const uint64_t sum =
          flight::Checksum(SlotBase(w.slot) + header_->data_offset_in_slot,
                           w.descriptor.committed_bytes);
      AutoLock lock(mutex_);
      Slot& s = slots_[w.slot];
      if (s.generation != w.generation || !s.seal_pending) continue;
      s.seal_pending = false;
      ChunkDescriptor d = s.last;
      d.state = static_cast<uint32_t>(SlotState::kDoneSealed);
      d.data_checksum = sum;
      WriteDescriptorLocked(w.slot, d);
    }
  }

  // Appends a metadata record (a whole snapshot of its type), compacting the log into its
  // other half when full.
  void AppendRecord(RecordType type, const std::string& payload) {
    AutoLock lock(mutex_);
    if (frozen_) return;
    latest_[type] = payload;
    if (TryAppendLocked(header_->active_log, type, payload)) return;
    const uint32_t other = 1 - header_->active_log;
    flight::LogHeader* log = LogAt(other);
    const uint64_t generation = LogAt(header_->active_log)->generation + 1;
    if (!ReserveLogLocked(other, flight::kLogHeaderBytes)) {
      header_->metadata_dropped = header_->metadata_dropped + 1;
      return;
    }
    log->generation = 0;  // Invalid while rewritten.
    log->used_bytes = flight::kLogHeaderBytes;
    for (const auto& [t, p] : latest_) {
      if (!TryAppendLocked(other, t, p)) {
        header_->metadata_dropped = header_->metadata_dropped + 1;
        log->generation = 0;
        return;
      }
    }
    FileStoreFence();
    log->generation = generation;
    FileStoreFence();
    header_->active_log = other;
  }

  void Stats(size_t* file_bytes, size_t* heap_chunks) {
    AutoLock lock(mutex_);
    *file_bytes = bytes_;
    *heap_chunks = header_->heap_chunks;
  }

  // Clean end: the file keeps what it holds now; later chunk changes are not written.
  void Freeze(TimeStamp end) {
    AutoLock lock(mutex_);
    header_->end_ns = end.ToNanoseconds();
    FileStoreFence();
    header_->clean_end = 1;
    frozen_ = true;
  }

 private:
  struct Slot {
    ChunkDescriptor last{};  // The descriptor last written.
    uint64_t generation = 0;  // Grows when the slot is freed.
    bool seal_pending = false;
    bool reserved = false;  // Its blocks allocated (grow_by_slot_).
  };

  FlightFile(uint8_t* base, size_t bytes)
      : base_(base), bytes_(bytes), header_(reinterpret_cast<FileHeader*>(base)) {}

  void SetSlotsBegin() { slots_begin_ = base_ + header_->slots_offset; }

  // Faults [begin, begin + bytes) of the mapping in for writing (whole pages), which reserves
  // the file's blocks: false (never a SIGBUS) when the disk is full.
  bool Reserve(uint8_t* begin, size_t bytes) {
    constexpr uintptr_t kPage = 4096;
    const uintptr_t first = reinterpret_cast<uintptr_t>(begin) & ~(kPage - 1);
    const uintptr_t end =
        std::min((reinterpret_cast<uintptr_t>(begin) + bytes + kPage - 1) & ~(kPage - 1),
                 reinterpret_cast<uintptr_t>(base_) + bytes_);
    // Raw: this runs on the thread that takes a chunk, maybe a program's (docs/host-contract.md).
    return end <= first || RawSyscall(SYS_madvise, static_cast<long>(first),
                                      static_cast<long>(end - first), kMadvisePopulateWrite) == 0;
  }

  uint8_t* SlotBase(uint32_t slot) const {
    return base_ + header_->slots_offset + size_t{slot} * header_->slot_stride;
  }
  uint32_t SlotOf(const BufferChunk& chunk) const {
    const size_t offset = reinterpret_cast<const uint8_t*>(&chunk) - (base_ + header_->slots_offset);
    return static_cast<uint32_t>(offset / header_->slot_stride);
  }
  static uint32_t Committed(const BufferChunk& chunk) {
    return chunk.OffsetPastLastBlock() < chunk.BufferBytes() ? chunk.OffsetPastLastBlock()
                                                              : chunk.BufferBytes();
  }
  flight::LogHeader* LogAt(uint32_t half) const {
    return reinterpret_cast<flight::LogHeader*>(base_ + header_->metadata_offset +
                                                half * header_->metadata_half_bytes);
  }

  void FreeSlot(const BufferChunk& chunk, bool release) {
    AutoLock sealing(seal_mutex_);  // A seal under way ends first (one chunk's hash at most).
    AutoLock lock(mutex_);
    const uint32_t slot = SlotOf(chunk);
    Slot& s = slots_[slot];
    ++s.generation;
    s.seal_pending = false;
    if (s.last.state != static_cast<uint32_t>(SlotState::kFree)) {
      ChunkDescriptor d{};
      d.state = static_cast<uint32_t>(SlotState::kFree);
      WriteDescriptorLocked(slot, d);
    }
    if (release) free_.push_back(slot);
  }

  void WriteChunkDescriptorLocked(uint32_t slot, SlotState state, const BufferChunk& chunk) {
    const BufferChunk::Header& h = chunk.header();
    ChunkDescriptor d{};
    d.state = static_cast<uint32_t>(state);
    d.offset_first_block = h.offset_first_block;
    d.committed_bytes = Committed(chunk);
    d.buffer_bytes = h.buffer_bytes;
    d.range_start = h.range_start;
    d.start_ns = h.start_time_stamp.ToNanoseconds();
    d.done_ns = h.done_time_stamp.ToNanoseconds();
    WriteDescriptorLocked(slot, d);
  }

  // Writes the copy the reader does not currently prefer, so that a death in the middle of
  // this write leaves the previous descriptor whole.
  void WriteDescriptorLocked(uint32_t slot, ChunkDescriptor d) {
    Slot& s = slots_[slot];
    d.sequence = s.last.sequence + 1;
    d.checksum = flight::DescriptorChecksum(d);
    s.last = d;
    if (frozen_) return;
    FileStoreFence();  // The data first.
    auto* copies = reinterpret_cast<ChunkDescriptor*>(SlotBase(slot));
    std::memcpy(&copies[d.sequence & 1], &d, sizeof(d));
  }

  bool TryAppendLocked(uint32_t half, RecordType type, const std::string& payload) {
    flight::LogHeader* log = LogAt(half);
    const size_t need = flight::RecordBytes(payload.size());
    const uint64_t used = log->used_bytes;
    if (used + need > header_->metadata_half_bytes) return false;
    if (!ReserveLogLocked(half, used + need)) return false;  // Full disk: as a full log.
    uint8_t* p = reinterpret_cast<uint8_t*>(log) + used;
    const uint32_t head[2] = {static_cast<uint32_t>(type), static_cast<uint32_t>(payload.size())};
    std::memcpy(p, head, 8);
    std::memcpy(p + 8, payload.data(), payload.size());
    std::memset(p + 8 + payload.size(), 0, flight::PaddedTo8(payload.size()) - payload.size());
    const size_t covered = 8 + flight::PaddedTo8(payload.size());
    const uint64_t sum = flight::Checksum(p, covered);
    std::memcpy(p + covered, &sum, 8);
    FileStoreFence();
    log->used_bytes = used + need;
    return true;
  }

  uint8_t* const base_;
  const size_t bytes_;
  FileHeader* const header_;
  const uint8_t* slots_begin_ = nullptr;
  bool unmapped_ = false;
  bool grow_by_slot_ = false;  // Slots and logs reserved when first used (else all at start).
  uint64_t log_reserved_[2] = {0, 0};  // Bytes of each metadata log reserved (grow_by_slot_).
  Mutex mutex_{"strata flight recorder"};
  // Held while a done chunk is hashed, and by FreeSlot; taken before mutex_.
  Mutex seal_mutex_{"strata flight recorder seal"};
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  std::map<RecordType, std::string> latest_;
  bool frozen_ = false;
};

}  // namespace
}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_FLIGHT_FLIGHT_FILE_H_
