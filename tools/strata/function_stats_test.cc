// Wall, CPU and sample weights (function_stats.h) and the summary's wall and CPU columns, on
// a hand-made profile with a blocked and a busy thread (test_profiles.h, WaitingProfileJson).
#include "tools/strata/function_stats.h"

#include <string>

#include "catch2/catch.hpp"
#include "tools/strata/profile_summary.h"
#include "tools/strata/test_profiles.h"

namespace strata {
namespace cli {
namespace {

Profile Load(const std::string& json) {
  rapidjson::Document document;
  document.Parse(json.c_str());
  REQUIRE_FALSE(document.HasParseError());
  Profile profile;
  std::string error;
  REQUIRE(LoadProfileModel(document, &profile, &error));
  return profile;
}

const Thread& Named(const Profile& profile, const std::string& name) {
  for (const Thread& t : profile.threads) {
    if (t.name == name) return t;
  }
  FAIL("no thread " << name);
  return profile.threads[0];
}

const FunctionTime& Of(const Profile& profile, const FunctionTimes& times, const std::string& name) {
  for (size_t i = 0; i < profile.functions.size(); ++i) {
    if (profile.functions[i].name == name) return times.functions[i];
  }
  FAIL("no function " << name);
  return times.functions[0];
}

TEST_CASE("An inlined leaf's self time goes to the function it is inlined into") {
  // main > malloc > tcache_get, tcache_get inlined into malloc (DWARF, inlineDepth 1): as
  // `strata symbolicate` writes it. Two samples stop in tcache_get's code, one in malloc's own.
  testing::TestProcess p;
  testing::TestThread t = testing::InlinedLeafThread();
  t.samples = {{2, 1.0, -1}, {2, 2.0, 1000000}, {1, 3.0, 1000000}};
  p.threads = {t};
  rapidjson::Document document;
  document.Parse(testing::MakeProfileJson(p).c_str());
  REQUIRE_FALSE(document.HasParseError());
  Profile profile;
  std::string error;
  REQUIRE(LoadProfileModel(document, &profile, &error));
  const FunctionTimes times = ComputeFunctionTimes(profile);
  // Self: malloc, as perf --no-inline and a profile named at capture (no inline frames) say.
  CHECK(Of(profile, times, "malloc").self_samples == 3);
  CHECK(Of(profile, times, "tcache_get").self_samples == 0);
  // Total: the inlined function is still on the stacks.
  CHECK(Of(profile, times, "tcache_get").total_samples == 2);
  CHECK(Of(profile, times, "malloc").total_samples == 3);
  const Thread& thread = profile.threads[0];
  CHECK(profile.functions[thread.SelfFunction(2)].name == "malloc");
  CHECK(profile.functions[thread.SelfFunction(1)].name == "malloc");
}

TEST_CASE("Weight names parse, and only those") {
  Weight w = Weight::kWall;
  CHECK(ParseWeight("cpu", &w));
  CHECK(w == Weight::kCpu);
  CHECK(ParseWeight("samples", &w));
  CHECK(w == Weight::kSamples);
  CHECK(ParseWeight("wall", &w));
  CHECK(w == Weight::kWall);
  CHECK_FALSE(ParseWeight("Wall", &w));
  CHECK_FALSE(ParseWeight("", &w));
  CHECK(ParseWeight("bytes", &w));
  CHECK(w == Weight::kBytes);
  CHECK(ParseWeight("retained", &w));
  CHECK(w == Weight::kRetained);
  CHECK(IsAllocationWeight(w));
  CHECK(std::string(WeightNames()) == "wall, cpu, samples, bytes, retained");
}

TEST_CASE("Wall time: to the next sample; a gap over a paused range counts one interval") {
  const Profile profile = Load(testing::WaitingProfileJson());
  REQUIRE(profile.processes[0].paused_ranges.size() == 2);
  CHECK(profile.processes[0].paused_ranges[0].first == Approx(302.5));
  const Thread& blocked = Named(profile, "blocked");
  const std::vector<double> wall = SampleWallMs(profile, blocked);
  REQUIRE(wall.size() == 58);
  CHECK(wall[0] == Approx(1));
  CHECK(wall[52 - 3 + 3] == Approx(1));  // The sample at 52 ms, before the paused 248 ms.
  CHECK(wall[55] == Approx(1));          // At 302 ms, before the paused range.
  CHECK(wall[57] == Approx(1));          // The last one: one interval.
  CHECK(ThreadWallMs(profile, blocked) == Approx(58));
  CHECK(ThreadWallMs(profile, Named(profile, "busy")) == Approx(10));

  // Without a paused range a long gap is wall time (the sampler or the thread waited for a
  // CPU), as in the front-end; the last sample stands for one interval.
  testing::TestProcess p;
  testing::TestThread t;
  t.strings = {"main (in prog)"};
  t.frames = {{0, 0}};
  t.stacks = {{-1, 0}};
  t.samples = {{0, 0.0, 1e6}, {0, 1.0, 1e6}, {0, 431.0, 1e6}, {0, 430.0, 0}};  // The last one goes back.
  p.threads = {t};
  const Profile gap = Load(testing::MakeProfileJson(p));
  CHECK(SampleWallMs(gap, gap.threads[0]) == std::vector<double>{1, 430, 0, 1});
}

TEST_CASE("A blocked thread's wait is wall time, not CPU time; a busy thread's is both") {
  const Profile profile = Load(testing::WaitingProfileJson());
  const FunctionTimes times = ComputeFunctionTimes(profile);
  CHECK(times.cpu);
  CHECK(times.wall == Approx(68));
  CHECK(times.cpu_ms == Approx(15.5));
  CHECK(times.samples == 68);
  const FunctionTime& poll = Of(profile, times, "poll");
  CHECK(poll.self_wall == Approx(50));
  CHECK(poll.self_cpu == Approx(0).margin(1e-12));
  CHECK(poll.self_samples == 50);
  const FunctionTime& wait_here = Of(profile, times, "wait_here");
  CHECK(wait_here.self_wall == Approx(0).margin(1e-12));
  CHECK(wait_here.total_wall == Approx(50));
  CHECK(wait_here.total_cpu == Approx(0).margin(1e-12));
  const FunctionTime& busy = Of(profile, times, "busy_loop");
  CHECK(busy.self_wall == Approx(10));
  CHECK(busy.self_cpu == Approx(9));
  const FunctionTime& after = Of(profile, times, "after");
  CHECK(after.self_wall == Approx(5));
  CHECK(after.self_cpu == Approx(4.5));
  CHECK(Of(profile, times, "prepare").self_cpu == Approx(2));
  const FunctionTime& main = Of(profile, times, "main");
  CHECK(main.total_wall == Approx(68));
  CHECK(main.total_cpu == Approx(15.5));
  CHECK(main.total_samples == 68);
  CHECK(main.Total(Weight::kSamples) == Approx(68));
  CHECK(times.Total(Weight::kCpu) == Approx(15.5));
}

TEST_CASE("Summary: wall and CPU columns per thread and function, sorted by the weight asked") {
  const Profile profile = Load(testing::WaitingProfileJson());
  const std::string by_wall = SummarizeProfile(profile, 10);
  INFO(by_wall);
  // Threads: samples, wall ms, CPU ms.
  CHECK(by_wall.find("blocked        58        58.0         6.5") != std::string::npos);
  CHECK(by_wall.find("busy           10        10.0         9.0") != std::string::npos);
  CHECK(by_wall.find("wall ms      CPU ms") != std::string::npos);
  // poll: self wall 50, self CPU 0, 73.5 % of 68 ms of wall time.
  CHECK(by_wall.find("      50.0        0.0    73.5%        50.0        0.0    73.5%        50  poll  [libc.so.6]") !=
        std::string::npos);
  CHECK(by_wall.find("sorted by wall time") != std::string::npos);
  CHECK(by_wall.find("poll  [libc.so.6]") < by_wall.find("busy_loop  [prog]"));

  const std::string by_cpu = SummarizeProfile(profile, 10, Weight::kCpu);
  INFO(by_cpu);
  CHECK(by_cpu.find("sorted by CPU time") != std::string::npos);
  // busy_loop first: 9 of 15.5 ms of CPU = 58.1 %; poll, with no CPU, not listed by self.
  CHECK(by_cpu.find("      10.0        9.0    58.1%        10.0        9.0    58.1%        10  busy_loop  [prog]") !=
        std::string::npos);
  const size_t self_table = by_cpu.find("Top functions by self");
  const size_t total_table = by_cpu.find("Top functions by total");
  CHECK(by_cpu.find("poll  [libc.so.6]", self_table) > total_table);

  const std::string by_samples = SummarizeProfile(profile, 10, Weight::kSamples);
  CHECK(by_samples.find("sorted by samples") != std::string::npos);
  CHECK(by_samples.find("73.5%        50  poll") != std::string::npos);  // 50 of 68 samples.
}

TEST_CASE("Without CPU deltas the CPU weight is one interval per sample, and the summary says so") {
  const Profile profile = Load(testing::WaitingProfileJson(false));
  const FunctionTimes times = ComputeFunctionTimes(profile);
  CHECK_FALSE(times.cpu);
  CHECK(times.wall == Approx(68));
  CHECK(times.cpu_ms == Approx(68));
  const std::string summary = SummarizeProfile(profile, 5, Weight::kCpu);
  INFO(summary);
  CHECK(summary.find("CPU ms: samples x interval; the profile has no CPU deltas") != std::string::npos);
}

}  // namespace
}  // namespace cli
}  // namespace strata
