#include "platform/sampling/stack_bounds.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "platform/private_fd.h"
#include "platform/raw_syscall.h"

extern "C" void* __libc_stack_end;  // glibc: the initial stack pointer's page, roughly.

namespace strata {
namespace {

constexpr uintptr_t kPageSize = 4096;

using stack_bounds_internal::MapsLine;

// A hexadecimal number at `*text`, which is moved past it.
uintptr_t ParseHex(const char** text) {
  uintptr_t value = 0;
  for (;; ++*text) {
    const char c = **text;
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0) return value;
    value = value * 16 + static_cast<uintptr_t>(digit);
  }
}

// "start-end " at the head of a maps line; false when the head is not that.
bool ParseRange(const char* line, uintptr_t* start, uintptr_t* end) {
  const char* text = line;
  *start = ParseHex(&text);
  if (text == line || *text != '-') return false;
  const char* const end_text = ++text;
  *end = ParseHex(&text);
  return text != end_text && *text == ' ' && *start < *end;
}

// Linux 6.11's PROCMAP_QUERY ioctl on /proc/self/maps (linux/fs.h; defined here for older
// headers): the mapping that covers an address, without reading the whole file.
struct ProcmapQuery {
  uint64_t size;
  uint64_t query_flags;
  uint64_t query_addr;
  uint64_t vma_start;
  uint64_t vma_end;
  uint64_t vma_flags;
  uint64_t vma_page_size;
  uint64_t vma_offset;
  uint64_t inode;
  uint32_t dev_major;
  uint32_t dev_minor;
  uint32_t vma_name_size;
  uint32_t build_id_size;
  uint64_t vma_name_addr;
  uint64_t build_id_addr;
};
static_assert(sizeof(ProcmapQuery) == 104, "linux/fs.h's struct procmap_query");
constexpr unsigned long kProcmapQuery = (3UL << 30) | (sizeof(ProcmapQuery) << 16) | ('f' << 8) | 17;

std::atomic<bool> g_maps_file_read_forced{false};

// The process-wide /proc/self/maps descriptor (OpenSharedMapsDescriptor): its number and the
// process that opened it, packed so that a reader sees a matching pair (an inherited one
// names the parent's maps), and its identity (fstat), written before the pair is published.
std::atomic<uint64_t> g_shared_maps{~uint64_t{0}};
std::atomic<uint64_t> g_shared_maps_device{0};
std::atomic<uint64_t> g_shared_maps_inode{0};

uint64_t PackSharedMaps(long fd, long pid) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(pid)) << 32) | static_cast<uint32_t>(fd);
}

bool StatDescriptor(long fd, uint64_t* device, uint64_t* inode) {
  struct stat status;
  if (RawSyscall(SYS_fstat, fd, reinterpret_cast<long>(&status)) != 0) return false;
  *device = status.st_dev;
  *inode = status.st_ino;
  return true;
}

// The shared descriptor when this process opened it and its number still names it, else -1.
long SharedMapsDescriptor() {
  const uint64_t packed = g_shared_maps.load(std::memory_order_acquire);
  if (packed == ~uint64_t{0}) return -1;
  const long fd = static_cast<long>(static_cast<uint32_t>(packed));
  if (static_cast<uint32_t>(packed >> 32) != static_cast<uint32_t>(RawSyscall(SYS_getpid))) {
    return -1;  // Inherited across fork: the parent's maps.
  }
  uint64_t device = 0, inode = 0;
  if (!StatDescriptor(fd, &device, &inode) ||
      device != g_shared_maps_device.load(std::memory_order_relaxed) ||
      inode != g_shared_maps_inode.load(std::memory_order_relaxed)) {
    return -1;  // The program closed it (and may have reopened the number).
  }
  return fd;
}

long PreadMaps(void* context, char* into, size_t capacity, uint64_t offset) {
  return RawSyscall(SYS_pread64, *static_cast<const long*>(context), reinterpret_cast<long>(into),
                    static_cast<long>(capacity), static_cast<long>(offset));
}

