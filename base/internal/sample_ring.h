// SampleRing: the few samples a thread's own signal handler takes between two sampling loops,
// waiting there for the sampler thread to move them into the profile buffer.
//
// The handler cannot write the buffer itself (it locks and may allocate, and the interrupted
// thread may be holding that lock or malloc's). So the handler fills a fixed-size slot here —
// registers, walked frames, a copy of the label stack — and the sampler thread, with no
// signal-context constraints, merges and serializes it.
//
// Single producer (the owning thread, in its signal handler), single consumer (the sampler
// thread, under the registry lock). Slots are pre-faulted at construction so the handler
// takes no page faults. When the ring is full the sample is dropped and counted.
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
struct SampleSlot {
  static constexpr uint32_t kMaxNativeFrames = 128;
  static constexpr uint32_t kMaxLabels = 32;
  static constexpr uint32_t kMaxDynamicChars = 63;

  struct Label {
    const char* label;
    uintptr_t stack_address;
    uint32_t category;
    bool has_dynamic;
    char dynamic[kMaxDynamicChars + 1];  // NUL-terminated copy.
  };

  int64_t time_ns;  // TimeStamp nanoseconds.
  int64_t cpu_ns;   // Thread CPU time then; -1 when not measured.
  int32_t overruns;
  uint32_t native_count;
  uint32_t label_count;
  NativeFrame natives[kMaxNativeFrames];  // Innermost first.
  Label labels[kMaxLabels];               // Root first.
};

class SampleRing {
 public:
  static constexpr uint32_t kSlots = 4;

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
