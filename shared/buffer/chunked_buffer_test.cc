#include "shared/buffer/chunked_buffer.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "catch2/catch.hpp"
#include "shared/buffer/local_limit_chunk_manager.h"
#include "shared/buffer/single_chunk_manager.h"

namespace strata {
namespace {

// A random entry: a sequence number and a payload whose bytes derive from it, so any
// corruption, loss or reordering is detected on read.
struct TestEntry {
  uint64_t sequence;
  std::string payload;
};

std::string PayloadFor(uint64_t sequence, size_t length) {
  std::string s(length, '\0');
  for (size_t i = 0; i < length; ++i) s[i] = static_cast<char>((sequence * 31 + i * 7) & 0xFF);
  return s;
}

// Appends the block [ULEB128 size][sequence, payload] to `staged`, exactly as the buffer
// stores it (what a StagingArea holds).
void AppendStagedBlock(std::vector<uint8_t>& staged, uint64_t sequence,
                       const std::string& payload) {
  const size_t entry_bytes = SumBytes(sequence, payload);
  const size_t at = staged.size();
  staged.resize(at + ULEB128Size(uint64_t{entry_bytes}) + entry_bytes);
  uint8_t* p = staged.data() + at;
  WriteULEB128(uint64_t{entry_bytes}, p);
  EntryWriter writer(p, entry_bytes, nullptr, 0);
  writer.WriteObjects(sequence, payload);
}

std::vector<TestEntry> ReadAll(const ChunkedBuffer& buffer, std::vector<BlockIndex>* indexes) {
  std::vector<TestEntry> entries;
  buffer.ReadEach([&](EntryReader& reader) {
    TestEntry e;
    reader.ReadIntoObjects(e.sequence, e.payload);
    REQUIRE_FALSE(reader.Failed());
    REQUIRE(reader.RemainingBytes() == 0);
    if (indexes) indexes->push_back(reader.CurrentBlockIndex());
    entries.push_back(std::move(e));
  });
  return entries;
}

TEST_CASE("Out of session, writes fail cheaply and are counted") {
  ChunkedBuffer buffer(ThreadSafety::kThreadSafe);
  CHECK_FALSE(buffer.IsInSession());
  bool size_asked = false;
  bool got_null = buffer.ReserveAndPut(
      [&]() {
        size_asked = true;
        return size_t{8};
      },
      [](EntryWriter* writer) { return writer == nullptr; });
  CHECK(got_null);
  CHECK_FALSE(size_asked);
  CHECK(buffer.PutObject(uint32_t{1}).IsNull());
  CHECK(buffer.GetState().failed_put_count == 2);
  int blocks = 0;
  buffer.ReadEach([&](EntryReader&) { ++blocks; });
  CHECK(blocks == 0);
}

TEST_CASE("Round trip of random entries across thousands of chunk boundaries") {
  // Small chunks so that nearly every entry straddles or fills one, including the size
  // header itself; a limit large enough to keep everything.
  const BufferChunk::Length chunk_bytes = GENERATE(24u, 40u, 128u, 1000u);
  LocalLimitChunkManager manager(/*max_total_bytes=*/64 * 1024 * 1024, chunk_bytes);
  ChunkedBuffer buffer(ThreadSafety::kThreadSafe, manager);
  std::mt19937_64 rng(chunk_bytes);
  std::vector<TestEntry> written;
  std::vector<BlockIndex> written_indexes;
  for (uint64_t seq = 0; seq < 20000; ++seq) {
    // Sizes from 0 to a bit less than a chunk (the header + sequence take some room).
    const size_t max_payload = chunk_bytes - 8 - 3;
    const size_t length = rng() % (max_payload + 1);
    TestEntry e{seq, PayloadFor(seq, length)};
    const BlockIndex index = buffer.PutObjects(e.sequence, e.payload);
    REQUIRE_FALSE(index.IsNull());
    written.push_back(std::move(e));
    written_indexes.push_back(index);
    if (seq % 7 == 0) buffer.PrepareNextChunk();
  }
  const ChunkedBuffer::State state = buffer.GetState();
  CHECK(state.pushed_block_count == 20000);
  CHECK(state.failed_put_count == 0);
  CHECK(state.cleared_block_count == 0);
  CHECK(state.chunks_taken > 1000 / (chunk_bytes / 24));  // Many boundaries crossed.

  std::vector<BlockIndex> read_indexes;
  const std::vector<TestEntry> read = ReadAll(buffer, &read_indexes);
  REQUIRE(read.size() == written.size());
  for (size_t i = 0; i < read.size(); ++i) {
    REQUIRE(read[i].sequence == written[i].sequence);
    REQUIRE(read[i].payload == written[i].payload);
    REQUIRE(read_indexes[i] == written_indexes[i]);
  }

  // Any block can be read directly by index, and iteration can start at any block.
  for (size_t i = 0; i < written.size(); i += 997) {
    const bool ok = buffer.ReadAt(written_indexes[i], [&](EntryReader* reader) {
      if (!reader) return false;
      return reader->ReadObject<uint64_t>() == written[i].sequence;
    });
    REQUIRE(ok);
    uint64_t expected = i;
    buffer.ReadEachFrom(written_indexes[i], [&](EntryReader& reader) {
      REQUIRE(reader.ReadObject<uint64_t>() == expected);
      ++expected;
    });
    REQUIRE(expected == written.size());
  }
}

TEST_CASE("Under a small limit the buffer keeps the most recent entries, in order") {
  LocalLimitChunkManager manager(/*max_total_bytes=*/4096, /*chunk_min_buffer_bytes=*/256);
  ChunkedBuffer buffer(ThreadSafety::kThreadSafe, manager);
  std::vector<BlockIndex> indexes;
  for (uint64_t seq = 0; seq < 5000; ++seq) {
    indexes.push_back(buffer.PutObjects(seq, PayloadFor(seq, seq % 50)));
    REQUIRE(BufferChunk::LiveBufferBytes() <= 4096 + 2 * 256);
  }
  const std::vector<TestEntry> read = ReadAll(buffer, nullptr);
  REQUIRE_FALSE(read.empty());
  REQUIRE(read.size() < 5000);
  // A contiguous suffix of what was written, ending with the last entry.
  for (size_t i = 0; i < read.size(); ++i) {
    REQUIRE(read[i].sequence == 5000 - read.size() + i);
    REQUIRE(read[i].payload == PayloadFor(read[i].sequence, read[i].sequence % 50));
  }
  const ChunkedBuffer::State state = buffer.GetState();
  CHECK(state.pushed_block_count - state.cleared_block_count >= read.size());
  // Destroyed blocks cannot be read by index any more; surviving ones can.
  CHECK(buffer.ReadAt(indexes.front(), [](EntryReader* r) { return r == nullptr; }));
  CHECK(buffer.ReadAt(indexes.back(), [](EntryReader* r) { return r != nullptr; }));
  CHECK(state.range_start > indexes.front().ToBufferIndex());
  CHECK(state.range_start <= indexes[5000 - read.size()].ToBufferIndex());
}

TEST_CASE("An entry that refers to an earlier block of the chunk it starts in is never read without it") {
  // Each entry names the latest earlier entry that was told the same chunk start (or none),
  // as a sample written as "the previous sample's first frames, then these" does. Under a
  // small limit the oldest chunks go; reading from the oldest block, every reference is to
  // an entry read before it. (Referring to the previous entry whatever its chunk fails.)
  LocalLimitChunkManager manager(/*max_total_bytes=*/4096, /*chunk_min_buffer_bytes=*/256);
  ChunkedBuffer buffer(ThreadSafety::kThreadSafe, manager);
  std::mt19937_64 random(38);
  BufferIndex last_chunk_start = 0;
  uint64_t last_in_chunk = UINT64_MAX;  // UINT64_MAX: no earlier entry in that chunk.
  size_t references = 0;
  for (uint64_t seq = 0; seq < 5000; ++seq) {
    const std::string payload = PayloadFor(seq, random() % 120);
    uint64_t refers_to = UINT64_MAX;
    const BlockIndex index = buffer.ReserveAndPutInChunk(
        [&](BufferIndex chunk_start) {
          refers_to = chunk_start == last_chunk_start ? last_in_chunk : UINT64_MAX;
          last_chunk_start = chunk_start;
          return SumBytes(seq, refers_to, payload);
        },
        [&](EntryWriter* writer) {
          if (!writer) return BlockIndex();
          writer->WriteObjects(seq, refers_to, payload);
          return writer->CurrentBlockIndex();
        });
    REQUIRE(index);
    REQUIRE(index.ToBufferIndex() >= last_chunk_start);
    last_in_chunk = seq;
    if (refers_to != UINT64_MAX) ++references;
  }
  CHECK(references > 2500);
  CHECK(buffer.GetState().cleared_block_count > 0);
  std::vector<bool> seen(5000, false);
  size_t resolved = 0;
  buffer.ReadEach([&](EntryReader& reader) {
    uint64_t seq = 0, refers_to = 0;
    reader.ReadIntoObjects(seq, refers_to);
    REQUIRE_FALSE(reader.Failed());
    if (refers_to != UINT64_MAX) {
      REQUIRE(seen[refers_to]);
      ++resolved;
    }
    seen[seq] = true;
  });
  CHECK(resolved > 0);
}

// A storage that copies each chunk's bytes when it is marked done (what the flight recorder
// checksums off the buffer's lock) and compares them with the bytes at recycling.
class SnapshotStorage : public ChunkStorage {
 public:
  ~SnapshotStorage() {
    for (void* b : blocks_) std::free(b);
  }
  void* Allocate(size_t bytes) override {
    void* p = std::aligned_alloc(8, (bytes + 7) / 8 * 8);
    blocks_.push_back(p);
    return p;
  }
  bool Contains(const void* p) const override {
    for (void* b : blocks_) {
      if (b == p) return true;
    }
    return false;
  }
  void OnChunkDone(const BufferChunk& chunk) override {
    // Its storage's bytes (a straddling block's offset runs past them, into the next chunk).
    const size_t bytes = std::min<size_t>(chunk.OffsetPastLastBlock(), chunk.BufferBytes());
    done_bytes_[&chunk].assign(chunk.Data(), chunk.Data() + bytes);
  }
  void OnChunkRecycled(const BufferChunk& chunk) override { Compare(chunk); }
  void OnChunkDestroyed(const BufferChunk& chunk) override { Compare(chunk); }
  size_t changed_after_done = 0;
  size_t compared = 0;

