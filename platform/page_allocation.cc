#include "platform/page_allocation.h"

#include <sys/mman.h>

#include <cstdint>

#include "platform/raw_syscall.h"

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer's dynamic annotation (libtsan): the range is fresh memory. TSan does not see
// the raw mmap/munmap below, so pages the kernel hands out again at an address used before kept
// the old accesses' shadow, and TSan reported "races" between a thread's new staging area and
// another's freed one (thread_churn_test).
extern "C" void AnnotateNewMemory(const char* file, int line, const volatile void* memory,
                                  size_t size);
#endif

namespace strata {
namespace {

constexpr size_t kPageBytes = 4096;  // The smallest page; mmap rounds further if it must.
constexpr size_t kSizePrefixBytes = 16;

size_t RoundUpToPages(size_t bytes) { return (bytes + kPageBytes - 1) & ~(kPageBytes - 1); }

}  // namespace

void* AllocatePages(size_t bytes) {
  if (bytes == 0 || bytes > (SIZE_MAX >> 1)) return nullptr;
  const long result =
      RawSyscall(SYS_mmap, 0, static_cast<long>(RoundUpToPages(bytes)), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  // The kernel returns an address, or -errno (the last page of the address space).
  if (result < 0 && result > -4096) return nullptr;
#if defined(__SANITIZE_THREAD__)
  AnnotateNewMemory(__FILE__, __LINE__, reinterpret_cast<void*>(result), RoundUpToPages(bytes));
#endif
  return reinterpret_cast<void*>(result);
}

void FreePages(void* pages, size_t bytes) {
  if (pages == nullptr) return;
  RawSyscall(SYS_munmap, reinterpret_cast<long>(pages), static_cast<long>(RoundUpToPages(bytes)));
}

void* AllocateSizedPages(size_t bytes) {
  if (bytes > (SIZE_MAX >> 1)) return nullptr;
  const size_t total = bytes + kSizePrefixBytes;
  auto* base = static_cast<uint8_t*>(AllocatePages(total));
  if (base == nullptr) return nullptr;
  *reinterpret_cast<size_t*>(base) = total;
  return base + kSizePrefixBytes;
}

void FreeSizedPages(void* memory) {
  if (memory == nullptr) return;
  uint8_t* base = static_cast<uint8_t*>(memory) - kSizePrefixBytes;
  FreePages(base, *reinterpret_cast<const size_t*>(base));
}

}  // namespace strata
