#include "platform/page_allocation.h"

#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <thread>

#include "catch2/catch.hpp"

namespace strata {
namespace {

// True when [p, p + bytes) is mapped (mincore fails with ENOMEM on an unmapped page).
bool IsMapped(const void* p, size_t bytes) {
  unsigned char residency[64];
  const auto page = reinterpret_cast<uintptr_t>(p) & ~uintptr_t{4095};
  return mincore(reinterpret_cast<void*>(page), bytes, residency) == 0;
}

TEST_CASE("Pages are zeroed, writable, page-aligned and given back") {
  const size_t bytes = 3 * 4096 + 10;
  auto* p = static_cast<uint8_t*>(AllocatePages(bytes));
  REQUIRE(p != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(p) % 4096 == 0);
  for (size_t i = 0; i < bytes; ++i) REQUIRE(p[i] == 0);
  memset(p, 0xab, bytes);
  CHECK(IsMapped(p, bytes));
  FreePages(p, bytes);
  CHECK_FALSE(IsMapped(p, 4096));
}

TEST_CASE("errno is left alone, and a refused size gives nullptr") {
  errno = 1234;
  void* p = AllocatePages(4096);
  CHECK(errno == 1234);
  FreePages(p, 4096);
  CHECK(AllocatePages(0) == nullptr);
  CHECK(AllocatePages(SIZE_MAX) == nullptr);
  CHECK(AllocatePages(size_t{1} << 60) == nullptr);  // More than the address space.
  CHECK(errno == 1234);
}

TEST_CASE("Sized pages remember their size") {
  auto* p = static_cast<uint8_t*>(AllocateSizedPages(100000));
  REQUIRE(p != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(p) % 16 == 0);
  memset(p, 1, 100000);
  FreeSizedPages(p);
  CHECK_FALSE(IsMapped(p, 1));
  CHECK_FALSE(IsMapped(p + 90000, 1));
  FreeSizedPages(nullptr);
}

}  // namespace
}  // namespace strata

// Pages that another thread used and gave back, handed out again at the same address to a
// thread that never synchronised with it: fresh memory, no data race. Under ThreadSanitizer
// this failed while the pages were mapped with raw system calls TSan cannot see (the old
// accesses' shadow stayed, and the new owner's first write was reported as a race).
TEST_CASE("Pages given back by one thread are fresh memory for the next") {
  constexpr size_t kBytes = 3 * 4096;
  std::atomic<uintptr_t> freed_at{0};  // Relaxed only: no happens-before for TSan.
  std::thread user([&] {
    auto* pages = static_cast<uint64_t*>(strata::AllocatePages(kBytes));
    if (pages == nullptr) return;
    for (size_t i = 0; i < kBytes / sizeof(uint64_t); ++i) pages[i] = i;
    strata::FreePages(pages, kBytes);
    freed_at.store(reinterpret_cast<uintptr_t>(pages), std::memory_order_relaxed);
  });
  while (freed_at.load(std::memory_order_relaxed) == 0) std::this_thread::yield();
  auto* again = static_cast<uint64_t*>(strata::AllocatePages(kBytes));
  REQUIRE(again != nullptr);
  if (reinterpret_cast<uintptr_t>(again) != freed_at.load(std::memory_order_relaxed)) {
    WARN("the kernel chose another address: nothing reused to check");
  }
  for (size_t i = 0; i < kBytes / sizeof(uint64_t); ++i) CHECK(again[i] == 0);
  for (size_t i = 0; i < kBytes / sizeof(uint64_t); ++i) again[i] = ~i;
  strata::FreePages(again, kBytes);
  user.join();
}
