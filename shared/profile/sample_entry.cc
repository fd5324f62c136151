#include "shared/profile/sample_entry.h"

namespace strata {

using profile::SampleFrame;

void Deserializer<SampleFrame>::ReadInto(EntryReader& reader, SampleFrame& frame) {
  const uint8_t kind = reader.ReadObject<uint8_t>();
  if (kind == static_cast<uint8_t>(SampleFrame::Kind::kNative)) {
    frame.kind = SampleFrame::Kind::kNative;
    frame.address = reader.ReadObject<uint64_t>();
    return;
  }
  if (kind != static_cast<uint8_t>(SampleFrame::Kind::kLabel)) {
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
