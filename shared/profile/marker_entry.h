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
namespace profile {
// The header bytes of the usual recording (a literal name shorter than 64 characters, so its
// encoding header is one byte; no stack), as Serializer<MarkerHeader> lays them out.
inline constexpr size_t kCommonMarkerHeaderBytes = sizeof(ThreadId::NumberType) +
                                                   sizeof(MarkerPhase) + 2 * sizeof(int64_t) +
                                                   1 + sizeof(const char*) + 2 + 1;
inline constexpr size_t kMaxCommonMarkerNameLength = 63;

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
