#include "shared/profile/sample_entry.h"

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
