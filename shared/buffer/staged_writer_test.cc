#include "shared/buffer/staged_writer.h"

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
  for (const BufferChunk::Length chunk_bytes : {48u, 300u, 4096u}) {
    CAPTURE(chunk_bytes);
    LocalLimitChunkManager direct_manager(1 << 24, chunk_bytes);
    LocalLimitChunkManager staged_manager(1 << 24, chunk_bytes);
    ChunkedBuffer direct(ThreadSafety::kThreadSafe, direct_manager);
    ChunkedBuffer staged(ThreadSafety::kThreadSafe, staged_manager);
    std::mt19937_64 random(chunk_bytes);
    {
      StagedWriter writer(staged, 1024);
      // Payload lengths up to 400 bytes: some exceed capacity / 4 (256) and go directly,
      // after a flush, so the order must still hold.
      for (uint64_t sequence = 0; sequence < 5000; ++sequence) {
        const size_t length = random() % 8 == 0 ? random() % 400 : random() % 40;
        const std::string payload = PayloadFor(sequence, std::min<size_t>(length, chunk_bytes / 2));
        direct.PutObjects(sequence, payload);
        writer.PutObjects(sequence, payload);
        if (sequence == 0) {
          // Nothing reaches the buffer before a flush.
          CHECK(staged.GetState().pushed_block_count == 0);
          CHECK(writer.StagedBytes() > 0);
        }
      }
    }  // The destructor flushes what is left.
    const ReadBack want = ReadAll(direct);
    const ReadBack got = ReadAll(staged);
    REQUIRE(want.sequences.size() == 5000);
    REQUIRE(got.sequences == want.sequences);
    REQUIRE(got.payloads == want.payloads);
    CHECK(staged.GetState().pushed_block_count == direct.GetState().pushed_block_count);
  }
}

TEST_CASE("A staged entry's writer is filled exactly and has no block index") {
  LocalLimitChunkManager manager(1 << 20, 4096);
  ChunkedBuffer buffer(ThreadSafety::kThreadSafe, manager);
  StagedWriter writer(buffer);
  const bool null_index = writer.ReserveAndPut([] { return size_t{8}; },
                                               [](EntryWriter* entry) {
                                                 REQUIRE(entry != nullptr);
                                                 REQUIRE(entry->RemainingBytes() == 8);
                                                 entry->WriteObjects(uint64_t{42});
                                                 return entry->CurrentBlockIndex().IsNull();
                                               });
  CHECK(null_index);
  CHECK(writer.StagedBytes() == 9);  // One size byte, eight entry bytes.
  writer.Flush();
  CHECK(writer.StagedBytes() == 0);
  int count = 0;
  buffer.ReadEach([&](EntryReader& reader) {
    CHECK(reader.ReadObject<uint64_t>() == 42);
    ++count;
  });
  CHECK(count == 1);
}

TEST_CASE("An entry that cannot be stored is refused through the direct path") {
  LocalLimitChunkManager manager(1 << 20, 256);
  ChunkedBuffer buffer(ThreadSafety::kThreadSafe, manager);
  StagedWriter writer(buffer, 64);
  const std::string too_large(2000, 'x');  // Larger than a chunk: the buffer refuses it.
  writer.PutObjects(uint64_t{1}, too_large);
  CHECK(buffer.GetState().failed_put_count == 1);
  writer.PutObjects(uint64_t{2}, std::string("ok"));
  writer.Flush();
  const ReadBack all = ReadAll(buffer);
  CHECK(all.sequences == std::vector<uint64_t>{2});
}

TEST_CASE("Several staged writers on one buffer: nothing lost, each writer's order kept") {
  constexpr int kThreads = 4;
  constexpr uint64_t kPerThread = 20000;
  LocalLimitChunkManager manager(64 << 20, 4096);
  ChunkedBuffer buffer(ThreadSafety::kThreadSafe, manager);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&buffer, t]() {
      StagedWriter writer(buffer, 2048);
      for (uint64_t i = 0; i < kPerThread; ++i) {
        const uint64_t sequence = (uint64_t(t) << 32) | i;
        writer.PutObjects(sequence, PayloadFor(sequence, i % 40));
      }
    });
  }
  for (auto& thread : threads) thread.join();
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
