// libFuzzer target: the flight recorder file reader (flight_reader.h), the first thing
// `strata recover` runs on a file a dead process left, then the recovered entries read back
// through an untrusted buffer reader with a literal resolver, then the recovered profile
// written from them (flight_recovery.h, WriteRecoveredProfile: the capture of a normal save,
// reading literals from the library paths the file names; not symbolicated).
//
// Input layout: [flags][FileHeader bytes][rest]. The file read is the FileHeader bytes, zeros
// up to kFileHeaderBytes, then the rest. So that the fuzzer gets past the checksums and the
// geometry check to the parsing behind them, the flags fix the file up first:
//   bit 0  file_bytes is set to the size the header's geometry gives (when it fits);
//   bit 1  the header's fixed checksum is recomputed;
//   bit 2  every chunk descriptor copy's checksum and every metadata record's checksum (as
//          far as the logs parse) are recomputed, and sealed chunks' data checksums.
// Checked on every input (STRATA_CHECK aborts, which the fuzzer reports as a crash):
//  - no read outside the file (ASan), no exception, no huge allocation;
//  - what is recovered is bounded by the file: entries' bytes <= the file's size, chunks read
//    <= slots;
//  - reading the recovered entries untrusted never dereferences an address from the file
//    (the resolver hands out its own bytes) and never reads past an entry;
//  - writing the profile neither crashes nor overflows (UBSan: damaged time stamps near the
//    int64 limits), and when it succeeds the JSON is well formed as far as the writer knows.
// Built with clang + libFuzzer by tools/fuzz.sh, and replayed over its corpus
// (fuzz_corpus/flight_reader_fuzzer/) by tools/testing/fuzz_replay_main.cc.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "platform/check.h"
#include "shared/buffer/chunked_buffer.h"
#include "shared/buffer/entry_kinds.h"
#include "shared/buffer/local_limit_chunk_manager.h"
#include "shared/flight/flight_format.h"
#include "shared/flight/flight_reader.h"
#include "shared/flight/flight_recovery.h"
#include "shared/json/json_writer.h"
#include "shared/profile/marker_entry.h"
#include "shared/profile/sample_entry.h"

namespace strata {
namespace {

using flight::ChunkDescriptor;
using flight::FileHeader;

class FakeResolver final : public LiteralResolver {
 public:
  const char* Resolve(uint64_t address, size_t length) const override {
    if (length > 4096) return nullptr;
    text_.assign(length, static_cast<char>('a' + address % 26));
    return text_.data();
  }

