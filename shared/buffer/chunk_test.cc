#include "shared/buffer/chunk.h"

#include <cstring>

#include "catch2/catch.hpp"

namespace strata {
namespace {

TEST_CASE("Create rounds storage up to 8 bytes and tracks live bytes") {
  const size_t live_before = BufferChunk::LiveBufferBytes();
  {
    std::unique_ptr<BufferChunk> chunk = BufferChunk::Create(13);
    REQUIRE(chunk);
    CHECK(chunk->BufferBytes() == 16);
    CHECK(reinterpret_cast<uintptr_t>(chunk->Data()) % 8 == 0);
    CHECK(chunk->state() == BufferChunk::State::kCreated);
    CHECK(BufferChunk::LiveBufferBytes() == live_before + 16);
    std::memset(chunk->Data(), 0xAB, chunk->BufferBytes());  // Whole storage writable (ASan).
  }
  CHECK(BufferChunk::LiveBufferBytes() == live_before);
}

TEST_CASE("Blocks are reserved one after the other and may spill into the next chunk") {
  std::unique_ptr<BufferChunk> chunk = BufferChunk::Create(32);
  chunk->SetRangeStart(100);
  CHECK(chunk->state() == BufferChunk::State::kInUse);
  CHECK(chunk->header().process_id == CurrentProcessId());
  CHECK_FALSE(chunk->header().start_time_stamp.IsNull());

  BufferChunk::Reservation a = chunk->ReserveBlock(10);
  CHECK(a.start == chunk->Data());
  CHECK(a.bytes_in_this_chunk == 10);
  CHECK(a.block_index.ToBufferIndex() == 100);
  BufferChunk::Reservation b = chunk->ReserveBlock(30);  // Only 22 bytes left.
  CHECK(b.start == chunk->Data() + 10);
  CHECK(b.bytes_in_this_chunk == 22);
  CHECK(b.block_index.ToBufferIndex() == 110);
  CHECK(chunk->RemainingBytes() == 0);
  CHECK(chunk->OffsetPastLastBlock() == 40);
  CHECK(chunk->BlockCount() == 2);
  CHECK(chunk->RangeEnd() == 132);

  std::unique_ptr<BufferChunk> next = BufferChunk::Create(32);
  next->SetRangeStart(chunk->RangeEnd());
  CHECK(next->ReserveInitialBlockAsTail(8) == next->Data());
  CHECK(next->OffsetFirstBlock() == 8);
  CHECK(next->FirstBlockIndex() == 140);
  CHECK(next->RemainingBytes() == 24);
  CHECK(next->ReserveBlock(4).block_index.ToBufferIndex() == 140);
}

TEST_CASE("Done then recycled forgets contents but keeps the storage") {
  std::unique_ptr<BufferChunk> chunk = BufferChunk::Create(64);
  chunk->SetRangeStart(1);
  chunk->ReserveBlock(20);
  const TimeStamp done = TimeStamp::Now();
  chunk->MarkDone(done);
  CHECK(chunk->state() == BufferChunk::State::kDone);
  CHECK(chunk->header().done_time_stamp == done);
  chunk->MarkRecycled();
  CHECK(chunk->state() == BufferChunk::State::kRecycled);
  CHECK(chunk->BufferBytes() == 64);
  CHECK(chunk->BlockCount() == 0);
  CHECK(chunk->OffsetPastLastBlock() == 0);
  CHECK(chunk->header().done_time_stamp.IsNull());
  chunk->SetRangeStart(65);
  CHECK(chunk->RemainingBytes() == 64);
}

TEST_CASE("Chains link, measure and destroy without recursion") {
  std::unique_ptr<BufferChunk> head = BufferChunk::Create(8);
  BufferChunk* second = nullptr;
  {
    std::unique_ptr<BufferChunk> c = BufferChunk::Create(8);
    second = c.get();
    head->AppendToChain(std::move(c));
  }
  head->AppendToChain(BufferChunk::Create(8));
  CHECK(head->ChainLength() == 3);
  CHECK(head->Next() == second);
  CHECK(head->Last() == second->Next());
  std::unique_ptr<BufferChunk> rest = head->TakeNext();
  CHECK(head->ChainLength() == 1);
  CHECK(rest->ChainLength() == 2);

  // A long chain: destroying it must not overflow the stack.
  const size_t live_before = BufferChunk::LiveBufferBytes();
  std::unique_ptr<BufferChunk> long_chain = BufferChunk::Create(8);
  BufferChunk* last = long_chain.get();
  for (int i = 0; i < 200000; ++i) {
    last->AppendToChain(BufferChunk::Create(8));
    last = last->Next();
  }
  long_chain.reset();
  CHECK(BufferChunk::LiveBufferBytes() == live_before);
}

}  // namespace
}  // namespace strata
