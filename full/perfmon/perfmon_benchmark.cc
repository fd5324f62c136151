// Cost of the performance monitor's hot path (docs/benchmarks.md, "Performance monitor").
//   bazel run -c opt //full/perfmon:perfmon_benchmark          (static base)
//   bazel run -c opt //full/perfmon:perfmon_benchmark_shared   (through libstrata_full.so)
// Each benchmark reports `cpu_reads_per_op`: thread-CPU clock reads (syscalls) per
// iteration, from the monitor's own per-thread counters.
#include <benchmark/benchmark.h>

#include "full/perfmon/perfmon.h"

namespace pm = strata::perfmon;

namespace {

struct Setup {
  Setup() { pm::EnableMonitoring(); }
};
const Setup g_setup;

pm::PerformanceGroup g_a("bench-a");
pm::PerformanceGroup g_b("bench-b");
pm::PerformanceGroup g_c("bench-c");
pm::PerformanceGroup g_item("bench-item", pm::PerformanceGroup::Kind::kPerItem);

// Sets the mode for one benchmark, reports clock reads per op, restores the default.
class Mode {
 public:
  Mode(benchmark::State& state, pm::Renormalisation mode) : state_(state) {
    pm::SetRenormalisation(mode);
    pm::IterationDone();
    reads_ = pm::CurrentThreadRecordingStats().cpu_clock_reads;
  }
  ~Mode() {
    const uint64_t reads = pm::CurrentThreadRecordingStats().cpu_clock_reads - reads_;
    state_.counters["cpu_reads_per_op"] = benchmark::Counter(
        static_cast<double>(reads) / static_cast<double>(state_.iterations()));
    pm::IterationDone();
    pm::SetRenormalisation(pm::Renormalisation::kAdaptive);
  }

 private:
  benchmark::State& state_;
  uint64_t reads_;
};

// Enter + exit, one active group, back to back (default adaptive mode: a window closes, one
// CPU clock read, once per 250 µs of this loop).
void BM_StopwatchOneGroup(benchmark::State& state) {
  Mode mode(state, pm::Renormalisation::kAdaptive);
  for (auto _ : state) {
    pm::AutoStopwatch watch{&g_a};
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_StopwatchOneGroup);

// Enter + exit, three active groups (initializer list).
void BM_StopwatchThreeGroups(benchmark::State& state) {
  Mode mode(state, pm::Renormalisation::kAdaptive);
  for (auto _ : state) {
    pm::AutoStopwatch watch{&g_a, &g_b, &g_c};
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_StopwatchThreeGroups);

// Pre-resolved GroupList (what a provider's cached answer looks like), three groups.
void BM_StopwatchGroupListThree(benchmark::State& state) {
  Mode mode(state, pm::Renormalisation::kAdaptive);
  const pm::GroupList groups{&g_a, &g_b, &g_c};
  for (auto _ : state) {
    pm::AutoStopwatch watch(groups);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_StopwatchGroupListThree);

// A nested stopwatch (one new group) inside an outer one that stays open.
void BM_StopwatchNestedOneGroup(benchmark::State& state) {
  Mode mode(state, pm::Renormalisation::kAdaptive);
  pm::AutoStopwatch outer{&g_a};
  for (auto _ : state) {
    pm::AutoStopwatch watch{&g_b};
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_StopwatchNestedOneGroup);

// kPerIteration: never a clock read in a stopwatch.
void BM_StopwatchOneGroupPerIteration(benchmark::State& state) {
  Mode mode(state, pm::Renormalisation::kPerIteration);
  for (auto _ : state) {
    pm::AutoStopwatch watch{&g_a};
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_StopwatchOneGroupPerIteration);

// kPerEvent: two thread-CPU clock reads per outermost stopwatch.
void BM_StopwatchOneGroupPerEvent(benchmark::State& state) {
  Mode mode(state, pm::Renormalisation::kPerEvent);
  for (auto _ : state) {
    pm::AutoStopwatch watch{&g_a};
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_StopwatchOneGroupPerEvent);

// Only an inactive (per-item) group: nothing acquired, no clock read.
void BM_StopwatchInactiveGroup(benchmark::State& state) {
  Mode mode(state, pm::Renormalisation::kAdaptive);
  for (auto _ : state) {
    pm::AutoStopwatch watch{&g_item};
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_StopwatchInactiveGroup);

// Monitoring disabled.
void BM_StopwatchDisabled(benchmark::State& state) {
  Mode mode(state, pm::Renormalisation::kAdaptive);
  pm::DisableMonitoring();
  for (auto _ : state) {
    pm::AutoStopwatch watch{&g_a, &g_b, &g_c};
    benchmark::ClobberMemory();
  }
  pm::EnableMonitoring();
}
BENCHMARK(BM_StopwatchDisabled);

// A whole iteration: a stopwatch over three groups, then IterationDone (one thread-CPU clock
// read, conversion and commit of three groups).
void BM_IterationThreeGroups(benchmark::State& state) {
  Mode mode(state, pm::Renormalisation::kAdaptive);
  for (auto _ : state) {
    { pm::AutoStopwatch watch{&g_a, &g_b, &g_c}; }
    pm::IterationDone();
  }
}
BENCHMARK(BM_IterationThreeGroups);

}  // namespace
