// The shared page of the IPC "limit" scenario (ipc_parent limit, ipc_child writer): a file
// of 4096 bytes that the parent and its writers map. Slot i (a std::atomic<uint64_t>) holds
// writer i's own live buffer bytes, refreshed by the writer; the slot at kTreeLiveSlot is a
// std::atomic<int64_t> to which every process of the tree adds its chunk creations and
// destructions (BufferChunk::AlsoCountLiveBytesIn): the tree's live buffer memory.
#ifndef STRATA_TESTS_IPC_WRITER_SLOTS_H_
#define STRATA_TESTS_IPC_WRITER_SLOTS_H_

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace strata_test {

constexpr int kTreeLiveSlot = 64;  // Past any writer's slot.
static_assert(sizeof(std::atomic<int64_t>) == sizeof(std::atomic<uint64_t>),
              "one slot size in the page");

constexpr size_t kSlotsPageBytes = 4096;

// Maps the shared page at `path` (made first, zeroed, when `create`: the parent). Null on
// failure.
inline std::atomic<uint64_t>* MapSlots(const char* path, bool create) {
  if (create) {
    const int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return nullptr;
    const bool sized = ftruncate(fd, kSlotsPageBytes) == 0;
    close(fd);
    if (!sized) return nullptr;
  }
  const int fd = open(path, O_RDWR);
  if (fd < 0) return nullptr;
  void* page = mmap(nullptr, kSlotsPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return page == MAP_FAILED ? nullptr : static_cast<std::atomic<uint64_t>*>(page);
}

// The tree's live buffer bytes (see above).
inline std::atomic<int64_t>* TreeLive(std::atomic<uint64_t>* slots) {
  return reinterpret_cast<std::atomic<int64_t>*>(slots + kTreeLiveSlot);
}

}  // namespace strata_test

#endif  // STRATA_TESTS_IPC_WRITER_SLOTS_H_
