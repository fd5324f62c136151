#include "platform/page_allocation.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>

#include "platform/raw_syscall.h"

// ThreadSanitizer builds map and unmap through TSan's mmap/munmap interceptors (the first
// definitions in the lookup order) instead of the raw system calls, which TSan cannot see:
// pages the kernel hands out again at an address used before kept the old accesses' shadow,
// and TSan reported "races" between a new allocation and another thread's freed one (a new
// thread's ThreadStart against the registry list it replaced, thread_churn_test). The
// interceptors reset the shadow of what they map and unmap. (AnnotateNewMemory, tried first,
// is an empty function in GCC 12's libtsan.) errno is kept, as the raw calls keep it. Other
// builds: the raw system calls only.
#if defined(__SANITIZE_THREAD__)
#define STRATA_PAGES_THROUGH_TSAN 1
#else
#define STRATA_PAGES_THROUGH_TSAN 0
#endif

namespace strata {
namespace {

constexpr size_t kPageBytes = 4096;  // The smallest page; mmap rounds further if it must.
constexpr size_t kSizePrefixBytes = 16;

size_t RoundUpToPages(size_t bytes) { return (bytes + kPageBytes - 1) & ~(kPageBytes - 1); }

}  // namespace

void* AllocatePages(size_t bytes) {
  if (bytes == 0 || bytes > (SIZE_MAX >> 1)) return nullptr;
#if STRATA_PAGES_THROUGH_TSAN
  const int saved_errno = errno;
  void* const mapped = mmap(nullptr, RoundUpToPages(bytes), PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  errno = saved_errno;
  return mapped == MAP_FAILED ? nullptr : mapped;
#else
  const long result =
      RawSyscall(SYS_mmap, 0, static_cast<long>(RoundUpToPages(bytes)), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  // The kernel returns an address, or -errno (the last page of the address space).
  if (result < 0 && result > -4096) return nullptr;
  return reinterpret_cast<void*>(result);
#endif
}

bool PopulatePages(void* pages, size_t bytes) {
  return RawSyscall(SYS_madvise, reinterpret_cast<long>(pages), static_cast<long>(bytes),
                    kMadvisePopulateWrite) == 0;
}

void FreePages(void* pages, size_t bytes) {
  if (pages == nullptr) return;
#if STRATA_PAGES_THROUGH_TSAN
  const int saved_errno = errno;
  munmap(pages, RoundUpToPages(bytes));
  errno = saved_errno;
#else
  RawSyscall(SYS_munmap, reinterpret_cast<long>(pages), static_cast<long>(RoundUpToPages(bytes)));
#endif
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
