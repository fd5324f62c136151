// Global positions in a chunked buffer.
//
// Every byte a ChunkedBuffer ever holds has a global index: chunks are laid end to end, each
// starting where the previous one ended, so an index stays meaningful after older chunks are
// destroyed (it then simply points before the buffer's range start). Index 0 is never used,
// so a default BlockIndex means "no block".
//
// BufferIndex is any position (inside blocks too). BlockIndex is a position known to be the
// start of a block: only the buffer creates them (when reserving a block, or when a reader
// walks blocks), so holding one is a promise that reading from it is meaningful.
//
// Thread safety: value types. Async-signal safety: yes.
#ifndef STRATA_SHARED_BUFFER_BLOCK_INDEX_H_
#define STRATA_SHARED_BUFFER_BLOCK_INDEX_H_

#include <cstdint>

namespace strata {

using BufferIndex = uint64_t;

// The global index of the first byte of the first chunk of every buffer.
inline constexpr BufferIndex kFirstBufferIndex = 1;

class BlockIndex {
 public:
  constexpr BlockIndex() = default;  // "No block".

  constexpr bool IsNull() const { return index_ == 0; }
  constexpr explicit operator bool() const { return index_ != 0; }
  constexpr BufferIndex ToBufferIndex() const { return index_; }

  // Only for code that knows `index` starts a block (the buffer itself, deserializers of a
  // BlockIndex that was serialized from a real one, and tests).
  static constexpr BlockIndex FromTrustedBufferIndex(BufferIndex index) {
    return BlockIndex(index);
  }

  constexpr bool operator==(BlockIndex o) const { return index_ == o.index_; }
  constexpr bool operator!=(BlockIndex o) const { return index_ != o.index_; }
  constexpr bool operator<(BlockIndex o) const { return index_ < o.index_; }
  constexpr bool operator<=(BlockIndex o) const { return index_ <= o.index_; }
  constexpr bool operator>(BlockIndex o) const { return index_ > o.index_; }
  constexpr bool operator>=(BlockIndex o) const { return index_ >= o.index_; }

 private:
  constexpr explicit BlockIndex(BufferIndex index) : index_(index) {}
  BufferIndex index_ = 0;
};

}  // namespace strata

#endif  // STRATA_SHARED_BUFFER_BLOCK_INDEX_H_