 private:
  void Compare(const BufferChunk& chunk) {
    auto it = done_bytes_.find(&chunk);
    if (it == done_bytes_.end()) return;
    ++compared;
    if (std::memcmp(it->second.data(), chunk.Data(), it->second.size()) != 0) {
      ++changed_after_done;
    }
    done_bytes_.erase(it);
  }
  std::vector<void*> blocks_;
  std::map<const BufferChunk*, std::vector<uint8_t>> done_bytes_;
};

TEST_CASE("A done chunk's bytes are final, the tail of a block that straddles it included") {
  // Entries of odd sizes, so that many blocks straddle two chunks. Before the fix, the chunk
  // was marked done before the straddling block's bytes were written into its tail (a flight
  // recorder's checksum then did not match the chunk's final bytes; ThreadSanitizer saw it).
  SnapshotStorage storage;
  REQUIRE(ChunkStorage::Register(&storage));
  {
    LocalLimitChunkManager manager(16 * 1024, 1024);
    manager.SetChunkStorage(&storage);
    ChunkedBuffer buffer(ThreadSafety::kThreadSafe, manager);
    for (uint64_t i = 0; i < 2000; ++i) buffer.PutObjects(i, PayloadFor(i, 37 + i % 101));
  }
  CHECK(storage.compared > 10);
  CHECK(storage.changed_after_done == 0);
  ChunkStorage::Unregister(&storage);
}

TEST_CASE("An entry larger than a chunk is refused and counted") {
  LocalLimitChunkManager manager(1 << 20, 64);
  ChunkedBuffer buffer(ThreadSafety::kSingleThreaded, manager);
  CHECK_FALSE(buffer.PutObject(uint64_t{1}).IsNull());
  const std::string huge(500, 'x');
  CHECK(buffer.PutObject(huge).IsNull());
  CHECK(buffer.GetState().failed_put_count == 1);
  CHECK(buffer.GetState().failed_put_bytes == SumBytes(huge));
  CHECK_FALSE(buffer.PutObject(uint64_t{2}).IsNull());  // The buffer still works.
  std::vector<uint64_t> values;
  buffer.ReadEach([&](EntryReader& r) { values.push_back(r.ReadObject<uint64_t>()); });
  CHECK(values == std::vector<uint64_t>{1, 2});
}

TEST_CASE("A single-chunk buffer stores until full, then refuses") {
  SingleChunkManager manager(100);
  ChunkedBuffer buffer(ThreadSafety::kSingleThreaded, manager);
  int stored = 0;
  while (!buffer.PutObject(uint64_t{42}).IsNull()) ++stored;
  CHECK(stored == 104 / 9);  // 1-byte size header + 8 bytes each.
  CHECK(buffer.GetState().failed_put_count == 1);
}

TEST_CASE("Clear drops everything; indexes keep growing; reset ends the session") {
  LocalLimitChunkManager manager(1 << 20, 128);
  ChunkedBuffer buffer(ThreadSafety::kThreadSafe, manager);
  BlockIndex first;
  for (int i = 0; i < 100; ++i) {
    BlockIndex b = buffer.PutObject(i);
    if (i == 0) first = b;
  }
  buffer.Clear();
  CHECK(ReadAll(buffer, nullptr).empty());
  CHECK(buffer.GetState().cleared_block_count == 100);
  const BlockIndex after = buffer.PutObject(7);
  CHECK(after > first);
  CHECK(buffer.ReadAt(first, [](EntryReader* r) { return r == nullptr; }));
  int count = 0;
  buffer.ReadEach([&](EntryReader& r) {
    CHECK(r.ReadObject<int>() == 7);
    ++count;
  });
  CHECK(count == 1);

  buffer.ResetChunkManager();
  CHECK_FALSE(buffer.IsInSession());
  CHECK(buffer.PutObject(1).IsNull());
}

TEST_CASE("Several writer threads: nothing lost or torn, the limit holds") {
  constexpr int kThreads = 4;
  constexpr uint64_t kPerThread = 20000;
  SECTION("limit large enough for everything") {
    LocalLimitChunkManager manager(64 << 20, 512);
    ChunkedBuffer buffer(ThreadSafety::kThreadSafe, manager);
    std::vector<std::thread> threads;
    // Catch2 assertions are not thread-safe: the writers count failures, checked after join.
    std::atomic<uint64_t> failed_puts{0};
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&buffer, &failed_puts, t]() {
        for (uint64_t i = 0; i < kPerThread; ++i) {
          const uint64_t seq = (uint64_t(t) << 32) | i;
          if (buffer.PutObjects(seq, PayloadFor(seq, i % 40)).IsNull()) ++failed_puts;
        }
      });
    }
    for (auto& th : threads) th.join();
    REQUIRE(failed_puts.load() == 0);
    std::vector<uint64_t> next(kThreads, 0);
    size_t total = 0;
    buffer.ReadEach([&](EntryReader& reader) {
      const uint64_t seq = reader.ReadObject<uint64_t>();
      const std::string payload = reader.ReadObject<std::string>();
      const size_t t = seq >> 32;
      const uint64_t i = seq & 0xFFFFFFFF;
      REQUIRE(t < kThreads);
      REQUIRE(i == next[t]);  // Per-thread order is kept.
      REQUIRE(payload == PayloadFor(seq, i % 40));
      ++next[t];
      ++total;
    });
    CHECK(total == kThreads * kPerThread);
  }
  SECTION("small limit: live chunk memory never passes the limit by more than one chunk") {
    constexpr size_t kLimit = 16 * 1024;
    constexpr BufferChunk::Length kChunk = 1024;
    LocalLimitChunkManager manager(kLimit, kChunk);
    ChunkedBuffer buffer(ThreadSafety::kThreadSafe, manager);
    const size_t live_before = BufferChunk::LiveBufferBytes();
    std::atomic<bool> done{false};
    std::atomic<size_t> worst{0};
    // The writers keep writing until the watcher has looked many times while chunks were
    // alive, so that on a loaded machine (the watcher descheduled) the watch still overlaps
    // the writes.
    std::atomic<uint64_t> observations{0};
    std::thread watcher([&]() {
      while (!done.load()) {
        const size_t live = BufferChunk::LiveBufferBytes() - live_before;
        size_t w = worst.load();
        while (live > w && !worst.compare_exchange_weak(w, live)) {
        }
        if (live > 0) observations.fetch_add(1);
      }
    });
    std::thread preparer([&]() {
      while (!done.load()) {
        buffer.PrepareNextChunk();
        std::this_thread::yield();
      }
    });
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&buffer, &observations, t]() {
        for (uint64_t i = 0; i < kPerThread || observations.load() < 1000; ++i) {
          const uint64_t seq = (uint64_t(t) << 32) | i;
          buffer.PutObjects(seq, PayloadFor(seq, i % 100));
        }
      });
    }
    for (auto& th : threads) th.join();
    done = true;
    watcher.join();
    preparer.join();
    INFO("worst live bytes " << worst.load());
    CHECK(worst.load() <= kLimit + kChunk);
    CHECK(worst.load() >= kLimit - 2 * kChunk);  // The limit was really reached.
    CHECK(manager.GetStats().chunks_recycled > 100);
    // What survives reads back intact.
    size_t total = 0;
    buffer.ReadEach([&](EntryReader& reader) {
      const uint64_t seq = reader.ReadObject<uint64_t>();
      REQUIRE(reader.ReadObject<std::string>() == PayloadFor(seq, (seq & 0xFFFFFFFF) % 100));
      ++total;
    });
    CHECK(total > 0);
  }
}


