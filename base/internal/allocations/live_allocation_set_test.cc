#include "base/internal/allocations/live_allocation_set.h"

#include <atomic>
#include <thread>
#include <vector>

#include "catch2/catch.hpp"

namespace strata {
namespace base_internal {
namespace {

TEST_CASE("LiveAllocationSet: an inserted address is removed once, with its estimate") {
  LiveAllocationSet set;
  REQUIRE(set.Init(1024));
  REQUIRE(set.Insert(0x10000, 4096));
  CHECK(set.MightContain(0x10000));
  int64_t estimate = 0;
  CHECK(set.Remove(0x10000, &estimate));
  CHECK(estimate == 4096);
  CHECK_FALSE(set.Remove(0x10000, &estimate));
  CHECK_FALSE(set.MightContain(0x10000));
}

TEST_CASE("LiveAllocationSet: an address inserted again keeps the later estimate") {
  LiveAllocationSet set;
  REQUIRE(set.Init(1024));
  REQUIRE(set.Insert(0x20000, 100));
  REQUIRE(set.Insert(0x20000, 200));
  int64_t estimate = 0;
  CHECK(set.Remove(0x20000, &estimate));
  CHECK(estimate == 200);
  CHECK_FALSE(set.Remove(0x20000, &estimate));
}

TEST_CASE("LiveAllocationSet: full is refused, and removals make room again") {
  LiveAllocationSet set;
  REQUIRE(set.Init(64));
  std::vector<uint64_t> inserted;
  for (uint64_t a = 0x1000; inserted.size() < 1000; a += 16) {
    if (!set.Insert(a, 1)) break;
    inserted.push_back(a);
  }
  CHECK(inserted.size() == 64);  // Every slot, then refusals.
  CHECK_FALSE(set.Insert(0x999990, 1));
  int64_t estimate = 0;
  for (uint64_t a : inserted) CHECK(set.Remove(a, &estimate));
  // Tombstones are reused.
  for (uint64_t a : inserted) CHECK(set.Insert(a + 8, 2));
}

TEST_CASE("LiveAllocationSet: keys stay found among the tombstones of many removals") {
  // An insertion whose address has no live key in its filter bucket takes the first
  // tombstone of its probe sequence; one that may be present walks on (its earlier entry is
  // replaced). Neither hides a live key from Remove.
  LiveAllocationSet set;
  REQUIRE(set.Init(256));
  std::vector<uint64_t> kept;
  for (uint64_t i = 0; i < 32; ++i) {
    kept.push_back(0x7f0000000000 + i * 4096);
    REQUIRE(set.Insert(kept.back(), static_cast<int64_t>(i)));
  }
  int64_t estimate = 0;
  for (uint64_t round = 0; round < 2000; ++round) {
    const uint64_t a = 0x550000000000 + round * 48;
    REQUIRE(set.Insert(a, 7));
    if (round % 3 == 0) REQUIRE(set.Insert(a, 8));  // Inserted again while present.
    REQUIRE(set.Remove(a, &estimate));
    CHECK(estimate == (round % 3 == 0 ? 8 : 7));
    CHECK_FALSE(set.Remove(a, &estimate));
  }
  for (uint64_t i = 0; i < kept.size(); ++i) {
    REQUIRE(set.Remove(kept[i], &estimate));
    CHECK(estimate == static_cast<int64_t>(i));
  }
}

TEST_CASE("LiveAllocationSet: unsampled addresses are mostly told apart by the filter") {
  LiveAllocationSet set;
  REQUIRE(set.Init(4096));
  for (uint64_t i = 0; i < 1000; ++i) REQUIRE(set.Insert(0x7f0000000000 + i * 4096, 1));
  size_t maybe = 0;
  for (uint64_t i = 0; i < 100000; ++i) maybe += set.MightContain(0x5500000000 + i * 48) ? 1 : 0;
  // 1000 granules' buckets of 65536: about 1.5 % of other addresses pass the filter.
  CHECK(maybe < 100000 / 20);
}

TEST_CASE("LiveAllocationSet: threads inserting and removing their own addresses agree") {
  LiveAllocationSet set;
  REQUIRE(set.Init(1 << 14));
  std::atomic<int64_t> removed_total{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 200; ++round) {
        std::vector<uint64_t> mine;
        for (uint64_t i = 0; i < 500; ++i) {
          const uint64_t a = (uint64_t{1} << 40) * (t + 1) + (round * 500 + i) * 32;
          if (set.Insert(a, 3)) mine.push_back(a);
        }
        for (uint64_t a : mine) {
          int64_t e = 0;
          if (set.Remove(a, &e)) removed_total.fetch_add(e);
        }
        if (mine.size() != 500) removed_total.fetch_add(-1000000);  // Never full here.
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(removed_total.load() == int64_t{4} * 200 * 500 * 3);
}

}  // namespace
}  // namespace base_internal
}  // namespace strata
