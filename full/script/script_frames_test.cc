// Script frames from the signal handler to the Gecko profile: ScriptFrameWriter's bounded
// copies, the merge of natives (with JIT boundaries), labels and script frames by stack
// address, the kSample frame format read back, and the frames the profile capture writes.
#include <memory>
#include <string>
#include <vector>

#include "base/internal/sampling/sample_entries.h"
#include "base/internal/sampling/sample_ring.h"
#include "catch2/catch.hpp"
#include "full/script/script_stack.h"
#include "rapidjson/document.h"
#include "shared/buffer/entry_kinds.h"
#include "shared/buffer/local_limit_chunk_manager.h"
#include "shared/json/json_writer.h"
#include "shared/profile/profile_capture.h"
#include "shared/profile/sample_entry.h"

namespace strata {
namespace {

using base_internal::MergedFrameKind;
using base_internal::MergedStack;
using base_internal::SampleSlot;
using full::script::ScriptFrameWriter;
using profile::SampleFrame;
using profile::ScriptFrameKind;

// A zeroed slot on the heap (it is ~10 KiB): value-initialised.
std::unique_ptr<SampleSlot> NewSlot() { return std::make_unique<SampleSlot>(); }

std::string Text(const SampleSlot& slot, uint32_t i) {
  const SampleSlot::ScriptFrame& f = slot.script_frames[i];
  return std::string(slot.script_text + f.text_offset, f.text_length);
}

TEST_CASE("ScriptFrameWriter copies texts and positions, and bounds both pools") {
  auto slot = NewSlot();
  ScriptFrameWriter writer(*slot);
  CHECK(writer.Append(ScriptFrameKind::kIon, Category::kJavaScript, 0, 0x2000, "b (x.js:2:10)"));
  CHECK(writer.Append(ScriptFrameKind::kLabel, Category::kGc, profile::kScriptFrameRelevantForJs,
                      0x1000, "js::GCRuntime::collect", "minor"));
  const char* pieces[] = {"get ", "Array", ".", "length"};
  CHECK(writer.AppendPieces(ScriptFrameKind::kLabel, Category::kJavaScript, 0, 0x800, pieces, 4));
  CHECK(writer.Append(ScriptFrameKind::kInterpreter, Category::kJavaScript,
                      profile::kScriptFrameHasPosition, 0x700, "a (x.js:1:1)", nullptr, 3, 4));
  REQUIRE(slot->script_frame_count == 4);
  CHECK(Text(*slot, 0) == "b (x.js:2:10)");
  CHECK(slot->script_frames[0].kind == static_cast<uint8_t>(ScriptFrameKind::kIon));
  CHECK(slot->script_frames[0].stack_address == 0x2000);
  CHECK(slot->script_frames[0].line == 0);
  CHECK(Text(*slot, 1) == "js::GCRuntime::collect minor");
  CHECK(slot->script_frames[1].category == static_cast<uint8_t>(Category::kGc));
  CHECK(slot->script_frames[1].flags == profile::kScriptFrameRelevantForJs);
  CHECK(Text(*slot, 2) == "get Array.length");
  CHECK(slot->script_frames[3].line == 3);
  CHECK(slot->script_frames[3].column == 4);

  // Frames beyond the slot are dropped and counted; text beyond the pool is truncated.
  const std::string long_text(SampleSlot::kScriptTextBytes, 'x');
  while (writer.count() < SampleSlot::kMaxScriptFrames) {
    writer.Append(ScriptFrameKind::kBaseline, Category::kJavaScript, 0, 0x100, long_text.c_str());
  }
  CHECK_FALSE(writer.Append(ScriptFrameKind::kBaseline, Category::kJavaScript, 0, 0x100, "z"));
  CHECK(writer.dropped() == 1);
  CHECK(slot->script_text_bytes == SampleSlot::kScriptTextBytes);
  CHECK(slot->script_frames[SampleSlot::kMaxScriptFrames - 1].text_length == 0);
}

// natives innermost first: n0 (JIT callee, C++), a boundary where the walk skipped JIT code,
// n2 (the engine's entry), n3 (main). Labels and script frames root first.
std::unique_ptr<SampleSlot> MergeSlot() {
  auto slot = NewSlot();
  slot->natives[0] = {0x10, 0x1000};
  slot->natives[1] = {0, 0x1100};  // Boundary.
  slot->natives[2] = {0x30, 0x1400};
  slot->natives[3] = {0x40, 0x1800};
  slot->native_count = 4;
  slot->labels[0] = SampleSlot::Label{"app label", 0x1500, 0, 0, false, {}};
  slot->label_count = 1;
  ScriptFrameWriter writer(*slot);
  writer.Append(ScriptFrameKind::kLabel, Category::kJavaScript, 0, 0x1450, "js::RunScript");
  writer.Append(ScriptFrameKind::kBaselineInterpreter, Category::kJavaScript,
                profile::kScriptFrameHasPosition, 0x1200, "a (x.js:1:1)", nullptr, 3, 4);
  writer.Append(ScriptFrameKind::kIon, Category::kJavaScript, 0, 0x1150, "b (x.js:2:10)");
  writer.Append(ScriptFrameKind::kLabel, Category::kGc, 0, 0x900, "js::Nursery::collect");
  return slot;
}

TEST_CASE("natives, labels and script frames merge by stack address around JIT boundaries") {
  auto slot = MergeSlot();
  std::vector<std::string> order;
  base_internal::ForEachMergedFrame(*slot, [&](MergedFrameKind kind, uint32_t i) {
    switch (kind) {
      case MergedFrameKind::kNative:
        order.push_back("n" + std::to_string(i));
        break;
      case MergedFrameKind::kLabel:
        order.push_back(slot->labels[i].label);
        break;
      case MergedFrameKind::kScript:
        order.push_back(Text(*slot, i));
        break;
    }
  });
  // main, the entry, the entry's labels (older first), the JIT frames in the skipped gap,
  // the C++ callee, then what lies below every native frame.
  CHECK(order == std::vector<std::string>{"n3", "n2", "app label", "js::RunScript",
                                          "a (x.js:1:1)", "b (x.js:2:10)", "n0",
                                          "js::Nursery::collect"});
  CHECK(base_internal::MergedFrameCount(*slot) == 8);  // The boundary is not a frame.
}

TEST_CASE("kSample script frames read back and become JS frames in the Gecko profile") {
  auto slot = MergeSlot();
  ScriptFrameWriter writer(*slot);
  writer.Append(ScriptFrameKind::kBaseline, Category::kJavaScript, 0, 0x800, "x.js");
  slot->time_ns = TimeStamp::Now().ToNanoseconds();
  slot->cpu_ns = -1;

  LocalLimitChunkManager manager(4 << 20, 64 << 10);
  ChunkedBuffer buffer(ThreadSafety::kThreadSafe, manager);
  const ThreadId tid = ThreadId::FromNumber(4242);
  const TimeStamp start = TimeStamp::FromNanoseconds(slot->time_ns - 1000);
  REQUIRE(buffer.PutObjects(EntryKind::kSample, tid, TimeStamp::FromNanoseconds(slot->time_ns),
                            int64_t{-1}, int32_t{0}, MergedStack{slot.get()}));

  // Read back.
  std::vector<SampleFrame> frames;
  buffer.ReadEach([&](EntryReader& reader) {
    REQUIRE(reader.ReadObject<EntryKind>() == EntryKind::kSample);
    ThreadId t;
    TimeStamp time;
    int64_t cpu = 0;
    int32_t overruns = 0;
    reader.ReadIntoObjects(t, time, cpu, overruns, frames);
    REQUIRE_FALSE(reader.Failed());
  });
  REQUIRE(frames.size() == 9);
  CHECK(frames[0].kind == SampleFrame::Kind::kNative);
  CHECK(frames[0].address == 0x40);
  CHECK(frames[2].kind == SampleFrame::Kind::kLabel);
  CHECK(frames[3].kind == SampleFrame::Kind::kScript);
  CHECK(frames[3].script_kind == ScriptFrameKind::kLabel);
  CHECK(frames[3].text == "js::RunScript");
  CHECK(frames[4].script_kind == ScriptFrameKind::kBaselineInterpreter);
  CHECK((frames[4].script_flags & profile::kScriptFrameHasPosition) != 0);
  CHECK(frames[4].line == 3);
  CHECK(frames[4].column == 4);
  CHECK(frames[5].text == "b (x.js:2:10)");
  CHECK(frames[5].script_kind == ScriptFrameKind::kIon);
  CHECK(frames[8].text == "x.js");

  // Captured: JS functions as JS frames with their tier and position, labels as labels.
  profile::CaptureInputs inputs;
  inputs.start_time = start;
  inputs.meta.start_time = start;
  inputs.meta.product = "script frames test";
  inputs.process_name = "script frames test";
  inputs.symbolicate = false;
  ChunkedJsonWriter out;
  std::string error;
  REQUIRE(profile::WriteProfile(inputs, buffer, out, &error));
  const std::string json = out.TakeString();
  rapidjson::Document doc;
  doc.Parse(json.c_str(), json.size());
  REQUIRE_FALSE(doc.HasParseError());
  const auto& thread = doc["threads"][0];
  const auto& strings = thread["stringTable"];
  const auto& schema = thread["frameTable"]["schema"];
  struct Row {
    std::string location, implementation;
    bool has_line = false;
    int64_t line = 0, column = 0;
    int category = -1;
    bool relevant_for_js = false;
  };
  std::vector<Row> rows;
  for (const auto& r : thread["frameTable"]["data"].GetArray()) {
    Row row;
    row.location = strings[r[schema["location"].GetUint()].GetUint()].GetString();
    const auto& impl = r[schema["implementation"].GetUint()];
    if (!impl.IsNull()) row.implementation = strings[impl.GetUint()].GetString();
    const auto& line = r[schema["line"].GetUint()];
    if (!line.IsNull()) {
      row.has_line = true;
      row.line = line.GetInt64();
      row.column = r[schema["column"].GetUint()].GetInt64();
    }
    const auto& category = r[schema["category"].GetUint()];
    if (!category.IsNull()) row.category = category.GetInt();
    row.relevant_for_js = r[schema["relevantForJS"].GetUint()].GetBool();
    rows.push_back(row);
  }
  auto find = [&](const std::string& location) -> const Row* {
    for (const Row& r : rows) {
      if (r.location == location) return &r;
    }
    return nullptr;
  };
  const Row* b = find("b (x.js:2:10)");
  REQUIRE(b);
  CHECK(b->implementation == "ion");
  CHECK_FALSE(b->has_line);
  CHECK(b->category == static_cast<int>(Category::kJavaScript));
  const Row* a = find("a (x.js:1:1)");
  REQUIRE(a);
  CHECK(a->implementation == "blinterp");
  CHECK(a->has_line);
  CHECK(a->line == 3);
  CHECK(a->column == 4);
  const Row* top = find(" (x.js:1)");  // A script without a function: "(root scope) x.js".
  REQUIRE(top);
  CHECK(top->implementation == "baseline");
  const Row* run = find("js::RunScript");
  REQUIRE(run);
  CHECK(run->implementation.empty());
  const Row* gc = find("js::Nursery::collect");
  REQUIRE(gc);
  CHECK(gc->category == static_cast<int>(Category::kGc));
}

// A fake stack of 64 words stands for the thread's: the cached segment's entry (return
// address 0x5a5a10 at the word below its sp) is live above the stopped JIT code only while
// that word still holds it.
TEST_CASE("The cached outer segment is a fallback only while its entry is live above the JIT") {
  uintptr_t stack[64] = {};
  const uintptr_t low = reinterpret_cast<uintptr_t>(&stack[0]);
  const uintptr_t high = reinterpret_cast<uintptr_t>(&stack[64]);
  full::script::WalkCache cache;
  cache.pc = 0x5a5a10;
  cache.sp = reinterpret_cast<uintptr_t>(&stack[40]);
  cache.count = 3;
  stack[39] = cache.pc;
  FrameRegisters stopped;
  stopped.pc = 0x7000123;  // JIT code.
  stopped.sp = reinterpret_cast<uintptr_t>(&stack[10]);
  using full::script::internal::CachedResumeIsLive;

  CHECK(CachedResumeIsLive(cache, stopped, low, high));
  SECTION("the return address was overwritten: another call path") {
    stack[39] = 0x5a5a18;
    CHECK_FALSE(CachedResumeIsLive(cache, stopped, low, high));
  }
  SECTION("the entry is not older than the JIT code") {
    stopped.sp = cache.sp;
    CHECK_FALSE(CachedResumeIsLive(cache, stopped, low, high));
    stopped.sp = reinterpret_cast<uintptr_t>(&stack[45]);
    CHECK_FALSE(CachedResumeIsLive(cache, stopped, low, high));
  }
  SECTION("nothing cached yet") {
    cache.count = 0;
    CHECK_FALSE(CachedResumeIsLive(cache, stopped, low, high));
  }
  SECTION("the entry lies outside the stack bounds") {
    CHECK_FALSE(CachedResumeIsLive(cache, stopped, low, reinterpret_cast<uintptr_t>(&stack[39])));
  }
}

}  // namespace
}  // namespace strata