 private:
  mutable std::string text_;
};

void FixUp(std::string& file, uint8_t flags) {
  FileHeader h;
  std::memcpy(&h, file.data(), sizeof(h));
  // Beyond these the reader refuses the header anyway (and the sums below could wrap).
  if (h.metadata_offset > (1u << 24) || h.slots_offset > (1u << 24) || h.slot_count > 4096 ||
      h.metadata_half_bytes > (1u << 24)) {
    flags &= ~5;
  }
  const uint64_t geometry = h.slots_offset + uint64_t{h.slot_count} * h.slot_stride;
  if ((flags & 1) && h.slot_stride != 0 && h.slot_stride < (1u << 20)) {
    h.file_bytes = geometry;
  }
  if (flags & 4) {
    // Metadata records, in both logs.
    for (uint32_t half = 0; half < 2; ++half) {
      const uint64_t start = h.metadata_offset + uint64_t{half} * h.metadata_half_bytes;
      if (start + flight::kLogHeaderBytes > file.size()) break;
      flight::LogHeader lh;
      std::memcpy(&lh, file.data() + start, sizeof(lh));
      const uint64_t used = std::min<uint64_t>(lh.used_bytes, file.size() - start);
      for (uint64_t pos = flight::kLogHeaderBytes; pos + 16 <= used;) {
        uint32_t head[2];
        std::memcpy(head, file.data() + start + pos, 8);
        const uint64_t need = flight::RecordBytes(head[1]);
        if (head[1] > used || pos + need > used) break;
        const size_t covered = 8 + flight::PaddedTo8(head[1]);
        const uint64_t sum = flight::Checksum(file.data() + start + pos, covered);
        std::memcpy(&file[start + pos + covered], &sum, 8);
        pos += need;
      }
    }
    // Chunk descriptors and sealed data.
    for (uint32_t i = 0; i < h.slot_count && h.slot_stride != 0; ++i) {
      const uint64_t slot = h.slots_offset + uint64_t{i} * h.slot_stride;
      if (slot + flight::kSlotHeaderBytes > file.size()) break;
      for (int c = 0; c < 2; ++c) {
        ChunkDescriptor d;
        std::memcpy(&d, file.data() + slot + c * sizeof(d), sizeof(d));
        const uint64_t data = slot + h.data_offset_in_slot;
        if (d.state == static_cast<uint32_t>(flight::SlotState::kDoneSealed) &&
            data <= file.size() && d.committed_bytes <= file.size() - data &&
            h.data_offset_in_slot >= flight::kSlotHeaderBytes) {
          d.data_checksum = flight::Checksum(file.data() + data, d.committed_bytes);
        }
        d.checksum = flight::DescriptorChecksum(d);
        std::memcpy(&file[slot + c * sizeof(d)], &d, sizeof(d));
      }
    }
  }
  if (flags & 2) h.fixed_checksum = flight::Checksum(&h, flight::kFixedHeaderChecksummedBytes);
  std::memcpy(&file[0], &h, sizeof(h));
}

}  // namespace
}  // namespace strata

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace strata;
  if (size < 1 + sizeof(flight::FileHeader)) return 0;
  const uint8_t flags = data[0];
  std::string file(flight::kFileHeaderBytes, '\0');
  std::memcpy(&file[0], data + 1, sizeof(flight::FileHeader));
  file.append(reinterpret_cast<const char*>(data) + 1 + sizeof(flight::FileHeader),
              size - 1 - sizeof(flight::FileHeader));
  FixUp(file, flags);

  flight::FlightContents contents;
  std::string error;
  if (!flight::ReadFlightContents(reinterpret_cast<const uint8_t*>(file.data()), file.size(), &contents,
                                  &error)) {
    STRATA_CHECK(!error.empty(), "a refused file must say why");
    return 0;
  }
  size_t entry_bytes = 0;
  for (const std::string& e : contents.entries) entry_bytes += e.size();
  STRATA_CHECK(entry_bytes <= file.size(), "recovered more bytes than the file holds");
  STRATA_CHECK(contents.chunks_read <= contents.header.slot_count, "more chunks than slots");

  // The entries in a buffer read untrusted, as the recovery does; every entry parsed as the
  // capture would (sample frames, marker headers).
  ChunkedBuffer buffer(ThreadSafety::kSingleThreaded,
                       std::make_unique<LocalLimitChunkManager>(entry_bytes * 2 + (64 << 10), 16 << 10));
  for (const std::string& e : contents.entries) {
    buffer.ReserveAndPut([&] { return e.size(); },
                         [&](EntryWriter* w) {
                           if (w) w->WriteBytes(e.data(), e.size());
                           return 0;
                         });
  }
  FakeResolver resolver;
  buffer.SetUntrustedReading(&resolver);
  buffer.ReadEach([](EntryReader& reader) {
    STRATA_CHECK(!reader.IsTrusted(), "recovered entries must be read untrusted");
    const EntryKind kind = reader.ReadObject<EntryKind>();
    if (kind == EntryKind::kMarker) {
      profile::MarkerHeader header;
      reader.ReadIntoObject(header);
    } else {
      while (!reader.Failed() && reader.RemainingBytes() > 0) {
        const size_t before = reader.RemainingBytes();
        profile::SampleFrame frame;
        reader.ReadIntoObject(frame);
        STRATA_CHECK(reader.RemainingBytes() <= before, "a read went backwards");
        if (reader.RemainingBytes() == before) break;
      }
    }
  });

  // The recovered profile, as `strata recover --raw` writes it.
  flight::RecoveryOptions options;
  options.symbolicate = false;
  options.crashed = (flags & 8) != 0;
  ChunkedJsonWriter out;
  std::string write_error;
  if (flight::WriteRecoveredProfile(contents, options, out, &write_error)) {
    STRATA_CHECK(out.ok(), "a written profile with a writer error");
  } else {
    STRATA_CHECK(!write_error.empty(), "a failed write must say why");
  }
  return 0;
}
