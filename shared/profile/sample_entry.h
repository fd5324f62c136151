// Samples, counters and sampler overhead in the profile buffer: the entry layouts both
// tiers write and the profile capture reads (shared/buffer/entry_kinds.h lists the kinds).
//
//   kSample        [kind][ThreadId][TimeStamp][int64 cpu_delta_ns, -1 unknown][int32 overruns]
//                  [ULEB128 frame count][frames, root first]
//      frame:      [uint8 0][uint64 address]                                      native
//                  [uint8 1][ProfilerString label][uint8 category][bool][string dynamic?] label
//                  [uint8 3][uint64 push site][... as kind 1]           label with its push site
//                  [uint8 2][uint8 ScriptFrameKind][uint8 category][uint8 flags]
//                  [ULEB128 line][ULEB128 column][string text]                    script
//      A script frame comes from a script engine (full tier): a function ("name (file:line:
//      col)" as the engine labels it) with its JIT tier, or one of the engine's own labels.
//      line/column: the current position in the function, valid with kScriptFrameHasPosition.
//      A label's push site (base/labels.h, LabelFrame::push_site) is an address in the code of
//      the function that pushed it, after inlining: it places the label among the inlined
//      frames of the native frame it follows (docs/symbols.md, "Labels").
//   kSampleSharedPrefix  [kind][ThreadId][TimeStamp][int64 cpu_delta_ns][int32 overruns]
//                  [ULEB128 base age ns][ULEB128 shared frames K][ULEB128 shared bytes]
//                  [ULEB128 own frame count N][N frames, root first]
//      A sample whose first K frames (root side) are its base's: the latest kSample or
//      kSampleSharedPrefix of the same thread before it in the buffer, taken `base age` ns
//      earlier (checked by readers); `shared bytes` is the size of those K frames' encoding.
//      Read back it is exactly the kSample [ULEB128 K + N][base's first K frames][N frames].
//      Written only when the base starts in the same chunk as this entry
//      (ChunkedBuffer::ReserveAndPutInChunk): a reader that reads the entry has read its base
//      (from the oldest block, or from a block of the thread's at or before the base), also
//      after the oldest chunks were destroyed, in a flight recorder file and after takeover.
//   kSameSample    [kind][ThreadId][TimeStamp][int64 cpu_delta_ns]  a copy of the thread's
//                  previous sample (same stack), written without signalling the thread when it
//                  has not run since the sampler's previous loop; cpu_delta_ns is the CPU it used
//                  between that sample and stopping (less than an interval), often 0
//   kCounterSample [kind][uint32 counter index][TimeStamp][int64 value][uint64 operations]
//   kProfilerOverhead [kind][TimeStamp loop start][TimeDuration locking][TimeDuration threads]
//                  [TimeDuration counters][TimeDuration extension work]   one sampler loop
//
// Thread safety: value types. Async-signal safety: no (reading allocates).
#ifndef STRATA_SHARED_PROFILE_SAMPLE_ENTRY_H_
#define STRATA_SHARED_PROFILE_SAMPLE_ENTRY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "platform/process_thread_ids.h"
#include "platform/time_stamp.h"
#include "shared/buffer/entry_serialization.h"

namespace strata {
namespace profile {

// What a script frame is. The values are part of the buffer format: append only.
enum class ScriptFrameKind : uint8_t {
  kLabel = 0,                // An engine label (e.g. "js::RunScript", a GC phase), not a function.
  kInterpreter = 1,          // A function run by the engine's bytecode interpreter.
  kBaselineInterpreter = 2,  // ... by SpiderMonkey's Baseline Interpreter.
  kBaseline = 3,             // ... in Baseline JIT code.
  kIon = 4,                  // ... in optimising JIT code (Ion/Warp).
  kWasm = 5,                 // A WebAssembly function.
  kFunction = 6,             // A function, tier unknown.
  kCount
};
inline constexpr uint8_t kScriptFrameRelevantForJs = 1u << 0;  // A label kept in JS-only views.
inline constexpr uint8_t kScriptFrameHasPosition = 1u << 1;    // line and column are known.
// The frame tag of a label written with its push site (read back as SampleFrame::Kind::kLabel).
inline constexpr uint8_t kLabelWithPushSiteTag = 3;

// True for the kinds that are script functions (everything but kLabel).
inline bool IsScriptFunction(ScriptFrameKind kind) { return kind != ScriptFrameKind::kLabel; }
// The Gecko frameTable "implementation" string of a tier ("blinterp", "baseline", "ion",
// "wasm"), or "" where Gecko writes null (interpreter, unknown, labels).
const char* ScriptFrameImplementation(ScriptFrameKind kind);

// One frame read back.
struct SampleFrame {
  enum class Kind : uint8_t { kNative = 0, kLabel = 1, kScript = 2 };
  Kind kind = Kind::kNative;
  uint64_t address = 0;       // kNative
  ProfilerString label;       // kLabel
  uint8_t category = 0;       // kLabel, kScript
  std::optional<std::string> dynamic;  // kLabel
  uint64_t push_site = 0;              // kLabel: where it was pushed; 0 when unknown.
  ScriptFrameKind script_kind = ScriptFrameKind::kLabel;  // kScript
  uint8_t script_flags = 0;                                // kScript
  uint32_t line = 0;                                       // kScript
  uint32_t column = 0;                                     // kScript
  std::string text;                                        // kScript
};

// A sample read back.
struct SampleRecord {
  ThreadId thread;
  TimeStamp time;
  int64_t cpu_delta_ns = -1;
  int32_t overruns = 0;
  std::vector<SampleFrame> frames;  // Root first.
};

// Reading kSampleSharedPrefix entries: one thread's latest sample frames as read, in order.
// Each reading of the buffer starts with Forget().
class SampleFrameHistory {
 public:
  void Forget() { known_ = false; }
  // After a kSample at `time` whose frame list (the rest of the entry: [ULEB128 count]
  // [frames]) is `list`: kept as the base of the next shared-prefix sample.
  void Remember(TimeStamp time, const uint8_t* list, size_t size);
  // Reads the rest of a kSampleSharedPrefix entry at `time` (after its overruns) and makes
  // the frame list a kSample would have carried, kept as the next base; `*list` then spans
  // it (valid until the next call). False when the base is not the one remembered (a reading
  // that did not see it) or the entry is malformed (then `reader` has failed).
  bool Expand(EntryReader& reader, TimeStamp time, const uint8_t** list, size_t* size);

 private:
  std::vector<uint8_t> list_;  // [ULEB128 count][frames]
  std::vector<uint8_t> next_;
  size_t count_header_bytes_ = 0;
  uint64_t count_ = 0;
  TimeStamp time_;
  bool known_ = false;
};

}  // namespace profile

template <>
struct Deserializer<profile::SampleFrame> : DeserializerBase<profile::SampleFrame> {
  static void ReadInto(EntryReader& reader, profile::SampleFrame& frame);
};

}  // namespace strata

#endif  // STRATA_SHARED_PROFILE_SAMPLE_ENTRY_H_
