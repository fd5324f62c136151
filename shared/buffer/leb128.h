// Unsigned LEB128 ("little-endian base 128") encoding of unsigned integers: 7 bits per byte,
// high bit set on every byte but the last. 0..127 take one byte, up to 16383 two, and so on.
// The buffer uses it for block sizes and string lengths, which are nearly always small.
//
// Thread safety: pure functions. Async-signal safety: all async-signal-safe.
#ifndef STRATA_SHARED_BUFFER_LEB128_H_
#define STRATA_SHARED_BUFFER_LEB128_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace strata {

// Most bytes an unsigned T can take once encoded.
template <typename T>
constexpr size_t ULEB128MaxSize() {
  static_assert(std::is_unsigned_v<T>, "ULEB128 is for unsigned integers");
  return (sizeof(T) * 8 + 6) / 7;
}

// Bytes that `value` takes once encoded.
template <typename T>
constexpr size_t ULEB128Size(T value) {
  static_assert(std::is_unsigned_v<T>, "ULEB128 is for unsigned integers");
  size_t size = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++size;
  }
  return size;
}

// Writes `value` through the byte iterator `it` (anything with `*it++ = uint8_t`).
template <typename T, typename Iterator>
constexpr void WriteULEB128(T value, Iterator& it) {
  static_assert(std::is_unsigned_v<T>, "ULEB128 is for unsigned integers");
  while (value >= 0x80) {
    *it++ = static_cast<uint8_t>(value | 0x80);
    value >>= 7;
  }
  *it++ = static_cast<uint8_t>(value);
}

// Reads a T from trusted input (data this process wrote itself) through `it`.
// Extra high bits that do not fit in T are dropped.
template <typename T, typename Iterator>
constexpr T ReadULEB128(Iterator& it) {
  static_assert(std::is_unsigned_v<T>, "ULEB128 is for unsigned integers");
  T value = 0;
  unsigned shift = 0;
  for (size_t i = 0; i < ULEB128MaxSize<T>(); ++i) {
    const uint8_t byte = static_cast<uint8_t>(*it++);
    value |= static_cast<T>(static_cast<T>(byte & 0x7f) << shift);
    if ((byte & 0x80) == 0) break;
    shift += 7;
  }
  return value;
}

// Reads a T from untrusted input in [*cursor, end). Returns false, leaving *cursor
// unchanged, when the input ends early or encodes a number that does not fit in T.
template <typename T>
bool TryReadULEB128(const uint8_t** cursor, const uint8_t* end, T* out) {
  static_assert(std::is_unsigned_v<T>, "ULEB128 is for unsigned integers");
  const uint8_t* p = *cursor;
  T value = 0;
  unsigned shift = 0;
  for (size_t i = 0; i < ULEB128MaxSize<T>(); ++i) {
    if (p == end) return false;
    const uint8_t byte = *p++;
    const T bits = static_cast<T>(byte & 0x7f);
    const unsigned room = static_cast<unsigned>(sizeof(T) * 8) - shift;  // Bits still free.
    if (room < 7 && (bits >> room) != 0) return false;  // Bits beyond T's width.
    value |= static_cast<T>(bits << shift);
    if ((byte & 0x80) == 0) {
      *cursor = p;
      *out = value;
      return true;
    }
    shift += 7;
  }
  return false;  // Too many continuation bytes.
}

}  // namespace strata

#endif  // STRATA_SHARED_BUFFER_LEB128_H_
