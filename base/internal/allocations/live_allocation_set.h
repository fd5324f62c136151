// LiveAllocationSet: the addresses of the sampled allocations that are still live, each with
// the estimate it was recorded with, so that its free is recorded with minus that estimate
// (native allocation profiling, docs/memory.md). Bounded: open addressing over a fixed table
// of Strata's own pages (platform/page_allocation.h), never the program's allocator.
//
// Lock-free: a slot's key goes from empty to an address (compare-and-swap), and from an
// address to a tombstone on removal; a tombstone is reused by a later insertion, never made
// empty again, so a lookup walks a probe sequence until an empty slot or the probe limit.
// Insertions and removals are rare (sampled allocations only). Beside the table, a filter of
// per-bucket counts of the live keys (buckets of 256-byte granules) tells most frees of unsampled
// memory, with one load, that their address is not in the set (MightContain).
//
// Contract: an address is inserted by the thread that allocated it and removed by the one
// that frees it, after the allocation returned (so never both at once for one address). A key
// inserted again while present (its free went through a path the hooks do not see) has its
// estimate replaced.
//
// Thread safety: thread-safe. Async-signal safety: async-signal-safe (atomics; Init maps pages
// with a raw system call). No allocation except Init's pages.
#ifndef STRATA_BASE_INTERNAL_LIVE_ALLOCATION_SET_H_
#define STRATA_BASE_INTERNAL_LIVE_ALLOCATION_SET_H_

#include <sys/mman.h>
#include <sys/syscall.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "platform/page_allocation.h"
#include "platform/raw_syscall.h"

namespace strata {
namespace base_internal {

class LiveAllocationSet {
 public:
  static constexpr size_t kDefaultSlots = size_t{1} << 18;  // 4 MiB of slots.
  static constexpr size_t kProbeLimit = 64;

  // The filter: one count per bucket of 256-byte granules, 64 KiB in all, so that the frees of
  // a program, which mostly touch memory it touched recently, mostly hit cached lines, while
  // a live sampled block makes only the frees of its own granule probe the table (with 4 KiB
  // granules, a malloc/free loop on the page of one long-lived sampled block probed at every
  // free: +3 ns per pair).
  static constexpr size_t kFilterCounts = size_t{1} << 16;

  // Maps the table (`slots`, a power of 2) and the filter. False when the kernel refuses;
  // the set then stays empty and every Insert fails. Call once, before use.
  bool Init(size_t slots = kDefaultSlots) {
    // A table of 2 MiB or more on 2 MiB pages where the kernel gives them (transparent huge
    // pages, asked with madvise; mapped 2 MiB more to align it): its slots are probed at
    // random, a TLB miss each on 4 KiB pages. Measured (alloc_bench_program at 64 KiB, perf):
    // insertions ~38 % cheaper. The table is then resident in 2 MiB steps, not page by page.
    constexpr size_t kHugePage = size_t{2} << 20;
    const size_t table_bytes = slots * sizeof(Slot);
    const bool huge = table_bytes >= kHugePage;
    void* memory = AllocatePages(table_bytes + kFilterCounts + (huge ? kHugePage : 0));
    if (memory == nullptr) return false;
    uintptr_t aligned = reinterpret_cast<uintptr_t>(memory);
    if (huge) {
      aligned = (aligned + kHugePage - 1) & ~(kHugePage - 1);
      RawSyscall(SYS_madvise, static_cast<long>(aligned), static_cast<long>(table_bytes),
                 MADV_HUGEPAGE);
    }
    slots_ = reinterpret_cast<Slot*>(aligned);
    filter_ = reinterpret_cast<std::atomic<uint8_t>*>(slots_ + slots);
    slot_bits_ = Log2(slots);
    return true;
  }
  bool initialized() const { return slots_ != nullptr; }
  size_t capacity() const { return slots_ ? size_t{1} << slot_bits_ : 0; }

  // False when no slot is free on the address's probe sequence (the set is full there).
  bool Insert(uint64_t address, int64_t estimate) {
    if (slots_ == nullptr || address <= kTombstone) return false;
    // A slot another thread claims first is looked for again (a few times at most).
    for (int attempt = 0; attempt < 4; ++attempt) {
      switch (TryInsert(address, estimate)) {
        case kInserted:
          return true;
        case kFull:
          return false;
        case kRaced:
          break;
      }
    }
    return false;
  }

  // True with *estimate set when `address` was in the set (it is removed).
  bool Remove(uint64_t address, int64_t* estimate) {
    if (slots_ == nullptr || address <= kTombstone) return false;
    const size_t mask = (size_t{1} << slot_bits_) - 1;
    size_t index = Hash(address) >> (64 - slot_bits_);
    for (size_t probe = 0; probe < kProbeLimit; ++probe, index = (index + 1) & mask) {
      Slot& slot = slots_[index];
      uint64_t key = slot.key.load(std::memory_order_acquire);
      if (key == kEmpty) return false;
      if (key != address) continue;
      *estimate = slot.estimate.load(std::memory_order_relaxed);
      if (!slot.key.compare_exchange_strong(key, kTombstone, std::memory_order_acq_rel)) {
        return false;
      }
      RemoveFromFilter(address);
      return true;
    }
    return false;
  }

