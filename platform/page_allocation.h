// Memory of Strata's own, straight from the kernel: anonymous private mappings made with the
// raw mmap/munmap system calls (raw_syscall.h).
//
// Why: code on a program's thread never calls the program's allocator. A program may replace
// `operator new` or `malloc` with its own, guarded by its own mutex; if a Strata path on that
// thread allocated through it while the thread already held that mutex (a marker for a
// contended lock recorded inside the program's allocator, say), the thread would deadlock on
// itself. The marker staging areas and the buffer's chunks are made here instead.
//
// Sizes are rounded up to whole pages; the memory is zero-filled on first touch. Each
// allocation is its own mapping, so use this for a few large, long-lived blocks (a staging
// area per thread, a buffer chunk), not for small objects.
//
// Thread safety: thread-safe. Async-signal safety: async-signal-safe (system calls only).
// ThreadSanitizer builds map and unmap through TSan's mmap/munmap interceptors instead, so that
// TSan resets the shadow of reused addresses (page_allocation.cc); TSan runs signal handlers at
// its own safe points.
#ifndef STRATA_PLATFORM_PAGE_ALLOCATION_H_
#define STRATA_PLATFORM_PAGE_ALLOCATION_H_

#include <cstddef>
#include <new>

namespace strata {

// At least `bytes` of zeroed, read-write memory, page-aligned; nullptr when the kernel refuses
// (out of memory or address space, or a seccomp filter). Give it back with FreePages() and
// the same `bytes`.
void* AllocatePages(size_t bytes);
void FreePages(void* pages, size_t bytes);

// madvise(MADV_POPULATE_WRITE) (Linux 5.14; named by <sys/mman.h> from glibc 2.35 only):
// faults a range in for writing without writing a byte of it, so another thread may be
// writing there meanwhile. One system call instead of a page fault per page (each a trap to
// the hypervisor in a VM: ~15 µs here against ~8 µs a page this way, docs/benchmarks.md).
constexpr int kMadvisePopulateWrite = 23;

// Makes the whole pages of [pages, pages + bytes) resident and writable (a raw madvise with
// kMadvisePopulateWrite). False when the kernel refuses (before 5.14: EINVAL; out of
// memory): the pages then fault in when first written, as before.
bool PopulatePages(void* pages, size_t bytes);

// An allocation that remembers its own size: `bytes` usable bytes at a 16-byte aligned
// address, the size kept in a 16-byte prefix. For objects whose deleting code does not know
// the size (a class's operator delete). Free with FreeSizedPages().
void* AllocateSizedPages(size_t bytes);
void FreeSizedPages(void* memory);

// A standard-library allocator on AllocatePages: every allocation is its own mapping of whole
// pages. For the few containers that grow on a program's thread (the thread registry's lists,
// grown by a new thread's registration): they grow geometrically, so a mapping is made per
// doubling, never per element. Not for containers of many small, short-lived allocations.
// Throws std::bad_alloc when the kernel refuses, as std::allocator does. Stateless: any two
// compare equal. Thread safety and async-signal safety: as AllocatePages.
template <typename T>
struct PageAllocator {
  using value_type = T;
  PageAllocator() noexcept = default;
  template <typename U>
  PageAllocator(const PageAllocator<U>&) noexcept {}  // NOLINT: rebinding, as std::allocator.
  T* allocate(size_t count) {
    if (count > (size_t{1} << 58) / sizeof(T)) throw std::bad_alloc();
    void* pages = AllocatePages(count * sizeof(T));
    if (pages == nullptr) throw std::bad_alloc();
    return static_cast<T*>(pages);
  }
  void deallocate(T* pointer, size_t count) noexcept { FreePages(pointer, count * sizeof(T)); }
  template <typename U>
  bool operator==(const PageAllocator<U>&) const noexcept { return true; }
  template <typename U>
  bool operator!=(const PageAllocator<U>&) const noexcept { return false; }
};

}  // namespace strata

#endif  // STRATA_PLATFORM_PAGE_ALLOCATION_H_
