// How the sampler writes a kSample entry (layout: shared/profile/sample_entry.h) from a
// signal handler's sample slot.
//
// Merging (MergedStack): native frames come innermost first with their stack pointers; a
// label lives in the frame of the function that pushed it, so a label whose address A
// satisfies frames[j].sp <= A < frames[j + 1].sp goes right after native frame j (root
// first). Script frames (a script engine's functions and labels, root first, each with the
// native stack address it belongs at) merge the same way; between a label and a script frame
// that both fit after native frame j, the higher address (the older) comes first. A native
// boundary (pc 0: the walk skipped JIT code there) is not written, but its sp still bounds
// what goes before it: script frames running in the skipped code land in the gap. Labels
// and script frames pushed in a frame the walk could not reach go after the last native
// frame.
//
// Thread safety: value types; serialization runs in the sampler thread (never in a signal
// handler). Async-signal safety: no.
#ifndef STRATA_BASE_INTERNAL_SAMPLE_ENTRIES_H_
#define STRATA_BASE_INTERNAL_SAMPLE_ENTRIES_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/internal/sampling/sample_ring.h"
#include "platform/process_thread_ids.h"
#include "platform/time_stamp.h"
#include "shared/buffer/entry_kinds.h"
#include "shared/buffer/entry_serialization.h"
#include "shared/profile/sample_entry.h"

namespace strata {
namespace base_internal {

using profile::SampleFrame;
using profile::SampleRecord;

// A sample slot seen as a root-first merged stack, for serialization without copying.
struct MergedStack {
  const SampleSlot* slot;
};

enum class MergedFrameKind : uint8_t { kNative, kLabel, kScript };

// Calls `f(MergedFrameKind kind, uint32_t index)` for the slot's frames in merged root-first
// order (index into natives, labels or script_frames). Native boundaries are skipped.
template <typename F>
void ForEachMergedFrame(const SampleSlot& slot, F&& f) {
  const uint32_t label_count = std::min(slot.label_count, SampleSlot::kMaxLabels);
  const uint32_t script_count = std::min(slot.script_frame_count, SampleSlot::kMaxScriptFrames);
  uint32_t label = 0;
  uint32_t script = 0;
  // Labels and script frames at `lower` or above, older (higher address) first.
  auto emit_down_to = [&](uintptr_t lower) {
    for (;;) {
      const bool has_label = label < label_count && slot.labels[label].stack_address >= lower;
      const bool has_script =
          script < script_count && slot.script_frames[script].stack_address >= lower;
      if (has_label && (!has_script || slot.labels[label].stack_address >=
                                           slot.script_frames[script].stack_address)) {
        f(MergedFrameKind::kLabel, label++);
      } else if (has_script) {
        f(MergedFrameKind::kScript, script++);
      } else {
        return;
      }
    }
  };
  for (uint32_t j = std::min(slot.native_count, SampleSlot::kMaxNativeFrames); j-- > 0;) {
    if (slot.natives[j].pc != 0) f(MergedFrameKind::kNative, j);
    emit_down_to(slot.natives[j].sp);
  }
  emit_down_to(0);
}

// The number of frames ForEachMergedFrame reports.
uint32_t MergedFrameCount(const SampleSlot& slot);

}  // namespace base_internal

template <>
struct Serializer<base_internal::MergedStack> {
  static size_t Bytes(const base_internal::MergedStack& m);
  static void Write(EntryWriter& writer, const base_internal::MergedStack& m);
};

}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_SAMPLE_ENTRIES_H_
