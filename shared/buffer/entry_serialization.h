// Entry writing and reading: EntryWriter, EntryReader, and the Serializer / Deserializer
// specialisations that turn C++ values into entry bytes and back
// (Firefox: ProfileBufferEntryWriter / ProfileBufferEntryReader).
//
// An entry's bytes may be split in two spans (a block that straddles two chunks); the writer
// and reader hide that. Writers are created by ChunkedBuffer::ReserveAndPut() with exactly
// the entry's size; readers by the buffer's read functions, or directly over bytes.
//
// Encodings (all little-endian, as the machine):
//   integers, floats, enums      raw bytes of the value (enums as their underlying type)
//   bool                         one byte, 0 or 1
//   TimeStamp, TimeDuration      int64 nanoseconds; ProcessId, ThreadId: int32
//   BlockIndex                   uint64 global index
//   std::string, string_view     ULEB128(length << 1) then the bytes
//   ProfilerString literal       ULEB128(length << 1 | 1) then the 8-byte address: literals
//                                are only read back in the process that wrote them
//   span / vector<T>             ULEB128(count) then each element
//   pair, tuple                  each element in order
//   optional<T>                  bool, then T if present
//   variant<Ts...>               ULEB128(alternative index) then the alternative
//
// To make a type serializable, specialise `Serializer<T>` with
//   static size_t Bytes(const T&);  static void Write(EntryWriter&, const T&);
// and `Deserializer<T>` with
//   static void ReadInto(EntryReader&, T&);  (Read(EntryReader&) is derived from it).
//
// Reading never runs past the entry: a read that would is refused, the reader's Failed()
// turns true and the destination gets zero bytes. Untrusted readers (SetUntrusted()) also
// refuse literal-string addresses, so bytes from elsewhere can never make us dereference a
// pointer.
//
// Thread safety: writers and readers are single-thread objects, used inside the buffer's
// callbacks. Async-signal safety: writing and reading raw values do not allocate; strings,
// vectors and variants read into owning types allocate.
#ifndef STRATA_SHARED_BUFFER_ENTRY_SERIALIZATION_H_
#define STRATA_SHARED_BUFFER_ENTRY_SERIALIZATION_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/types/span.h"
#include "platform/check.h"
#include "platform/process_thread_ids.h"
#include "platform/time_stamp.h"
#include "shared/buffer/block_index.h"
#include "shared/buffer/leb128.h"

namespace strata {

class EntryWriter;
class EntryReader;

template <typename T, typename Enable = void>
struct Serializer;  // Specialise for each serializable type.
template <typename T, typename Enable = void>
struct Deserializer;  // Specialise for each deserializable type.

// Bytes needed for all `values` together.
template <typename... Ts>
size_t SumBytes(const Ts&... values) {
  return (size_t{0} + ... + Serializer<Ts>::Bytes(values));
}

// ---------------------------------------------------------------------------------------
// EntryWriter

class EntryWriter {
 public:
  using Byte = uint8_t;

  // Writes into [first, first + first_bytes) then [second, second + second_bytes);
  // `block_index` is the block holding the entry.
  EntryWriter(Byte* first, size_t first_bytes, Byte* second, size_t second_bytes,
              BlockIndex block_index = BlockIndex())
      : cursor_(first),
        end_(first + first_bytes),
        second_(second),
        second_end_(second + second_bytes),
        block_index_(block_index) {}

  // Bytes still to write. The entry must be filled exactly.
  size_t RemainingBytes() const {
    return static_cast<size_t>(end_ - cursor_) + static_cast<size_t>(second_end_ - second_);
  }
  // The block holding this entry (to refer to it later, e.g. from another entry).
  BlockIndex CurrentBlockIndex() const { return block_index_; }

  void WriteBytes(const void* source, size_t bytes) {
    STRATA_DCHECK(bytes <= RemainingBytes(), "entry write past the reserved size");
    if (__builtin_expect(bytes <= static_cast<size_t>(end_ - cursor_), 1)) {
      // memcpy with a null pointer is undefined even for 0 bytes (empty vectors and
      // string_views have null data()).
      if (bytes != 0) std::memcpy(cursor_, source, bytes);
      cursor_ += bytes;
      return;
    }
    WriteBytesAcrossSpans(static_cast<const Byte*>(source), bytes);
  }

