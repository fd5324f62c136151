// The performance monitor with a synthetic event loop: accuracy against the thread CPU
// clock, jank histogram buckets, nested loops, alerts with a jank marker in a captured
// profile, inactive groups. Links the base tier statically (in-process session).
#include "full/perfmon/perfmon.h"

#include <unistd.h>

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
  Monitoring() { pm::EnableMonitoring(); }
  ~Monitoring() { pm::IterationDone(); }
};

// One synthetic event loop: three groups with 0.5, 3 and 12 ms of work per iteration.
struct Loop {
  pm::PerformanceGroup a{"loop-0.5ms"};
  pm::PerformanceGroup b{"loop-3ms"};
  pm::PerformanceGroup c{"loop-12ms"};
  pm::PerformanceGroup item{"loop-item", pm::PerformanceGroup::Kind::kPerItem};
  TimeDuration truth_a, truth_b, truth_c;
  int disturbed_iterations = 0;

  // Descheduling (or VM steal) that hits one group's work much more than the others moves
  // the per-iteration scale away from that group's own wall/CPU ratio; such an iteration may
  // land one jank bucket off. Counted here so the bucket checks can be exact otherwise.
  void Iteration() {
    Burn burns[3];
    {
      pm::AutoStopwatch watch{&a};
      burns[0] = BurnCpu(TimeDuration::FromMicroseconds(500));
      truth_a = truth_a + burns[0].cpu;
    }
    {
      pm::AutoStopwatch watch{&b, &item};  // The inactive per-item group rides along.
      burns[1] = BurnCpu(TimeDuration::FromMilliseconds(3));
      truth_b = truth_b + burns[1].cpu;
    }
    {
      pm::AutoStopwatch watch{&c};
      burns[2] = BurnCpu(TimeDuration::FromMilliseconds(12));
      truth_c = truth_c + burns[2].cpu;
    }
    pm::IterationDone();
    TimeDuration wall, cpu;
    for (const Burn& burn : burns) {
      wall = wall + burn.wall;
      cpu = cpu + burn.cpu;
    }
    const double stretch = static_cast<double>(wall.ToNanoseconds()) / cpu.ToNanoseconds();
    stretch_sum += stretch;
    bool disturbed = false;
    for (const Burn& burn : burns) disturbed |= std::fabs(burn.Stretch() / stretch - 1) > 0.25;
    disturbed_iterations += disturbed ? 1 : 0;
    ++iterations;
  }
  double MeanStretch() const { return stretch_sum / iterations; }
  double stretch_sum = 0;
  int iterations = 0;
};

