// Cost of the performance monitor's hot path (docs/benchmarks.md, "Performance monitor").
//   bazel run -c opt //full/perfmon:perfmon_benchmark
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

// Enter + exit, one active group.
void BM_StopwatchOneGroup(benchmark::State& state) {
  for (auto _ : state) {
    pm::AutoStopwatch watch{&g_a};
    benchmark::ClobberMemory();
  }
  pm::IterationDone();
}
BENCHMARK(BM_StopwatchOneGroup);

// Enter + exit, three active groups.
void BM_StopwatchThreeGroups(benchmark::State& state) {
  for (auto _ : state) {
    pm::AutoStopwatch watch{&g_a, &g_b, &g_c};
    benchmark::ClobberMemory();
  }
  pm::IterationDone();
}
BENCHMARK(BM_StopwatchThreeGroups);

// Pre-resolved GroupList (what a provider's cached answer looks like), three groups.
void BM_StopwatchGroupListThree(benchmark::State& state) {
  const pm::GroupList groups{&g_a, &g_b, &g_c};
  for (auto _ : state) {
    pm::AutoStopwatch watch(groups);
    benchmark::ClobberMemory();
  }
  pm::IterationDone();
}
BENCHMARK(BM_StopwatchGroupListThree);

// kPerEvent renormalisation: the outermost stopwatch also reads the thread CPU clock twice.
void BM_StopwatchPerEventOneGroup(benchmark::State& state) {
  pm::SetRenormalisation(pm::Renormalisation::kPerEvent);
  for (auto _ : state) {
    pm::AutoStopwatch watch{&g_a};
    benchmark::ClobberMemory();
  }
  pm::SetRenormalisation(pm::Renormalisation::kPerIteration);
  pm::IterationDone();
}
BENCHMARK(BM_StopwatchPerEventOneGroup);

// Only an inactive (per-item) group: nothing acquired, no rdtsc.
void BM_StopwatchInactiveGroup(benchmark::State& state) {
  for (auto _ : state) {
    pm::AutoStopwatch watch{&g_item};
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_StopwatchInactiveGroup);

// Monitoring disabled.
void BM_StopwatchDisabled(benchmark::State& state) {
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
  for (auto _ : state) {
    { pm::AutoStopwatch watch{&g_a, &g_b, &g_c}; }
    pm::IterationDone();
  }
}
BENCHMARK(BM_IterationThreeGroups);

}  // namespace
