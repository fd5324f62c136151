// The performance monitor with a synthetic event loop: accuracy against the thread CPU
// clock, jank histogram buckets, nested loops, alerts with a jank marker in a captured
// profile, inactive groups. Links the base tier statically (in-process session).
#include "full/perfmon/perfmon.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/profiler.h"
#include "catch2/catch.hpp"
#include "platform/cpu_time.h"
#include "rapidjson/document.h"

namespace pm = strata::perfmon;
using strata::CurrentThreadCpuTime;
using strata::TimeDuration;
using strata::TimeStamp;

namespace {

struct Burn {
  TimeDuration cpu;   // Thread CPU time actually used (the truth).
  TimeDuration wall;  // Wall time it took.
  double Stretch() const { return static_cast<double>(wall.ToNanoseconds()) / cpu.ToNanoseconds(); }
};

volatile uint64_t g_sink;

// Spins until the thread has used `target` of CPU time.
Burn BurnCpu(TimeDuration target) {
  const TimeStamp wall0 = TimeStamp::Now();
  const TimeDuration cpu0 = CurrentThreadCpuTime();
  TimeDuration cpu = cpu0;
  uint64_t x = 1;
  while (cpu - cpu0 < target) {
    for (int i = 0; i < 2000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
    cpu = CurrentThreadCpuTime();
  }
  g_sink = x;
  return Burn{cpu - cpu0, TimeStamp::Now() - wall0};
}

double RelativeError(TimeDuration measured, TimeDuration truth) {
  return std::fabs(measured.ToMilliseconds() - truth.ToMilliseconds()) / truth.ToMilliseconds();
}

struct Monitoring {
  Monitoring() {
    pm::EnableMonitoring();
    pm::SetRenormalisation(pm::Renormalisation::kAdaptive);
  }
  ~Monitoring() {
    pm::IterationDone();
    pm::SetRenormalisation(pm::Renormalisation::kAdaptive);
  }
};

// The synthetic event loop: three groups doing 0.5, 3 and 20 ms of CPU work per
// iteration (busy loops on the thread CPU clock), an inactive per-item group riding along
// with the 3 ms one. The truth is the thread CPU time measured around each busy loop, inside
// the stopwatch. None of the three costs is near a power of two (the jank thresholds): the
// nearest is 3 ms vs 2 and 4 ms, 25 % away, so the buckets only move with a gross error.
struct Loop {
  static constexpr int kGroups = 3;
  static constexpr double kWorkMs[kGroups] = {0.5, 3, 20};
  pm::PerformanceGroup a{"loop-0.5ms"};
  pm::PerformanceGroup b{"loop-3ms"};
  pm::PerformanceGroup c{"loop-20ms"};
  pm::PerformanceGroup item{"loop-item", pm::PerformanceGroup::Kind::kPerItem};
  pm::PerformanceGroup* groups[kGroups] = {&a, &b, &c};
  TimeDuration truth[kGroups];
  std::vector<std::array<TimeDuration, kGroups>> truth_per_iteration;
  // The thread CPU time from just before the stopwatch starts to just after it ends: the
  // truth plus the stopwatch's own work and whatever else ran on the thread meanwhile (a
  // sampling signal's handler between the stopwatch's clock reading and the busy loop's, on a
  // loaded machine more often). A group's cost is right anywhere between the two.
  std::vector<std::array<TimeDuration, kGroups>> outer_per_iteration;
  TimeDuration wall, cpu;

  void Iteration() {
    std::array<TimeDuration, kGroups> this_iteration;
    std::array<TimeDuration, kGroups> this_outer;
    for (int k = 0; k < kGroups; ++k) {
      Burn burn;
      const TimeDuration outer_start = CurrentThreadCpuTime();
      {
        pm::AutoStopwatch watch{groups[k], &item};  // `item` is inactive: never acquired.
        burn = BurnCpu(TimeDuration::FromMicroseconds(static_cast<int64_t>(kWorkMs[k] * 1000)));
      }
      this_outer[k] = CurrentThreadCpuTime() - outer_start;
      this_iteration[k] = burn.cpu;
      truth[k] = truth[k] + burn.cpu;
      wall = wall + burn.wall;
      cpu = cpu + burn.cpu;
    }
    pm::IterationDone();
    truth_per_iteration.push_back(this_iteration);
    outer_per_iteration.push_back(this_outer);
  }
  double Stretch() const { return static_cast<double>(wall.ToNanoseconds()) / cpu.ToNanoseconds(); }
  int Index(const std::string& group_name) const {
    for (int k = 0; k < kGroups; ++k) {
      if (groups[k]->name() == group_name) return k;
    }
    return -1;
  }
};

const rapidjson::Value* ThreadNamed(const rapidjson::Document& profile, const char* name) {
  for (const auto& t : profile["threads"].GetArray()) {
    if (std::string(t["name"].GetString()) == name) return &t;
  }
  return nullptr;
}

// Records every group's cost in every iteration (an alert with a zero threshold) and the
// alerts of a 10 ms threshold.
struct LoopRecorder {
  struct Cost {
    std::string group;
    TimeDuration cost;
    uint64_t iteration;
  };
  std::vector<Cost> costs;
  std::vector<pm::AlertInfo> alerts;
  pm::AlertId all, janky;
  LoopRecorder() {
    all = pm::AddAlert(nullptr, TimeDuration(), [this](const pm::AlertInfo& info) {
      costs.push_back(Cost{info.group_name, info.cost, info.iteration});
    });
    janky = pm::AddAlert(nullptr, TimeDuration::FromMilliseconds(10),
                         [this](const pm::AlertInfo& info) { alerts.push_back(info); });
  }
  ~LoopRecorder() {
    pm::RemoveAlert(all);
    pm::RemoveAlert(janky);
  }
};

// Alerts of `threshold` against the costs the monitor reported for the same iterations
// (an alert of threshold 0 sees every group's cost): one alert per (group, iteration) whose
// cost is at or over the threshold, none for the others, and the 20 ms group in each of the
// `iterations` iterations from `first_iteration` on. Which other group crosses the threshold
// is up to the thread CPU clock (a preempted clock can charge a 3 ms group 10 ms), so it is
// not fixed here: such alerts are printed.
template <typename Cost>
void CheckAlertsMatchCosts(const std::vector<pm::AlertInfo>& alerts,
                           const std::vector<Cost>& costs, TimeDuration threshold,
                           uint64_t first_iteration, int iterations) {
  std::vector<std::pair<std::string, uint64_t>> expected, got;
  for (const Cost& c : costs) {
    if (c.iteration < first_iteration || c.iteration >= first_iteration + iterations) continue;
    if (c.cost >= threshold) expected.emplace_back(c.group, c.iteration);
  }
  int loop20 = 0;
  for (const pm::AlertInfo& a : alerts) {
    got.emplace_back(a.group_name, a.iteration);
    CHECK(a.cost >= threshold);
    CHECK(a.threshold == threshold);
    if (a.group_name == "loop-20ms") {
      ++loop20;
    } else {
      std::printf("  (alert for %s in iteration %llu: %.2f ms, charged by the CPU clock)\n",
                  a.group_name.c_str(), (unsigned long long)(a.iteration - first_iteration),
                  a.cost.ToMilliseconds());
    }
  }
  std::sort(expected.begin(), expected.end());
  std::sort(got.begin(), got.end());
  INFO(alerts.size() << " alerts, " << expected.size() << " costs at or over "
                     << threshold.ToMilliseconds() << " ms");
  CHECK(got == expected);  // Once per offending (group, iteration), nothing else.
  CHECK(std::adjacent_find(got.begin(), got.end()) == got.end());
  CHECK(loop20 == iterations);  // 20 ms of CPU is always over the threshold.
}

// The acceptance of issue 8, strictly, in one renormalisation mode: totals within 10 % of
// the thread CPU time actually spent, every iteration's cost within 10 % too (+25 µs in
// adaptive mode), buckets
// exact, the 10 ms alert for the 20 ms group only and once per iteration, the inactive
// group untouched.
void CheckSyntheticLoop(pm::Renormalisation mode, const char* mode_name) {
  const bool adaptive = mode == pm::Renormalisation::kAdaptive;
  Monitoring monitoring;
  pm::SetRenormalisation(mode);
  constexpr int kIterations = 30;
  pm::IterationDone();  // A fresh window.
  Loop loop;
  const pm::Snapshot before = pm::TakeSnapshot();
  const pm::ThreadRecordingStats reads_before = pm::CurrentThreadRecordingStats();
  uint64_t first_iteration;
  {
    LoopRecorder recorder;
    first_iteration = reads_before.iterations + 1;
    for (int i = 0; i < kIterations; ++i) loop.Iteration();
    const pm::ThreadRecordingStats reads = pm::CurrentThreadRecordingStats();
    const pm::Snapshot diff = pm::Subtract(pm::TakeSnapshot(), before);

    double worst_iteration_error[Loop::kGroups] = {0, 0, 0};
    for (const LoopRecorder::Cost& cost : recorder.costs) {
      const int k = loop.Index(cost.group);
      REQUIRE(k >= 0);  // Only the loop's groups ran.
      const uint64_t i = cost.iteration - first_iteration;
      REQUIRE(i < loop.truth_per_iteration.size());
      const TimeDuration truth = loop.truth_per_iteration[i][k];
      const TimeDuration outer = loop.outer_per_iteration[i][k];
      // How far the cost lies outside [truth, outer] (0 inside).
      const double miss_ms = std::max({0.0, truth.ToMilliseconds() - cost.cost.ToMilliseconds(),
                                       cost.cost.ToMilliseconds() - outer.ToMilliseconds()});
      const double error = miss_ms / truth.ToMilliseconds();
      worst_iteration_error[k] = std::max(worst_iteration_error[k], error);
      // Each iteration within 10 %, plus, in adaptive mode, the documented bound of the
      // unmonitored gap before an event (25 µs, descheduling there is charged to the event).
      const double allowance_ms = 0.10 * truth.ToMilliseconds() + (adaptive ? 0.025 : 0.0);
      INFO(cost.group << " iteration " << i << ": " << cost.cost.ToMilliseconds() << " ms vs "
                      << truth.ToMilliseconds() << " ms (" << outer.ToMilliseconds()
                      << " ms around the stopwatch)");
      CHECK(miss_ms < allowance_ms);
    }
    std::printf("perfmon %s (wall/CPU %.2f, %llu CPU clock reads for %d iterations):\n", mode_name,
                loop.Stretch(),
                (unsigned long long)(reads.cpu_clock_reads - reads_before.cpu_clock_reads),
                kIterations);
    for (int k = 0; k < Loop::kGroups; ++k) {
      const pm::GroupStats* s = diff.Find(loop.groups[k]->id());
      REQUIRE(s);
      const double error = RelativeError(s->cpu_time, loop.truth[k]);
      std::printf("  %-10s total %8.2f ms vs %8.2f ms CPU (%.2f %%), worst iteration %.2f %%, "
                  "jank >1..>32: %llu %llu %llu %llu %llu %llu\n",
                  s->name.c_str(), s->cpu_time.ToMilliseconds(), loop.truth[k].ToMilliseconds(),
                  100 * error, 100 * worst_iteration_error[k], (unsigned long long)s->jank[0],
                  (unsigned long long)s->jank[1], (unsigned long long)s->jank[2],
                  (unsigned long long)s->jank[3], (unsigned long long)s->jank[4],
                  (unsigned long long)s->jank[5]);
      INFO(mode_name << ", group " << s->name);
      CHECK(error < 0.10);
      CHECK(s->iterations == kIterations);
      CHECK(s->cycles > 0);
    }
    CHECK(recorder.costs.size() == static_cast<size_t>(Loop::kGroups * kIterations));

    // Buckets, exactly: 0.5 ms in none; 3 ms in >1, >2; 20 ms in >1, >2, >4, >8, >16 —
    // per iteration, from the thread CPU time actually spent (the CPU clock may charge the
    // thread for more than its busy loop asked for, e.g. interrupt work on a VM: then the
    // iteration belongs in the buckets of what it really cost). An iteration whose truth is
    // within 3 % of a threshold could go either way and is reported (none seen).
    const pm::GroupStats* a = diff.Find(loop.a.id());
    const pm::GroupStats* b = diff.Find(loop.b.id());
    const pm::GroupStats* c = diff.Find(loop.c.id());
    std::array<uint64_t, pm::kJankBuckets> nominal[Loop::kGroups]{};
    for (size_t k = 0; k < pm::kJankBuckets; ++k) {
      nominal[0][k] = 0;
      nominal[1][k] = k < 2 ? kIterations : 0;
      nominal[2][k] = k < 5 ? kIterations : 0;
    }
    std::array<uint64_t, pm::kJankBuckets> expected[Loop::kGroups]{};
    int ambiguous = 0;
    for (const auto& iteration : loop.truth_per_iteration) {
      for (int g = 0; g < Loop::kGroups; ++g) {
        const double ms = iteration[g].ToMilliseconds();
        for (size_t k = 0; k < pm::kJankBuckets; ++k) {
          const double threshold = static_cast<double>(pm::JankThresholdMs(k));
          if (ms > threshold) ++expected[g][k];
          if (std::fabs(ms - threshold) < 0.03 * threshold) ++ambiguous;
        }
      }
    }
    for (int g = 0; g < Loop::kGroups; ++g) {
      if (expected[g] != nominal[g]) {
        std::printf("  (%s: the CPU clock charged some iterations past a threshold)\n",
                    loop.groups[g]->name().c_str());
      }
    }
    INFO("iterations within 3 % of a threshold: " << ambiguous);
    if (ambiguous == 0) {
      CHECK(a->jank == expected[0]);
      CHECK(b->jank == expected[1]);
      CHECK(c->jank == expected[2]);
    }
    // And the 20 ms group's buckets are the nominal ones whatever happened (a 20 ms busy
    // loop is not charged 32 ms).
    CHECK(c->jank == nominal[2]);

    // The 10 ms alert: once for every group cost of an iteration at or over 10 ms, as the
    // monitor itself measured it (the zero-threshold alert's costs), and for nothing else;
    // so the 20 ms group in every iteration. Another group alerts only where the thread CPU
    // clock charged it that much (its cost is checked against that clock above): a CPU
    // clock that jumped while the thread was preempted (a VM's stolen time) made a 3 ms
    // group cost 10 ms once beside load (issue 35), a true alert.
    CheckAlertsMatchCosts(recorder.alerts, recorder.costs, TimeDuration::FromMilliseconds(10),
                          first_iteration, kIterations);
    for (const pm::AlertInfo& alert : recorder.alerts) {
      CHECK_FALSE(alert.jank_marker_recorded);  // No session.
    }

    // The inactive per-item group was named by every stopwatch and never measured.
    const pm::GroupStats* item = diff.Find(loop.item.id());
    REQUIRE(item);
    CHECK_FALSE(item->active);
    CHECK(item->cycles == 0);
    CHECK(item->iterations == 0);
    CHECK(item->cpu_time == TimeDuration());
  }
}

}  // namespace

TEST_CASE("Synthetic event loop 0.5/3/20 ms, adaptive renormalisation (default)") {
  CheckSyntheticLoop(pm::Renormalisation::kAdaptive, "adaptive");
  // Every event here is >= 250 µs: one CPU clock read at each stopwatch exit and one per
  // IterationDone, none at entries (the gaps are a few µs).
}

TEST_CASE("Synthetic event loop 0.5/3/20 ms, per-event renormalisation") {
  CheckSyntheticLoop(pm::Renormalisation::kPerEvent, "per-event");
}

TEST_CASE("Adaptive mode reads the CPU clock only at window boundaries") {
  Monitoring monitoring;
  pm::IterationDone();
  pm::PerformanceGroup g("reads");
  // Short events (no busy work) inside one 250 µs window: cycle counter only.
  pm::ThreadRecordingStats before = pm::CurrentThreadRecordingStats();
  for (int i = 0; i < 10; ++i) {
    pm::AutoStopwatch watch{&g};
  }
  pm::ThreadRecordingStats after = pm::CurrentThreadRecordingStats();
  // The first entry after IterationDone() restarts the (stale) window: one read (two if the
  // thread was descheduled for 250 µs among these few µs of work, never one per stopwatch).
  CHECK(after.cpu_clock_reads - before.cpu_clock_reads >= 1);
  CHECK(after.cpu_clock_reads - before.cpu_clock_reads <= 2);
  CHECK(after.cycle_counter_reads - before.cycle_counter_reads ==
        2 * 10 + (after.cpu_clock_reads - before.cpu_clock_reads));
  // A long event closes its window at its exit: exactly one read there (its entry may have
  // closed one too, if the thread was descheduled just before).
  pm::ThreadRecordingStats inside;
  {
    pm::AutoStopwatch watch{&g};
    BurnCpu(TimeDuration::FromMilliseconds(1));
    inside = pm::CurrentThreadRecordingStats();
  }
  after = pm::CurrentThreadRecordingStats();
  CHECK(after.cpu_clock_reads - inside.cpu_clock_reads == 1);
  pm::IterationDone();
  CHECK(pm::CurrentThreadRecordingStats().cpu_clock_reads - after.cpu_clock_reads == 1);
  CHECK(g.Stats().iterations == 1);
}

TEST_CASE("Per-iteration renormalisation: the iteration's total is bounded by the CPU clock") {
  Monitoring monitoring;
  pm::SetRenormalisation(pm::Renormalisation::kPerIteration);
  pm::IterationDone();
  Loop loop;
  constexpr int kIterations = 10;
  loop.Iteration();  // Its first entry restarts the window left stale by IterationDone().
  const pm::ThreadRecordingStats reads_before = pm::CurrentThreadRecordingStats();
  for (int i = 1; i < kIterations; ++i) loop.Iteration();
  // One CPU clock read per iteration, none in the stopwatches.
  CHECK(pm::CurrentThreadRecordingStats().cpu_clock_reads - reads_before.cpu_clock_reads ==
        kIterations - 1);
  // The split between groups of one iteration follows the ticks (noisy under load); the sum
  // is the iteration's CPU time.
  TimeDuration measured, truth;
  for (int k = 0; k < Loop::kGroups; ++k) {
    measured = measured + loop.groups[k]->Stats().cpu_time;
    truth = truth + loop.truth[k];
  }
  INFO("sum " << measured.ToMilliseconds() << " ms, truth " << truth.ToMilliseconds());
  CHECK(RelativeError(measured, truth) < 0.10);
}

TEST_CASE("Nested event loop cancels the outer measure; nested stopwatches do not double count") {
  Monitoring monitoring;
  pm::IterationDone();
  pm::PerformanceGroup g("nested-g");
  pm::PerformanceGroup inner_only("nested-inner");
  TimeDuration nested_truth;
  {
    pm::AutoStopwatch outer{&g};
    BurnCpu(TimeDuration::FromMilliseconds(2));  // Cancelled with the outer measure.
    pm::NestedLoopEntered();
    for (int i = 0; i < 3; ++i) {
      {
        pm::AutoStopwatch inner{&g};  // Can acquire g again: the outer released it.
        nested_truth = nested_truth + BurnCpu(TimeDuration::FromMilliseconds(3)).cpu;
      }
      pm::IterationDone();
    }
    BurnCpu(TimeDuration::FromMilliseconds(2));  // Still cancelled.
  }
  pm::IterationDone();
  pm::GroupStats s = g.Stats();
  INFO("g " << s.cpu_time.ToMilliseconds() << " ms, nested truth "
            << nested_truth.ToMilliseconds() << " ms");
  CHECK(s.iterations == 3);
  CHECK(RelativeError(s.cpu_time, nested_truth) < 0.10);

  // Inner stopwatch naming an already-acquired group: only the new group is acquired.
  pm::PerformanceGroup outer_group("nested-outer");
  TimeDuration outer_truth, inner_truth;
  for (int i = 0; i < 10; ++i) {
    {
      pm::AutoStopwatch outer{&outer_group};
      outer_truth = outer_truth + BurnCpu(TimeDuration::FromMilliseconds(2)).cpu;
      {
        pm::AutoStopwatch inner{&outer_group, &inner_only};
        const TimeDuration t = BurnCpu(TimeDuration::FromMilliseconds(3)).cpu;
        inner_truth = inner_truth + t;
        outer_truth = outer_truth + t;
      }
    }
    pm::IterationDone();
  }
  CHECK(outer_group.Stats().iterations == 10);
  INFO("outer " << outer_group.Stats().cpu_time.ToMilliseconds() << " ms, inner "
                << inner_only.Stats().cpu_time.ToMilliseconds() << " ms");
  CHECK(RelativeError(outer_group.Stats().cpu_time, outer_truth) < 0.10);
  CHECK(RelativeError(inner_only.Stats().cpu_time, inner_truth) < 0.10);
}

TEST_CASE("Blocked time inside a stopwatch is not charged (renormalised to CPU time)") {
  Monitoring monitoring;
  pm::IterationDone();
  pm::PerformanceGroup g("sleeper");
  {
    pm::AutoStopwatch watch{&g};
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pm::IterationDone();
  const pm::GroupStats s = g.Stats();
  CHECK(s.iterations == 1);
  CHECK(s.cycles > 0);
  CHECK(s.cpu_time < TimeDuration::FromMilliseconds(2));
  CHECK(s.jank[0] == 0);
}

TEST_CASE("Inactive groups and disabled monitoring cost nothing measurable") {
  Monitoring monitoring;
  pm::IterationDone();
  pm::PerformanceGroup item("inactive-item", pm::PerformanceGroup::Kind::kPerItem);
  pm::PerformanceGroup other_item("inactive-item-2", pm::PerformanceGroup::Kind::kPerItem);
  REQUIRE_FALSE(item.IsActive());
  // Count-based: a stopwatch over inactive groups reads no clock, changes no statistics and
  // puts nothing on the thread's recent list (IterationDone has nothing to commit).
  const pm::Snapshot before = pm::TakeSnapshot();
  const pm::ThreadRecordingStats reads_before = pm::CurrentThreadRecordingStats();
  for (int i = 0; i < 1000; ++i) {
    pm::AutoStopwatch watch{&item, &other_item};
    g_sink = i;
  }
  pm::IterationDone();
  const pm::ThreadRecordingStats reads_after = pm::CurrentThreadRecordingStats();
  CHECK(reads_after.cycle_counter_reads == reads_before.cycle_counter_reads);
  CHECK(reads_after.cpu_clock_reads == reads_before.cpu_clock_reads);
  CHECK(reads_after.windows == reads_before.windows);
  const pm::Snapshot diff = pm::Subtract(pm::TakeSnapshot(), before);
  for (const pm::PerformanceGroup* g : {&item, &other_item}) {
    const pm::GroupStats* s = diff.Find(g->id());
    REQUIRE(s);
    CHECK(s->cycles == 0);
    CHECK(s->iterations == 0);
    CHECK(s->cpu_time == TimeDuration());
  }

  // Activated, it is measured; disabled monitoring measures nothing and reads nothing.
  item.SetActive(true);
  { pm::AutoStopwatch watch{&item}; BurnCpu(TimeDuration::FromMicroseconds(300)); }
  pm::IterationDone();
  CHECK(item.Stats().iterations == 1);
  pm::DisableMonitoring();
  const pm::ThreadRecordingStats reads_disabled = pm::CurrentThreadRecordingStats();
  { pm::AutoStopwatch watch{&item}; BurnCpu(TimeDuration::FromMicroseconds(300)); }
  CHECK(pm::CurrentThreadRecordingStats().cycle_counter_reads ==
        reads_disabled.cycle_counter_reads);
  pm::IterationDone();
  CHECK(item.Stats().iterations == 1);
  pm::EnableMonitoring();
}

TEST_CASE("Group provider decides the groups of a context") {
  Monitoring monitoring;
  pm::IterationDone();
  pm::PerformanceGroup thread_group("provider-thread");
  pm::PerformanceGroup module_group("provider-module");
  pm::PerformanceGroup script_group("provider-script", pm::PerformanceGroup::Kind::kPerItem);
  static int module_context, other_context;
  pm::SetGroupProvider([&](const void* context, pm::GroupList& groups) {
    groups.Add(&thread_group);  // The "top group": everything on this thread.
    if (context == &module_context) {
      groups.Add(&module_group);
      groups.Add(&script_group);
    }
  });
  { pm::AutoStopwatch watch(&module_context); BurnCpu(TimeDuration::FromMilliseconds(1)); }
  { pm::AutoStopwatch watch(&other_context); BurnCpu(TimeDuration::FromMilliseconds(1)); }
  pm::IterationDone();
  pm::SetGroupProvider(nullptr);
  CHECK(thread_group.Stats().iterations == 1);
  CHECK(module_group.Stats().iterations == 1);
  CHECK(script_group.Stats().iterations == 0);  // Per-item: inactive by default.
  CHECK(thread_group.Stats().cpu_time > module_group.Stats().cpu_time);
  CHECK(pm::ResolveGroups(&module_context).empty());
}

TEST_CASE("Snapshot JSON and subtraction") {
  Monitoring monitoring;
  pm::IterationDone();
  pm::PerformanceGroup g("json-group");
  const pm::Snapshot s0 = pm::TakeSnapshot();
  { pm::AutoStopwatch watch{&g}; BurnCpu(TimeDuration::FromMilliseconds(3)); }
  pm::IterationDone();
  const pm::Snapshot s1 = pm::TakeSnapshot();
  { pm::AutoStopwatch watch{&g}; BurnCpu(TimeDuration::FromMilliseconds(1)); }
  pm::IterationDone();
  const pm::Snapshot s2 = pm::TakeSnapshot();
  const pm::Snapshot d = pm::Subtract(s2, s1);
  REQUIRE(d.Find(g.id()));
  CHECK(d.Find(g.id())->iterations == 1);
  CHECK(s2.Find(g.id())->iterations == 2);
  CHECK(d.Find(g.id())->jank[1] == 0);
  CHECK(pm::Subtract(s1, s0).Find(g.id())->jank[1] == 1);

  const std::string json = s2.ToJson();
  rapidjson::Document doc;
  doc.Parse(json.c_str(), json.size());
  REQUIRE_FALSE(doc.HasParseError());
  REQUIRE(doc["jankThresholdsMs"].Size() == pm::kJankBuckets);
  CHECK(doc["jankThresholdsMs"][9].GetInt() == 512);
  bool found = false;
  for (const auto& group : doc["groups"].GetArray()) {
    if (std::string(group["name"].GetString()) != "json-group") continue;
    found = true;
    CHECK(group["iterations"].GetUint64() == 2);
    CHECK(group["active"].GetBool());
    CHECK(group["cpuTimeMs"].GetDouble() > 3.0);
    CHECK(group["jank"].Size() == pm::kJankBuckets);
    CHECK(group["jank"][1].GetUint64() == 1);
  }
  CHECK(found);
}

TEST_CASE("Alerts: once per offending iteration; jank marker and saved profile in a session") {
  Monitoring monitoring;
  char dir_template[] = "/tmp/strata-perfmon-XXXXXX";
  REQUIRE(mkdtemp(dir_template) != nullptr);
  const std::string dir = dir_template;

  strata::ProfilerSettings settings;
  settings.interval_ms = 1;
  strata::ProfilerStart(settings);
  REQUIRE(strata::ProfilerIsActive());

  pm::IterationDone();
  Loop loop;
  loop.c.EnableProfileCounters();
  // Warm up: the sampler's first samples on this thread load libunwind and its tables, CPU
  // time charged to this thread, that could push one iteration's group over the threshold.
  for (int i = 0; i < 3; ++i) loop.Iteration();
  std::vector<pm::AlertInfo> alerts;
  pm::AlertOptions options;
  options.save_profile_path = dir + "/jank-{n}.json";
  // Every group's cost, as the monitor measured it (no marker, no save): what the 8 ms alert
  // is checked against.
  std::vector<LoopRecorder::Cost> costs;
  pm::AlertOptions quiet;
  quiet.jank_marker = false;
  const pm::AlertId all = pm::AddAlert(
      nullptr, TimeDuration(),
      [&](const pm::AlertInfo& info) {
        costs.push_back(LoopRecorder::Cost{info.group_name, info.cost, info.iteration});
      },
      quiet);
  const uint64_t first_iteration = pm::CurrentThreadRecordingStats().iterations + 1;
  const pm::AlertId id = pm::AddAlert(
      nullptr, TimeDuration::FromMilliseconds(8),
      [&](const pm::AlertInfo& info) { alerts.push_back(info); }, options);
  constexpr int kIterations = 10;
  for (int i = 0; i < kIterations; ++i) loop.Iteration();
  pm::RemoveAlert(id);
  pm::RemoveAlert(all);
  loop.Iteration();  // No alert any more.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // A counter sample or two.
  const std::string json = strata::ProfilerGetProfile();
  strata::ProfilerStop();

  // Once per (group, iteration) the monitor measured at 8 ms or more: the 20 ms group in
  // every iteration, another group only where the CPU clock charged it that much (the
  // warm-up above keeps libunwind's first load out; a preempted CPU clock can still do it).
  CheckAlertsMatchCosts(alerts, costs, TimeDuration::FromMilliseconds(8), first_iteration,
                        kIterations);
  size_t saved = 0;
  for (const pm::AlertInfo& a : alerts) {
    CHECK(a.jank_marker_recorded);
    CHECK(a.iteration_end > a.iteration_start);
    if (!a.saved_profile_path.empty()) ++saved;
  }
  REQUIRE(!alerts.empty());
  CHECK(saved == 1);  // min_save_interval: 10 s.
  CHECK(alerts[0].saved_profile_path == dir + "/jank-0.json");

  // The live profile: one Jank marker per alert, the counters.
  rapidjson::Document profile;
  profile.Parse(json.c_str(), json.size());
  REQUIRE_FALSE(profile.HasParseError());
  const rapidjson::Value* main_thread = ThreadNamed(profile, "GeckoMain");
  REQUIRE(main_thread);
  {
    const rapidjson::Value& markers = (*main_thread)["markers"];
    const rapidjson::Value& strings = (*main_thread)["stringTable"];
    const int name_col = markers["schema"]["name"].GetInt();
    size_t janks = 0;
    for (const auto& m : markers["data"].GetArray()) {
      if (std::string(strings[m[name_col].GetInt()].GetString()) == "Jank") ++janks;
    }
    CHECK(janks == alerts.size());
  }
  CHECK(json.find("\"loop-20ms >8ms\"") != std::string::npos);
  CHECK(json.find("\"loop-20ms CPU") != std::string::npos);
  CHECK(json.find("\"name\":\"Jank\"") != std::string::npos);  // meta.markerSchema

  // The saved capture: its last Jank marker is the first alert's, and samples of the main
  // thread fall inside that janky iteration.
  std::ifstream file(alerts[0].saved_profile_path);
  REQUIRE(file.good());
  std::stringstream text;
  text << file.rdbuf();
  const std::string saved_json = text.str();
  rapidjson::Document capture;
  capture.Parse(saved_json.c_str(), saved_json.size());
  REQUIRE_FALSE(capture.HasParseError());
  const rapidjson::Value* thread = ThreadNamed(capture, "GeckoMain");
  REQUIRE(thread);
  const rapidjson::Value& markers = (*thread)["markers"];
  const rapidjson::Value& strings = (*thread)["stringTable"];
  const int name_col = markers["schema"]["name"].GetInt();
  const int start_col = markers["schema"]["startTime"].GetInt();
  const int end_col = markers["schema"]["endTime"].GetInt();
  const int data_col = markers["schema"]["data"].GetInt();
  const rapidjson::Value* last_jank = nullptr;
  for (const auto& m : markers["data"].GetArray()) {
    if (std::string(strings[m[name_col].GetInt()].GetString()) == "Jank") last_jank = &m;
  }
  REQUIRE(last_jank);
  const rapidjson::Value& data = (*last_jank)[data_col];
  CHECK(std::string(data["type"].GetString()) == "Jank");
  CHECK(std::string(data["group"].GetString()) == alerts[0].group_name);  // The first alert saved.
  CHECK(data["cost"].GetDouble() >= 8.0);
  const double start = (*last_jank)[start_col].GetDouble();
  const double end = (*last_jank)[end_col].GetDouble();
  CHECK(end - start >= 12.0);
  const rapidjson::Value& samples = (*thread)["samples"];
  const int time_col = samples["schema"]["time"].GetInt();
  int inside = 0;
  for (const auto& s : samples["data"].GetArray()) {
    const double t = s[time_col].GetDouble();
    if (t >= start && t <= end) ++inside;
  }
  INFO("janky iteration " << start << ".." << end << " ms, samples inside: " << inside);
  // ~15 ms of CPU at a 1 ms CPU-clock interval (effective ~4 ms, the kernel tick): 3-4
  // samples on a quiet machine; under heavy load as few as one was seen.
  std::printf("perfmon: main-thread samples inside the janky iteration (%.1f ms): %d\n",
              end - start, inside);
  CHECK(inside >= 1);

  for (size_t n = 0; n < 3; ++n) std::remove((dir + "/jank-" + std::to_string(n) + ".json").c_str());
  rmdir(dir.c_str());
}
