// The reader on the fuzzer's hand-made seed (fuzz_corpus/flight_reader_fuzzer/seed-two-chunks,
// built by the fuzzer's fix-up rules): a block straddling two chunks is joined, the metadata
// decoded; its recovery with a FIFO for a library file does not hang. (The writer and the
// reader together: base/internal/flight/flight_recorder_test.cc.)
#include "shared/flight/flight_reader.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "catch2/catch.hpp"
#include "shared/flight/flight_format.h"
#include "shared/flight/flight_recovery.h"
#include "shared/json/json_writer.h"

namespace strata {
namespace flight {
namespace {

// The fuzzer's hand-made seed as a file, its checksums fixed ("" when unreadable).
std::string SeedFile() {
  std::ifstream in("shared/flight/fuzz_corpus/flight_reader_fuzzer/seed-two-chunks", std::ios::binary);
  if (!in) return "";
  const std::string input((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The fuzzer's layout: [flags][FileHeader][rest], the file being the header padded to
  // kFileHeaderBytes then the rest; the seed's checksums are left to the fuzzer's fix-up, so
  // fix them here the same way (descriptors, records, header).
  std::string file(kFileHeaderBytes, '\0');
  file.replace(0, sizeof(FileHeader), input.substr(1, sizeof(FileHeader)));
  file += input.substr(1 + sizeof(FileHeader));
  FileHeader h;
  std::memcpy(&h, file.data(), sizeof(h));
  // Records of log 0.
  LogHeader lh;
  std::memcpy(&lh, file.data() + h.metadata_offset, sizeof(lh));
  for (uint64_t pos = kLogHeaderBytes; pos + 16 <= lh.used_bytes;) {
    uint32_t head[2];
    std::memcpy(head, file.data() + h.metadata_offset + pos, 8);
    const size_t covered = 8 + PaddedTo8(head[1]);
    const uint64_t sum = Checksum(file.data() + h.metadata_offset + pos, covered);
    std::memcpy(&file[h.metadata_offset + pos + covered], &sum, 8);
    pos += RecordBytes(head[1]);
  }
  for (uint32_t i = 0; i < h.slot_count; ++i) {
    const size_t slot = h.slots_offset + size_t{i} * h.slot_stride;
    ChunkDescriptor d;
    std::memcpy(&d, file.data() + slot, sizeof(d));
    if (d.sequence == 0) continue;
    if (d.state == static_cast<uint32_t>(SlotState::kDoneSealed)) {
      d.data_checksum = Checksum(file.data() + slot + h.data_offset_in_slot, d.committed_bytes);
    }
    d.checksum = DescriptorChecksum(d);
    std::memcpy(&file[slot], &d, sizeof(d));
  }
  h.fixed_checksum = Checksum(&h, kFixedHeaderChecksummedBytes);
  std::memcpy(&file[0], &h, sizeof(h));
  return file;
}

TEST_CASE("The seed file: metadata and a block across two chunks") {
  const std::string file = SeedFile();
  REQUIRE(!file.empty());
  FileHeader h;
  std::memcpy(&h, file.data(), sizeof(h));
  FlightContents contents;
  std::string error;
  REQUIRE(ReadFlightContents(reinterpret_cast<const uint8_t*>(file.data()), file.size(), &contents, &error));
  INFO(error);
  REQUIRE(contents.session.has_value());
  CHECK(contents.session->program == "prog");
  CHECK(contents.threads.size() == 2);
  CHECK(contents.libraries.size() == 1);
  CHECK(contents.marker_types.size() == 1);
  CHECK(contents.counters.size() == 1);
  CHECK(contents.chunks_read == 2);
  CHECK(contents.chunks_damaged == 0);
  CHECK(contents.blocks_dropped == 0);
  CHECK(contents.entries.size() == 24);  // 12 markers and 12 samples, one straddling.

  // One byte changed in the sealed chunk: it is dropped, and the straddling block with it.
  std::string damaged = file;
  damaged[h.slots_offset + h.data_offset_in_slot + 5] ^= 1;
  FlightContents partial;
  REQUIRE(ReadFlightContents(reinterpret_cast<const uint8_t*>(damaged.data()), damaged.size(), &partial, &error));
  CHECK(partial.chunks_damaged == 1);
  CHECK(partial.chunks_read == 1);
  CHECK(partial.entries.size() < contents.entries.size());
}

// Version 3 (marker stacks may hold label blocks) is written; version-1 and version-2 files
// are still read; any other version is refused with the range this reader accepts, which is
// what an older strata's recover or record -p join now hits on a version-3 file.
TEST_CASE("File versions: 1 to 3 read, others refused with the accepted range") {
  const std::string file = SeedFile();
  REQUIRE(!file.empty());
  CHECK(kVersion == 3);
  for (const uint32_t version : {0u, 1u, 2u, 3u, 4u}) {
    std::string copy = file;
    FileHeader h;
    std::memcpy(&h, copy.data(), sizeof(h));
    h.version = version;
    h.fixed_checksum = Checksum(&h, kFixedHeaderChecksummedBytes);
    std::memcpy(&copy[0], &h, sizeof(h));
    FlightContents contents;
    std::string error;
    const bool read = ReadFlightContents(reinterpret_cast<const uint8_t*>(copy.data()), copy.size(),
                                         &contents, &error);
    INFO("version " << version << ": " << error);
    if (version >= 1 && version <= 3) {
      CHECK(read);
      CHECK(contents.entries.size() == 24);
    } else {
      CHECK_FALSE(read);
      CHECK(error.find("reads 1 to 3") != std::string::npos);
    }
  }
}

// A library path read from the file is untrusted: a FIFO there (no writer) must not hang the
// recovery, neither reading literals (marker names at 0x401000) nor symbolicating (frames at
// 0x401234). alarm() bounds the test: a blocking open() is killed by SIGALRM and fails it.
TEST_CASE("Recovery: a library path naming a FIFO is not opened for reading") {
  const std::string file = SeedFile();
  REQUIRE(!file.empty());
  FlightContents contents;
  std::string error;
  REQUIRE(ReadFlightContents(reinterpret_cast<const uint8_t*>(file.data()), file.size(), &contents, &error));
  REQUIRE(contents.libraries.size() == 1);
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string fifo = std::string(tmp ? tmp : "/tmp") + "/flight-library-fifo";
  unlink(fifo.c_str());
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  contents.libraries[0].library.path = fifo;
  RecoveryOptions options;
  options.symbolicate = true;
  alarm(60);
  ChunkedJsonWriter out;
  size_t samples = 0;
  REQUIRE(WriteRecoveredProfile(contents, options, out, &error, &samples));
  alarm(0);
  const std::string json = out.TakeString();
  CHECK(samples == 12);
  CHECK(json.find("\"????\"") != std::string::npos);  // The unreadable marker name.
  unlink(fifo.c_str());
}

}  // namespace
}  // namespace flight
}  // namespace strata
