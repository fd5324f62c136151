// The shared page of the IPC "limit" scenario (ipc_parent limit, ipc_child writer): a file
// of 4096 bytes that the parent and its writers map. Slot i (a std::atomic<uint64_t>) holds
// writer i's own live buffer bytes, refreshed by the writer; the slot at kTreeLiveSlot is a
// std::atomic<int64_t> to which every process of the tree adds its chunk creations and
// destructions (BufferChunk::AlsoCountLiveBytesIn): the tree's live buffer memory.
#ifndef STRATA_TESTS_IPC_WRITER_SLOTS_H_
#define STRATA_TESTS_IPC_WRITER_SLOTS_H_

#include <atomic>
#include <cstdint>

namespace strata_test {

constexpr int kTreeLiveSlot = 64;  // Past any writer's slot.
static_assert(sizeof(std::atomic<int64_t>) == sizeof(std::atomic<uint64_t>),
              "one slot size in the page");

}  // namespace strata_test

#endif  // STRATA_TESTS_IPC_WRITER_SLOTS_H_
