#include "shared/flight/flight_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace strata {
namespace flight {
namespace {

void Note(FlightContents* out, const std::string& problem) {
  if (std::find(out->problems.begin(), out->problems.end(), problem) == out->problems.end()) {
    out->problems.push_back(problem);
  }
}

// ---------------------------------------------------------------------------------------
// Metadata records.

bool ParseSession(PayloadReader& r, FlightContents* out) {
  SessionFacts s;
  s.start_ns = r.I64();
  s.start_epoch_ns = r.I64();
  s.interval_ms = r.F64();
  s.features = r.U32();
  s.feature_names = r.String();
  s.pid = r.U32();
  s.program = r.String();
  const uint32_t n = r.Count(8);
  for (uint32_t i = 0; i < n && !r.Failed(); ++i) {
    std::string name = r.String();
    std::string color = r.String();
    s.categories.emplace_back(std::move(name), std::move(color));
  }
  if (r.Failed() || !(s.interval_ms > 0 && s.interval_ms < 1e6)) return false;
  out->session = std::move(s);
  return true;
}

bool ParseThreads(PayloadReader& r, FlightContents* out) {
  std::vector<ThreadFacts> threads;
  const uint32_t n = r.Count(25);
  for (uint32_t i = 0; i < n && !r.Failed(); ++i) {
    ThreadFacts t;
    t.tid = static_cast<int32_t>(r.U32());
    t.name = r.String();
    t.register_ns = r.I64();
    t.unregister_ns = r.I64();
    t.is_main = r.U8() != 0;
    threads.push_back(std::move(t));
  }
  if (r.Failed()) return false;
  out->threads = std::move(threads);
  return true;
}

bool ParseLibraries(PayloadReader& r, FlightContents* out) {
  std::vector<profile::LibraryLifetime> libraries;
  const uint32_t n = r.Count(68);
  for (uint32_t i = 0; i < n && !r.Failed(); ++i) {
    profile::LibraryLifetime l;
    l.library.start = r.U64();
    l.library.end = r.U64();
    l.library.offset = r.U64();
    for (std::string* s : {&l.library.name, &l.library.path, &l.library.debug_name,
                           &l.library.debug_path, &l.library.breakpad_id, &l.library.code_id,
                           &l.library.arch}) {
      *s = r.String();
    }
    l.loaded = TimeStamp::FromNanoseconds(r.I64());
    l.unloaded = TimeStamp::FromNanoseconds(r.I64());
    if (l.library.end < l.library.start || l.library.offset > l.library.start) {
      return false;
    }
    libraries.push_back(std::move(l));
  }
  if (r.Failed()) return false;
  out->libraries = std::move(libraries);
  return true;
}

bool ParseMarkerTypes(PayloadReader& r, FlightContents* out) {
  std::vector<MarkerTypeFacts> types;
  const uint32_t n = r.Count(9);
  for (uint32_t i = 0; i < n && !r.Failed(); ++i) {
    MarkerTypeFacts t;
    t.tag = r.U8();
    t.name = r.String();
    t.schema = r.String();
    types.push_back(std::move(t));
  }
  if (r.Failed()) return false;
  out->marker_types = std::move(types);
  return true;
}

bool ParseCounters(PayloadReader& r, FlightContents* out) {
  std::vector<CounterFacts> counters;
  const uint32_t n = r.Count(13);
  for (uint32_t i = 0; i < n && !r.Failed(); ++i) {
    CounterFacts c;
    c.present = r.U8() != 0;
    c.name = r.String();
    c.category = r.String();
    c.description = r.String();
    counters.push_back(std::move(c));
  }
  if (r.Failed()) return false;
  out->counters = std::move(counters);
  return true;
}

// Reads one metadata log; returns the number of good records (0 when it is unusable).
size_t ReadLog(const uint8_t* data, size_t bytes, const FileHeader& h, uint32_t half,
               FlightContents* out) {
  const uint64_t start = h.metadata_offset + uint64_t{half} * h.metadata_half_bytes;
  if (start + kLogHeaderBytes > bytes) return 0;
  const uint8_t* log = data + start;
  LogHeader lh;
  std::memcpy(&lh, log, sizeof(lh));
  if (lh.generation == 0 || lh.used_bytes < kLogHeaderBytes || lh.used_bytes > h.metadata_half_bytes) {
    return 0;
  }
  const uint64_t used = std::min<uint64_t>(lh.used_bytes, bytes - start);
  size_t good = 0;
  uint64_t pos = kLogHeaderBytes;
  while (pos + 16 <= used) {
    uint32_t head[2];
    std::memcpy(head, log + pos, 8);
    const uint64_t need = RecordBytes(head[1]);
    if (head[1] > used || pos + need > used) {
      Note(out, "a metadata record runs past the log's end");
      break;
    }
    const size_t covered = 8 + PaddedTo8(head[1]);
    uint64_t sum;
    std::memcpy(&sum, log + pos + covered, 8);
    if (sum != Checksum(log + pos, covered)) {
      Note(out, "a metadata record has a bad checksum (later records ignored)");
      break;
    }
    PayloadReader r(log + pos + 8, head[1]);
    bool ok = true;
    switch (static_cast<RecordType>(head[0])) {
      case RecordType::kSession: ok = ParseSession(r, out); break;
      case RecordType::kThreads: ok = ParseThreads(r, out); break;
      case RecordType::kLibraries: ok = ParseLibraries(r, out); break;
      case RecordType::kMarkerTypes: ok = ParseMarkerTypes(r, out); break;
      case RecordType::kCounters: ok = ParseCounters(r, out); break;
      default: Note(out, "unknown metadata record type (skipped)"); break;
    }
    if (!ok) Note(out, "a metadata record could not be decoded (skipped)");
    ++good;
    pos += need;
  }
  return good;
}

// ---------------------------------------------------------------------------------------
// Chunks.

struct Piece {
  uint64_t range_start;
  const uint8_t* data;
  uint32_t offset_first_block;
  uint32_t committed;
  uint32_t buffer_bytes;
  uint64_t RangeEnd() const { return range_start + buffer_bytes; }
};

// The slot's current descriptor: the valid copy with the highest sequence.
std::optional<ChunkDescriptor> CurrentDescriptor(const uint8_t* slot, bool* damaged) {
  std::optional<ChunkDescriptor> best;
  int valid = 0;
  for (int i = 0; i < 2; ++i) {
    ChunkDescriptor d;
    std::memcpy(&d, slot + i * sizeof(ChunkDescriptor), sizeof(d));
    if (d.sequence == 0 && d.checksum == 0) continue;  // Never written.
    if (d.checksum != DescriptorChecksum(d)) continue;
    ++valid;
    if (!best || d.sequence > best->sequence) best = d;
  }
  bool written = false;  // A slot never used is all zeros.
  for (size_t i = 0; i < 2 * sizeof(ChunkDescriptor) && !written; ++i) written = slot[i] != 0;
  *damaged = valid == 0 && written;
  return best;
}

void CollectPieces(const uint8_t* data, size_t bytes, const FileHeader& h, FlightContents* out,
                   std::vector<Piece>* pieces) {
  size_t missing_slots = 0;
  for (uint32_t i = 0; i < h.slot_count; ++i) {
    const uint64_t slot_offset = h.slots_offset + uint64_t{i} * h.slot_stride;
    if (slot_offset + kSlotHeaderBytes > bytes) {
      ++missing_slots;
      continue;
    }
    const uint8_t* slot = data + slot_offset;
    bool damaged = false;
    const std::optional<ChunkDescriptor> d = CurrentDescriptor(slot, &damaged);
    if (!d) {
      if (damaged) {
        ++out->chunks_damaged;
        Note(out, "chunk descriptors with bad checksums (skipped)");
      }
      continue;
    }
    const auto state = static_cast<SlotState>(d->state);
    if (state == SlotState::kFree) continue;
    const bool known_state = state == SlotState::kInUse || state == SlotState::kDone ||
                             state == SlotState::kDoneSealed;
    if (!known_state || d->buffer_bytes > h.slot_data_capacity || d->committed_bytes > d->buffer_bytes ||
        d->offset_first_block > d->committed_bytes || d->range_start == 0 ||
        d->range_start > UINT64_MAX / 2) {
      ++out->chunks_damaged;
      Note(out, "chunk descriptors with impossible fields (skipped)");
      continue;
    }
    if (slot_offset + h.data_offset_in_slot + d->committed_bytes > bytes) {
      ++missing_slots;
      continue;
    }
    const uint8_t* storage = slot + h.data_offset_in_slot;
    if (state == SlotState::kDoneSealed && Checksum(storage, d->committed_bytes) != d->data_checksum) {
      ++out->chunks_damaged;
      Note(out, "chunks whose data does not match their checksum (skipped)");
      continue;
    }
    if (state == SlotState::kDone) ++out->chunks_unsealed;
    pieces->push_back({d->range_start, storage, d->offset_first_block, d->committed_bytes,
                       d->buffer_bytes});
  }
  if (missing_slots > 0) {
    Note(out, "the file is truncated: " + std::to_string(missing_slots) + " chunk slot(s) missing");
  }
  std::sort(pieces->begin(), pieces->end(),
            [](const Piece& a, const Piece& b) { return a.range_start < b.range_start; });
  // Overlapping chunks cannot both be right: keep the earlier.
  std::vector<Piece> kept;
  for (const Piece& p : *pieces) {
    if (!kept.empty() && p.range_start < kept.back().RangeEnd()) {
      ++out->chunks_damaged;
      Note(out, "chunks overlapping in the buffer's index range (skipped)");
      continue;
    }
    kept.push_back(p);
  }
  *pieces = std::move(kept);
}

// Cuts the blocks of pieces[i] (those that start in it) into out->entries.
void CutBlocks(const std::vector<Piece>& pieces, size_t i, FlightContents* out) {
  const Piece& p = pieces[i];
  const Piece* next = i + 1 < pieces.size() && pieces[i + 1].range_start == p.RangeEnd()
                          ? &pieces[i + 1]
                          : nullptr;
  size_t offset = p.offset_first_block;
  while (offset < p.committed) {
    // The size header (ULEB128), possibly continuing into the next chunk.
    uint64_t entry_bytes = 0;
    size_t header_bytes = 0;
    bool header_ok = false;
    for (unsigned shift = 0; header_bytes < 10; shift += 7) {
      const size_t at = offset + header_bytes;
      uint8_t byte;
      if (at < p.committed) {
        byte = p.data[at];
      } else if (p.committed == p.buffer_bytes && next && at - p.buffer_bytes < next->offset_first_block) {
        byte = next->data[at - p.buffer_bytes];
      } else {
        break;
      }
      ++header_bytes;
      entry_bytes |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) {
        header_ok = true;
        break;
      }
    }
    const uint64_t block_end = offset + header_bytes + entry_bytes;
    if (!header_ok || entry_bytes > p.buffer_bytes) {
      if (header_ok || p.committed == p.buffer_bytes) ++out->blocks_dropped;
      return;
    }
    std::string entry(static_cast<size_t>(entry_bytes), '\0');
    if (block_end <= p.committed) {
      std::memcpy(entry.data(), p.data + offset + header_bytes, entry.size());
    } else if (p.committed == p.buffer_bytes && next && block_end - p.buffer_bytes == next->offset_first_block) {
      const size_t here = offset + header_bytes < p.buffer_bytes ? p.buffer_bytes - (offset + header_bytes) : 0;
      std::memcpy(entry.data(), p.data + offset + header_bytes, here);
      const size_t there_start = offset + header_bytes - std::min<size_t>(offset + header_bytes, p.buffer_bytes) ;
      std::memcpy(entry.data() + here, next->data + there_start, entry.size() - here);
    } else {
      // Cut: by the end of what was committed, or by a missing next chunk.
      if (p.committed == p.buffer_bytes) ++out->blocks_dropped;
      return;
    }
    out->entries.push_back(std::move(entry));
    offset = static_cast<size_t>(block_end);
  }
}

}  // namespace

