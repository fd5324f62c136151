#include "shared/buffer/staging_area.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "catch2/catch.hpp"
#include "shared/buffer/chunked_buffer.h"
#include "shared/buffer/local_limit_chunk_manager.h"

namespace strata {
namespace {

std::string PayloadFor(uint64_t sequence, size_t length) {
  std::string s(length, '\0');
  for (size_t i = 0; i < length; ++i) s[i] = static_cast<char>((sequence * 31 + i * 7) & 0xFF);
  return s;
}

struct ReadBack {
  std::vector<uint64_t> sequences;
  std::vector<std::string> payloads;
};

ReadBack ReadAll(const ChunkedBuffer& buffer) {
  ReadBack all;
  buffer.ReadEach([&](EntryReader& reader) {
    uint64_t sequence = 0;
    std::string payload;
    reader.ReadIntoObjects(sequence, payload);
    REQUIRE_FALSE(reader.Failed());
    REQUIRE(reader.RemainingBytes() == 0);
    all.sequences.push_back(sequence);
    all.payloads.push_back(std::move(payload));
  });
  return all;
}

TEST_CASE("Staged entries reach the buffer only when flushed, exactly as direct puts") {
  for (const BufferChunk::Length chunk_bytes : {48u, 300u, 4096u, 16384u}) {
    CAPTURE(chunk_bytes);
    LocalLimitChunkManager direct_manager(1 << 26, chunk_bytes);
    LocalLimitChunkManager staged_manager(1 << 26, chunk_bytes);
    ChunkedBuffer direct(ThreadSafety::kThreadSafe, direct_manager);
    ChunkedBuffer staged(ThreadSafety::kThreadSafe, staged_manager);
    StagingArea area;
    std::mt19937_64 random(chunk_bytes);
    // Some payloads exceed kMaxStagedEntryBytes (with 16 KiB chunks): they go directly,
    // after a flush, and the order must still hold. The area fills and rewinds many times.
    for (uint64_t sequence = 0; sequence < 5000; ++sequence) {
      const size_t length = random() % 8 == 0 ? random() % 6000 : random() % 40;
      const std::string payload =
          PayloadFor(sequence, std::min<size_t>(length, chunk_bytes / 2));
      direct.PutObjects(sequence, payload);
      area.PutObjects(staged, sequence, payload);
      if (sequence == 0) CHECK(staged.GetState().pushed_block_count == 0);
    }
    area.FlushInto(staged);
    const ReadBack want = ReadAll(direct);
    const ReadBack got = ReadAll(staged);
    REQUIRE(want.sequences.size() == 5000);
    REQUIRE(got.sequences == want.sequences);
    REQUIRE(got.payloads == want.payloads);
    CHECK(staged.GetState().pushed_block_count == direct.GetState().pushed_block_count);
  }
}

// A flush tells the buffer how many blocks it moves from the count the commits kept (no
// walk over the sizes): with consumers' flushes between commits (a tail inside the area),
// rewinds, and both reservation kinds, the buffer counts exactly the committed blocks.
TEST_CASE("Flushes move exactly the committed blocks, counted by the commits") {
  LocalLimitChunkManager manager(1 << 24, 1024);
  ChunkedBuffer buffer(ThreadSafety::kThreadSafe, manager);
  StagingArea area;
  std::mt19937_64 random(7);
  uint64_t committed = 0;
  for (uint64_t sequence = 0; sequence < 20000; ++sequence) {
    const size_t entry_bytes = sizeof(uint64_t) + random() % 100;
    const bool small = entry_bytes < 0x80 && random() % 2 == 0;
    uint8_t* entry = small ? area.TryReserveSmallEntry(entry_bytes)
                           : area.TryReserveEntry(entry_bytes);
    if (entry == nullptr) {
      area.FlushAndRewind(buffer);
      CHECK(buffer.GetState().pushed_block_count == committed);
      entry = small ? area.TryReserveSmallEntry(entry_bytes) : area.TryReserveEntry(entry_bytes);
      REQUIRE(entry != nullptr);
    }
    std::memcpy(entry, &sequence, sizeof(sequence));
    std::memset(entry + sizeof(sequence), 0, entry_bytes - sizeof(sequence));
    if (random() % 16 == 0) continue;  // Reserved, never committed: the next one replaces it.
    area.CommitEntry();
    ++committed;
    if (random() % 64 == 0) {
      area.FlushInto(buffer);
      CHECK(buffer.GetState().pushed_block_count == committed);
    }
  }
  area.FlushInto(buffer);
  REQUIRE(buffer.GetState().pushed_block_count == committed);
  uint64_t read = 0;
  uint64_t previous = 0;
  buffer.ReadEach([&](EntryReader& reader) {
    const uint64_t sequence = reader.ReadObject<uint64_t>();
    if (read > 0) CHECK(sequence > previous);
    previous = sequence;
    ++read;
  });
  CHECK(read == committed);
}

TEST_CASE("A reserved entry is invisible to consumers until committed") {
  LocalLimitChunkManager manager(1 << 20, 4096);
  ChunkedBuffer buffer(ThreadSafety::kThreadSafe, manager);
  StagingArea area;
  uint8_t* entry = area.TryReserveEntry(8);
  REQUIRE(entry != nullptr);
  const uint64_t value = 42;
  std::memcpy(entry, &value, sizeof(value));
  area.FlushInto(buffer);
  CHECK(buffer.GetState().pushed_block_count == 0);
  area.CommitEntry();
  area.FlushInto(buffer);
  CHECK(buffer.GetState().pushed_block_count == 1);
  area.Discard();  // Nothing left to drop.
  area.FlushInto(buffer);
  CHECK(buffer.GetState().pushed_block_count == 1);
  int count = 0;
  buffer.ReadEach([&](EntryReader& reader) {
    CHECK(reader.ReadObject<uint64_t>() == 42);
    ++count;
  });
  CHECK(count == 1);
  CHECK(area.TryReserveEntry(StagingArea::kMaxStagedEntryBytes + 1) == nullptr);
}

TEST_CASE("An entry the buffer cannot store is refused through the direct path") {
  LocalLimitChunkManager manager(1 << 20, 256);
  ChunkedBuffer buffer(ThreadSafety::kThreadSafe, manager);
  StagingArea area;
  const std::string too_large(StagingArea::kBytes, 'x');  // Not staged, larger than a chunk.
  area.PutObjects(buffer, uint64_t{1}, too_large);
  CHECK(buffer.GetState().failed_put_count == 1);
  area.PutObjects(buffer, uint64_t{2}, std::string("ok"));
  area.FlushInto(buffer);
  const ReadBack all = ReadAll(buffer);
  CHECK(all.sequences == std::vector<uint64_t>{2});
}

// How the base tier uses it: every owner writes into its own area while another thread
// (the sampler) keeps flushing all of them; owners also flush when full (rewinding).
TEST_CASE("Owners writing while a consumer flushes: nothing lost, each owner's order kept") {
  constexpr int kThreads = 3;
  constexpr uint64_t kPerThread = 30000;
  LocalLimitChunkManager manager(64 << 20, 4096);
  ChunkedBuffer buffer(ThreadSafety::kThreadSafe, manager);
  std::vector<std::unique_ptr<StagingArea>> areas;
  for (int t = 0; t < kThreads; ++t) areas.push_back(std::make_unique<StagingArea>());
  std::atomic<bool> writing{true};
  std::thread consumer([&] {
    while (writing.load()) {
      for (auto& area : areas) area->FlushInto(buffer);
    }
  });
  std::vector<std::thread> owners;
  for (int t = 0; t < kThreads; ++t) {
    owners.emplace_back([&buffer, &areas, t]() {
      for (uint64_t i = 0; i < kPerThread; ++i) {
        const uint64_t sequence = (uint64_t(t) << 32) | i;
        areas[t]->PutObjects(buffer, sequence, PayloadFor(sequence, i % 40));
      }
    });
  }
  for (auto& owner : owners) owner.join();
  writing = false;
  consumer.join();
  for (auto& area : areas) area->FlushInto(buffer);
  const ReadBack all = ReadAll(buffer);
  REQUIRE(all.sequences.size() == kThreads * kPerThread);
  std::vector<uint64_t> next(kThreads, 0);
  for (size_t k = 0; k < all.sequences.size(); ++k) {
    const uint64_t sequence = all.sequences[k];
    const size_t t = sequence >> 32;
    REQUIRE(t < kThreads);
    REQUIRE((sequence & 0xFFFFFFFF) == next[t]);
    REQUIRE(all.payloads[k] == PayloadFor(sequence, next[t] % 40));
    ++next[t];
  }
}

}  // namespace
}  // namespace strata
