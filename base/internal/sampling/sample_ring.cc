// SampleRing (sample_ring.h): the scratch slot, and the byte ring of variable-size records.
//
// A record, 8-byte aligned throughout (positions and sizes are multiples of 8):
//   RecordHeader
//   natives: wide: NativeFrame[native_count]; narrow: uint64 pc[native_count], then
//            uint32 (sp - sp_base)[native_count], padded to 8
//   RecordLabel[label_count], then their dynamic texts back to back (no NUL), padded to 8
//   SampleSlot::ScriptFrame[script_frame_count]
//   script text (script_text_bytes), padded to 8
// A record never crosses the ring's end: when it would, the producer writes a skip marker
// (the first 8 bytes of a header, kind kSkip) over the rest of the ring and starts the
// record at its beginning.
#include "base/internal/sampling/sample_ring.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "platform/tsan_sync.h"

namespace strata {
namespace base_internal {

namespace {

constexpr uint32_t kRecordKind = 0x53524543;  // "SREC"
constexpr uint32_t kSkipKind = 0x534b4950;    // "SKIP"
constexpr size_t kPage = 4096;
// RecordHeader::flags.
constexpr uint8_t kInSystemCall = 1;
constexpr uint8_t kChargedSystemCall = 2;
constexpr uint8_t kMissedWait = 4;

struct RecordHeader {
  uint32_t bytes;  // The whole record (or skipped run), header included.
  uint32_t kind;   // kRecordKind or kSkipKind (a skip marker has only these 8 bytes).
  int64_t time_ns;
  int64_t cpu_ns;
  int32_t overruns;
  uint16_t native_count;
  uint8_t flags;  // kInSystemCall, kChargedSystemCall, kMissedWait.
  uint8_t wide_natives;  // 1: NativeFrame[]; 0: pcs, then 32-bit sp offsets above sp_base.
  uint16_t label_count;
  uint16_t script_frame_count;
  uint32_t script_text_bytes;
  uint64_t sp_base;
};
static_assert(sizeof(RecordHeader) == 48, "8-byte multiple");

struct RecordLabel {
  const char* label;
  uintptr_t stack_address;
  uintptr_t push_site;
  uint32_t category;
  uint16_t dynamic_length;
  uint8_t has_dynamic;
  uint8_t reserved;
};
static_assert(sizeof(RecordLabel) == 32, "8-byte multiple");
static_assert(sizeof(SampleSlot::ScriptFrame) % 8 == 0, "8-byte multiple");
static_assert(SampleRing::kRingBytes % 8 == 0, "8-byte multiple");
static_assert(SampleSlot::kMaxNativeFrames <= UINT16_MAX && SampleSlot::kMaxLabels <= UINT16_MAX &&
                  SampleSlot::kMaxScriptFrames <= UINT16_MAX,
              "record counts are 16-bit");

constexpr size_t RoundUp8(size_t n) { return (n + 7) & ~size_t{7}; }

// ---------------------------------------------------------------------------------------
// Signal context (the producer's side, down to "End of signal context"): no lock, no
// allocation, no errno change. memcpy is async-signal-safe (POSIX.1-2017).

// The counts a record of `slot` keeps, clamped to the slot's arrays.
struct UsedCounts {
  uint32_t natives;
  uint32_t labels;
  uint32_t script_frames;
  uint32_t script_text;
};

UsedCounts CountsOf(const SampleSlot& slot) {
  return UsedCounts{std::min(slot.native_count, SampleSlot::kMaxNativeFrames),
                    std::min(slot.label_count, SampleSlot::kMaxLabels),
                    std::min(slot.script_frame_count, SampleSlot::kMaxScriptFrames),
                    std::min(slot.script_text_bytes, SampleSlot::kScriptTextBytes)};
}

uint16_t DynamicLength(const SampleSlot::Label& label) {
  if (!label.has_dynamic) return 0;
  uint16_t length = 0;
  while (length < SampleSlot::kMaxDynamicChars && label.dynamic[length] != '\0') ++length;
  return length;
}

// Whether every frame's sp lies within 4 GiB above the lowest (then 32-bit offsets keep them).
bool NarrowNatives(const SampleSlot& slot, uint32_t count, uint64_t* sp_base) {
  uint64_t low = UINT64_MAX;
  uint64_t high = 0;
  for (uint32_t i = 0; i < count; ++i) {
    low = std::min<uint64_t>(low, slot.natives[i].sp);
    high = std::max<uint64_t>(high, slot.natives[i].sp);
  }
  *sp_base = count == 0 ? 0 : low;
  return count == 0 || high - low <= UINT32_MAX;
}

size_t NativeBytes(uint32_t count, bool narrow) {
  return narrow ? RoundUp8(count * (sizeof(uint64_t) + sizeof(uint32_t)))
                : count * sizeof(NativeFrame);
}

size_t LabelBytes(const SampleSlot& slot, uint32_t count) {
  size_t text = 0;
  for (uint32_t i = 0; i < count; ++i) text += DynamicLength(slot.labels[i]);
  return count * sizeof(RecordLabel) + RoundUp8(text);
}

size_t RecordBytesOf(const SampleSlot& slot, const UsedCounts& used, bool narrow) {
  return sizeof(RecordHeader) + NativeBytes(used.natives, narrow) + LabelBytes(slot, used.labels) +
         used.script_frames * sizeof(SampleSlot::ScriptFrame) + RoundUp8(used.script_text);
}

}  // namespace

size_t SampleRing::RecordBytes(const SampleSlot& slot) {
  const UsedCounts used = CountsOf(slot);
  uint64_t sp_base;
  return RecordBytesOf(slot, used, NarrowNatives(slot, used.natives, &sp_base));
}

SampleSlot* SampleRing::BeginWrite() {
  if (!scratch_) return nullptr;
  // Nested inside a write of this thread (sample_ring.h): the slot and the ring's head are
  // that write's. A handler that interrupts us between this check and the store below runs
  // its whole write before we touch the slot.
  if (writing_.load(std::memory_order_relaxed)) return nullptr;
  const uint64_t used =
      head_.load(std::memory_order_relaxed) - tail_.load(std::memory_order_acquire);
  StrataTsanAcquire(&tail_);  // Also inside a TSan blocking call (platform/tsan_sync.h).
  // Room for at least a header and one frame (a record may still not fit at commit).
  if (kRingBytes - used < sizeof(RecordHeader) + sizeof(NativeFrame)) return nullptr;
  writing_.store(true, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);  // Before any write to the slot.
  return scratch_;
}

void SampleRing::EndWrite() {
  std::atomic_signal_fence(std::memory_order_seq_cst);  // After every access to the slot.
  writing_.store(false, std::memory_order_relaxed);
}

bool SampleRing::CommitWrite() {
  const bool committed = CommitWriteKeepingSlot();
  EndWrite();
  return committed;
}

bool SampleRing::Reserve(size_t bytes, uint64_t* record_start, uint64_t* new_head) {
  const uint64_t head = head_.load(std::memory_order_relaxed);
  const uint64_t free_bytes = kRingBytes - (head - tail_.load(std::memory_order_acquire));
  StrataTsanAcquire(&tail_);
  const size_t position = head % kRingBytes;
  const size_t to_end = kRingBytes - position;
  if (bytes <= to_end) {
    if (bytes > free_bytes) return false;
    *record_start = head;
    *new_head = head + bytes;
    return true;
  }
  if (to_end + bytes > free_bytes) return false;
  // The rest of the ring is skipped (to_end >= 8: positions are multiples of 8).
  const uint32_t skip[2] = {static_cast<uint32_t>(to_end), kSkipKind};
  std::memcpy(ring_ + position, skip, sizeof(skip));
  *record_start = head + to_end;
  *new_head = head + to_end + bytes;
  return true;
}

bool SampleRing::CommitWriteKeepingSlot() {
  if (!scratch_) return false;
  const SampleSlot& slot = *scratch_;
  const UsedCounts used = CountsOf(slot);
  uint64_t sp_base = 0;
  const bool narrow = NarrowNatives(slot, used.natives, &sp_base);
  const size_t bytes = RecordBytesOf(slot, used, narrow);
  uint64_t start;
  uint64_t new_head;
  if (!Reserve(bytes, &start, &new_head)) return false;
  unsigned char* out = ring_ + start % kRingBytes;

  RecordHeader header;
  header.bytes = static_cast<uint32_t>(bytes);
  header.kind = kRecordKind;
  header.time_ns = slot.time_ns;
  header.cpu_ns = slot.cpu_ns;
  header.overruns = slot.overruns;
  header.native_count = static_cast<uint16_t>(used.natives);
  header.flags = static_cast<uint8_t>((slot.in_system_call ? kInSystemCall : 0) |
                                      (slot.charged_system_call ? kChargedSystemCall : 0) |
                                      (slot.missed_wait ? kMissedWait : 0));
  header.wide_natives = narrow ? 0 : 1;
  header.label_count = static_cast<uint16_t>(used.labels);
  header.script_frame_count = static_cast<uint16_t>(used.script_frames);
  header.script_text_bytes = used.script_text;
  header.sp_base = sp_base;
  std::memcpy(out, &header, sizeof(header));
  out += sizeof(header);

  if (narrow) {
    uint64_t* pcs = reinterpret_cast<uint64_t*>(out);
    uint32_t* sps = reinterpret_cast<uint32_t*>(out + used.natives * sizeof(uint64_t));
    for (uint32_t i = 0; i < used.natives; ++i) {
      pcs[i] = slot.natives[i].pc;
      sps[i] = static_cast<uint32_t>(slot.natives[i].sp - sp_base);
    }
  } else {
    std::memcpy(out, slot.natives, used.natives * sizeof(NativeFrame));
  }
  out += NativeBytes(used.natives, narrow);

  RecordLabel* labels = reinterpret_cast<RecordLabel*>(out);
  char* text = reinterpret_cast<char*>(out + used.labels * sizeof(RecordLabel));
  size_t text_bytes = 0;
  for (uint32_t i = 0; i < used.labels; ++i) {
    const SampleSlot::Label& label = slot.labels[i];
    const uint16_t length = DynamicLength(label);
    labels[i] = RecordLabel{label.label, label.stack_address, label.push_site, label.category,
                            length, static_cast<uint8_t>(label.has_dynamic ? 1 : 0), 0};
    std::memcpy(text + text_bytes, label.dynamic, length);
    text_bytes += length;
  }
  out += used.labels * sizeof(RecordLabel) + RoundUp8(text_bytes);

  std::memcpy(out, slot.script_frames, used.script_frames * sizeof(SampleSlot::ScriptFrame));
  out += used.script_frames * sizeof(SampleSlot::ScriptFrame);
  std::memcpy(out, slot.script_text, used.script_text);

  StrataTsanRelease(&head_);
  head_.store(new_head, std::memory_order_release);
  return true;
}
// End of signal context.

// ---------------------------------------------------------------------------------------
// The consumer's side.

bool SampleRing::TryRead(SampleSlot* slot) {
  if (!scratch_) return false;
  uint64_t tail = tail_.load(std::memory_order_relaxed);
  const uint64_t head = head_.load(std::memory_order_acquire);
  StrataTsanAcquire(&head_);
  for (;;) {
    if (tail == head) {
      StrataTsanRelease(&tail_);
      tail_.store(tail, std::memory_order_release);
      return false;
    }
    const unsigned char* in = ring_ + tail % kRingBytes;
    uint32_t first[2];
    std::memcpy(first, in, sizeof(first));
    if (first[1] == kSkipKind) {
      tail += first[0];
      continue;
    }
    RecordHeader header;
    std::memcpy(&header, in, sizeof(header));
    in += sizeof(header);
    const uint32_t natives = std::min<uint32_t>(header.native_count, SampleSlot::kMaxNativeFrames);
    const uint32_t labels = std::min<uint32_t>(header.label_count, SampleSlot::kMaxLabels);
    const uint32_t script_frames =
        std::min<uint32_t>(header.script_frame_count, SampleSlot::kMaxScriptFrames);
    const uint32_t script_text = std::min(header.script_text_bytes, SampleSlot::kScriptTextBytes);
    slot->time_ns = header.time_ns;
    slot->cpu_ns = header.cpu_ns;
    slot->overruns = header.overruns;
    slot->in_system_call = (header.flags & kInSystemCall) != 0;
    slot->charged_system_call = (header.flags & kChargedSystemCall) != 0;
    slot->missed_wait = (header.flags & kMissedWait) != 0;
    slot->native_count = natives;
    slot->label_count = labels;
    slot->script_frame_count = script_frames;
    slot->script_text_bytes = script_text;

    if (header.wide_natives) {
      std::memcpy(slot->natives, in, natives * sizeof(NativeFrame));
    } else {
      const uint64_t* pcs = reinterpret_cast<const uint64_t*>(in);
      const uint32_t* sps = reinterpret_cast<const uint32_t*>(in + natives * sizeof(uint64_t));
      for (uint32_t i = 0; i < natives; ++i) {
        slot->natives[i] = NativeFrame{static_cast<uintptr_t>(pcs[i]),
                                       static_cast<uintptr_t>(header.sp_base + sps[i])};
      }
    }
    in += NativeBytes(natives, header.wide_natives == 0);

    const RecordLabel* record_labels = reinterpret_cast<const RecordLabel*>(in);
    const char* text = reinterpret_cast<const char*>(in + labels * sizeof(RecordLabel));
    size_t text_bytes = 0;
    for (uint32_t i = 0; i < labels; ++i) {
      const RecordLabel& from = record_labels[i];
      SampleSlot::Label& to = slot->labels[i];
      to.label = from.label;
      to.stack_address = from.stack_address;
      to.push_site = from.push_site;
      to.category = from.category;
      to.has_dynamic = from.has_dynamic != 0;
      const uint16_t length = std::min<uint16_t>(from.dynamic_length, SampleSlot::kMaxDynamicChars);
      std::memcpy(to.dynamic, text + text_bytes, length);
      to.dynamic[length] = '\0';
      text_bytes += from.dynamic_length;
    }
    in += labels * sizeof(RecordLabel) + RoundUp8(text_bytes);

    std::memcpy(slot->script_frames, in, script_frames * sizeof(SampleSlot::ScriptFrame));
    in += script_frames * sizeof(SampleSlot::ScriptFrame);
    std::memcpy(slot->script_text, in, script_text);

    StrataTsanRelease(&tail_);
    tail_.store(tail + header.bytes, std::memory_order_release);
    return true;
  }
}

void SampleRing::DiscardAll() {
  const uint64_t head = head_.load(std::memory_order_acquire);
  StrataTsanAcquire(&head_);
  StrataTsanRelease(&tail_);
  tail_.store(head, std::memory_order_release);
}

// ---------------------------------------------------------------------------------------
// Construction: one mapping, the scratch slot (page-aligned) then the ring.

// Construction and destruction run once per thread, off the sampling path: cold (size).
__attribute__((cold)) SampleRing::SampleRing() {
  const size_t slot_bytes = (sizeof(SampleSlot) + kPage - 1) / kPage * kPage;
  mapped_bytes_ = slot_bytes + kRingBytes;
  void* memory = mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    mapped_bytes_ = 0;
    return;
  }
  scratch_ = static_cast<SampleSlot*>(memory);
  ring_ = static_cast<unsigned char*>(memory) + slot_bytes;
  // Fault in what a thread's first samples write: the scratch slot up to its first
  // kFaultedInNativeFrames native frames (deeper frames fault in when first written), and
  // the ring's first kFaultedInRingBytes; the rest when the sampler first drains a sample
  // of the thread (MakeResident).
  constexpr size_t kFaultedInBytes =
      offsetof(SampleSlot, natives) + sizeof(NativeFrame) * SampleSlot::kFaultedInNativeFrames;
  volatile unsigned char* const slot_start = reinterpret_cast<volatile unsigned char*>(scratch_);
  for (size_t offset = 0; offset < kFaultedInBytes; offset += kPage) slot_start[offset] = 0;
  slot_start[kFaultedInBytes - 1] = 0;
  volatile unsigned char* const ring_start = ring_;
  for (size_t offset = 0; offset < kFaultedInRingBytes; offset += kPage) ring_start[offset] = 0;
}

__attribute__((cold)) SampleRing::~SampleRing() {
  if (scratch_) munmap(scratch_, mapped_bytes_);
}

}  // namespace base_internal
}  // namespace strata
