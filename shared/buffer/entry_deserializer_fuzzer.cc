// libFuzzer target: the buffer's entry deserializers (entry_serialization.h, entry_kinds.h)
// and the profile's entry layouts built on them (shared/profile: sample frames, marker
// headers), reading bytes they did not write through an untrusted EntryReader.
//
// Input layout: [type selector][split][entry bytes...]. The selector picks what to read
// (repeatedly, until the entry is used up or the reader fails); the split cuts the entry
// bytes in two separately allocated spans, like a block that straddles two chunks, so that
// the across-spans paths are exercised and an overrun of either span is caught by ASan.
//
// Checked on every input (STRATA_CHECK aborts, which the fuzzer reports as a crash):
//  - reading never goes past the entry (ASan), RemainingBytes() only decreases;
//  - an untrusted reader never accepts a literal-string address;
//  - a value read without failure re-encodes to exactly Serializer<T>::Bytes() bytes, and
//    reading those bytes back gives a value that encodes to the very same bytes;
//  - a vector's element count never exceeds the bytes the entry had (no huge allocation).
//
// Built with clang + libFuzzer by tools/fuzz.sh, and replayed over its corpus
// (fuzz_corpus/entry_deserializer_fuzzer/) as an ordinary test by
// tools/testing/fuzz_replay_main.cc.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "platform/check.h"
#include "shared/buffer/entry_kinds.h"
#include "shared/buffer/entry_serialization.h"
#include "shared/profile/marker_entry.h"
#include "shared/profile/sample_entry.h"

namespace strata {
namespace {

using Byte = uint8_t;

// The entry bytes in two heap spans of exactly their sizes (ASan sees any overrun).
struct SplitEntry {
  std::unique_ptr<Byte[]> first;
  size_t first_bytes = 0;
  std::unique_ptr<Byte[]> second;
  size_t second_bytes = 0;