// PutBlocks (a writer's staged blocks, moved in one go) must leave the buffer exactly as
// putting the same entries one by one would: same entries, same order, same block indexes,
// across chunk boundaries (runs split between chunks, blocks straddling two).
TEST_CASE("PutBlocks of staged blocks equals putting each entry") {
  for (const BufferChunk::Length chunk_bytes : {40u, 128u, 1000u}) {
    CAPTURE(chunk_bytes);
    LocalLimitChunkManager direct_manager(1 << 24, chunk_bytes);
    LocalLimitChunkManager batched_manager(1 << 24, chunk_bytes);
    ChunkedBuffer direct(ThreadSafety::kThreadSafe, direct_manager);
    ChunkedBuffer batched(ThreadSafety::kThreadSafe, batched_manager);
    std::mt19937_64 random(chunk_bytes);
    std::vector<uint8_t> staged;
    uint64_t sequence = 0;
    for (int batch = 0; batch < 300; ++batch) {
      staged.clear();
      const int entries = static_cast<int>(random() % 20);  // Empty batches too.
      for (int e = 0; e < entries; ++e) {
        const std::string payload = PayloadFor(sequence, random() % (chunk_bytes / 2));
        direct.PutObjects(sequence, payload);
        AppendStagedBlock(staged, sequence, payload);
        ++sequence;
      }
      batched.PutBlocks(staged.data(), staged.size());
    }
    std::vector<BlockIndex> direct_indexes, batched_indexes;
    const std::vector<TestEntry> want = ReadAll(direct, &direct_indexes);
    const std::vector<TestEntry> got = ReadAll(batched, &batched_indexes);
    REQUIRE(want.size() == sequence);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      REQUIRE(got[i].sequence == want[i].sequence);
      REQUIRE(got[i].payload == want[i].payload);
    }
    REQUIRE(batched_indexes == direct_indexes);
    REQUIRE(batched.GetState().pushed_block_count == direct.GetState().pushed_block_count);
  }
}

