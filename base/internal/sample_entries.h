// How the sampler writes a kSample entry (layout: shared/profile/sample_entry.h) from a
// signal handler's sample slot.
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
#include "shared/profile/sample_entry.h"

namespace strata {
namespace base_internal {

using profile::SampleFrame;
using profile::SampleRecord;

// A sample slot seen as a root-first merged stack, for serialization without copying.
struct MergedStack {
  const SampleSlot* slot;
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

}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_SAMPLE_ENTRIES_H_
