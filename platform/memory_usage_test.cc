#include "platform/memory_usage.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "catch2/catch.hpp"

namespace strata {
namespace {

using memory_usage_internal::ParseStatm;

constexpr uint64_t kMiB = 1024 * 1024;

std::optional<MemoryUsage> Parse(const std::string& text, uint64_t page_size = 4096) {
  return ParseStatm(text.data(), text.size(), page_size);
}

// VmRSS from /proc/self/status, in bytes: an independent reading of the same number.
uint64_t StatusVmRssBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

TEST_CASE("ParseStatm: reads the first two fields in pages", "[platform][memory]") {
  const auto usage = Parse("2635 1031 821 6 0 204 0\n");
  REQUIRE(usage.has_value());
  REQUIRE(usage->virtual_bytes == 2635u * 4096);
  REQUIRE(usage->resident_bytes == 1031u * 4096);

  const auto big_pages = Parse("10 3 1 1 0 1 0\n", 65536);
  REQUIRE(big_pages.has_value());
  REQUIRE(big_pages->virtual_bytes == 10u * 65536);
  REQUIRE(big_pages->resident_bytes == 3u * 65536);

  // Only the two first fields are needed; the end of the read may fall right after them.
  REQUIRE(Parse("7 5").has_value());
  REQUIRE(Parse("7 5")->resident_bytes == 5u * 4096);
  REQUIRE(Parse("7 5\n").has_value());
  REQUIRE(Parse("18446744073709551615 0", 1).has_value());  // UINT64_MAX pages of 1 byte
}

TEST_CASE("ParseStatm: rejects malformed text", "[platform][memory]") {
  REQUIRE_FALSE(Parse("").has_value());
  REQUIRE_FALSE(Parse("123").has_value());
  REQUIRE_FALSE(Parse("123 ").has_value());
  REQUIRE_FALSE(Parse("123\n456").has_value());
  REQUIRE_FALSE(Parse("abc 456").has_value());
  REQUIRE_FALSE(Parse("123 4x6").has_value());
  REQUIRE_FALSE(Parse("-1 2").has_value());
  REQUIRE_FALSE(Parse("18446744073709551616 1").has_value());  // overflows uint64
  REQUIRE_FALSE(Parse("4503599627370496 1", 4096).has_value());  // 2^52 pages * 2^12
  REQUIRE_FALSE(Parse("1 1", 0).has_value());
  // Length is respected: the text is not NUL-terminated in general.
  const char not_terminated[] = {'1', '2', ' ', '3', '4'};
  const auto usage = ParseStatm(not_terminated, 4, 4096);
  REQUIRE(usage.has_value());
  REQUIRE(usage->resident_bytes == 3u * 4096);
}

TEST_CASE("ReadProcessMemoryUsage agrees with /proc/self/status", "[platform][memory]") {
  const auto before = ReadProcessMemoryUsage();
  const uint64_t status_rss = StatusVmRssBytes();
  const auto after = ReadProcessMemoryUsage();
  REQUIRE(before.has_value());
  REQUIRE(after.has_value());
  REQUIRE(status_rss > 0);
  REQUIRE(before->resident_bytes > 0);
  REQUIRE(before->virtual_bytes >= before->resident_bytes);
  // The reads straddle the status read; allow a little churn (ifstream's buffer, stack).
  const uint64_t low = std::min(before->resident_bytes, after->resident_bytes);
  const uint64_t high = std::max(before->resident_bytes, after->resident_bytes);
  REQUIRE(status_rss + kMiB >= low);
  REQUIRE(status_rss <= high + kMiB);
}

TEST_CASE("ReadProcessMemoryUsage: RSS grows when a big allocation is touched",
          "[platform][memory]") {
  constexpr size_t kSize = 64 * kMiB;
  const auto start = ReadProcessMemoryUsage();
  REQUIRE(start.has_value());

  void* mapping = mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(mapping != MAP_FAILED);
  const auto mapped = ReadProcessMemoryUsage();
  REQUIRE(mapped.has_value());
  // Reserved address space counts at once; untouched pages are not resident.
  REQUIRE(mapped->virtual_bytes >= start->virtual_bytes + kSize);
  REQUIRE(mapped->resident_bytes < start->resident_bytes + kSize / 4);

  auto* bytes = static_cast<volatile char*>(mapping);
  const long page = sysconf(_SC_PAGESIZE);
  for (size_t i = 0; i < kSize; i += static_cast<size_t>(page)) bytes[i] = 1;
  const auto touched = ReadProcessMemoryUsage();
  REQUIRE(touched.has_value());
  INFO("RSS " << start->resident_bytes / kMiB << " -> " << mapped->resident_bytes / kMiB
              << " -> " << touched->resident_bytes / kMiB << " MiB");
  // Every page is now resident (no swap on these machines; allow a margin for reclaim of
  // other pages meanwhile).
  REQUIRE(touched->resident_bytes >= mapped->resident_bytes + kSize * 7 / 8);

  REQUIRE(munmap(mapping, kSize) == 0);
  const auto unmapped = ReadProcessMemoryUsage();
  REQUIRE(unmapped.has_value());
  REQUIRE(unmapped->resident_bytes + kSize * 7 / 8 <= touched->resident_bytes);
  REQUIRE(unmapped->virtual_bytes + kSize <= touched->virtual_bytes);
}

TEST_CASE("ReadProcessMemoryUsage preserves errno", "[platform][memory]") {
  errno = ERANGE;
  REQUIRE(ReadProcessMemoryUsage().has_value());
  REQUIRE(errno == ERANGE);
}

// Works from inside a signal handler (what the profiler's sampler needs). This cannot prove
// async-signal safety, but it exercises the handler path.
std::optional<MemoryUsage> g_from_handler;
void OnSignal(int) { g_from_handler = ReadProcessMemoryUsage(); }

TEST_CASE("ReadProcessMemoryUsage works in a signal handler", "[platform][memory]") {
  struct sigaction action = {};
  struct sigaction previous = {};
  action.sa_handler = &OnSignal;
  sigemptyset(&action.sa_mask);
  REQUIRE(sigaction(SIGUSR1, &action, &previous) == 0);
  g_from_handler.reset();
  raise(SIGUSR1);  // delivered before raise() returns, on this thread
  REQUIRE(sigaction(SIGUSR1, &previous, nullptr) == 0);
  REQUIRE(g_from_handler.has_value());
  REQUIRE(g_from_handler->resident_bytes > 0);
}

}  // namespace
}  // namespace strata
