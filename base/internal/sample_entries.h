// The buffer entries of samples and counters, and how a sample's native frames and labels
// are merged into one stack. Both tiers read and write these (one buffer, handed over).
//
//   kSample        [kind][ThreadId][TimeStamp][int64 cpu_delta_ns, -1 unknown][int32 overruns]
//                  [ULEB128 frame count][frames, root first]
//      frame:      [uint8 0][uint64 address]                          native
//                  [uint8 1][ProfilerString label][uint8 category][bool][string dynamic?] label
//   kSameSample    [kind][ThreadId][TimeStamp]  the thread has not run since its previous
//                  sample: same stack, CPU delta 0 (written without signalling the thread)
//   kCounterSample [kind][uint32 counter index][TimeStamp][int64 value][uint64 operations]
//
// Merging (MergedStack): native frames come innermost first with their stack pointers; a
// label lives in the frame of the function that pushed it, so a label whose address A
// satisfies frames[j].sp <= A < frames[j + 1].sp goes right after native frame j (root
// first). Labels pushed in a frame the walk could not reach go after the last native frame.
//
// Thread safety: value types; serialization runs in the sampler thread (never in a signal
// handler). Async-signal safety: no.
#ifndef STRATA_BASE_INTERNAL_SAMPLE_ENTRIES_H_
#define STRATA_BASE_INTERNAL_SAMPLE_ENTRIES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/internal/sample_ring.h"
#include "platform/process_thread_ids.h"
#include "platform/time_stamp.h"
#include "shared/buffer/entry_kinds.h"
#include "shared/buffer/entry_serialization.h"

namespace strata {
namespace base_internal {

// A sample slot seen as a root-first merged stack, for serialization without copying.
struct MergedStack {
  const SampleSlot* slot;
};

// One frame read back.
struct SampleFrame {
  enum class Kind : uint8_t { kNative = 0, kLabel = 1 };
  Kind kind = Kind::kNative;
  uint64_t address = 0;       // kNative
  ProfilerString label;       // kLabel
  uint8_t category = 0;       // kLabel
  std::optional<std::string> dynamic;  // kLabel
};

// A sample read back.
struct SampleRecord {
  ThreadId thread;
  TimeStamp time;
  int64_t cpu_delta_ns = -1;
  int32_t overruns = 0;
  std::vector<SampleFrame> frames;  // Root first.
};

// Calls `f(bool is_native, uint32_t index)` for the slot's frames in merged root-first order
// (index into natives or labels).
template <typename F>
void ForEachMergedFrame(const SampleSlot& slot, F&& f) {
  uint32_t label = 0;
  for (uint32_t j = slot.native_count; j-- > 0;) {
    f(true, j);
    const uintptr_t lower = slot.natives[j].sp;
    while (label < slot.label_count && slot.labels[label].stack_address >= lower) {
      f(false, label++);
    }
  }
  while (label < slot.label_count) f(false, label++);
}

}  // namespace base_internal

template <>
struct Serializer<base_internal::MergedStack> {
  static size_t Bytes(const base_internal::MergedStack& m);
  static void Write(EntryWriter& writer, const base_internal::MergedStack& m);
};

template <>
struct Deserializer<base_internal::SampleFrame> : DeserializerBase<base_internal::SampleFrame> {
  static void ReadInto(EntryReader& reader, base_internal::SampleFrame& frame);
};

}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_SAMPLE_ENTRIES_H_