  SplitEntry(const Byte* data, size_t bytes, size_t split) {
    first_bytes = split;
    second_bytes = bytes - split;
    first.reset(new Byte[first_bytes]);
    second.reset(new Byte[second_bytes]);
    if (first_bytes != 0) std::memcpy(first.get(), data, first_bytes);
    if (second_bytes != 0) std::memcpy(second.get(), data + split, second_bytes);
  }
  EntryReader Reader() const {
    EntryReader reader(first.get(), first_bytes, second.get(), second_bytes);
    reader.SetUntrusted();
    return reader;
  }
};

// Encodes `value` with its Serializer into a buffer of exactly Bytes() bytes.
template <typename T>
std::vector<Byte> Encode(const T& value) {
  const size_t bytes = Serializer<T>::Bytes(value);
  std::vector<Byte> out(bytes);
  EntryWriter writer(out.data(), out.size(), nullptr, 0);
  writer.WriteObject(value);
  STRATA_CHECK(writer.RemainingBytes() == 0, "Serializer<T>::Bytes() disagrees with Write()");
  return out;
}

// A value decoded from fuzz bytes re-encodes to a stable form: encode, decode that (trusted
// is not needed: nothing read from fuzz bytes can be a literal), encode again, same bytes.
template <typename T>
void CheckReencodes(const T& value) {
  const std::vector<Byte> once = Encode(value);
  EntryReader reader = EntryReader::OverBytes(absl::MakeConstSpan(once));
  reader.SetUntrusted();
  const T again = reader.ReadObject<T>();
  STRATA_CHECK(!reader.Failed(), "a re-encoded value does not decode");
  STRATA_CHECK(reader.RemainingBytes() == 0, "a re-encoded value leaves bytes unread");
  STRATA_CHECK(Encode(again) == once, "decode(encode(x)) encodes differently from x");
}

// No ProfilerString read by an untrusted reader may be a literal (an address from the bytes).
void CheckNotLiteral(const ProfilerString& s) {
  STRATA_CHECK(!s.IsLiteral(), "an untrusted reader accepted a literal-string address");
}

// Reads values of type T until the entry is used up or the reader fails.
template <typename T, typename Check>
void ReadAll(EntryReader& reader, size_t entry_bytes, Check&& check) {
  while (reader.RemainingBytes() != 0) {
    const size_t before = reader.RemainingBytes();
    T value = reader.ReadObject<T>();
    const size_t after = reader.RemainingBytes();
    STRATA_CHECK(after <= before && before <= entry_bytes, "the reader moved backwards");
    if (reader.Failed()) return;
    check(value);
    if (after == before) return;  // A zero-byte type: nothing more to learn.
  }
}

template <typename T>
void ReadAllAndReencode(EntryReader& reader, size_t entry_bytes) {
  ReadAll<T>(reader, entry_bytes, [](const T& value) { CheckReencodes(value); });
}

using NestedVariant = std::variant<uint8_t, std::string, std::vector<int32_t>, bool>;
using MixedTuple = std::tuple<bool, ThreadId, ProcessId, TimeDuration, BlockIndex, double>;
using NestedPair =
    std::pair<std::vector<std::pair<uint16_t, std::string>>, std::optional<std::vector<TimeStamp>>>;

// The sample layout (shared/profile/sample_entry.h) after its kind byte, read the way the
// profile capture reads it.
void ReadSample(EntryReader& reader) {
  profile::SampleRecord record;
  reader.ReadIntoObjects(record.thread, record.time, record.cpu_delta_ns, record.overruns,
                         record.frames);
  if (reader.Failed()) return;
  for (const profile::SampleFrame& frame : record.frames) {
    CheckNotLiteral(frame.label);
    if (frame.kind == profile::SampleFrame::Kind::kScript) {
      STRATA_CHECK(frame.script_kind < profile::ScriptFrameKind::kCount,
                   "a script frame kind out of range was accepted");
    }
  }
}

void Run(const Byte* data, size_t size) {
  if (size < 2) return;
  const uint8_t selector = data[0];
  const Byte* entry = data + 2;
  const size_t entry_bytes = size - 2;
  const size_t split = entry_bytes == 0 ? 0 : data[1] % (entry_bytes + 1);
  const SplitEntry bytes(entry, entry_bytes, split);
  EntryReader reader = bytes.Reader();
  STRATA_CHECK(reader.RemainingBytes() == entry_bytes, "the reader does not see the whole entry");

  switch (selector % 16) {
    case 0:
      ReadAll<LegacyEntry>(reader, entry_bytes, [](const LegacyEntry& e) {
        STRATA_CHECK(IsLegacyKind(e.kind()), "a non-legacy kind was read as a legacy entry");
        CheckReencodes(e);
      });
      break;
    case 1:
      ReadAllAndReencode<std::string>(reader, entry_bytes);
      break;
    case 2:
      ReadAll<ProfilerString>(reader, entry_bytes, [](const ProfilerString& s) {
        CheckNotLiteral(s);
        CheckReencodes(s);
      });
      break;
    case 3:
      ReadAll<std::vector<uint64_t>>(reader, entry_bytes, [&](const std::vector<uint64_t>& v) {
        STRATA_CHECK(v.size() * sizeof(uint64_t) <= entry_bytes, "a vector larger than its entry");
        CheckReencodes(v);
      });
      break;
    case 4:
      ReadAll<std::vector<std::string>>(reader, entry_bytes, [&](const std::vector<std::string>& v) {
        STRATA_CHECK(v.size() <= entry_bytes, "more strings than the entry has bytes");
        CheckReencodes(v);
      });
      break;
    case 5:
      ReadAllAndReencode<std::optional<TimeStamp>>(reader, entry_bytes);
      break;
    case 6:
      ReadAllAndReencode<NestedVariant>(reader, entry_bytes);
      break;
    case 7:
      ReadAllAndReencode<MixedTuple>(reader, entry_bytes);
      break;
    case 8:
      ReadAllAndReencode<NestedPair>(reader, entry_bytes);
      break;
    case 9:  // ULEB128 of each width: a value that decodes fits its type.
      while (reader.RemainingBytes() != 0 && !reader.Failed()) {
        (void)reader.ReadULEB128<uint8_t>();
        (void)reader.ReadULEB128<uint16_t>();
        (void)reader.ReadULEB128<uint32_t>();
        (void)reader.ReadULEB128<uint64_t>();
      }
      break;
    case 10:  // Skips and peeks interleaved with reads, across the split.
      while (reader.RemainingBytes() != 0 && !reader.Failed()) {
        const size_t before = reader.RemainingBytes();
        const Byte skip = reader.PeekByte();
        STRATA_CHECK(reader.RemainingBytes() == before, "PeekByte consumed a byte");
        reader.Skip(skip % 7);
        if (reader.Failed()) {
          STRATA_CHECK(skip % 7 > before, "Skip failed with enough bytes left");
          break;
        }
        uint32_t value = 0;
        reader.ReadBytes(&value, sizeof(value));
        if (reader.Failed()) STRATA_CHECK(value == 0, "a failed read left bytes behind");
      }
      break;
    case 11:
      ReadAll<profile::SampleFrame>(reader, entry_bytes, [](const profile::SampleFrame& frame) {
        CheckNotLiteral(frame.label);
      });
      break;
    case 12:
      ReadSample(reader);
      break;
    case 13:
      ReadAll<profile::MarkerHeader>(reader, entry_bytes, [&](const profile::MarkerHeader& h) {
        CheckNotLiteral(h.name);
        STRATA_CHECK(h.stack.size() * sizeof(uint64_t) <= entry_bytes,
                     "a marker stack larger than its entry");
        CheckReencodes(h);
      });
      break;
    case 14: {  // A whole buffer entry: the kind byte, then the kind's layout.
      const EntryKind kind = reader.ReadObject<EntryKind>();
      if (reader.Failed()) break;
      if (kind == EntryKind::kSample) {
        ReadSample(reader);
      } else if (kind == EntryKind::kSampleSharedPrefix) {
        // Against a base of two native frames at time 0: the rebuilt list must read as a
        // kSample's frames (or the expansion refuses).
        static const uint8_t kBase[] = {2, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 9, 9, 9, 9, 9, 9, 9, 9};
        profile::SampleFrameHistory history;
        history.Remember(TimeStamp(), kBase, sizeof(kBase));
        profile::SampleRecord record;
        reader.ReadIntoObjects(record.thread, record.time, record.cpu_delta_ns, record.overruns);
        const uint8_t* list = nullptr;
        size_t list_size = 0;
        if (!reader.Failed() && history.Expand(reader, record.time, &list, &list_size)) {
          EntryReader frames = EntryReader::OverBytes(absl::Span<const uint8_t>(list, list_size));
          frames.ReadIntoObject(record.frames);
          for (const profile::SampleFrame& frame : record.frames) CheckNotLiteral(frame.label);
        }
      } else if (kind == EntryKind::kMarker) {
        const profile::MarkerHeader header = reader.ReadObject<profile::MarkerHeader>();
        CheckNotLiteral(header.name);
        if (!reader.Failed() && header.payload_tag == profile::kTextMarkerTag) {
          (void)reader.ReadObject<std::string>();
        }
      } else if (IsLegacyKind(kind)) {
        (void)reader.ReadObject<uint64_t>();
      }
      break;
    }
    default:  // Raw numbers of every width, bool (which refuses anything but 0 and 1).
      while (reader.RemainingBytes() != 0 && !reader.Failed()) {
        const uint8_t next = reader.PeekByte();
        const bool flag = reader.ReadObject<bool>();
        STRATA_CHECK(reader.Failed() == (next > 1), "bool accepted a byte other than 0 or 1");
        if (reader.Failed()) break;
        STRATA_CHECK(flag == (next == 1), "bool read the wrong value");
        (void)reader.ReadObject<int16_t>();
        (void)reader.ReadObject<float>();
        (void)reader.ReadObject<TimeStamp>();
      }
      break;
  }
  STRATA_CHECK(reader.RemainingBytes() <= entry_bytes, "the reader ran past its entry");
}

}  // namespace
}  // namespace strata

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  strata::Run(data, size);
  return 0;
}
