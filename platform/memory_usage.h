// The process's memory usage: resident set size and virtual size, from /proc/self/statm.
//
// ReadProcessMemoryUsage() opens, reads into a stack buffer, closes, and parses by hand: no
// allocation, no lock, no stdio. It costs a few system calls (open/read/close; the kernel
// walks its memory counters on read), see docs/benchmarks.md.
//
// Thread safety: thread-safe.
// Async-signal safety: ReadProcessMemoryUsage() and ParseStatm() are async-signal-safe
// (open, read and close are; errno is preserved). The page size comes from the auxiliary
// vector (getauxval), read once.
#ifndef STRATA_PLATFORM_MEMORY_USAGE_H_
#define STRATA_PLATFORM_MEMORY_USAGE_H_

#include <cstddef>
#include <cstdint>
#include <optional>

namespace strata {

struct MemoryUsage {
  uint64_t resident_bytes = 0;  // RSS: pages in RAM (anonymous, file-backed and shmem)
  uint64_t virtual_bytes = 0;   // total size of the address space mappings
};

// The calling process's memory usage; nullopt when /proc/self/statm cannot be read or
// parsed (no /proc in a sandbox, out of file descriptors).
std::optional<MemoryUsage> ReadProcessMemoryUsage();

namespace memory_usage_internal {
// Parses the start of /proc/self/statm ("size resident ..." in pages, decimal, separated by
// spaces) from `text[0, length)`; `text` need not be NUL-terminated. nullopt when the two
// first fields are not there. Exposed for testing.
std::optional<MemoryUsage> ParseStatm(const char* text, size_t length, uint64_t page_size);
}  // namespace memory_usage_internal

}  // namespace strata

#endif  // STRATA_PLATFORM_MEMORY_USAGE_H_