const rapidjson::Value* ThreadNamed(const rapidjson::Document& profile, const char* name) {
  for (const auto& t : profile["threads"].GetArray()) {
    if (std::string(t["name"].GetString()) == name) return &t;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("Synthetic event loop: per-group CPU within 15 % of the thread CPU clock, buckets") {
  Monitoring monitoring;
  constexpr int kIterations = 50;
  // The estimate's error is noise from descheduling (a few preemptions of several ms hitting
  // the 0.5 ms group dominate it on a loaded 2-core VM); up to 3 attempts, all printed.
  for (int attempt = 1; attempt <= 3; ++attempt) {
    pm::IterationDone();  // Start a fresh window.
    Loop loop;
    const pm::Snapshot before = pm::TakeSnapshot();
    for (int i = 0; i < kIterations; ++i) loop.Iteration();
    const pm::Snapshot diff = pm::Subtract(pm::TakeSnapshot(), before);

    const pm::GroupStats* a = diff.Find(loop.a.id());
    const pm::GroupStats* b = diff.Find(loop.b.id());
    const pm::GroupStats* c = diff.Find(loop.c.id());
    const pm::GroupStats* item = diff.Find(loop.item.id());
    REQUIRE(a);
    REQUIRE(b);
    REQUIRE(c);
    REQUIRE(item);
    const double error_a = RelativeError(a->cpu_time, loop.truth_a);
    const double error_b = RelativeError(b->cpu_time, loop.truth_b);
    const double error_c = RelativeError(c->cpu_time, loop.truth_c);
    std::printf(
        "perfmon accuracy, attempt %d (%d iterations, wall/CPU %.2f, %d disturbed): "
        "0.5 ms group %.2f ms vs %.2f ms (%.1f %%), 3 ms group %.2f vs %.2f (%.1f %%), "
        "12 ms group %.2f vs %.2f (%.1f %%)\n",
        attempt, kIterations, loop.MeanStretch(), loop.disturbed_iterations,
        a->cpu_time.ToMilliseconds(), loop.truth_a.ToMilliseconds(), 100 * error_a,
        b->cpu_time.ToMilliseconds(), loop.truth_b.ToMilliseconds(), 100 * error_b,
        c->cpu_time.ToMilliseconds(), loop.truth_c.ToMilliseconds(), 100 * error_c);
    const bool accurate = error_a < 0.15 && error_b < 0.15 && error_c < 0.15;
    if (!accurate && attempt < 3) continue;
    CHECK(error_a < 0.15);
    CHECK(error_b < 0.15);
    CHECK(error_c < 0.15);
    CHECK(a->iterations == kIterations);
    CHECK(b->iterations == kIterations);
    CHECK(c->iterations == kIterations);
    CHECK(a->cycles > 0);

    // Buckets: cumulative ">2^k ms" counts. Exact in undisturbed iterations; an iteration
    // where the VM descheduled one group's work much more than the others' may move one
    // bucket (the scale is per iteration).
    const int slack = loop.disturbed_iterations;
    INFO("disturbed iterations: " << slack);
    CHECK(static_cast<int>(a->jank[0]) <= slack);                // 0.5 ms: never > 1 ms.
    CHECK(static_cast<int>(b->jank[0]) >= kIterations - slack);  // 3 ms: > 1 ms,
    CHECK(static_cast<int>(b->jank[1]) >= kIterations - slack);  // > 2 ms,
    CHECK(static_cast<int>(b->jank[2]) <= slack);                // not > 4 ms.
    CHECK(static_cast<int>(c->jank[3]) >= kIterations - slack);  // 12 ms: > 8 ms,
    CHECK(static_cast<int>(c->jank[4]) <= slack);                // not > 16 ms.
    for (size_t k = 5; k < pm::kJankBuckets; ++k) CHECK(c->jank[k] == 0);
    std::printf("perfmon buckets: 0.5 ms group >1ms %llu; 3 ms group >1ms %llu >2ms %llu "
                ">4ms %llu; 12 ms group >4ms %llu >8ms %llu >16ms %llu\n",
                (unsigned long long)a->jank[0], (unsigned long long)b->jank[0],
                (unsigned long long)b->jank[1], (unsigned long long)b->jank[2],
                (unsigned long long)c->jank[2], (unsigned long long)c->jank[3],
                (unsigned long long)c->jank[4]);

    // The inactive per-item group: nothing at all.
    CHECK_FALSE(item->active);
    CHECK(item->per_item);
    CHECK(item->cycles == 0);
    CHECK(item->cpu_time == TimeDuration());
    CHECK(item->iterations == 0);
    break;
  }
}

TEST_CASE("Per-event renormalisation: exact attribution and buckets under descheduling") {
  Monitoring monitoring;
  pm::SetRenormalisation(pm::Renormalisation::kPerEvent);
  pm::IterationDone();
  Loop loop;
  constexpr int kIterations = 50;
  const pm::Snapshot before = pm::TakeSnapshot();
  for (int i = 0; i < kIterations; ++i) loop.Iteration();
  const pm::Snapshot diff = pm::Subtract(pm::TakeSnapshot(), before);
  pm::SetRenormalisation(pm::Renormalisation::kPerIteration);
  const pm::GroupStats* a = diff.Find(loop.a.id());
  const pm::GroupStats* b = diff.Find(loop.b.id());
  const pm::GroupStats* c = diff.Find(loop.c.id());
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(c);
  const double error_a = RelativeError(a->cpu_time, loop.truth_a);
  const double error_b = RelativeError(b->cpu_time, loop.truth_b);
  const double error_c = RelativeError(c->cpu_time, loop.truth_c);
  std::printf(
      "perfmon accuracy, per-event (wall/CPU %.2f): 0.5 ms group %.2f ms vs %.2f ms (%.1f %%), "
      "3 ms group %.2f vs %.2f (%.1f %%), 12 ms group %.2f vs %.2f (%.1f %%)\n",
      loop.MeanStretch(), a->cpu_time.ToMilliseconds(), loop.truth_a.ToMilliseconds(),
      100 * error_a, b->cpu_time.ToMilliseconds(), loop.truth_b.ToMilliseconds(), 100 * error_b,
      c->cpu_time.ToMilliseconds(), loop.truth_c.ToMilliseconds(), 100 * error_c);
  CHECK(error_a < 0.15);
  CHECK(error_b < 0.15);
  CHECK(error_c < 0.15);
  // Each event is scaled by its own CPU time: buckets exact whatever the load.
  CHECK(a->jank[0] == 0);
  CHECK(b->jank[1] == kIterations);
  CHECK(b->jank[2] == 0);
  CHECK(c->jank[3] == kIterations);
  CHECK(c->jank[4] == 0);
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
  CHECK(RelativeError(s.cpu_time, nested_truth) < 0.15);

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
  CHECK(RelativeError(outer_group.Stats().cpu_time, outer_truth) < 0.15);
  CHECK(RelativeError(inner_only.Stats().cpu_time, inner_truth) < 0.15);
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
  pm::PerformanceGroup item("inactive-item", pm::PerformanceGroup::Kind::kPerItem);
  REQUIRE_FALSE(item.IsActive());
  constexpr int kRounds = 200000;
  auto per_op_ns = [&] {
    double best = 1e9;
    for (int attempt = 0; attempt < 5; ++attempt) {
      // Thread CPU time, not wall: descheduling on a loaded VM is not our cost.
      const TimeDuration t0 = CurrentThreadCpuTime();
      for (int i = 0; i < kRounds; ++i) {
        pm::AutoStopwatch watch{&item};
        g_sink = i;
      }
      best = std::min(best,
                      static_cast<double>((CurrentThreadCpuTime() - t0).ToNanoseconds()) / kRounds);
    }
    return best;
  };
  const double inactive_ns = per_op_ns();
  pm::IterationDone();
  std::printf("perfmon: stopwatch over an inactive group: %.1f ns (unoptimised build)\n",
              inactive_ns);
  CHECK(inactive_ns < 150);  // Unoptimised build; -c opt: ~4 ns (docs/benchmarks.md).
  const pm::GroupStats s = item.Stats();
  CHECK(s.cycles == 0);
  CHECK(s.iterations == 0);

  // Activated, it is measured; disabled monitoring measures nothing.
  item.SetActive(true);
  { pm::AutoStopwatch watch{&item}; BurnCpu(TimeDuration::FromMicroseconds(300)); }
  pm::IterationDone();
  CHECK(item.Stats().iterations == 1);
  pm::DisableMonitoring();
  { pm::AutoStopwatch watch{&item}; BurnCpu(TimeDuration::FromMicroseconds(300)); }
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
  std::vector<pm::AlertInfo> alerts;
  pm::AlertOptions options;
  options.save_profile_path = dir + "/jank-{n}.json";
  const pm::AlertId id = pm::AddAlert(
      nullptr, TimeDuration::FromMilliseconds(8),
      [&](const pm::AlertInfo& info) { alerts.push_back(info); }, options);
  constexpr int kIterations = 10;
  for (int i = 0; i < kIterations; ++i) loop.Iteration();
  pm::RemoveAlert(id);
  loop.Iteration();  // No alert any more.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // A counter sample or two.
  const std::string json = strata::ProfilerGetProfile();
  strata::ProfilerStop();

  INFO("disturbed iterations: " << loop.disturbed_iterations);
  CHECK(static_cast<int>(alerts.size()) >= kIterations - loop.disturbed_iterations);
  CHECK(alerts.size() <= static_cast<size_t>(kIterations));
  size_t saved = 0;
  for (const pm::AlertInfo& a : alerts) {
    CHECK(a.group_name == "loop-12ms");
    CHECK(a.jank_marker_recorded);
    CHECK(a.cost >= TimeDuration::FromMilliseconds(8));
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
  CHECK(json.find("\"loop-12ms >8ms\"") != std::string::npos);
  CHECK(json.find("\"loop-12ms CPU") != std::string::npos);
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
  CHECK(std::string(data["group"].GetString()) == "loop-12ms");
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