  template <typename T>
  void WriteULEB128(T value) {
    // Straight into the span when the number surely fits (the usual case: small numbers,
    // mid-entry), so that no variable-length memcpy call is made.
    const size_t room = static_cast<size_t>(end_ - cursor_);
    if (__builtin_expect(room >= ULEB128MaxSize<T>() || ULEB128Size(value) <= room, 1)) {
      strata::WriteULEB128(value, cursor_);
      return;
    }
    Byte bytes[ULEB128MaxSize<T>()];
    Byte* end = bytes;
    strata::WriteULEB128(value, end);
    WriteBytes(bytes, static_cast<size_t>(end - bytes));
  }

  template <typename T>
  void WriteObject(const T& value) {
    Serializer<T>::Write(*this, value);
  }

  // When the next `bytes` bytes lie in the current span: returns where they start and moves
  // past them (the caller must then write exactly them). Otherwise null, nothing moves. For
  // serializers of fixed-layout records that write with plain stores.
  Byte* TakeContiguous(size_t bytes) {
    if (__builtin_expect(bytes > static_cast<size_t>(end_ - cursor_), 0)) return nullptr;
    Byte* start = cursor_;
    cursor_ += bytes;
    return start;
  }

  template <typename... Ts>
  void WriteObjects(const Ts&... values) {
    (WriteObject(values), ...);
  }

 private:
  void WriteBytesAcrossSpans(const Byte* source, size_t bytes) {
    const size_t here = static_cast<size_t>(end_ - cursor_);
    if (here != 0) std::memcpy(cursor_, source, here);
    cursor_ = second_;
    end_ = second_end_;
    second_ = second_end_;
    const size_t rest = bytes - here;
    STRATA_CHECK(rest <= static_cast<size_t>(end_ - cursor_), "entry write past the reserved size");
    std::memcpy(cursor_, source + here, rest);
    cursor_ += rest;
  }

  Byte* cursor_;
  Byte* end_;
  Byte* second_;
  Byte* second_end_;
  BlockIndex block_index_;
};

// ---------------------------------------------------------------------------------------
// EntryReader

// Turns a literal-string address met by an untrusted reader into characters of the reading
// process: entries recovered from a dead process's flight recorder file name its string
// literals by their addresses there (shared/flight/flight_recovery.h reads them from the
// library files). Returns `length` characters that stay valid as long as the resolver, or
// null (the read then fails). Thread safety: as the implementation says.
class LiteralResolver {
 public:
  virtual const char* Resolve(uint64_t address, size_t length) const = 0;

 protected:
  ~LiteralResolver() = default;
};

class EntryReader {
 public:
  using Byte = uint8_t;

  // Reads [first, first + first_bytes) then [second, second + second_bytes). Indexes as for
  // EntryWriter; `next_block_index` is where the following block starts.
  EntryReader(const Byte* first, size_t first_bytes, const Byte* second, size_t second_bytes,
              BlockIndex block_index = BlockIndex(), BlockIndex next_block_index = BlockIndex())
      : cursor_(first),
        end_(first + first_bytes),
        second_(second),
        second_end_(second + second_bytes),
        block_index_(block_index),
        next_block_index_(next_block_index) {}

  // A reader over one contiguous run of bytes (tests, fuzzing, IPC payloads).
  static EntryReader OverBytes(absl::Span<const Byte> bytes) {
    return EntryReader(bytes.data(), bytes.size(), nullptr, 0);
  }

  size_t RemainingBytes() const {
    return static_cast<size_t>(end_ - cursor_) + static_cast<size_t>(second_end_ - second_);
  }
  BlockIndex CurrentBlockIndex() const { return block_index_; }
  BlockIndex NextBlockIndex() const { return next_block_index_; }

