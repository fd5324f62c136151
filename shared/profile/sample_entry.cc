#include "shared/profile/sample_entry.h"

#include <cstring>

namespace strata {

using profile::SampleFrame;

namespace profile {

const char* ScriptFrameImplementation(ScriptFrameKind kind) {
  switch (kind) {
    case ScriptFrameKind::kBaselineInterpreter:
      return "blinterp";
    case ScriptFrameKind::kBaseline:
      return "baseline";
    case ScriptFrameKind::kIon:
      return "ion";
    case ScriptFrameKind::kWasm:
      return "wasm";
    default:
      return "";
  }
}

void SampleFrameHistory::Remember(TimeStamp time, const uint8_t* list, size_t size) {
  const uint8_t* cursor = list;
  known_ = TryReadULEB128(&cursor, list + size, &count_);
  if (!known_) return;
  count_header_bytes_ = static_cast<size_t>(cursor - list);
  list_.assign(list, list + size);
  time_ = time;
}

bool SampleFrameHistory::Expand(EntryReader& reader, TimeStamp time, const uint8_t** list,
                                size_t* size) {
  uint64_t fields[4];  // base age (ns), shared frames, shared bytes, own frames
  for (uint64_t& field : fields) field = reader.ReadULEB128<uint64_t>();
  const uint64_t age_ns = fields[0];
  const uint64_t shared_frames = fields[1];
  const uint64_t shared_bytes = fields[2];
  const uint64_t own_frames = fields[3];
  // Every frame takes at least one byte.
  if (reader.Failed() || own_frames > reader.RemainingBytes() || shared_frames > shared_bytes) {
    reader.SetFailed();
    return false;
  }
  const bool base_known = known_ && age_ns <= uint64_t{INT64_MAX} &&
                          time_.ToNanoseconds() == time.ToNanoseconds() - static_cast<int64_t>(age_ns) &&
                          shared_frames <= count_ && shared_bytes <= list_.size() - count_header_bytes_;
  if (!base_known) {
    known_ = false;
    return false;
  }
  const uint64_t count = shared_frames + own_frames;
  const size_t own_bytes = reader.RemainingBytes();
  next_.resize(ULEB128Size(count) + shared_bytes + own_bytes);
  uint8_t* out = next_.data();
  WriteULEB128(count, out);
  std::memcpy(out, list_.data() + count_header_bytes_, shared_bytes);
  reader.ReadBytes(out + shared_bytes, own_bytes);
  list_.swap(next_);
  count_header_bytes_ = ULEB128Size(count);
  count_ = count;
  time_ = time;
  *list = list_.data();
  *size = list_.size();
  return !reader.Failed();
}

}  // namespace profile

void Deserializer<SampleFrame>::ReadInto(EntryReader& reader, SampleFrame& frame) {
  const uint8_t kind = reader.ReadObject<uint8_t>();
  frame.push_site = 0;
  if (kind == static_cast<uint8_t>(SampleFrame::Kind::kNative)) {
    frame.kind = SampleFrame::Kind::kNative;
    frame.address = reader.ReadObject<uint64_t>();
    return;
  }
  if (kind == static_cast<uint8_t>(SampleFrame::Kind::kScript)) {
    frame.kind = SampleFrame::Kind::kScript;
    uint8_t script_kind = 0;
    reader.ReadIntoObjects(script_kind, frame.category, frame.script_flags);
    if (script_kind >= static_cast<uint8_t>(profile::ScriptFrameKind::kCount)) {
      reader.SetFailed();
      return;
    }
    frame.script_kind = static_cast<profile::ScriptFrameKind>(script_kind);
    frame.line = reader.ReadULEB128<uint32_t>();
    frame.column = reader.ReadULEB128<uint32_t>();
    reader.ReadIntoObject(frame.text);
    return;
  }
  if (kind == profile::kLabelWithPushSiteTag) {
    frame.push_site = reader.ReadObject<uint64_t>();
  } else if (kind != static_cast<uint8_t>(SampleFrame::Kind::kLabel)) {
    reader.SetFailed();
    return;
  }
  frame.kind = SampleFrame::Kind::kLabel;
  reader.ReadIntoObjects(frame.label, frame.category);
  if (reader.ReadObject<bool>()) {
    frame.dynamic.emplace();
    reader.ReadIntoObject(*frame.dynamic);
  } else {
    frame.dynamic.reset();
  }
}

}  // namespace strata