  // Starts loading the lines Insert(address) and Remove(address) will touch first (the
  // address's first slot and its filter count), so that they arrive while the caller does
  // something else (the stack walk of a sampled allocation).
  void Prefetch(uint64_t address) const {
    if (slots_ == nullptr) return;
    __builtin_prefetch(&slots_[Hash(address) >> (64 - slot_bits_)], 1);
    __builtin_prefetch(&FilterCount(address), 1);
  }

  // False when `address` is certainly not in the set: one relaxed load.
  bool MightContain(uint64_t address) const {
    return slots_ != nullptr && FilterCount(address).load(std::memory_order_relaxed) != 0;
  }

 private:
  static constexpr uint64_t kEmpty = 0;
  static constexpr uint64_t kTombstone = 1;
  struct Slot {
    std::atomic<uint64_t> key;
    std::atomic<int64_t> estimate;
  };

  enum InsertResult { kInserted, kFull, kRaced };
  InsertResult TryInsert(uint64_t address, int64_t estimate) {
    const size_t mask = (size_t{1} << slot_bits_) - 1;
    size_t index = Hash(address) >> (64 - slot_bits_);
    Slot* reusable = nullptr;
    // No live key in the address's filter bucket: the address is not in the set, so the first
    // tombstone or empty slot will do (without this, every insertion walked to the end of its
    // probe sequence, through the tombstones that removals leave: most of an insertion's time).
    const bool may_be_present = FilterCount(address).load(std::memory_order_relaxed) != 0;
    for (size_t probe = 0; probe < kProbeLimit; ++probe, index = (index + 1) & mask) {
      Slot& slot = slots_[index];
      const uint64_t key = slot.key.load(std::memory_order_acquire);
      if (key == kTombstone && !may_be_present) {
        return Claim(slot, kTombstone, address, estimate) ? kInserted : kRaced;
      }
      if (key == address) {  // Still here: its free was not seen.
        slot.estimate.store(estimate, std::memory_order_relaxed);
        return kInserted;
      }
      if (key == kTombstone && reusable == nullptr) reusable = &slot;
      if (key != kEmpty) continue;
      // The end of the sequence: the address is not in the set. The first reusable slot,
      // else this empty one.
      if (reusable != nullptr) return Claim(*reusable, kTombstone, address, estimate) ? kInserted : kRaced;
      return Claim(slot, kEmpty, address, estimate) ? kInserted : kRaced;
    }
    if (reusable == nullptr) return kFull;
    return Claim(*reusable, kTombstone, address, estimate) ? kInserted : kRaced;
  }

  static uint64_t Hash(uint64_t address) { return (address >> 4) * 0x9E3779B97F4A7C15ull; }
  static uint32_t Log2(size_t n) {
    uint32_t bits = 0;
    while ((size_t{1} << bits) < n) ++bits;
    return bits;
  }
  std::atomic<uint8_t>& FilterCount(uint64_t address) const {
    return filter_[((address >> 8) * 0xD6E8FEB86659FD93ull) >> (64 - 16)];
  }
  // A count that reaches 255 stays there (its bucket always says "maybe").
  void AddToFilter(uint64_t address) {
    std::atomic<uint8_t>& count = FilterCount(address);
    uint8_t value = count.load(std::memory_order_relaxed);
    while (value != 255 && !count.compare_exchange_weak(value, static_cast<uint8_t>(value + 1),
                                                        std::memory_order_relaxed)) {
    }
  }
  void RemoveFromFilter(uint64_t address) {
    std::atomic<uint8_t>& count = FilterCount(address);
    uint8_t value = count.load(std::memory_order_relaxed);
    while (value != 255 && value != 0 &&
           !count.compare_exchange_weak(value, static_cast<uint8_t>(value - 1),
                                        std::memory_order_relaxed)) {
    }
  }
  bool Claim(Slot& slot, uint64_t expected, uint64_t address, int64_t estimate) {
    // Counted first: a free of this address (later, by contract) then sees it.
    AddToFilter(address);
    if (slot.key.compare_exchange_strong(expected, address, std::memory_order_acq_rel)) {
      // Read by the free, which comes after this allocation returned.
      slot.estimate.store(estimate, std::memory_order_relaxed);
      return true;
    }
    RemoveFromFilter(address);
    return false;
  }

  Slot* slots_ = nullptr;
  std::atomic<uint8_t>* filter_ = nullptr;
  uint32_t slot_bits_ = 0;
};

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_LIVE_ALLOCATION_SET_H_
