// SampleRing: the few samples a thread's own signal handler takes between two sampling loops,
// waiting there for the sampler thread to move them into the profile buffer.
//
// The handler cannot write the buffer itself (it locks and may allocate, and the interrupted
// thread may be holding that lock or malloc's). So the handler fills a fixed-size slot here —
// registers, walked frames, a copy of the label stack — and the sampler thread, with no
// signal-context constraints, merges and serializes it.
//
// Single producer (the owning thread, in its signal handler), single consumer (the sampler
// thread, under the registry lock). When the ring is full the sample is dropped and counted.
//
// Memory. A slot keeps up to 1 024 native frames (Firefox's limit; 16 KiB of them), at the
// end of the slot. Each slot is faulted in at construction up to its first
// kFaultedInNativeFrames frames, so the usual sample takes no page fault in the handler: 2
// pages per slot (slots are page-aligned; the second page ends with the first 44 frames), so
// 64 KiB resident for the 8 slots. Deeper frames are reserved but only become resident when
// a walk first writes them (a minor page fault per page, once per slot, on threads with
// deep stacks).
//
// Why 8 slots: at 1 kHz (perf task-clock events, docs/sampling.md) a busy thread fills one
// slot per millisecond of its CPU, and the sampler thread, an ordinary thread on a busy
// machine, sometimes waits several milliseconds for a CPU: with 4 slots, 20 takeovers under
// 2 busy processes per CPU dropped 3 samples (issue 17); 8 slots hold 8 ms.
//
// Thread safety: as above. Async-signal safety: TryBeginWrite/CommitWrite are (no lock, no
// allocation; atomics only); construction and destruction are not.
#ifndef STRATA_BASE_INTERNAL_SAMPLE_RING_H_
#define STRATA_BASE_INTERNAL_SAMPLE_RING_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "platform/sampling/native_frame.h"

namespace strata {
namespace base_internal {

// One sample as the signal handler captured it.
//
// Script frames (a later tier's script engine, e.g. SpiderMonkey's JS frames) are copied here
// by that tier's signal callback between BeginSample and CommitSample: fixed-size records and
// a bounded text pool, no pointer into the engine (its strings may be freed before the
// sampler thread serializes the slot). Only what a sample uses is touched: a thread without
// a script engine writes the two counts and nothing else of this part.
// Page-aligned (sample_ring.h, top): a slot's resident part is whole pages of its own.
struct alignas(4096) SampleSlot {
  static constexpr uint32_t kMaxNativeFrames = 1024;
  // Native frames resident from the start (see the top of this file).
  static constexpr uint32_t kFaultedInNativeFrames = 44;
  static constexpr uint32_t kMaxLabels = 32;
  static constexpr uint32_t kMaxDynamicChars = 63;
  static constexpr uint32_t kMaxScriptFrames = 64;
  static constexpr uint32_t kScriptTextBytes = 3072;

  struct Label {
    const char* label;
    uintptr_t stack_address;
    uint32_t category;
    bool has_dynamic;
    char dynamic[kMaxDynamicChars + 1];  // NUL-terminated copy.
  };

  // One script frame. `kind` is a profile::ScriptFrameKind (shared/profile/sample_entry.h),
  // `flags` a set of profile::kScriptFrame* bits, `category` a strata::Category.
  struct ScriptFrame {
    uintptr_t stack_address;  // Native stack address the frame is merged by (higher = older).
    uint32_t line;            // Current position in the function (kScriptFrameHasPosition).
    uint32_t column;
    uint16_t text_offset;     // Into script_text: the frame's text (not NUL-terminated).
    uint16_t text_length;
    uint8_t kind;
    uint8_t category;
    uint8_t flags;
    uint8_t reserved;
  };

  int64_t time_ns;  // TimeStamp nanoseconds.
  int64_t cpu_ns;   // Thread CPU time then; -1 when not measured.
  int32_t overruns;
  // The signal interrupted a system call (the thread was blocked in it, or entering or
  // leaving it). Set in precise mode only: it parks blocked threads' timers (thread_sampling.cc).
  bool in_system_call;
  uint32_t native_count;
  uint32_t label_count;
  uint32_t script_frame_count;
  uint32_t script_text_bytes;  // Used bytes of script_text.
  Label labels[kMaxLabels];                       // Root first.
  ScriptFrame script_frames[kMaxScriptFrames];    // Root first.
  char script_text[kScriptTextBytes];
  // Innermost first. A frame with pc 0 is not a frame but a boundary: the native walk skipped
  // code it cannot unwind (JIT code, reported as script frames) and resumed older; its sp is
  // where the skipped part begins, so that frames merged by address land in the gap. Last in
  // the slot: only the frames a walk writes are touched (see the top of this file).
  NativeFrame natives[kMaxNativeFrames];
};

static_assert(SampleSlot::kScriptTextBytes <= UINT16_MAX, "script text offsets are 16-bit");
static_assert(offsetof(SampleSlot, natives) +
                      sizeof(NativeFrame) * SampleSlot::kFaultedInNativeFrames <= 2 * 4096,
              "the faulted-in part of a slot is 2 pages (sample_ring.h, Memory)");

class SampleRing {
 public:
  static constexpr uint32_t kSlots = 8;

  SampleRing();
  ~SampleRing();
  SampleRing(const SampleRing&) = delete;
  SampleRing& operator=(const SampleRing&) = delete;

  bool ok() const { return slots_ != nullptr; }

  // Producer: a free slot to fill, or null when full (or not allocated).
  SampleSlot* TryBeginWrite() {
    if (!slots_) return nullptr;
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - tail_.load(std::memory_order_acquire) >= kSlots) return nullptr;
    return &slots_[head % kSlots];
  }
  void CommitWrite() { head_.store(head_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

  // Consumer: the oldest filled slot, or null when empty.
  const SampleSlot* TryBeginRead() const {
    if (!slots_) return nullptr;
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    if (tail == head_.load(std::memory_order_acquire)) return nullptr;
    return &slots_[tail % kSlots];
  }
  void EndRead() { tail_.store(tail_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }

 private:
  SampleSlot* slots_ = nullptr;
  size_t mapped_bytes_ = 0;
  std::atomic<uint64_t> head_{0};
  std::atomic<uint64_t> tail_{0};
};

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_SAMPLE_RING_H_
