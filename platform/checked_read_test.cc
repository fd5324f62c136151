#include "platform/checked_read.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "catch2/catch.hpp"

namespace strata {
namespace {

TEST_CASE("CheckedRead copies readable memory and refuses unreadable memory", "[platform]") {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  auto* pages = static_cast<char*>(
      mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(pages != MAP_FAILED);
  std::memset(pages, 'a', 2 * page);
  char out[64] = {};
  CHECK(CheckedRead(pages + page - 32, out, sizeof(out)));
  CHECK(std::memcmp(out, pages, sizeof(out)) == 0);
  REQUIRE(mprotect(pages + page, page, PROT_NONE) == 0);
  // Across into the unreadable page, and inside it: refused, no fault.
  CHECK_FALSE(CheckedRead(pages + page - 32, out, sizeof(out)));
  CHECK_FALSE(CheckedRead(pages + page, out, 1));
  CHECK(CheckedRead(pages, out, sizeof(out)));
  CHECK_FALSE(ProbeReadable(reinterpret_cast<uintptr_t>(pages + page)));
  CHECK(ProbeReadable(reinterpret_cast<uintptr_t>(pages)));
  // Unmapped: refused too.
  munmap(pages, 2 * page);
  CHECK_FALSE(CheckedRead(pages, out, 1));
  CHECK(CheckedRead(pages, out, 0));
}

}  // namespace
}  // namespace strata
