#include "shared/buffer/controlled_chunk_manager.h"

#include <map>
#include <random>
#include <vector>

#include "catch2/catch.hpp"

namespace strata {
namespace {

using Update = ControlledChunkManager::Update;
using Metadata = ControlledChunkManager::ChunkMetadata;

// What a controller knows about one manager after applying updates in order: this is the
// meaning of an update, against which folding is checked.
struct ControllerView {
  bool final = false;
  size_t unreleased = 0;
  size_t released = 0;
  std::map<int64_t, BufferChunk::Length> chunks;  // done time (ns) -> bytes

  void Apply(const Update& u) {
    if (u.IsNotUpdate()) return;
    if (u.IsFinal()) {  // The manager is gone, and its memory with it.
      final = true;
      unreleased = released = 0;
      chunks.clear();
      return;
    }
    unreleased = u.UnreleasedBytes();
    released = u.ReleasedBytes();
    const TimeStamp oldest = u.OldestDoneTimeStamp();
    if (oldest.IsNull()) {
      chunks.clear();
    } else {
      chunks.erase(chunks.begin(), chunks.lower_bound(oldest.ToNanoseconds()));
    }
    for (const Metadata& m : u.NewlyReleasedChunks()) {
      chunks[m.done_time_stamp.ToNanoseconds()] = m.buffer_bytes;
    }
  }
  bool operator==(const ControllerView& o) const {
    return final == o.final && unreleased == o.unreleased && released == o.released &&
           chunks == o.chunks;
  }
};

// Simulates a manager's life: releases and destructions of chunks with increasing done
// times, producing a realistic stream of updates.
std::vector<Update> RandomUpdateStream(std::mt19937& rng, int length) {
  std::vector<Update> stream;
  std::vector<Metadata> held;  // Released chunks, oldest first.
  int64_t now = 1000;
  size_t unreleased = 0;
  for (int i = 0; i < length; ++i) {
    std::vector<Metadata> newly;
    const int released_now = static_cast<int>(rng() % 3);
    for (int r = 0; r < released_now; ++r) {
      now += 1 + static_cast<int64_t>(rng() % 5);
      newly.push_back({TimeStamp::FromNanoseconds(now), static_cast<BufferChunk::Length>(64 * (1 + rng() % 4))});
    }
    held.insert(held.end(), newly.begin(), newly.end());
    const size_t destroyed = held.empty() ? 0 : rng() % (held.size() + 1);
    held.erase(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(destroyed));
    // A chunk released and destroyed within the same update does not appear in it.
    std::vector<Metadata> still_newly;
    for (const Metadata& m : newly) {
      if (!held.empty() && m.done_time_stamp >= held.front().done_time_stamp) still_newly.push_back(m);
    }
    size_t released = 0;
    for (const Metadata& m : held) released += m.buffer_bytes;
    unreleased = 64 * (rng() % 3);
    stream.emplace_back(unreleased, released,
                        held.empty() ? TimeStamp() : held.front().done_time_stamp,
                        still_newly);
  }
  if (rng() % 2) stream.push_back(Update::Final());
  return stream;
}

TEST_CASE("Folding two updates equals applying them one after the other") {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 2000; ++trial) {
    const std::vector<Update> stream = RandomUpdateStream(rng, 2 + static_cast<int>(rng() % 10));
    // Apply a random prefix directly, then a random run both folded and one by one.
    const size_t prefix = rng() % stream.size();
    const size_t run_end = prefix + 1 + rng() % (stream.size() - prefix);
    ControllerView one_by_one, folded;
    for (size_t i = 0; i < prefix; ++i) {
      one_by_one.Apply(stream[i]);
      folded.Apply(stream[i]);
    }
    Update accumulated;
    for (size_t i = prefix; i < run_end; ++i) {
      one_by_one.Apply(stream[i]);
      Update copy = stream[i];
      accumulated.Fold(std::move(copy));
    }
    folded.Apply(accumulated);
    INFO("trial " << trial << " prefix " << prefix << " run_end " << run_end);
    REQUIRE(folded == one_by_one);
  }
}

TEST_CASE("Fold into nothing, final, and empty") {
  Update empty;
  CHECK(empty.IsNotUpdate());
  Update regular(10, 20, TimeStamp::FromNanoseconds(5), {{TimeStamp::FromNanoseconds(5), 20}});
  Update copy = regular;
  empty.Fold(std::move(copy));
  CHECK(empty == regular);
  empty.Fold(Update());  // Folding "no update" changes nothing.
  CHECK(empty == regular);
  empty.Fold(Update::Final());
  CHECK(empty.IsFinal());
}

TEST_CASE("Folding drops chunks destroyed by the later update") {
  Update first(0, 30, TimeStamp::FromNanoseconds(1),
               {{TimeStamp::FromNanoseconds(1), 10}, {TimeStamp::FromNanoseconds(2), 20}});
  Update second(0, 20, TimeStamp::FromNanoseconds(2), {});
  first.Fold(std::move(second));
  REQUIRE(first.NewlyReleasedChunks().size() == 1);
  CHECK(first.NewlyReleasedChunks()[0].done_time_stamp == TimeStamp::FromNanoseconds(2));
  CHECK(first.ReleasedBytes() == 20);
}

}  // namespace
}  // namespace strata
