#include "base/internal/sampling/sample_entries.h"

#include <cstring>
#include <string_view>

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

}  // namespace

size_t Serializer<MergedStack>::Bytes(const MergedStack& m) {
  const SampleSlot& s = *m.slot;
  size_t bytes = ULEB128Size(uint64_t{base_internal::MergedFrameCount(s)});
  base_internal::ForEachMergedFrame(s, [&](MergedFrameKind kind, uint32_t i) {
    switch (kind) {
      case MergedFrameKind::kNative:
        bytes += 1 + sizeof(uint64_t);
        return;
      case MergedFrameKind::kLabel: {
        const SampleSlot::Label& l = s.labels[i];
        bytes += 1 + StringEncoding::LiteralBytes(l.label ? strlen(l.label) : 0) + 1 + 1;
        if (l.has_dynamic) bytes += StringEncoding::DynamicBytes(strlen(l.dynamic));
        return;
      }
      case MergedFrameKind::kScript: {
        const SampleSlot::ScriptFrame& f = s.script_frames[i];
        bytes += 4 + ULEB128Size(uint64_t{f.line}) + ULEB128Size(uint64_t{f.column}) +
                 StringEncoding::DynamicBytes(ScriptText(s, f).size());
        return;
      }
    }
  });
  return bytes;
}

void Serializer<MergedStack>::Write(EntryWriter& writer, const MergedStack& m) {
  const SampleSlot& s = *m.slot;
  writer.WriteULEB128<uint64_t>(base_internal::MergedFrameCount(s));
  base_internal::ForEachMergedFrame(s, [&](MergedFrameKind kind, uint32_t i) {
    switch (kind) {
      case MergedFrameKind::kNative:
        writer.WriteObjects(static_cast<uint8_t>(SampleFrame::Kind::kNative),
                            static_cast<uint64_t>(s.natives[i].pc));
        return;
      case MergedFrameKind::kLabel: {
        const SampleSlot::Label& l = s.labels[i];
        const char* label = l.label ? l.label : "";
        writer.WriteObject(static_cast<uint8_t>(SampleFrame::Kind::kLabel));
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
  });
}

}  // namespace strata