  // True once any read asked for more bytes than the entry had, or met an impossible
  // encoding, or something an untrusted reader refuses. Values read after a failure are
  // meaningless (but reading stays within the entry).
  bool Failed() const { return failed_; }
  void SetFailed() { failed_ = true; }

  // Entries from outside this process (files, IPC, fuzzers): literal-string addresses are
  // refused.
  void SetUntrusted() { trusted_ = false; }
  bool IsTrusted() const { return trusted_; }
  // Untrusted, and literal-string addresses are resolved by `resolver` (which must outlive
  // the reader and its copies) instead of refused.
  void SetUntrustedWithResolver(const LiteralResolver* resolver) {
    trusted_ = false;
    resolver_ = resolver;
  }
  const LiteralResolver* Resolver() const { return resolver_; }

  // Where the remaining bytes are when they lie in one piece (the entry does not continue
  // in a second span from here), else null. Valid as long as the bytes read are.
  const Byte* ContiguousRemaining() const { return second_ == second_end_ ? cursor_ : nullptr; }

  // Copies `bytes` bytes out; on overrun copies nothing, zero-fills and fails.
  // Always inlined: the profile writer reads every entry through it, and its file is compiled
  // for size (.bazelrc), where GCC would otherwise call it.
  __attribute__((always_inline)) void ReadBytes(void* destination, size_t bytes) {
    if (__builtin_expect(bytes <= static_cast<size_t>(end_ - cursor_), 1)) {
      if (bytes != 0) std::memcpy(destination, cursor_, bytes);  // (null data(): see WriteBytes)
      cursor_ += bytes;
      return;
    }
    ReadBytesAcrossSpans(static_cast<Byte*>(destination), bytes);
  }

  // Skips `bytes` bytes (fails on overrun).
  void Skip(size_t bytes);

  // Reads the next byte without consuming it (0 and failure at the end).
  Byte PeekByte() {
    if (cursor_ != end_) return *cursor_;
    if (second_ != second_end_) return *second_;
    failed_ = true;
    return 0;
  }

  template <typename T>
  __attribute__((always_inline)) T ReadULEB128() {
    T value = 0;
    unsigned shift = 0;
    for (size_t i = 0; i < ULEB128MaxSize<T>(); ++i) {
      Byte byte = 0;
      ReadBytes(&byte, 1);
      if (failed_) return 0;
      const unsigned room = static_cast<unsigned>(sizeof(T) * 8) - shift;
      if (room < 7 && ((byte & 0x7f) >> room) != 0) {
        failed_ = true;
        return 0;
      }
      value |= static_cast<T>(static_cast<T>(byte & 0x7f) << shift);
      if ((byte & 0x80) == 0) return value;
      shift += 7;
    }
    failed_ = true;  // Too many continuation bytes.
    return 0;
  }

  template <typename T>
  void ReadIntoObject(T& destination) {
    Deserializer<T>::ReadInto(*this, destination);
  }
  template <typename... Ts>
  void ReadIntoObjects(Ts&... destinations) {
    (ReadIntoObject(destinations), ...);
  }
  template <typename T>
  T ReadObject() {
    return Deserializer<T>::Read(*this);
  }

 private:
  void ReadBytesAcrossSpans(Byte* destination, size_t bytes);

