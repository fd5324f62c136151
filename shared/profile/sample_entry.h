// Samples, counters and sampler overhead in the profile buffer: the entry layouts both
// tiers write and the profile capture reads (shared/buffer/entry_kinds.h lists the kinds).
//
//   kSample        [kind][ThreadId][TimeStamp][int64 cpu_delta_ns, -1 unknown][int32 overruns]
//                  [ULEB128 frame count][frames, root first]
//      frame:      [uint8 0][uint64 address]                                      native
//                  [uint8 1][ProfilerString label][uint8 category][bool][string dynamic?] label
//   kSameSample    [kind][ThreadId][TimeStamp]  the thread has not run since its previous
//                  sample: same stack, CPU delta 0 (written without signalling the thread)
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

// One frame read back.
struct SampleFrame {
  enum class Kind : uint8_t { kNative = 0, kLabel = 1 };
  Kind kind = Kind::kNative;
  uint64_t address = 0;       // kNative
  ProfilerString label;       // kLabel
  uint8_t category = 0;       // kLabel
  std::optional<std::string> dynamic;  // kLabel
};

// A sample read back.
struct SampleRecord {
  ThreadId thread;
  TimeStamp time;
  int64_t cpu_delta_ns = -1;
  int32_t overruns = 0;
  std::vector<SampleFrame> frames;  // Root first.
};

}  // namespace profile

template <>
struct Deserializer<profile::SampleFrame> : DeserializerBase<profile::SampleFrame> {
  static void ReadInto(EntryReader& reader, profile::SampleFrame& frame);
};

}  // namespace strata

#endif  // STRATA_SHARED_PROFILE_SAMPLE_ENTRY_H_
