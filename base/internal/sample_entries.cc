#include "base/internal/sample_entries.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "platform/page_allocation.h"

namespace strata {

using base_internal::MergedFrameKind;
using base_internal::MergedStack;
using base_internal::SampleSlot;
using profile::SampleFrame;

namespace base_internal {

uint32_t MergedFrameCount(const SampleSlot& s) {
  uint32_t count = std::min(s.label_count, SampleSlot::kMaxLabels) +
                   std::min(s.script_frame_count, SampleSlot::kMaxScriptFrames);
  const uint32_t natives = std::min(s.native_count, SampleSlot::kMaxNativeFrames);
  for (uint32_t i = 0; i < natives; ++i) count += s.natives[i].pc != 0 ? 1 : 0;
  return count;
}

}  // namespace base_internal

namespace {

// The script frame's text, clamped to the pool.
std::string_view ScriptText(const SampleSlot& s, const SampleSlot::ScriptFrame& f) {
  const uint32_t used = std::min(s.script_text_bytes, SampleSlot::kScriptTextBytes);
  if (f.text_offset >= used) return std::string_view();
  return std::string_view(s.script_text + f.text_offset,
                          std::min<uint32_t>(f.text_length, used - f.text_offset));
}

// One merged frame's encoding: its size, and writing it.
size_t MergedFrameBytes(const SampleSlot& s, MergedFrameKind kind, uint32_t i) {
  switch (kind) {
    case MergedFrameKind::kNative:
      return 1 + sizeof(uint64_t);
    case MergedFrameKind::kLabel: {
      const SampleSlot::Label& l = s.labels[i];
      return 1 + (l.push_site != 0 ? sizeof(uint64_t) : 0) +
             StringEncoding::LiteralBytes(l.label ? strlen(l.label) : 0) + 1 + 1 +
             (l.has_dynamic ? StringEncoding::DynamicBytes(strlen(l.dynamic)) : 0);
    }
    case MergedFrameKind::kScript: {
      const SampleSlot::ScriptFrame& f = s.script_frames[i];
      return 4 + ULEB128Size(uint64_t{f.line}) + ULEB128Size(uint64_t{f.column}) +
             StringEncoding::DynamicBytes(ScriptText(s, f).size());
    }
  }
  return 0;
}

void WriteMergedFrame(EntryWriter& writer, const SampleSlot& s, MergedFrameKind kind, uint32_t i) {
    switch (kind) {
      case MergedFrameKind::kNative:
        writer.WriteObjects(static_cast<uint8_t>(SampleFrame::Kind::kNative),
                            static_cast<uint64_t>(s.natives[i].pc));
        return;
      case MergedFrameKind::kLabel: {
        const SampleSlot::Label& l = s.labels[i];
        const char* label = l.label ? l.label : "";
        if (l.push_site != 0) {
          writer.WriteObjects(profile::kLabelWithPushSiteTag, static_cast<uint64_t>(l.push_site));
        } else {
          writer.WriteObject(static_cast<uint8_t>(SampleFrame::Kind::kLabel));
        }
        StringEncoding::WriteLiteral(writer, label, strlen(label));
        writer.WriteObjects(static_cast<uint8_t>(l.category), l.has_dynamic);
        if (l.has_dynamic) StringEncoding::WriteDynamic(writer, l.dynamic);
        return;
      }
      case MergedFrameKind::kScript: {
        const SampleSlot::ScriptFrame& f = s.script_frames[i];
        const uint8_t script_kind =
            f.kind < static_cast<uint8_t>(profile::ScriptFrameKind::kCount)
                ? f.kind
                : static_cast<uint8_t>(profile::ScriptFrameKind::kFunction);
        writer.WriteObjects(static_cast<uint8_t>(SampleFrame::Kind::kScript), script_kind,
                            f.category, f.flags);
        writer.WriteULEB128<uint32_t>(f.line);
        writer.WriteULEB128<uint32_t>(f.column);
        StringEncoding::WriteDynamic(writer, ScriptText(s, f));
        return;
      }
    }
}

}  // namespace

size_t Serializer<MergedStack>::Bytes(const MergedStack& m) {
  const SampleSlot& s = *m.slot;
  size_t bytes = ULEB128Size(uint64_t{base_internal::MergedFrameCount(s)});
  base_internal::ForEachMergedFrame(
      s, [&](MergedFrameKind kind, uint32_t i) { bytes += MergedFrameBytes(s, kind, i); });
  return bytes;
}

void Serializer<MergedStack>::Write(EntryWriter& writer, const MergedStack& m) {
  const SampleSlot& s = *m.slot;
  writer.WriteULEB128<uint64_t>(base_internal::MergedFrameCount(s));
  base_internal::ForEachMergedFrame(
      s, [&](MergedFrameKind kind, uint32_t i) { WriteMergedFrame(writer, s, kind, i); });
}

namespace base_internal {

namespace {

constexpr uint32_t kMaxMergedFrames =
    SampleSlot::kMaxNativeFrames + SampleSlot::kMaxLabels + SampleSlot::kMaxScriptFrames;
// A shorter shared part is not worth a reference (the reference's own fields).
constexpr size_t kMinSharedBytes = 16;

// The merged frames of the sample being written and where each frame's encoding ends
// (registry mutex held: one at a time).
struct MergedFramesScratch {
  uint8_t bytes[PreviousSampleStack::kCapacityBytes];
  uint32_t ends[kMaxMergedFrames];
  uint32_t count;
  size_t size;
};
MergedFramesScratch g_scratch;

// Encodes the slot's merged frames into g_scratch, as Serializer<MergedStack> writes them
// after the count. False when they do not fit.
bool EncodeMergedFrames(const SampleSlot& s) {
  MergedFramesScratch& out = g_scratch;
  EntryWriter writer(out.bytes, sizeof(out.bytes), nullptr, 0);
  uint32_t count = 0;
  bool fits = true;
  ForEachMergedFrame(s, [&](MergedFrameKind kind, uint32_t i) {
    if (!fits) return;
    if (kind == MergedFrameKind::kNative) {
      // The usual frame, with plain stores (the same bytes as WriteMergedFrame).
      if (uint8_t* p = writer.TakeContiguous(1 + sizeof(uint64_t))) {
        p[0] = static_cast<uint8_t>(SampleFrame::Kind::kNative);
        const uint64_t pc = s.natives[i].pc;
        std::memcpy(p + 1, &pc, sizeof(pc));
      } else {
        fits = false;
        return;
      }
    } else if (MergedFrameBytes(s, kind, i) <= writer.RemainingBytes()) {
      WriteMergedFrame(writer, s, kind, i);
    } else {
      fits = false;
      return;
    }
    out.ends[count++] = static_cast<uint32_t>(sizeof(out.bytes) - writer.RemainingBytes());
  });
  out.count = count;
  out.size = sizeof(out.bytes) - writer.RemainingBytes();
  return fits;
}

size_t CommonPrefixBytes(const uint8_t* a, const uint8_t* b, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x, y;
    std::memcpy(&x, a + i, 8);
    std::memcpy(&y, b + i, 8);
    if (x != y) break;
  }
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

PreviousSampleStack::~PreviousSampleStack() {
  if (bytes_) FreePages(bytes_, kCapacityBytes);
}

BlockIndex PutSampleEntry(ChunkedBuffer& buffer, PreviousSampleStack& previous, ThreadId thread,
                          TimeStamp time, int64_t cpu_delta_ns, int32_t overruns,
                          const SampleSlot& slot) {
  if (!previous.bytes_) previous.bytes_ = static_cast<uint8_t*>(AllocatePages(PreviousSampleStack::kCapacityBytes));
  if (!previous.bytes_ || !EncodeMergedFrames(slot)) {
    previous.Forget();
    return buffer.PutObjects(EntryKind::kSample, thread, time, cpu_delta_ns, overruns,
                             MergedStack{&slot});
  }
  const MergedFramesScratch& frames = g_scratch;
  // Whole frames within the bytes both encodings start with: the same frames (each frame's
  // encoding is self-delimiting), so the previous encoding's first shared_bytes are these.
  uint32_t shared_frames = 0;
  const int64_t time_ns = time.ToNanoseconds();
  if (previous.known_ && time_ns >= previous.time_ns_) {
    const size_t common =
        CommonPrefixBytes(previous.bytes_, frames.bytes, std::min(previous.size_, frames.size));
    shared_frames = static_cast<uint32_t>(
        std::upper_bound(frames.ends, frames.ends + frames.count, common) - frames.ends);
  }
  const size_t shared_bytes = shared_frames ? frames.ends[shared_frames - 1] : 0;
  // Each encoding's fields before its frames, made before locking: [kind][thread][time]
  // [cpu delta][overruns], then the whole sample's frame count, or the shared one's base age,
  // shared frames, shared bytes and own frame count (shared/profile/sample_entry.h).
  uint8_t whole_head[64];
  uint8_t shared_head[64];
  EntryWriter head_writer(whole_head, sizeof(whole_head), nullptr, 0);
  head_writer.WriteObjects(EntryKind::kSample, thread, time, cpu_delta_ns, overruns);
  const size_t common_bytes = sizeof(whole_head) - head_writer.RemainingBytes();
  std::memcpy(shared_head, whole_head, common_bytes);
  shared_head[0] = static_cast<uint8_t>(EntryKind::kSampleSharedPrefix);
  uint8_t* whole_end = whole_head + common_bytes;
  WriteULEB128(uint64_t{frames.count}, whole_end);
  uint8_t* shared_end = shared_head + common_bytes;
  for (const uint64_t field : {static_cast<uint64_t>(time_ns - previous.time_ns_), uint64_t{shared_frames},
                               uint64_t{shared_bytes}, uint64_t{frames.count - shared_frames}}) {
    WriteULEB128(field, shared_end);
  }
  BufferIndex chunk_start = 0;
  bool shares = false;
  const BlockIndex block = buffer.ReserveAndPutInChunk(
      [&](BufferIndex start) {
        chunk_start = start;
        shares = shared_bytes >= kMinSharedBytes && previous.known_ && start == previous.chunk_start_;
        return shares ? static_cast<size_t>(shared_end - shared_head) + frames.size - shared_bytes
                      : static_cast<size_t>(whole_end - whole_head) + frames.size;
      },
      [&](EntryWriter* writer) {
        if (!writer) return BlockIndex();
        const uint8_t* head = shares ? shared_head : whole_head;
        writer->WriteBytes(head, static_cast<size_t>((shares ? shared_end : whole_end) - head));
        const size_t skipped = shares ? shared_bytes : 0;
        writer->WriteBytes(frames.bytes + skipped, frames.size - skipped);
        return writer->CurrentBlockIndex();
      });
  if (!block) {
    previous.Forget();
    return block;
  }
  // The first shared_bytes are already there.
  std::memcpy(previous.bytes_ + shared_bytes, frames.bytes + shared_bytes,
              frames.size - shared_bytes);
  previous.size_ = frames.size;
  previous.time_ns_ = time_ns;
  previous.chunk_start_ = chunk_start;
  previous.known_ = true;
  return block;
}

}  // namespace base_internal

}  // namespace strata
