// The kinds of entries in the profile buffer (Firefox: ProfileBufferEntryKinds.h).
//
// Every entry starts with one EntryKind byte.
//  - Legacy kinds are small fixed-size entries, [kind][8-byte payload] (LegacyEntry): the
//    pieces of a sample (thread id, time, frame addresses, labels, categories, ...) and of
//    counters, written one after the other.
//  - Modern kinds have a variable layout after the kind byte, defined by their writers
//    (markers, compact stacks, running times, ...).
// Values are stable within a process; the numeric values are part of the handover between
// the base and full tiers (one buffer, two libraries), so append, never renumber.
//
// Thread safety: value types. Async-signal safety: yes.
#ifndef STRATA_SHARED_BUFFER_ENTRY_KINDS_H_
#define STRATA_SHARED_BUFFER_ENTRY_KINDS_H_

#include <cstdint>
#include <cstring>

#include "shared/buffer/entry_serialization.h"

namespace strata {

enum class EntryKind : uint8_t {
  kInvalid = 0,
  // Legacy, fixed-size.
  kCategoryPair = 1,       // payload: category and subcategory
  kLabel = 2,              // payload: address of a static label string
  kFrameFlags = 3,         // payload: frame flags
  kDynamicStringFragment = 4,  // payload: 8 bytes of a dynamic string
  kJitReturnAddress = 5,
  kInnerWindowId = 6,
  kLineNumber = 7,
  kColumnNumber = 8,
  kNativeLeafAddress = 9,  // payload: a native frame's address
  kPause = 10,
  kResume = 11,
  kPauseSampling = 12,
  kResumeSampling = 13,
  kResponsiveness = 14,
  kThreadId = 15,          // payload: ThreadId of the sample that follows
  kTime = 16,              // payload: double milliseconds
  kTimeBeforeCompactStack = 17,
  kTimeBeforeSameSample = 18,
  kCounterId = 19,
  kCount = 20,
  kNumber = 21,
  kProfilerOverheadTime = 22,
  kProfilerOverheadDuration = 23,
  kLegacyLimit,  // Kinds below are modern.
  // Modern, variable-size.
  kMarker = 64,
  kCompactStack = 65,
  kSameSample = 66,
  kRunningTimes = 67,
  kSample = 68,         // A stack sample (base/internal/sample_entries.h).
  kCounterSample = 69,  // A counter's value (base/internal/sample_entries.h).
  kProfilerOverhead = 70,  // One sampler loop's own cost (base/internal/sample_entries.h).
  // A blocked thread off-CPU outside any wrapped call (docs/sampling.md, "Unknown waits"):
  // ThreadId, TimeStamp, int64 CPU delta (ns), uint8 flags (kUnknownWaitDropsLeaf: the
  // previous sample was a finished wait's, whose leaf is left out), uint8 the label's
  // category. Read as the previous sample's stack under an "Unknown wait" label (no label
  // when it carries CPU).
  kUnknownWait = 71,
  // A stack sample that repeats the first frames of its thread's previous sample
  // (shared/profile/sample_entry.h; issue 38): readers older than it skip it.
  kSampleSharedPrefix = 72,
  kModernLimit,
};

inline constexpr uint8_t kUnknownWaitDropsLeaf = 1;
// The label an unknown wait's samples end in.
inline constexpr char kUnknownWaitLabel[] = "Unknown wait";

inline constexpr bool IsLegacyKind(EntryKind kind) {
  return kind > EntryKind::kInvalid && kind < EntryKind::kLegacyLimit;
}
inline constexpr bool IsModernKind(EntryKind kind) {
  return kind >= EntryKind::kMarker && kind < EntryKind::kModernLimit;
}

// A legacy entry: a kind and 8 bytes of payload, read as an integer, a double or an address.
class LegacyEntry {
 public:
  LegacyEntry() = default;
  static LegacyEntry FromInteger(EntryKind kind, uint64_t value) { return LegacyEntry(kind, value); }
  static LegacyEntry FromDouble(EntryKind kind, double value) {
    uint64_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    return LegacyEntry(kind, bits);
  }
  static LegacyEntry FromAddress(EntryKind kind, const void* address) {
    return LegacyEntry(kind, reinterpret_cast<uintptr_t>(address));
  }

  EntryKind kind() const { return kind_; }
  uint64_t AsInteger() const { return payload_; }
  double AsDouble() const {
    double value;
    std::memcpy(&value, &payload_, sizeof(value));
    return value;
  }
  const void* AsAddress() const { return reinterpret_cast<const void*>(static_cast<uintptr_t>(payload_)); }

  bool operator==(const LegacyEntry& o) const { return kind_ == o.kind_ && payload_ == o.payload_; }

  static constexpr size_t kBytes = 1 + sizeof(uint64_t);

 private:
  LegacyEntry(EntryKind kind, uint64_t payload) : kind_(kind), payload_(payload) {}
  friend struct Deserializer<LegacyEntry>;
  EntryKind kind_ = EntryKind::kInvalid;
  uint64_t payload_ = 0;
};

template <>
struct Serializer<LegacyEntry> {
  static constexpr size_t Bytes(const LegacyEntry&) { return LegacyEntry::kBytes; }
  static void Write(EntryWriter& writer, const LegacyEntry& entry) {
    writer.WriteObjects(entry.kind(), entry.AsInteger());
  }
};
template <>
struct Deserializer<LegacyEntry> : DeserializerBase<LegacyEntry> {
  static void ReadInto(EntryReader& reader, LegacyEntry& entry) {
    reader.ReadIntoObjects(entry.kind_, entry.payload_);
    if (!IsLegacyKind(entry.kind_)) reader.SetFailed();
  }
};

}  // namespace strata

#endif  // STRATA_SHARED_BUFFER_ENTRY_KINDS_H_
