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
  std::vector<uint64_t> stack;  // Native return addresses, leaf first; empty = none.
};

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
// The recording hot path: the usual header (literal name, no stack) is written with plain
// stores when it is contiguous in the entry; anything else field by field. Same bytes.
template <>
struct Serializer<profile::MarkerHeaderRef> {
  static size_t Bytes(const profile::MarkerHeaderRef& h) {
    if (__builtin_expect(IsCommonCase(h), 1)) return kCommonBytes;
    return SumBytes(h.thread, h.phase, h.start, h.end, *h.name, h.category, h.payload_tag,
                    h.stack);
  }
  __attribute__((always_inline)) static void Write(EntryWriter& w,
                                                   const profile::MarkerHeaderRef& h) {
    if (__builtin_expect(IsCommonCase(h), 1)) {
      if (uint8_t* p = w.TakeContiguous(kCommonBytes)) {
        const ThreadId::NumberType thread = h.thread.ToNumber();
        const int64_t start = h.start.ToNanoseconds();
        const int64_t end = h.end.ToNanoseconds();
        const char* chars = h.name->View().data();
        std::memcpy(p, &thread, sizeof(thread));
        p += sizeof(thread);
        std::memcpy(p, &h.phase, sizeof(h.phase));
        p += sizeof(h.phase);
        std::memcpy(p, &start, sizeof(start));
        p += sizeof(start);
        std::memcpy(p, &end, sizeof(end));
        p += sizeof(end);
        *p++ = static_cast<uint8_t>((h.name->View().size() << 1) | 1);  // Literal, 1 byte.
        std::memcpy(p, &chars, sizeof(chars));
        p += sizeof(chars);
        *p++ = h.category;
        *p++ = h.payload_tag;
        *p = 0;  // No stack.
        return;
      }
    }
    w.WriteObjects(h.thread, h.phase, h.start, h.end, *h.name, h.category, h.payload_tag,
                   h.stack);
  }

 private:
  // A literal name shorter than 64 characters (its encoding header is one byte), no stack.
  static bool IsCommonCase(const profile::MarkerHeaderRef& h) {
    return h.name->IsLiteral() && h.name->View().size() < 64 && h.stack.empty();
  }
  static constexpr size_t kCommonBytes = sizeof(ThreadId::NumberType) + sizeof(MarkerPhase) +
                                         2 * sizeof(int64_t) + 1 + sizeof(const char*) + 2 + 1;
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