// Asks /proc/self/maps with raw system calls: no allocation, no libc call. With
// `need_previous` false, first one PROCMAP_QUERY ioctl (Linux 6.11+; ~1 us against ~8 us of
// CPU for a short file read whole); else, or where the kernel has no such ioctl, the file's
// lines (FindInMaps). False when the file cannot be read or no mapping holds `address`.
bool FindMapping(uintptr_t address, MapsLine* found, bool need_previous) {
  long fd = SharedMapsDescriptor();
  const bool shared = fd >= 0;
  if (!shared) {
    fd = RawSyscall(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/proc/self/maps"),
                    O_RDONLY | O_CLOEXEC);
  }
  if (fd < 0) return false;
  if (!need_previous && !g_maps_file_read_forced.load(std::memory_order_relaxed)) {
    ProcmapQuery query = {};
    query.size = sizeof(query);
    query.query_addr = address;
    if (RawSyscall(SYS_ioctl, fd, static_cast<long>(kProcmapQuery),
                   reinterpret_cast<long>(&query)) == 0 &&
        query.vma_start <= address && address < query.vma_end) {
      if (!shared) RawSyscall(SYS_close, fd);
      *found = MapsLine{query.vma_start, query.vma_end, 0, false};
      return true;
    }
  }
  const bool ok = stack_bounds_internal::FindInMaps(&PreadMaps, &fd, address, found);
  if (!shared) RawSyscall(SYS_close, fd);
  return ok;
}

// The main thread's stack as glibc's pthread_getattr_np reports it: from the page above
// __libc_stack_end down to the soft RLIMIT_STACK counted from the mapping's end, or to the
// mapping below, whichever is higher.
StackBounds MainStackIn(const MapsLine& mapping) {
  struct rlimit limit = {RLIM_INFINITY, RLIM_INFINITY};
  RawSyscall(SYS_prlimit64, 0, RLIMIT_STACK, 0, reinterpret_cast<long>(&limit));
  StackBounds bounds;
  bounds.high = (reinterpret_cast<uintptr_t>(__libc_stack_end) + kPageSize - 1) & ~(kPageSize - 1);
  bounds.low = mapping.previous_end;
  if (limit.rlim_cur < mapping.end && mapping.end - limit.rlim_cur > bounds.low) {
    bounds.low = (mapping.end - limit.rlim_cur) & ~(kPageSize - 1);
  }
  return bounds;
}

}  // namespace

namespace stack_bounds_internal {

bool FindInMaps(MapsReader read, void* context, uintptr_t address, MapsLine* found) {
  char buffer[kMapsBufferSize];
  size_t filled = 0;
  uint64_t offset = 0;
  // In the tail of a line longer than the buffer (its range was read from its head).
  bool skipping_tail = false;
  uintptr_t previous_end = 0;
  bool previous_known = false;
  for (;;) {
    const long got = read(context, buffer + filled, sizeof(buffer) - 1 - filled, offset);
    if (got <= 0) return false;
    offset += static_cast<uint64_t>(got);
    filled += static_cast<size_t>(got);
    buffer[filled] = '\0';
    const char* const stop = buffer + filled;
    const char* line = buffer;
    if (skipping_tail) {
      const char* newline = static_cast<const char*>(std::memchr(line, '\n', stop - line));
      if (newline == nullptr) {
        filled = 0;
        continue;
      }
      line = newline + 1;
      skipping_tail = false;
    }
    for (;;) {
      const char* newline = static_cast<const char*>(std::memchr(line, '\n', stop - line));
      const bool buffer_full = line == buffer && filled == sizeof(buffer) - 1;
      if (newline == nullptr && !buffer_full) break;  // The rest comes with the next read.
      // A whole line, or the head of one longer than the buffer (a long path).
      uintptr_t start = 0, end = 0;
      const bool parsed = ParseRange(line, &start, &end);
      if (parsed && address >= start && address < end) {
        *found = MapsLine{start, end, previous_end, previous_known};
        return true;
      }
      previous_end = end;
      previous_known = parsed;
      if (newline == nullptr) {
        skipping_tail = true;
        line = stop;
        break;
      }
      line = newline + 1;
    }
    filled = static_cast<size_t>(stop - line);
    std::memmove(buffer, line, filled);
  }
}

}  // namespace stack_bounds_internal