TEST_CASE("EndsWithCall recognises each x86-64 call form ending at the return address") {
  using strata::full::script::internal::EndsWithCall;
  // Each: the instruction's bytes, padded in front to 7 bytes with a byte that is no opcode
  // here (0x90, nop), then checked as the 7 bytes before a return address.
  struct Case {
    std::vector<uint8_t> bytes;
    bool call;
    const char* what;
  };
  const Case cases[] = {
      {{0xE8, 0x10, 0x20, 0x30, 0x40}, true, "call rel32"},
      {{0xFF, 0xD0}, true, "call rax"},
      {{0x41, 0xFF, 0xD3}, true, "call r11 (REX.B)"},
      {{0xFF, 0x10}, true, "call [rax]"},
      {{0xFF, 0x14, 0x24}, true, "call [rsp] (SIB)"},
      {{0xFF, 0x15, 0x01, 0x02, 0x03, 0x04}, true, "call [rip+disp32]"},
      {{0xFF, 0x14, 0x25, 0x01, 0x02, 0x03, 0x04}, true, "call [disp32] (SIB, no base)"},
      {{0xFF, 0x50, 0x08}, true, "call [rax+disp8]"},
      {{0xFF, 0x54, 0x24, 0x08}, true, "call [rsp+disp8] (SIB)"},
      {{0xFF, 0x90, 0x01, 0x02, 0x03, 0x04}, true, "call [rax+disp32]"},
      {{0xFF, 0x94, 0x24, 0x01, 0x02, 0x03, 0x04}, true, "call [rsp+disp32] (SIB)"},
      {{0x41, 0xFF, 0x55, 0x08}, true, "call [r13+disp8] (REX.B)"},
      {{0xFF, 0xE0}, false, "jmp rax (FF /4)"},
      {{0xFF, 0x20}, false, "jmp [rax]"},
      {{0xFF, 0xC0}, false, "inc eax (FF /0)"},
      {{0x48, 0x89, 0xE5}, false, "mov rbp, rsp"},
      {{0xFF, 0x50}, false, "call [rax+disp8] cut short: its disp8 would be the return address"},
      {{0xE8, 0x10, 0x20, 0x30}, false, "call rel32 cut short"},
  };
  for (const Case& c : cases) {
    uint8_t code[7];
    std::fill(code, code + 7, 0x90);
    std::copy(c.bytes.begin(), c.bytes.end(), code + 7 - c.bytes.size());
    INFO(c.what);
    CHECK(EndsWithCall(code, 7) == c.call);
  }
}
