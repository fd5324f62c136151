// SampleRing: the samples a thread's own signal handler takes between two sampling loops,
// waiting there for the sampler thread to move them into the profile buffer.
//
// The handler cannot write the buffer itself (it locks and may allocate, and the interrupted
// thread may be holding that lock or malloc's). So the handler fills a fixed-size scratch
// slot here (registers, walked frames, a copy of the label stack; a later tier's script
// frames), and at commit the used parts of the slot are copied into a byte ring as one
// variable-size record. The sampler thread, with no signal-context constraints, decodes each
// record back into a slot of its own, merges and serializes it.
//
// Single producer (the owning thread, in its signal handler), single consumer (the sampler
// thread, under the registry lock). A record that does not fit in the free part of the ring
// is dropped (and the caller counts it); nothing already committed is ever overwritten.
//
// One write at a time, enforced: from BeginWrite to the end of its CommitWrite (or EndWrite)
// the slot is the producer's, and a BeginWrite nested inside it (a handler run on the same
// thread in the middle of a write) gets null: that sample is dropped, the write it
// interrupted stays whole. The thread writes from two places, its sampling handler and the
// end of a wrapped call (wait/kernel_cpu_charge.cc); plainly neither can be interrupted by
// a signal handler (each runs with every signal blocked for real). ThreadSanitizer breaks
// that: it runs a handler deferred, at the exit of an intercepted call, and blocks signals
// around it with the pthread_sigmask it finds next, ours, which keeps the sampling signal
// unblocked for real; a sample arriving meanwhile ran at the exit of the memcpy inside the
// handler's own CommitWrite, on the same slot and reserved range, and gave records whose bytes
// were not their own (docs/reliability.md, "The sample ring under TSan").
//
// Record size. A header of 48 bytes; native frames as their pcs (8 bytes) and their stack
// pointers as 32-bit offsets above the lowest (12 bytes a frame; 16 when a walk's stack
// pointers span 4 GiB or more); labels 32 bytes (with their push sites) plus their dynamic
// text; script frames 24 bytes plus their text. A typical sample (40 native frames, 4 labels)
// takes 672-680 bytes: the 80 KiB ring holds ~119 of them, ~119 ms of a busy thread's CPU at 1 kHz, where the 8
// fixed slots before it held 8 ms (issue 17: a sampler thread starved ~30 ms beside busy
// processes on 2 CPUs dropped 7 samples). A deep sample (1 024 frames) takes ~12 KiB.
//
// Memory. Construction faults in the scratch slot up to its first kFaultedInNativeFrames
// frames (2 pages) and the ring's first kFaultedInRingBytes (a dozen usual samples). The
// sampler thread makes the rest of the ring resident, off the sampled thread, when its loop
// first drains a sample the thread's handler took (MakeResident: one
// madvise(MADV_POPULATE_WRITE), Linux 5.14+, not where a seccomp filter is in force; there,
// and before 5.14, the ring's pages fault in as the handler first writes them). So a thread
// that is never sampled, as most of a build's short processes are, has 4 pages resident, not
// 22 (each page fault costs ~15 µs in this project's VMs: docs/benchmarks.md), and a sampled
// one 88 KiB, with nothing faulted in inside the handler for a usual sample once the sampler
// has drained it once. A slot keeps up to 1 024 native frames (Firefox's limit; 16 KiB of
// them), at its end: the deeper frames of the scratch slot are reserved but only become
// resident when a walk first writes them (a minor page fault per page, once per thread, on
// threads with deep stacks).
//
// Thread safety: as above. Async-signal safety: BeginWrite, CommitWrite,
// CommitWriteKeepingSlot and EndWrite are (no lock, no allocation; atomics and copies only);
// construction, destruction and the consumer's side are not meant for signal context.
#ifndef STRATA_BASE_INTERNAL_SAMPLE_RING_H_
#define STRATA_BASE_INTERNAL_SAMPLE_RING_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

