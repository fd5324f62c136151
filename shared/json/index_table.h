// IndexTable: the hash index behind UniqueStrings and UniqueStacks. An open-addressing
// (linear probing) set of indexes into a vector the caller owns; the caller supplies each
// key's hash and an equality test against the stored index. Flat arrays, no per-entry
// allocation: de-duplicating millions of stacks is dominated by this table, and
// std::unordered_map was 3-4x slower (node allocation, identity hash of integers).
//
// Thread safety: none. Not async-signal-safe (allocates when growing).
#ifndef STRATA_SHARED_JSON_INDEX_TABLE_H_
#define STRATA_SHARED_JSON_INDEX_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace strata {
namespace json_internal {

// A 64-bit finalizer (from MurmurHash3 / splitmix64): spreads every input bit, so that
// structured integer keys (prefix << 32 | frame, addresses) work with power-of-two tables.
__attribute__((always_inline)) inline uint64_t MixHash(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// A hash of `size` bytes at `bytes` (may be null when size is 0), a word at a time and
// inline: the keys hashed here (strings, frame lists) are mostly short, and std::hash's
// out-of-line Murmur cost more than the table itself.
__attribute__((always_inline)) inline uint64_t HashBytes(const void* bytes, size_t size) {
  const char* data = static_cast<const char*>(bytes);
  uint64_t h = MixHash(size + 0x9e3779b97f4a7c15ULL);
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, data + i, 8);
    h = (h ^ word) * 0xff51afd7ed558ccdULL;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  if (size > i) std::memcpy(&tail, data + i, size - i);
  return MixHash(h ^ tail);
}

class IndexTable {
 public:
  // The index whose key equals the one described by (hash, equals); if there is none,
  // records `new_index` for this hash and returns it. `equals(index)` compares the caller's
  // key with the key stored at `index`.
  template <typename Equals>
  uint32_t FindOrInsert(uint64_t hash, uint32_t new_index, const Equals& equals) {
    if ((size_ + 1) * 10 > slots_.size() * 7) Grow();
    const uint32_t h = static_cast<uint32_t>(hash);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (slot.index_plus_one == 0) {
        slot.hash = h;
        slot.index_plus_one = new_index + 1;
        ++size_;
        return new_index;
      }
      if (slot.hash == h && equals(slot.index_plus_one - 1)) return slot.index_plus_one - 1;
    }
  }

  // The index whose key equals the one described by (hash, equals), or `absent` when there
  // is none. Inserts nothing.
  template <typename Equals>
  uint32_t Find(uint64_t hash, uint32_t absent, const Equals& equals) const {
    if (slots_.empty()) return absent;
    const uint32_t h = static_cast<uint32_t>(hash);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.index_plus_one == 0) return absent;
      if (slot.hash == h && equals(slot.index_plus_one - 1)) return slot.index_plus_one - 1;
    }
  }

  size_t size() const { return size_; }

 private:
  struct Slot {
    uint32_t hash;            // Low 32 bits of the key's hash; also picks the bucket.
    uint32_t index_plus_one;  // 0 = empty.
  };

  void Grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{0, 0});
    mask_ = slots_.size() - 1;
    for (const Slot& slot : old) {
      if (slot.index_plus_one == 0) continue;
      size_t i = slot.hash & mask_;
      while (slots_[i].index_plus_one != 0) i = (i + 1) & mask_;
      slots_[i] = slot;
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace json_internal
}  // namespace strata

#endif  // STRATA_SHARED_JSON_INDEX_TABLE_H_