bool StackBounds::OpenSharedMapsDescriptor(bool above_soft_limit_helper_allowed) {
  if (SharedMapsDescriptor() >= 0) return true;
  // One inherited from the parent (a forked child's) names the parent's maps: closed when its
  // number still names it (the identity recorded in the parent is this memory's copy).
  const uint64_t inherited = g_shared_maps.exchange(~uint64_t{0}, std::memory_order_acq_rel);
  if (inherited != ~uint64_t{0}) {
    const long inherited_fd = static_cast<long>(static_cast<uint32_t>(inherited));
    uint64_t device = 0, inode = 0;
    if (StatDescriptor(inherited_fd, &device, &inode) &&
        device == g_shared_maps_device.load(std::memory_order_relaxed) &&
        inode == g_shared_maps_inode.load(std::memory_order_relaxed)) {
      RawSyscall(SYS_close, inherited_fd);
    }
  }
  if (!above_soft_limit_helper_allowed) return false;
  const long opened = RawSyscall(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/proc/self/maps"),
                                 O_RDONLY | O_CLOEXEC);
  if (opened < 0) return false;
  const int fd = MoveDescriptorAboveSoftLimit(static_cast<int>(opened));
  uint64_t device = 0, inode = 0;
  if (fd < 0 || !StatDescriptor(fd, &device, &inode)) {
    // Kept in the program's range for good it would take one of its descriptors: each query
    // opens its own instead.
    RawSyscall(SYS_close, fd < 0 ? opened : fd);
    return false;
  }
  g_shared_maps_device.store(device, std::memory_order_relaxed);
  g_shared_maps_inode.store(inode, std::memory_order_relaxed);
  g_shared_maps.store(PackSharedMaps(fd, RawSyscall(SYS_getpid)), std::memory_order_release);
  return true;
}

void StackBounds::ForceMapsFileReadForTesting(bool forced) {
  g_maps_file_read_forced.store(forced, std::memory_order_relaxed);
}

StackBounds StackBounds::OfCurrentThread() {
  const uintptr_t here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  MapsLine mapping;
  if (!FindMapping(here, &mapping, /*need_previous=*/false)) return StackBounds();
  // The main stack (also a forked child's, whatever thread forked it, is told by the address).
  const uintptr_t main_inside = reinterpret_cast<uintptr_t>(__libc_stack_end);
  if (main_inside >= mapping.start && main_inside < mapping.end) return OfMainThread();
  StackBounds bounds;
  bounds.low = mapping.start;
  bounds.high = mapping.end;
  // The mapping may have been merged with an anonymous rw mapping just above the stack block
  // (a large malloc chunk; MAP_STACK keeps them apart only from Linux 6.7), which the program
  // may unmap later: `high` stops at the thread's TCB (glibc's struct pthread, the thread
  // pointer, placed at the top of the stack block, above the static TLS and every frame).
  // A stack the program gave holds the TCB too; where it does not lie in this mapping, the
  // pthread_create wrapper's narrowing to the given stack is the cap.
  const uintptr_t thread_control_block = reinterpret_cast<uintptr_t>(pthread_self());
  if (thread_control_block > here && thread_control_block < bounds.high) {
    bounds.high = thread_control_block;
  }
  return bounds;
}

StackBounds StackBounds::OfMainThread() {
  MapsLine mapping;
  if (!FindMapping(reinterpret_cast<uintptr_t>(__libc_stack_end), &mapping, true) ||
      !mapping.previous_known) {
    return StackBounds();
  }
  return MainStackIn(mapping);
}

StackBounds StackBounds::OfThread(pthread_t thread) {
  pthread_attr_t attributes;
  if (pthread_getattr_np(thread, &attributes) != 0) return StackBounds();
  void* address = nullptr;
  size_t size = 0;
  const int error = pthread_attr_getstack(&attributes, &address, &size);
  pthread_attr_destroy(&attributes);
  if (error != 0 || address == nullptr || size == 0) return StackBounds();
  StackBounds bounds;
  bounds.low = reinterpret_cast<uintptr_t>(address);
  bounds.high = bounds.low + size;
  // As OfCurrentThread(): the frames end below the TCB at the top of the block.
  const uintptr_t thread_control_block = reinterpret_cast<uintptr_t>(thread);
  if (thread_control_block > bounds.low && thread_control_block < bounds.high) {
    bounds.high = thread_control_block;
  }
  return bounds;
}

StackBounds StackBounds::MainStackReach() {
  MapsLine mapping;
  if (!FindMapping(reinterpret_cast<uintptr_t>(__libc_stack_end), &mapping, true) ||
      !mapping.previous_known) {
    return StackBounds();
  }
  constexpr uintptr_t kStackGuardGap = 256 * kPageSize;
  StackBounds found;
  found.high = mapping.end;
  found.low = mapping.previous_end + kStackGuardGap < mapping.start
                  ? mapping.previous_end + kStackGuardGap
                  : mapping.start;
  return found;
}

}  // namespace strata