#include "platform/page_allocation.h"
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
  // 2816: 3072 before labels kept their push sites, so that the faulted-in part stays 2 pages.
  static constexpr uint32_t kScriptTextBytes = 2816;

  struct Label {
    const char* label;
    uintptr_t stack_address;
    uintptr_t push_site;  // LabelFrame::push_site (base/labels.h); 0 when unknown.
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
  // Written by the thread at the end of a wrapped call, not by its signal handler: the
  // call's kernel CPU charged to its stack (wait/kernel_cpu_charge.h). Then `cpu_ns` is not
  // a clock reading but the CPU this sample carries.
  bool charged_system_call;
  // Written by the thread at the end of a wrapped wait whose stack the sampler never walked
  // (wait/own_samples.h): the wait's stack, CPU delta 0, standing for `overruns` + 1
  // samples, at `time_ns` and each interval after it. Then `cpu_ns` is not a clock reading
  // but the wait's end (TimeStamp ns).
  bool missed_wait;
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

// A slot of the sampler's own (records decoded into it by SampleRing::TryRead, or a waiting
// thread's stack walked into it), one per `Tag` type for the process's life: zero-filled
// static storage used as a SampleSlot as it is, as the ring's own mapped scratch slot is (an
// aggregate: its zero bytes are its initial value). Nothing writes it before the first record
// does, so only the pages records are decoded into become resident; a constructed static slot
// (value-initialized) wrote zeros over all 6 of its pages (24 KiB) in every process with a
// session, sampled or not. Thread safety: the caller serializes its uses.
template <typename Tag>
SampleSlot* StaticConsumerSlot() {
  alignas(SampleSlot) static unsigned char storage[sizeof(SampleSlot)];
  return std::launder(reinterpret_cast<SampleSlot*>(storage));
}

class SampleRing {
 public:
  // Bytes of the record ring (a multiple of 8).
  static constexpr size_t kRingBytes = 80 * 1024;
  // A typical sample's record: 40 native frames and 4 labels (two with ~10 characters of
  // dynamic text) take 672-680 bytes, so a ring holds at least kTypicalRecords (119) of them
  // (sample_ring_test checks both). The sampler thread's period is bounded by it
  // (sampler_thread.cc).
  static constexpr size_t kTypicalRecordBytes = 688;
  static constexpr size_t kTypicalRecords = kRingBytes / kTypicalRecordBytes;
  // Resident from construction (Memory, above); MakeResident makes the rest.
  static constexpr size_t kFaultedInRingBytes = 8 * 1024;

  SampleRing();
  ~SampleRing();
  SampleRing(const SampleRing&) = delete;
  SampleRing& operator=(const SampleRing&) = delete;

  bool ok() const { return scratch_ != nullptr; }

  // Producer (the owning thread's signal handler). The scratch slot to fill, or null when
  // the ring has no room left for even the smallest record (or is not allocated): the
  // sample is dropped before its walk. The slot stays the producer's until CommitWrite.
  SampleSlot* BeginWrite();
  // Copies the used parts of the scratch slot into the ring as one record, visible to the
  // consumer once this returns, and ends the write. Returns false, writing nothing, when the
  // record does not fit in the free part of the ring (the sample is dropped; the caller
  // counts it).
  bool CommitWrite();
  // As CommitWrite, but the slot stays the producer's, as filled, for another record of it
  // (a call's kernel CPU charged as several samples); end with CommitWrite or EndWrite.
  bool CommitWriteKeepingSlot();
  // Ends a write without committing anything more.
  void EndWrite();

  // Consumer (one thread at a time, e.g. under a lock). Decodes the oldest record into
  // `*out` (its counts and the used parts of its arrays; the rest of `*out` is left as it
  // was) and frees its bytes. Returns false when there is none.
  bool TryRead(SampleSlot* out);
  // Consumer: makes the whole ring resident, once (Memory, above). Only page tables change,
  // no byte is written, so the producer may be writing meanwhile. A refusal (a kernel before
  // 5.14) leaves the pages to fault in as they are written.
  void MakeResident() {
    if (populated_ || !scratch_) return;
    populated_ = true;
    PopulatePages(ring_ + kFaultedInRingBytes, kRingBytes - kFaultedInRingBytes);
  }
  // Frees every committed record unread.
  void DiscardAll();

  // The bytes a record of `slot` takes in the ring (its header included; a multiple of 8).
  static size_t RecordBytes(const SampleSlot& slot);

 private:
  // Producer: the ring byte position a record of `bytes` starts at, writing a skip marker
  // first when it would cross the end; false when it does not fit.
  bool Reserve(size_t bytes, uint64_t* record_start, uint64_t* new_head);

  SampleSlot* scratch_ = nullptr;
  unsigned char* ring_ = nullptr;  // kRingBytes, 8-aligned.
  size_t mapped_bytes_ = 0;
  std::atomic<uint64_t> head_{0};  // Bytes ever committed (producer writes).
  std::atomic<uint64_t> tail_{0};  // Bytes ever freed (consumer writes).
  // A write is under way (BeginWrite to CommitWrite/EndWrite). The owning thread's only,
  // its handlers included: relaxed accesses and signal fences.
  std::atomic<bool> writing_{false};
  bool populated_ = false;  // The consumer's: MakeResident has run.
};

}  // namespace base_internal
}  // namespace strata

#endif  // STRATA_BASE_INTERNAL_SAMPLE_RING_H_
