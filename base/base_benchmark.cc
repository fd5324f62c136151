// Costs of the base tier's hot paths (docs/benchmarks.md). Run:
//   bazel run -c opt //base:base_benchmark
#include <pthread.h>
#include <unistd.h>

#include <string>

#include "base/labels.h"
#include "base/markers.h"
#include "base/profiler.h"
#include "base/testing/three_field_marker.h"
#include "benchmark/benchmark.h"
#include "base/internal/session/core.h"
#include "platform/strata_clock.h"
#include "platform/strata_clock_table.h"
#include "platform/time_stamp.h"
#include "platform/tsc_clock.h"
#include "shared/buffer/chunked_buffer.h"
#include "shared/buffer/entry_kinds.h"
#include "shared/buffer/staging_area.h"
#include "shared/profile/marker_entry.h"

namespace {

using strata::testing::ThreeFieldMarker;

void EnsureStopped() {
  if (strata::ProfilerIsActive()) strata::ProfilerStop();
}
void EnsureStarted() {
  if (!strata::ProfilerIsActive()) {
    strata::ProfilerSettings settings;
    settings.buffer_megabytes = 64;
    strata::ProfilerStart(settings);
  }
  // The sampler switches TimeStamp::Now() to the TSC ~10 ms into the session (where the TSC
  // is usable): measure the steady state.
  for (int i = 0; i < 100 && !strata::StrataClockUsesTsc(); ++i) usleep(10 * 1000);
}

// The floor: an empty loop body.
void BM_EmptyLoop(benchmark::State& state) {
  for (auto _ : state) benchmark::ClobberMemory();
}
BENCHMARK(BM_EmptyLoop);

// The timestamp floor the marker rows are compared with (issue 38), in the same binary: one
// `rdtsc` (what a marker's time would cost at the least), and TimeStamp::Now() (the clock
// markers read: CLOCK_MONOTONIC through the vDSO). Each result goes to memory, as a marker's
// time does.
void BM_ReadTsc(benchmark::State& state) {
  for (auto _ : state) {
    uint64_t ticks = strata::ReadTscTicks();
    benchmark::DoNotOptimize(ticks);
  }
}
BENCHMARK(BM_ReadTsc);

// rdtscp: the Strata clock's ordered tick read (platform/strata_clock_table.h).
void BM_ReadTscp(benchmark::State& state) {
  for (auto _ : state) {
    unsigned int processor;
    uint64_t ticks = __builtin_ia32_rdtscp(&processor);
    benchmark::DoNotOptimize(ticks);
  }
}
BENCHMARK(BM_ReadTscp);

// CLOCK_MONOTONIC through the vDSO: TimeStamp::Now() before the Strata clock runs on the TSC
// (and where it cannot), what markers read before issue 38.
void BM_ClockGettimeMonotonic(benchmark::State& state) {
  for (auto _ : state) {
    strata::TimeStamp now = strata::TimeStamp::MonotonicNow();
    benchmark::DoNotOptimize(now);
  }
}
BENCHMARK(BM_ClockGettimeMonotonic);

// TimeStamp::Now() in a session: the Strata clock (rdtsc and the conversion table) where the
// TSC is usable (the "tsc_clock" counter says which).
void BM_TimeStampNow(benchmark::State& state) {
  EnsureStarted();
  for (auto _ : state) {
    strata::TimeStamp now = strata::TimeStamp::Now();
    benchmark::DoNotOptimize(now);
  }
  state.counters["tsc_clock"] = strata::StrataClockUsesTsc() ? 1 : 0;
}
BENCHMARK(BM_TimeStampNow);

void BM_LabelInactive(benchmark::State& state) {
  EnsureStopped();
  for (auto _ : state) {
    STRATA_LABEL("label", kOther);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_LabelInactive);

void BM_MarkerInactive(benchmark::State& state) {
  EnsureStopped();
  for (auto _ : state) {
    STRATA_MARKER_UNTYPED("marker", kOther);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_MarkerInactive);

void BM_LabelActivePushPop(benchmark::State& state) {
  EnsureStarted();
  for (auto _ : state) {
    STRATA_LABEL("label", kOther);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_LabelActivePushPop);

void BM_MarkerUntypedInstant(benchmark::State& state) {
  EnsureStarted();
  for (auto _ : state) STRATA_MARKER_UNTYPED("marker", kOther);
  strata::base_internal::SessionBuffer().Clear();
}
BENCHMARK(BM_MarkerUntypedInstant);

void BM_MarkerUntypedInterval(benchmark::State& state) {
  EnsureStarted();
  const strata::TimeStamp start = strata::TimeStamp::Now();
  for (auto _ : state) {
    // One entry for the whole interval, ending when recorded (the marker reads the clock).
    STRATA_MARKER_UNTYPED("marker", kOther, strata::MarkerOptions::IntervalUntilNow(start));
  }
  strata::base_internal::SessionBuffer().Clear();
}
BENCHMARK(BM_MarkerUntypedInterval);

void BM_MarkerTypedThreeFields(benchmark::State& state) {
  EnsureStarted();
  int64_t i = 0;
  for (auto _ : state) {
    STRATA_MARKER("typed", kOther, {}, ThreeFieldMarker, ++i, 2.5,
                  strata::ProfilerString::Literal("text"));
  }
  strata::base_internal::SessionBuffer().Clear();
}
BENCHMARK(BM_MarkerTypedThreeFields);

// Where an instant marker's nanoseconds go (issue 38): its work written inline, with the
// same building blocks as the fast path (base/internal/markers/markers.cc
// BeginStagedMarkerNow) but no call, no gate and none of its checks, into a staging of this
// benchmark's own that is flushed into the session buffer when full, as the marker's is.
// kClock: 0 no clock read (the header's stores and the flushes alone), 1 rdtscp and the
// conversion (the Strata clock: the ordered floor of a marker), 2 plain rdtsc and the
// conversion (what an unordered clock would cost).
template <int kClock>
void BM_MarkerFloor(benchmark::State& state) {
  EnsureStarted();
  strata::StagingArea* const staging = new strata::StagingArea;
  const strata::ThreadId tid = strata::CurrentThreadId();
  static const char kName[] = "marker";
  for (auto _ : state) {
    constexpr size_t kEntryBytes = 1 + strata::profile::kCommonMarkerHeaderBytes;
    uint8_t* p = staging->TryReserveSmallEntry(kEntryBytes);
    if (p == nullptr) {
      staging->FlushAndRewind(strata::base_internal::SessionBuffer());
      p = staging->TryReserveSmallEntry(kEntryBytes);
    }
    int64_t now_ns = 1;
    if constexpr (kClock != 0) {
      uint64_t ticks;
      if constexpr (kClock == 1) {
        ticks = strata::clock_internal::ReadStrataClockTicks();
      } else {
        ticks = strata::ReadTscTicks();
      }
      if (!strata::clock_internal::TicksToStrataNanosecondsNewestSegment(ticks, &now_ns)) {
        strata::clock_internal::TicksToStrataNanosecondsSlow(ticks, &now_ns);
      }
    }
    *p = static_cast<uint8_t>(strata::EntryKind::kMarker);
    strata::profile::WriteCommonMarkerHeader(
        p + 1, tid, strata::MarkerPhase::kInstant,
        strata::TimeStamp::FromNanoseconds(now_ns), strata::TimeStamp(), kName,
        sizeof(kName) - 1, static_cast<uint8_t>(strata::Category::kOther), 0);
    staging->CommitEntry();
  }
  staging->Discard();
  delete staging;
  strata::base_internal::SessionBuffer().Clear();
}
BENCHMARK_TEMPLATE(BM_MarkerFloor, 0)->Name("BM_MarkerFloorStoresOnly");
BENCHMARK_TEMPLATE(BM_MarkerFloor, 1)->Name("BM_MarkerFloorOrdered");
BENCHMARK_TEMPLATE(BM_MarkerFloor, 2)->Name("BM_MarkerFloorUnordered");

// The cost of sampling a busy thread: the same work with and without a session; the
// difference divided by the samples taken is the cost of one sample (signal delivery, stack
// walk with libunwind, label copy), all on the sampled thread.
__attribute__((noinline)) uint64_t BusyWork(uint64_t x) {
  for (int i = 0; i < 1000000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  return x;
}

size_t SamplesOfCurrentThread() {
  const strata::ThreadId self = strata::CurrentThreadId();
  size_t samples = 0;
  strata::base_internal::SessionBuffer().ReadEach([&](strata::EntryReader& reader) {
    if (reader.ReadObject<strata::EntryKind>() != strata::EntryKind::kSample) return;
    if (reader.ReadObject<strata::ThreadId>() == self) ++samples;
  });
  return samples;
}

void BM_BusyWorkUnsampled(benchmark::State& state) {
  EnsureStopped();
  uint64_t x = 1;
  for (auto _ : state) benchmark::DoNotOptimize(x = BusyWork(x));
}
BENCHMARK(BM_BusyWorkUnsampled)->MinTime(2.0);

void BM_BusyWorkSampled(benchmark::State& state) {
  EnsureStopped();
  EnsureStarted();
  uint64_t x = 1;
  for (auto _ : state) benchmark::DoNotOptimize(x = BusyWork(x));
  state.counters["samples_per_s"] = benchmark::Counter(
      static_cast<double>(SamplesOfCurrentThread()), benchmark::Counter::kIsRate);
  EnsureStopped();
}
BENCHMARK(BM_BusyWorkSampled)->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
