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
// Shared prefixes (issue 38): PutSampleEntry writes a sample whose root-side frames repeat
// the thread's previous sample as a kSampleSharedPrefix entry (layout and the rule that keeps
// it readable: shared/profile/sample_entry.h), so that a deep stack that stays put costs its
// changed frames, not all of them, in the buffer.
//
// Thread safety: value types; serialization runs in the sampler thread (never in a signal
// handler). PutSampleEntry and PreviousSampleStack: registry mutex held (one static scratch).
// Async-signal safety: no.
#ifndef STRATA_BASE_INTERNAL_SAMPLE_ENTRIES_H_
#define STRATA_BASE_INTERNAL_SAMPLE_ENTRIES_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/internal/sample_ring.h"
#include "platform/process_thread_ids.h"
#include "platform/time_stamp.h"
#include "shared/buffer/chunked_buffer.h"
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

// What the sampler remembers of a thread's latest sample in the buffer: its merged frames'
// encoding, its time and the chunk its block starts in, for the next sample's shared prefix.
// The encoding lives in pages of Strata's own (page_allocation.h), mapped at the first sample
// and touched only as far as stacks go (one page for a usual stack). Registry mutex held.
class PreviousSampleStack {
 public:
  // Merged frames whose encoding is larger are written whole, and forget the previous one.
  static constexpr size_t kCapacityBytes = 16 * 1024;

  PreviousSampleStack() = default;
  ~PreviousSampleStack();
  PreviousSampleStack(const PreviousSampleStack&) = delete;
  PreviousSampleStack& operator=(const PreviousSampleStack&) = delete;

  // The next sample is written whole: call when anything else writes a sample of the thread
  // (a wait's stack) and when its sampling starts.
  void Forget() { known_ = false; }

 private:
  friend BlockIndex PutSampleEntry(ChunkedBuffer& buffer, PreviousSampleStack& previous,
                                   ThreadId thread, TimeStamp time, int64_t cpu_delta_ns,
                                   int32_t overruns, const SampleSlot& slot);
  uint8_t* bytes_ = nullptr;  // kCapacityBytes, or null until the first sample.
  size_t size_ = 0;
  int64_t time_ns_ = 0;
  BufferIndex chunk_start_ = 0;
  bool known_ = false;
};

// Writes `slot` as a sample of `thread` (kSample, or kSampleSharedPrefix when its first
// frames are the previous sample's and that one starts in the same chunk) and updates
// `previous`. The stack read back is the same either way. Returns the block, null when the
// write failed (then `previous` is forgotten).
BlockIndex PutSampleEntry(ChunkedBuffer& buffer, PreviousSampleStack& previous, ThreadId thread,
                          TimeStamp time, int64_t cpu_delta_ns, int32_t overruns,
                          const SampleSlot& slot);

}  // namespace base_internal

template <>
struct Serializer<base_internal::MergedStack> {
  static size_t Bytes(const base_internal::MergedStack& m);
  static void Write(EntryWriter& writer, const base_internal::MergedStack& m);
};

}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_SAMPLE_ENTRIES_H_
