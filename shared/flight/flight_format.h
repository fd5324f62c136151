// The flight recorder's file (docs/flight-recorder.md): the layout shared by its writer
// (base/internal/flight/flight_recorder.h, in the profiled process) and its reader
// (flight_reader.h, `strata recover`). Version 3 (the chunks may hold kSampleSharedPrefix
// entries and push-site label frames, since 2, and marker stacks with label blocks, since 3,
// which older readers do not know); readers take versions 1 to 3.
//
//   offset 0                  FileHeader (kFileHeaderBytes): identity, geometry, end state
//   metadata_offset           two metadata logs of metadata_half_bytes each; the header's
//                             active_log names the one in use (the other is the previous
//                             generation, rewritten compacted when the active one fills)
//   slots_offset + i * stride slot i: SlotHeader (two ChunkDescriptor copies), then the
//                             BufferChunk object, then the chunk's block storage
//
// Every piece a reader relies on is checksummed: the fixed part of the header, each chunk
// descriptor (written alternately into two copies, so that a death in the middle of one
// write leaves the other), each metadata record, and a done chunk's data once sealed.
// All integers are little-endian (the writer's own layout: x86-64 and AArch64).
//
// Thread safety: plain data, pure functions, and payload writers/readers used by one thread
// at a time. Async-signal safety: the structs and the checksum functions yes; PayloadWriter
// and PayloadReader::String allocate (no).
#ifndef STRATA_SHARED_FLIGHT_FLIGHT_FORMAT_H_
#define STRATA_SHARED_FLIGHT_FLIGHT_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace strata {
namespace flight {

inline constexpr char kMagic[8] = {'S', 'T', 'R', 'A', 'T', 'A', 'F', 'R'};
// The version a writer puts in the header. 2: the buffer's chunks may hold samples written as a
// shared prefix of the thread's previous one (kSampleSharedPrefix) and label frames carrying
// the push site (tag 3, label ABI 2), neither of which a version-1 reader knows. 3: marker
// stacks (native allocations') may hold label blocks (profile/marker_entry.h), whose words a
// version-2 reader would show as frames at bogus addresses. Readers accept
// kOldestReadableVersion..kVersion (older files lack the newer entries: read the same way)
// and refuse any other with a clear message (`strata recover`, `record -p`'s join).
inline constexpr uint32_t kVersion = 3;
inline constexpr uint32_t kOldestReadableVersion = 1;
inline constexpr size_t kFileHeaderBytes = 4096;
inline constexpr size_t kSlotHeaderBytes = 128;
inline constexpr size_t kMetadataHalfBytes = 1 << 20;
inline constexpr size_t kLogHeaderBytes = 64;

// A 64-bit checksum of bytes: four independent multiply-xor lanes over 32-byte blocks (so
// that sealing a chunk runs near memory speed), then the tail. Not cryptographic: it tells a
// torn or scribbled region from a whole one.
inline uint64_t Checksum(const void* data, size_t bytes, uint64_t seed = 0x5354524154414652) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  constexpr uint64_t kMul = 0xBF58476D1CE4E5B9ull;
  uint64_t lanes[4] = {seed ^ (bytes * 0x9E3779B97F4A7C15ull), seed + 1, seed + 2, seed + 3};
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    for (int lane = 0; lane < 4; ++lane) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * lane, 8);
      lanes[lane] = (lanes[lane] ^ w) * kMul;
      lanes[lane] ^= lanes[lane] >> 31;
    }
  }
  uint64_t h = lanes[0];
  for (int lane = 1; lane < 4; ++lane) h = (h ^ lanes[lane]) * kMul;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 31;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p + i, bytes - i);
  h = (h ^ tail ^ (bytes - i)) * 0x94D049BB133111EBull;
  return h ^ (h >> 29);
}

struct FileHeader {
  // Fixed at creation; `fixed_checksum` covers everything before it.
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;         // kFileHeaderBytes
  uint64_t file_bytes;           // The file's size, set once (ftruncate) and never changed.
  uint64_t metadata_offset;
  uint64_t metadata_half_bytes;
  uint64_t slots_offset;
  uint32_t slot_count;
  uint32_t slot_stride;          // Bytes from one slot to the next.
  uint32_t data_offset_in_slot;  // Where the block storage starts in a slot.
  uint32_t slot_data_capacity;   // Most storage bytes a slot holds.
  uint64_t buffer_limit_bytes;   // The session's buffer limit.
  int32_t pid;
  uint32_t reserved0;
  int64_t start_ns;              // Session start (TimeStamp nanoseconds, CLOCK_MONOTONIC).
  uint64_t fixed_checksum;
  // Changing while the process runs (single aligned stores).
  uint32_t active_log;           // 0 or 1.
  uint32_t clean_end;            // 1 once the session ended normally (ProfilerStop).
  int64_t end_ns;                // When it ended (clean end only).
  uint64_t heap_chunks;          // Chunks the writer had to take from the heap (not in here).
  uint64_t metadata_dropped;     // Metadata records that did not fit.
};
static_assert(sizeof(FileHeader) <= kFileHeaderBytes, "header too large");
inline constexpr size_t kFixedHeaderChecksummedBytes = offsetof(FileHeader, fixed_checksum);