  const Byte* cursor_;
  const Byte* end_;
  const Byte* second_;
  const Byte* second_end_;
  BlockIndex block_index_;
  BlockIndex next_block_index_;
  bool failed_ = false;
  bool trusted_ = true;
  const LiteralResolver* resolver_ = nullptr;
};

inline void EntryReader::ReadBytesAcrossSpans(Byte* destination, size_t bytes) {
  if (failed_ || bytes > RemainingBytes()) {
    failed_ = true;
    if (bytes != 0) std::memset(destination, 0, bytes);
    return;
  }
  // Copy what is left of this span, then continue in the second one (written as a loop so
  // that the optimiser's object-size analysis does not see a copy into a zero-sized rest).
  while (bytes != 0) {
    if (cursor_ == end_) {
      cursor_ = second_;
      end_ = second_end_;
      second_ = second_end_;
    }
    const size_t available = static_cast<size_t>(end_ - cursor_);
    const size_t n = bytes < available ? bytes : available;
    for (size_t i = 0; i < n; ++i) destination[i] = cursor_[i];
    destination += n;
    cursor_ += n;
    bytes -= n;
  }
}

inline void EntryReader::Skip(size_t bytes) {
  if (bytes > RemainingBytes()) {
    failed_ = true;
    return;
  }
  const size_t here = static_cast<size_t>(end_ - cursor_);
  if (bytes <= here) {
    cursor_ += bytes;
    return;
  }
  cursor_ = second_ + (bytes - here);
  end_ = second_end_;
  second_ = second_end_;
}

// Derived Read() for every Deserializer that has ReadInto().
template <typename T>
struct DeserializerBase {
  static T Read(EntryReader& reader) {
    T value{};
    Deserializer<T>::ReadInto(reader, value);
    return value;
  }
};

// ---------------------------------------------------------------------------------------
// Raw values: arithmetic types (but bool) and enums.

template <typename T>
inline constexpr bool kIsRawSerializable =
    (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) || std::is_enum_v<T>;

template <typename T>
struct Serializer<T, std::enable_if_t<kIsRawSerializable<T>>> {
  static constexpr size_t Bytes(const T&) { return sizeof(T); }
  static void Write(EntryWriter& writer, const T& value) { writer.WriteBytes(&value, sizeof(T)); }
};
template <typename T>
struct Deserializer<T, std::enable_if_t<kIsRawSerializable<T>>> : DeserializerBase<T> {
  static void ReadInto(EntryReader& reader, T& value) { reader.ReadBytes(&value, sizeof(T)); }
};

template <>
struct Serializer<bool> {
  static constexpr size_t Bytes(const bool&) { return 1; }
  static void Write(EntryWriter& writer, const bool& value) {
    const uint8_t byte = value ? 1 : 0;
    writer.WriteBytes(&byte, 1);
  }
};
template <>
struct Deserializer<bool> : DeserializerBase<bool> {
  static void ReadInto(EntryReader& reader, bool& value) {
    uint8_t byte = 0;
    reader.ReadBytes(&byte, 1);
    if (byte > 1) reader.SetFailed();
    value = byte == 1;
  }
};

// ---------------------------------------------------------------------------------------
// Platform and buffer value types.

// Serializes a type through one of its integer members.
template <typename T, typename Number, Number (T::*kGet)() const, T (*kMake)(Number)>
struct NumberBackedSerialization {
  struct Writer {
    static constexpr size_t Bytes(const T&) { return sizeof(Number); }
    static void Write(EntryWriter& writer, const T& value) {
      writer.WriteObject<Number>((value.*kGet)());
    }
  };
  struct Reader : DeserializerBase<T> {
    static void ReadInto(EntryReader& reader, T& value) {
      value = kMake(reader.ReadObject<Number>());
    }
  };
};

using TimeStampSerialization =
    NumberBackedSerialization<TimeStamp, int64_t, &TimeStamp::ToNanoseconds,
                              &TimeStamp::FromNanoseconds>;
template <>
struct Serializer<TimeStamp> : TimeStampSerialization::Writer {};
template <>
struct Deserializer<TimeStamp> : TimeStampSerialization::Reader {};

using TimeDurationSerialization =
    NumberBackedSerialization<TimeDuration, int64_t, &TimeDuration::ToNanoseconds,
                              &TimeDuration::FromNanoseconds>;
template <>
struct Serializer<TimeDuration> : TimeDurationSerialization::Writer {};
template <>
struct Deserializer<TimeDuration> : TimeDurationSerialization::Reader {};

using ProcessIdSerialization =
    NumberBackedSerialization<ProcessId, ProcessId::NumberType, &ProcessId::ToNumber,
                              &ProcessId::FromNumber>;
template <>
struct Serializer<ProcessId> : ProcessIdSerialization::Writer {};
template <>
struct Deserializer<ProcessId> : ProcessIdSerialization::Reader {};

using ThreadIdSerialization =
    NumberBackedSerialization<ThreadId, ThreadId::NumberType, &ThreadId::ToNumber,
                              &ThreadId::FromNumber>;
template <>
struct Serializer<ThreadId> : ThreadIdSerialization::Writer {};
template <>
struct Deserializer<ThreadId> : ThreadIdSerialization::Reader {};

using BlockIndexSerialization =
    NumberBackedSerialization<BlockIndex, BufferIndex, &BlockIndex::ToBufferIndex,
                              &BlockIndex::FromTrustedBufferIndex>;
template <>
struct Serializer<BlockIndex> : BlockIndexSerialization::Writer {};
template <>
struct Deserializer<BlockIndex> : BlockIndexSerialization::Reader {};

// ---------------------------------------------------------------------------------------
// Strings.

// A string to record: either a literal with static storage (only its address and length
// are stored: cheap, and readable only in this process) or a dynamic string (copied in).
// Read back, it owns a copy of a dynamic string.
class ProfilerString {
 public:
  ProfilerString() = default;
  // A literal: "name" in the source. The array must have static storage duration.
  template <size_t N>
  static ProfilerString Literal(const char (&literal)[N]) {
    return ProfilerString(literal, N - 1, true);
  }
  // A literal given by pointer and length; the caller guarantees static storage duration.
  static ProfilerString LiteralFromPointer(const char* chars, size_t length) {
    return ProfilerString(chars, length, true);
  }
  // A dynamic string, copied when serialized (and owned when read back).
  static ProfilerString Dynamic(std::string_view text) {
    ProfilerString s;
    s.owned_.assign(text.data(), text.size());
    s.chars_ = nullptr;
    s.length_ = text.size();
    return s;
  }