bool ReadFlightContents(const uint8_t* data, size_t bytes, FlightContents* out, std::string* error) {
  *out = FlightContents();
  if (bytes < sizeof(FileHeader) || std::memcmp(data, kMagic, sizeof(kMagic)) != 0) {
    *error = "not a Strata flight recorder file (no STRATAFR header)";
    return false;
  }
  FileHeader h;
  std::memcpy(&h, data, sizeof(h));
  if (h.version < kOldestReadableVersion || h.version > kVersion) {
    *error = "flight recorder file version " + std::to_string(h.version) + " (this strata reads " +
             std::to_string(kOldestReadableVersion) + " to " + std::to_string(kVersion) + ")";
    return false;
  }
  if (h.fixed_checksum != Checksum(&h, kFixedHeaderChecksummedBytes)) {
    *error = "the flight recorder file's header is damaged (checksum mismatch)";
    return false;
  }
  const uint64_t slot_overhead = kSlotHeaderBytes;
  // Bounds first, so that no sum below can wrap around.
  constexpr uint64_t kMaxOffset = uint64_t{1} << 48;
  if (h.metadata_offset > kMaxOffset || h.slots_offset > kMaxOffset || h.slot_count > (1u << 24) ||
      h.file_bytes > kMaxOffset + (uint64_t{1} << 56)) {
    *error = "the flight recorder file's header describes an impossible layout";
    return false;
  }
  if (h.header_bytes != kFileHeaderBytes || h.metadata_offset < kFileHeaderBytes ||
      h.metadata_half_bytes < kLogHeaderBytes || h.metadata_half_bytes > (uint64_t{1} << 32) ||
      h.slots_offset < h.metadata_offset + 2 * h.metadata_half_bytes || h.slot_stride == 0 ||
      h.data_offset_in_slot < slot_overhead || h.data_offset_in_slot > h.slot_stride ||
      h.slot_data_capacity > h.slot_stride - h.data_offset_in_slot ||
      h.slots_offset + uint64_t{h.slot_count} * h.slot_stride != h.file_bytes) {
    *error = "the flight recorder file's header describes an impossible layout";
    return false;
  }
  out->header = h;
  if (bytes < h.file_bytes) {
    Note(out, "the file is shorter than its header says (" + std::to_string(bytes) + " of " +
                  std::to_string(h.file_bytes) + " bytes): reading what is there");
  }
  out->clean_end = h.clean_end == 1;
  out->end_ns = out->clean_end ? h.end_ns : 0;
  if (h.heap_chunks > 0) {
    Note(out, std::to_string(h.heap_chunks) + " chunk(s) were kept outside the file (lost)");
  }
  if (h.metadata_dropped > 0) Note(out, "some metadata did not fit in the file");

  // Metadata: the active log, else the other one.
  const uint32_t active = h.active_log == 1 ? 1 : 0;
  if (ReadLog(data, bytes, h, active, out) == 0 || !out->session) {
    FlightContents other;
    if (ReadLog(data, bytes, h, 1 - active, &other) > 0 && other.session) {
      out->session = std::move(other.session);
      out->threads = std::move(other.threads);
      out->libraries = std::move(other.libraries);
      out->marker_types = std::move(other.marker_types);
      out->counters = std::move(other.counters);
      Note(out, "the active metadata log is damaged: the previous one is used");
    }
  }
  if (!out->session) Note(out, "no session record: times and names are unknown");

  std::vector<Piece> pieces;
  CollectPieces(data, bytes, h, out, &pieces);
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (i > 0 && pieces[i].range_start != pieces[i - 1].RangeEnd()) {
      out->bytes_missing += pieces[i].range_start - pieces[i - 1].RangeEnd();
    }
    CutBlocks(pieces, i, out);
    ++out->chunks_read;
  }
  if (out->bytes_missing > 0) {
    Note(out, "gaps between the chunks read (" + std::to_string(out->bytes_missing) +
                  " bytes of the buffer missing)");
  }
  return true;
}

bool ReadFlightFile(const std::string& path, FlightContents* out, std::string* error) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size <= 0) {
    *error = path + " is empty";
    close(fd);
    return false;
  }
  const size_t bytes = static_cast<size_t>(st.st_size);
  void* memory = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (memory == MAP_FAILED) {
    *error = "cannot map " + path + ": " + std::strerror(errno);
    return false;
  }
  const bool ok = ReadFlightContents(static_cast<const uint8_t*>(memory), bytes, out, error);
  munmap(memory, bytes);
  if (!ok) *error = path + ": " + *error;
  return ok;
}

}  // namespace flight
}  // namespace strata
