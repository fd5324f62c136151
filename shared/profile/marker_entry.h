// The buffer entry of a marker, and the capture-time functions of a typed marker's payload.
// Both tiers write markers into the one buffer; the profile capture reads them back.
//
//   kMarker [kind][MarkerHeader][payload: nothing | std::string text | the typed marker's
//           fields, serialized by its StreamJSONMarkerData parameter types]
//
// Thread safety: value types. Async-signal safety: no (the stack vector allocates).
#ifndef STRATA_SHARED_PROFILE_MARKER_ENTRY_H_
#define STRATA_SHARED_PROFILE_MARKER_ENTRY_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "platform/process_thread_ids.h"
#include "platform/time_stamp.h"
#include "shared/buffer/entry_serialization.h"
#include "shared/json/json_writer.h"
#include "shared/json/marker_timing.h"

namespace strata {
namespace profile {

// What every marker entry starts with, after the kMarker kind byte.
struct MarkerHeader {
  ThreadId thread;
  MarkerPhase phase = MarkerPhase::kInstant;
  TimeStamp start;
  TimeStamp end;
  ProfilerString name;
  uint8_t category = 0;
  uint8_t payload_tag = 0;  // kUntypedMarkerTag, kTextMarkerTag, or a registered type.
  // Native return addresses, leaf first; empty = none. May hold label frames among them
  // (MarkerStackLabel below: native allocations' stacks).
  std::vector<uint64_t> stack;
};

// Label frames in a marker stack (native allocations, docs/memory.md): a stack of native
// return addresses, leaf first, may hold labels among them, each where it goes in the merged
// stack (a label follows, root first, the native frame it was pushed in, as in a sample). A
// label is a block of words:
//   [kMarkerStackLabelTag | category | label length << 8 | dynamic length << 16 |
//    has dynamic << 23][push site, 0 unknown][the label's then the dynamic string's bytes,
//    8 a word, the last one zero-padded]
// The tag's top bits make the word a non-canonical x86-64 address: never a return address.
// The other words are not so marked (the push site is a real code address, a zero-padded
// last text word can look like a small canonical one), so a reader that does not know the
// tag would show them as frames: the flight file's version is 3 since label blocks
// (flight_format.h), and older readers refuse such a file.
inline constexpr uint64_t kMarkerStackLabelTag = 0x53544C4200000000ull;  // "STLB"
inline constexpr uint64_t kMarkerStackLabelTagMask = 0xFFFFFFFF00000000ull;
inline constexpr size_t kMaxMarkerStackLabelLength = 255;
inline constexpr size_t kMaxMarkerStackDynamicLength = 127;

inline bool IsMarkerStackLabelWord(uint64_t word) {
  return (word & kMarkerStackLabelTagMask) == kMarkerStackLabelTag;
}

// The words a label block takes (lengths already capped at the maxima above).
inline size_t MarkerStackLabelWords(size_t label_length, size_t dynamic_length) {
  return 2 + (label_length + dynamic_length + 7) / 8;
}

// Writes a label block at `out` (room for MarkerStackLabelWords(...) words, lengths capped
// first with the maxima above) and returns the words written. No allocation, no system call.
inline size_t WriteMarkerStackLabel(uint64_t* out, const char* label, size_t label_length,
                                    const char* dynamic, size_t dynamic_length, bool has_dynamic,
                                    uint8_t category, uint64_t push_site) {
  if (label_length > kMaxMarkerStackLabelLength) label_length = kMaxMarkerStackLabelLength;
  if (dynamic_length > kMaxMarkerStackDynamicLength) dynamic_length = kMaxMarkerStackDynamicLength;
  if (!has_dynamic) dynamic_length = 0;
  out[0] = kMarkerStackLabelTag | category | (uint64_t{label_length} << 8) |
           (uint64_t{dynamic_length} << 16) | (uint64_t{has_dynamic} << 23);
  out[1] = push_site;
  const size_t text_words = (label_length + dynamic_length + 7) / 8;
  uint8_t* text = reinterpret_cast<uint8_t*>(out + 2);
  if (text_words > 0) out[2 + text_words - 1] = 0;  // The padding.
  std::memcpy(text, label, label_length);
  if (dynamic_length > 0) std::memcpy(text + label_length, dynamic, dynamic_length);
  return 2 + text_words;
}

// One label block read back.
struct MarkerStackLabel {
  std::string_view label;
  std::string_view dynamic;
  bool has_dynamic = false;
  uint8_t category = 0;
  uint64_t push_site = 0;
};

// Calls on_native(address) and on_label(const MarkerStackLabel&) for the frames of a marker
// stack, in its order (leaf first). A label block cut short (damaged data) ends the walk:
// returns false then.
template <typename OnNative, typename OnLabel>
bool ForEachMarkerStackFrame(const uint64_t* words, size_t count, OnNative&& on_native,
                             OnLabel&& on_label) {
  for (size_t i = 0; i < count;) {
    const uint64_t word = words[i];
    if (!IsMarkerStackLabelWord(word)) {
      on_native(word);
      ++i;
      continue;
    }
    MarkerStackLabel label;
    label.category = static_cast<uint8_t>(word & 0xff);
    const size_t label_length = (word >> 8) & 0xff;
    const size_t dynamic_length = (word >> 16) & 0x7f;
    label.has_dynamic = ((word >> 23) & 1) != 0;
    const size_t words_needed = MarkerStackLabelWords(label_length, dynamic_length);
    if (count - i < words_needed) return false;
    label.push_site = words[i + 1];
    const char* text = reinterpret_cast<const char*>(words + i + 2);
    label.label = std::string_view(text, label_length);
    label.dynamic = std::string_view(text + label_length, dynamic_length);
    on_label(label);
    i += words_needed;
  }
  return true;
}

// The writing side of MarkerHeader: the same bytes, but it owns nothing (the name is
// referenced, the stack is a span over the caller's frames), so recording a marker copies
// no string and allocates nothing. Read entries back as MarkerHeader.
struct MarkerHeaderRef {
  ThreadId thread;
  MarkerPhase phase = MarkerPhase::kInstant;
  TimeStamp start;
  TimeStamp end;
  const ProfilerString* name = nullptr;  // Never null when serialized.
  uint8_t category = 0;
  uint8_t payload_tag = 0;
  absl::Span<const uint64_t> stack;
};

inline constexpr uint8_t kUntypedMarkerTag = 0;
inline constexpr uint8_t kTextMarkerTag = 1;

// Capture-time hooks of one marker type.
using MarkerStreamFunction = void (*)(EntryReader& payload, JsonWriter& writer);
using MarkerSchemaFunction = std::string (*)();
struct MarkerTypeFunctions {
  const char* type_name;
  MarkerStreamFunction stream;
  MarkerSchemaFunction schema;  // May be null.
  // The save writes this type's stacks in the front-end's minimal backtrace form
  // (GeckoThreadWriter::WriteMarkerStack): for types recorded by the hundred thousand whose
  // stack the front-end reads only as a call-tree node (native allocations, issue 37).
  bool minimal_stack = false;
};
}  // namespace profile

template <>
struct Serializer<profile::MarkerHeader> {
  static size_t Bytes(const profile::MarkerHeader& h) {
    return SumBytes(h.thread, h.phase, h.start, h.end, h.name, h.category, h.payload_tag,
                    h.stack);
  }
  static void Write(EntryWriter& w, const profile::MarkerHeader& h) {
    w.WriteObjects(h.thread, h.phase, h.start, h.end, h.name, h.category, h.payload_tag, h.stack);
  }
};
namespace profile {
// The header bytes of the usual recording (a literal name shorter than 64 characters, so its
// encoding header is one byte; no stack), as Serializer<MarkerHeader> lays them out.
inline constexpr size_t kCommonMarkerHeaderBytes = sizeof(ThreadId::NumberType) +
                                                   sizeof(MarkerPhase) + 2 * sizeof(int64_t) +
                                                   1 + sizeof(const char*) + 2 + 1;
inline constexpr size_t kMaxCommonMarkerNameLength = 63;
// Where that header's start and end times are (from the header's first byte).
inline constexpr size_t kCommonMarkerHeaderStartOffset =
    sizeof(ThreadId::NumberType) + sizeof(MarkerPhase);
inline constexpr size_t kCommonMarkerHeaderEndOffset =
    kCommonMarkerHeaderStartOffset + sizeof(int64_t);

// Writes those kCommonMarkerHeaderBytes at `p` with plain stores (the caller checked the name
// is a literal of at most kMaxCommonMarkerNameLength characters) and returns the end.
__attribute__((always_inline)) inline uint8_t* WriteCommonMarkerHeader(
    uint8_t* p, ThreadId thread, MarkerPhase phase, TimeStamp start, TimeStamp end,
    const char* name_chars, size_t name_length, uint8_t category, uint8_t payload_tag) {
  const ThreadId::NumberType thread_number = thread.ToNumber();
  const int64_t start_ns = start.ToNanoseconds();
  const int64_t end_ns = end.ToNanoseconds();
  std::memcpy(p, &thread_number, sizeof(thread_number));
  p += sizeof(thread_number);
  std::memcpy(p, &phase, sizeof(phase));
  p += sizeof(phase);
  std::memcpy(p, &start_ns, sizeof(start_ns));
  p += sizeof(start_ns);
  std::memcpy(p, &end_ns, sizeof(end_ns));
  p += sizeof(end_ns);
  *p++ = static_cast<uint8_t>((name_length << 1) | 1);  // Literal; ULEB128 of one byte.
  std::memcpy(p, &name_chars, sizeof(name_chars));
  p += sizeof(name_chars);
  *p++ = category;
  *p++ = payload_tag;
  *p++ = 0;  // No stack.
  return p;
}
}  // namespace profile

// The recording hot path: the usual header (literal short name, no stack) is written with
// plain stores when it is contiguous in the entry; anything else field by field. Same bytes.
template <>
struct Serializer<profile::MarkerHeaderRef> {
  static size_t Bytes(const profile::MarkerHeaderRef& h) {
    if (__builtin_expect(IsCommonCase(h), 1)) return profile::kCommonMarkerHeaderBytes;
    return SumBytes(h.thread, h.phase, h.start, h.end, *h.name, h.category, h.payload_tag,
                    h.stack);
  }
  __attribute__((always_inline)) static void Write(EntryWriter& w,
                                                   const profile::MarkerHeaderRef& h) {
    if (__builtin_expect(IsCommonCase(h), 1)) {
      if (uint8_t* p = w.TakeContiguous(profile::kCommonMarkerHeaderBytes)) {
        profile::WriteCommonMarkerHeader(p, h.thread, h.phase, h.start, h.end,
                                         h.name->View().data(), h.name->View().size(),
                                         h.category, h.payload_tag);
        return;
      }
    }
    w.WriteObjects(h.thread, h.phase, h.start, h.end, *h.name, h.category, h.payload_tag,
                   h.stack);
  }

 private:
  static bool IsCommonCase(const profile::MarkerHeaderRef& h) {
    return h.name->IsLiteral() && h.name->View().size() <= profile::kMaxCommonMarkerNameLength &&
           h.stack.empty();
  }
};
template <>
struct Deserializer<profile::MarkerHeader> : DeserializerBase<profile::MarkerHeader> {
  static void ReadInto(EntryReader& r, profile::MarkerHeader& h) {
    r.ReadIntoObjects(h.thread, h.phase, h.start, h.end, h.name, h.category, h.payload_tag,
                      h.stack);
  }
};

}  // namespace strata

#endif  // STRATA_SHARED_PROFILE_MARKER_ENTRY_H_