  bool IsLiteral() const { return literal_; }
  std::string_view View() const {
    return literal_ ? std::string_view(chars_, length_) : std::string_view(owned_);
  }

 private:
  ProfilerString(const char* chars, size_t length, bool literal)
      : chars_(chars), length_(length), literal_(literal) {}
  friend struct Deserializer<ProfilerString>;

  const char* chars_ = nullptr;  // Literal only.
  size_t length_ = 0;
  bool literal_ = false;
  std::string owned_;  // Dynamic only.
};

// Writing and reading of the string encodings, shared by every string type.
struct StringEncoding {
  static size_t DynamicBytes(size_t length) { return ULEB128Size(uint64_t{length} << 1) + length; }
  static size_t LiteralBytes(size_t length) {
    return ULEB128Size((uint64_t{length} << 1) | 1) + sizeof(const char*);
  }
  static void WriteDynamic(EntryWriter& writer, std::string_view text) {
    writer.WriteULEB128<uint64_t>(uint64_t{text.size()} << 1);
    writer.WriteBytes(text.data(), text.size());
  }
  static void WriteLiteral(EntryWriter& writer, const char* chars, size_t length) {
    writer.WriteULEB128<uint64_t>((uint64_t{length} << 1) | 1);
    writer.WriteBytes(&chars, sizeof(chars));
  }
  // Reads either encoding; `on_literal(chars, length)` or `on_dynamic(length)` (which must
  // then read `length` bytes). Fails the reader on nonsense.
  template <typename OnLiteral, typename OnDynamic>
  static void Read(EntryReader& reader, OnLiteral&& on_literal, OnDynamic&& on_dynamic) {
    const uint64_t header = reader.ReadULEB128<uint64_t>();
    const uint64_t length = header >> 1;
    if (reader.Failed()) return;
    if (header & 1) {
      const char* chars = nullptr;
      reader.ReadBytes(&chars, sizeof(chars));
      if (!reader.IsTrusted() && !reader.Failed()) {
        const LiteralResolver* resolver = reader.Resolver();
        chars = resolver ? resolver->Resolve(reinterpret_cast<uintptr_t>(chars),
                                             static_cast<size_t>(length))
                         : nullptr;
        if (chars == nullptr) reader.SetFailed();
      }
      if (reader.Failed()) return;
      on_literal(chars, static_cast<size_t>(length));
      return;
    }
    if (length > reader.RemainingBytes()) {
      reader.SetFailed();
      return;
    }
    on_dynamic(static_cast<size_t>(length));
  }
};

template <>
struct Serializer<std::string_view> {
  static size_t Bytes(const std::string_view& s) { return StringEncoding::DynamicBytes(s.size()); }
  static void Write(EntryWriter& writer, const std::string_view& s) {
    StringEncoding::WriteDynamic(writer, s);
  }
};
template <>
struct Serializer<std::string> {
  static size_t Bytes(const std::string& s) { return StringEncoding::DynamicBytes(s.size()); }
  static void Write(EntryWriter& writer, const std::string& s) {
    StringEncoding::WriteDynamic(writer, s);
  }
};
template <>
struct Deserializer<std::string> : DeserializerBase<std::string> {
  static void ReadInto(EntryReader& reader, std::string& s) {
    StringEncoding::Read(
        reader, [&](const char* chars, size_t length) { s.assign(chars, length); },
        [&](size_t length) {
          s.resize(length);
          reader.ReadBytes(s.data(), length);
        });
  }
};
template <>
struct Serializer<ProfilerString> {
  static size_t Bytes(const ProfilerString& s) {
    return s.IsLiteral() ? StringEncoding::LiteralBytes(s.View().size())
                         : StringEncoding::DynamicBytes(s.View().size());
  }
  static void Write(EntryWriter& writer, const ProfilerString& s) {
    if (s.IsLiteral()) {
      StringEncoding::WriteLiteral(writer, s.View().data(), s.View().size());
    } else {
      StringEncoding::WriteDynamic(writer, s.View());
    }
  }
};
template <>
struct Deserializer<ProfilerString> : DeserializerBase<ProfilerString> {
  static void ReadInto(EntryReader& reader, ProfilerString& s) {
    s = ProfilerString();
    StringEncoding::Read(
        reader,
        [&](const char* chars, size_t length) { s = ProfilerString::LiteralFromPointer(chars, length); },
        [&](size_t length) {
          s.owned_.resize(length);
          reader.ReadBytes(s.owned_.data(), length);
          s.length_ = length;
        });
  }
};

// ---------------------------------------------------------------------------------------
// Sequences: absl::Span<const T> and std::vector<T> write the same way; read as vector.

template <typename T>
struct SequenceEncoding {
  static size_t Bytes(absl::Span<const T> items) {
    size_t bytes = ULEB128Size(uint64_t{items.size()});
    if constexpr (kIsRawSerializable<T>) {
      bytes += items.size() * sizeof(T);
    } else {
      for (const T& item : items) bytes += Serializer<T>::Bytes(item);
    }
    return bytes;
  }
  static void Write(EntryWriter& writer, absl::Span<const T> items) {
    writer.WriteULEB128<uint64_t>(items.size());
    if constexpr (kIsRawSerializable<T>) {
      writer.WriteBytes(items.data(), items.size() * sizeof(T));
    } else {
      for (const T& item : items) writer.WriteObject(item);
    }
  }
};

template <typename T>
struct Serializer<absl::Span<const T>> {
  static size_t Bytes(const absl::Span<const T>& items) { return SequenceEncoding<T>::Bytes(items); }
  static void Write(EntryWriter& writer, const absl::Span<const T>& items) {
    SequenceEncoding<T>::Write(writer, items);
  }
};
template <typename T>
struct Serializer<std::vector<T>> {
  static size_t Bytes(const std::vector<T>& items) { return SequenceEncoding<T>::Bytes(items); }
  static void Write(EntryWriter& writer, const std::vector<T>& items) {
    SequenceEncoding<T>::Write(writer, items);
  }
};
template <typename T>
struct Deserializer<std::vector<T>> : DeserializerBase<std::vector<T>> {
  static void ReadInto(EntryReader& reader, std::vector<T>& items) {
    const uint64_t count = reader.ReadULEB128<uint64_t>();
    // Every element takes at least one byte: a count beyond the remaining bytes is garbage
    // (and must not make us allocate a huge vector).
    if (reader.Failed() || count > reader.RemainingBytes()) {
      reader.SetFailed();
      items.clear();
      return;
    }
    items.resize(static_cast<size_t>(count));
    if constexpr (kIsRawSerializable<T>) {
      reader.ReadBytes(items.data(), items.size() * sizeof(T));
    } else {
      for (T& item : items) reader.ReadIntoObject(item);
    }
  }
};

// ---------------------------------------------------------------------------------------
// pair, tuple, optional, variant.

template <typename A, typename B>
struct Serializer<std::pair<A, B>> {
  static size_t Bytes(const std::pair<A, B>& p) { return SumBytes(p.first, p.second); }
  static void Write(EntryWriter& writer, const std::pair<A, B>& p) {
    writer.WriteObjects(p.first, p.second);
  }
};
template <typename A, typename B>
struct Deserializer<std::pair<A, B>> : DeserializerBase<std::pair<A, B>> {
  static void ReadInto(EntryReader& reader, std::pair<A, B>& p) {
    reader.ReadIntoObjects(p.first, p.second);
  }
};

template <typename... Ts>
struct Serializer<std::tuple<Ts...>> {
  static size_t Bytes(const std::tuple<Ts...>& t) {
    return std::apply([](const Ts&... values) { return SumBytes(values...); }, t);
  }
  static void Write(EntryWriter& writer, const std::tuple<Ts...>& t) {
    std::apply([&](const Ts&... values) { writer.WriteObjects(values...); }, t);
  }
};
template <typename... Ts>
struct Deserializer<std::tuple<Ts...>> : DeserializerBase<std::tuple<Ts...>> {
  static void ReadInto(EntryReader& reader, std::tuple<Ts...>& t) {
    std::apply([&](Ts&... values) { reader.ReadIntoObjects(values...); }, t);
  }
};

template <typename T>
struct Serializer<std::optional<T>> {
  static size_t Bytes(const std::optional<T>& o) {
    return 1 + (o ? Serializer<T>::Bytes(*o) : 0);
  }
  static void Write(EntryWriter& writer, const std::optional<T>& o) {
    writer.WriteObject(o.has_value());
    if (o) writer.WriteObject(*o);
  }
};
template <typename T>
struct Deserializer<std::optional<T>> : DeserializerBase<std::optional<T>> {
  static void ReadInto(EntryReader& reader, std::optional<T>& o) {
    if (reader.ReadObject<bool>() && !reader.Failed()) {
      o.emplace();
      reader.ReadIntoObject(*o);
    } else {
      o.reset();
    }
  }
};

template <typename... Ts>
struct Serializer<std::variant<Ts...>> {
  static size_t Bytes(const std::variant<Ts...>& v) {
    return ULEB128Size(uint64_t{v.index()}) +
           std::visit([](const auto& alt) { return SumBytes(alt); }, v);
  }
  static void Write(EntryWriter& writer, const std::variant<Ts...>& v) {
    writer.WriteULEB128<uint64_t>(v.index());
    std::visit([&](const auto& alt) { writer.WriteObject(alt); }, v);
  }
};
template <typename... Ts>
struct Deserializer<std::variant<Ts...>> : DeserializerBase<std::variant<Ts...>> {
  static void ReadInto(EntryReader& reader, std::variant<Ts...>& v) {
    const uint64_t index = reader.ReadULEB128<uint64_t>();
    if (reader.Failed() || index >= sizeof...(Ts)) {
      reader.SetFailed();
      return;
    }
    ReadAlternative(reader, v, static_cast<size_t>(index), std::index_sequence_for<Ts...>());
  }

 private:
  template <size_t... Is>
  static void ReadAlternative(EntryReader& reader, std::variant<Ts...>& v, size_t index,
                              std::index_sequence<Is...>) {
    ((Is == index ? (void)reader.ReadIntoObject(v.template emplace<Is>()) : (void)0), ...);
  }
};

}  // namespace strata

#endif  // STRATA_SHARED_BUFFER_ENTRY_SERIALIZATION_H_