// PutBlocks copies outside the buffer's lock (chunks count copies in flight): a reader, a
// chunk being retired and released, and a recycled chunk being reused must all wait for
// those copies. Several writers move batches in while a reader keeps reading and a small
// limit keeps recycling chunks; every entry ever read must be whole and each writer's
// entries in order. (Without the waits, the reader sees reserved bytes not yet copied.)
TEST_CASE("PutBlocks from several threads while reading and recycling: nothing torn") {
  constexpr int kWriters = 3;
  constexpr uint64_t kBatchesPerWriter = 4000;
  LocalLimitChunkManager manager(64 * 1024, 4096);
  ChunkedBuffer buffer(ThreadSafety::kThreadSafe, manager);
  std::atomic<int> writers_left{kWriters};
  // Catch2 assertions are not thread-safe: threads count, the test checks after joining.
  std::atomic<uint64_t> entries_read{0}, torn{0}, out_of_order{0}, reads{0};
  // The reader reads on from where it stopped, so that it keeps reading the newest blocks,
  // where copies land.
  std::thread reader([&] {
    std::vector<uint64_t> last(kWriters, 0);
    std::vector<bool> seen(kWriters, false);
    BlockIndex next;
    while (writers_left.load() > 0 || reads.load() == 0) {
      buffer.ReadEachFrom(next, [&](EntryReader& entry) {
        next = entry.NextBlockIndex();
        uint64_t sequence = 0;
        std::string payload;
        entry.ReadIntoObjects(sequence, payload);
        const size_t writer = sequence >> 32;
        const uint64_t i = sequence & 0xFFFFFFFF;
        if (entry.Failed() || entry.RemainingBytes() != 0 || writer >= kWriters ||
            payload != PayloadFor(sequence, i % 300)) {
          ++torn;
          return;
        }
        if (seen[writer] && i <= last[writer]) ++out_of_order;
        seen[writer] = true;
        last[writer] = i;
        ++entries_read;
      });
      ++reads;
    }
  });
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      std::vector<uint8_t> staged;
      uint64_t i = 0;
      for (uint64_t batch = 0; batch < kBatchesPerWriter; ++batch) {
        staged.clear();
        for (int e = 0; e < 12; ++e, ++i) {
          const uint64_t sequence = (uint64_t(w) << 32) | i;
          AppendStagedBlock(staged, sequence, PayloadFor(sequence, i % 300));
        }
        buffer.PutBlocks(staged.data(), staged.size());
      }
      --writers_left;
    });
  }
  for (auto& writer : writers) writer.join();
  reader.join();
  INFO(reads.load() << " reads, " << entries_read.load() << " entries read");
  CHECK(torn.load() == 0);
  CHECK(out_of_order.load() == 0);
  CHECK(entries_read.load() > 0);
  CHECK(manager.GetStats().chunks_recycled > 100);
  // After the last copy, everything the limit kept reads back whole.
  size_t kept = 0;
  buffer.ReadEach([&](EntryReader& entry) {
    uint64_t sequence = 0;
    std::string payload;
    entry.ReadIntoObjects(sequence, payload);
    REQUIRE(payload == PayloadFor(sequence, (sequence & 0xFFFFFFFF) % 300));
    ++kept;
  });
  CHECK(kept > 0);
}

}  // namespace
}  // namespace strata
