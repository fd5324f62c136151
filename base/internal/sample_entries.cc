#include "base/internal/sample_entries.h"

#include <cstring>

namespace strata {

using base_internal::MergedStack;
using profile::SampleFrame;
using base_internal::SampleSlot;

size_t Serializer<MergedStack>::Bytes(const MergedStack& m) {
  const SampleSlot& s = *m.slot;
  size_t bytes = ULEB128Size(uint64_t{s.native_count} + s.label_count);
  bytes += s.native_count * (1 + sizeof(uint64_t));
  for (uint32_t i = 0; i < s.label_count; ++i) {
    const SampleSlot::Label& l = s.labels[i];
    bytes += 1 + StringEncoding::LiteralBytes(l.label ? strlen(l.label) : 0) + 1 + 1;
    if (l.has_dynamic) bytes += StringEncoding::DynamicBytes(strlen(l.dynamic));
  }
  return bytes;
}

void Serializer<MergedStack>::Write(EntryWriter& writer, const MergedStack& m) {
  const SampleSlot& s = *m.slot;
  writer.WriteULEB128<uint64_t>(uint64_t{s.native_count} + s.label_count);
  base_internal::ForEachMergedFrame(s, [&](bool is_native, uint32_t i) {
    if (is_native) {
      writer.WriteObjects(static_cast<uint8_t>(SampleFrame::Kind::kNative),
                          static_cast<uint64_t>(s.natives[i].pc));
      return;
    }
    const SampleSlot::Label& l = s.labels[i];
    const char* label = l.label ? l.label : "";
    writer.WriteObject(static_cast<uint8_t>(SampleFrame::Kind::kLabel));
    StringEncoding::WriteLiteral(writer, label, strlen(label));
    writer.WriteObjects(static_cast<uint8_t>(l.category), l.has_dynamic);
    if (l.has_dynamic) StringEncoding::WriteDynamic(writer, l.dynamic);
  });
}

}  // namespace strata