enum class SlotState : uint32_t {
  kFree = 0,
  kInUse = 1,        // Being written: storage bytes [0, committed_bytes) are final.
  kDone = 2,         // Full; storage final up to committed_bytes; data checksum not yet made.
  kDoneSealed = 3,   // Full, and data_checksum covers [0, committed_bytes).
};

// What a reader needs of one chunk. Two copies per slot; the valid one with the highest
// sequence is current.
struct ChunkDescriptor {
  uint64_t sequence;           // Grows by one per write of this slot's descriptor.
  uint32_t state;              // SlotState
  uint32_t offset_first_block;
  uint32_t committed_bytes;
  uint32_t buffer_bytes;
  uint64_t range_start;        // Global buffer index of the first storage byte.
  int64_t start_ns;
  int64_t done_ns;
  uint64_t data_checksum;      // kDoneSealed only.
  uint64_t checksum;           // Over everything above.
};
static_assert(2 * sizeof(ChunkDescriptor) <= kSlotHeaderBytes, "slot header too small");
inline constexpr size_t kDescriptorChecksummedBytes = offsetof(ChunkDescriptor, checksum);

inline uint64_t DescriptorChecksum(const ChunkDescriptor& d) {
  return Checksum(&d, kDescriptorChecksummedBytes);
}

// A metadata log: LogHeader, then records [u32 type][u32 payload bytes][payload][pad to 8]
// [u64 checksum of type, size and payload]. `used_bytes` (from the log's start, header
// included) is stored after the record it covers.
struct LogHeader {
  uint64_t generation;  // Grows by one per compaction; 0: never written.
  uint64_t used_bytes;
};

// Record types. Each record is a whole snapshot of its kind: the last valid one wins.
enum class RecordType : uint32_t {
  kSession = 1,      // SessionRecord fields
  kThreads = 2,      // thread table
  kLibraries = 3,    // library lifetimes
  kMarkerTypes = 4,  // marker type tags, names and schemas (and the Text schema)
  kCounters = 5,     // counter descriptions by id
};

inline size_t PaddedTo8(size_t n) { return (n + 7) & ~size_t{7}; }
inline size_t RecordBytes(size_t payload_bytes) { return 8 + PaddedTo8(payload_bytes) + 8; }

// Payload encoding: little-endian integers, strings as u32 length then bytes.
class PayloadWriter {
 public:
  void U8(uint8_t v) { bytes_.push_back(static_cast<char>(v)); }
  void U32(uint32_t v) { Raw(&v, 4); }
  void U64(uint64_t v) { Raw(&v, 8); }
  void I64(int64_t v) { Raw(&v, 8); }
  void F64(double v) { Raw(&v, 8); }
  void String(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    bytes_.append(s.data(), s.size());
  }
  const std::string& bytes() const { return bytes_; }

 private:
  void Raw(const void* p, size_t n) { bytes_.append(static_cast<const char*>(p), n); }
  std::string bytes_;
};

class PayloadReader {
 public:
  PayloadReader(const uint8_t* data, size_t bytes) : p_(data), end_(data + bytes) {}
  uint8_t U8() { uint8_t v = 0; Raw(&v, 1); return v; }
  uint32_t U32() { uint32_t v = 0; Raw(&v, 4); return v; }
  uint64_t U64() { uint64_t v = 0; Raw(&v, 8); return v; }
  int64_t I64() { int64_t v = 0; Raw(&v, 8); return v; }
  double F64() { double v = 0; Raw(&v, 8); return v; }
  std::string String() {
    const uint32_t n = U32();
    if (failed_ || n > static_cast<size_t>(end_ - p_)) {
      failed_ = true;
      return std::string();
    }
    std::string s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }
  // A count of items of at least `min_item_bytes` each: fails when they cannot fit.
  uint32_t Count(size_t min_item_bytes) {
    const uint32_t n = U32();
    if (min_item_bytes && n > static_cast<size_t>(end_ - p_) / min_item_bytes) failed_ = true;
    return failed_ ? 0 : n;
  }
  bool Failed() const { return failed_; }

 private:
  void Raw(void* out, size_t n) {
    if (failed_ || n > static_cast<size_t>(end_ - p_)) {
      failed_ = true;
      return;
    }
    std::memcpy(out, p_, n);
    p_ += n;
  }
  const uint8_t* p_;
  const uint8_t* end_;
  bool failed_ = false;
};

}  // namespace flight
}  // namespace strata

#endif  // STRATA_SHARED_FLIGHT_FLIGHT_FORMAT_H_
