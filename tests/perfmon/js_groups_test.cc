// "Which script makes us janky": a real SpiderMonkey 102 context runs two script files, calm.js
// (0.5 ms per tick) and janky.js (20 ms per tick), from a synthetic event loop that calls
// each file's tick function inside a stopwatch over the groups ScriptGroups gives it (top
// group, global, file). The janky file's group gets the cost, the jank buckets and the alert;
// the calm one does not; the per-file groups are per-item (inactive until activated).
#include <cstdio>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "full/perfmon/perfmon.h"
#include "full/script/spidermonkey/embedding.h"
#include "full/script/spidermonkey/script_groups.h"
#include "platform/cpu_time.h"

namespace pm = strata::perfmon;
namespace sm = strata::full::spidermonkey;
using strata::TimeDuration;

namespace {
std::string ScriptPath(const char* name) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  REQUIRE(srcdir != nullptr);
  REQUIRE(workspace != nullptr);
  return std::string(srcdir) + "/" + workspace + "/tests/perfmon/scripts/" + name;
}
}  // namespace

TEST_CASE("JavaScript groups per file and per global: the janky script gets cost and alert") {
  std::string error;
  REQUIRE(sm::InitEngine(sm::JitMode::kDefault, &error));
  {
    auto context = sm::ScriptContext::Create(sm::JitMode::kDefault, &error);
    REQUIRE(context);
    const std::string calm_path = ScriptPath("calm.js");
    const std::string janky_path = ScriptPath("janky.js");
    REQUIRE(context->EvaluateFile(calm_path, &error));
    REQUIRE(context->EvaluateFile(janky_path, &error));

    pm::EnableMonitoring();
    pm::IterationDone();
    sm::ScriptGroupOptions options;
    options.thread_group = "js-thread";
    sm::ScriptGroups groups(context->context(), options);
    pm::PerformanceGroup* global_group = groups.RegisterGlobal(context->global(), "global:main");
    REQUIRE(global_group != nullptr);
    CHECK(groups.RegisterGlobal(context->global(), "again") == global_group);
    CHECK(groups.GlobalGroup(context->global()) == global_group);

    // The groups of each tick function: resolved once, as an event loop caches them.
    const pm::GroupList calm_groups = groups.GroupsForGlobalFunction(context->global(), "calmTick");
    const pm::GroupList janky_groups =
        groups.GroupsForGlobalFunction(context->global(), "jankyTick");
    REQUIRE(calm_groups.size() == 3);
    REQUIRE(janky_groups.size() == 3);
    pm::PerformanceGroup* calm_file = groups.FileGroup(calm_path);
    pm::PerformanceGroup* janky_file = groups.FileGroup(janky_path);
    CHECK(calm_groups[2] == calm_file);
    CHECK(janky_groups[2] == janky_file);
    CHECK(janky_file->name() == "js:" + janky_path);
    CHECK(janky_file->kind() == pm::PerformanceGroup::Kind::kPerItem);
    CHECK_FALSE(janky_file->IsActive());  // Per-item: inactive by default.

    std::vector<pm::AlertInfo> alerts;
    const pm::AlertId alert = pm::AddAlert(
        nullptr, TimeDuration::FromMilliseconds(10),
        [&](const pm::AlertInfo& info) { alerts.push_back(info); });
    TimeDuration calm_truth, janky_truth;
    auto tick = [&](const pm::GroupList& tick_groups, const char* function, TimeDuration* truth) {
      pm::AutoStopwatch watch(tick_groups);
      const TimeDuration start = strata::CurrentThreadCpuTime();
      REQUIRE(context->CallFunction(function, &error));
      *truth = *truth + (strata::CurrentThreadCpuTime() - start);
    };

    // Inactive file groups: the top and global groups are measured, the files are not.
    for (int i = 0; i < 2; ++i) {
      tick(calm_groups, "calmTick", &calm_truth);
      tick(janky_groups, "jankyTick", &janky_truth);
      pm::IterationDone();
    }
    CHECK(calm_file->Stats().iterations == 0);
    CHECK(janky_file->Stats().iterations == 0);
    CHECK(global_group->Stats().iterations == 2);
    // The global's group is charged both scripts: every iteration costs > 20 ms, so the alert
    // names it (and the top group) twice; no file group yet.
    CHECK(alerts.size() == 4);
    for (const pm::AlertInfo& a : alerts) {
      CHECK((a.group_name == "global:main" || a.group_name == "js-thread"));
    }

    // Activated: "which script makes us janky" has an answer.
    groups.SetFileGroupsActive(true);
    alerts.clear();
    calm_truth = janky_truth = TimeDuration();
    const pm::Snapshot before = pm::TakeSnapshot();
    constexpr int kIterations = 8;
    for (int i = 0; i < kIterations; ++i) {
      tick(calm_groups, "calmTick", &calm_truth);
      tick(janky_groups, "jankyTick", &janky_truth);
      pm::IterationDone();
    }
    pm::RemoveAlert(alert);
    const pm::Snapshot diff = pm::Subtract(pm::TakeSnapshot(), before);
    const pm::GroupStats* calm = diff.Find(calm_file->id());
    const pm::GroupStats* janky = diff.Find(janky_file->id());
    const pm::GroupStats* global = diff.Find(global_group->id());
    REQUIRE(calm);
    REQUIRE(janky);
    REQUIRE(global);
    std::printf("js groups: %s %.2f ms (truth %.2f), %s %.2f ms (truth %.2f), global %.2f ms\n",
                calm->name.c_str(), calm->cpu_time.ToMilliseconds(),
                calm_truth.ToMilliseconds(), janky->name.c_str(),
                janky->cpu_time.ToMilliseconds(), janky_truth.ToMilliseconds(),
                global->cpu_time.ToMilliseconds());
    const auto within_10_percent = [](TimeDuration measured, TimeDuration truth) {
      const double ratio = measured.ToMilliseconds() / truth.ToMilliseconds();
      return ratio > 0.9 && ratio < 1.1;
    };
    CHECK(within_10_percent(janky->cpu_time, janky_truth));
    CHECK(within_10_percent(calm->cpu_time, calm_truth));
    CHECK(within_10_percent(global->cpu_time, calm_truth + janky_truth));
    CHECK(janky->iterations == kIterations);
    CHECK(calm->iterations == kIterations);
    CHECK(janky->jank[4] == kIterations);  // > 16 ms every iteration,
    CHECK(janky->jank[5] == 0);            // not > 32 ms.
    CHECK(calm->jank[0] == 0);             // Never > 1 ms.
    // The 10 ms alert: per iteration, the janky file, the global and the top group; never
    // the calm file.
    size_t janky_alerts = 0;
    for (const pm::AlertInfo& a : alerts) {
      CHECK(a.group_name != calm->name);
      if (a.group_name == janky->name) ++janky_alerts;
    }
    CHECK(janky_alerts == kIterations);
    CHECK(alerts.size() == 3 * kIterations);
    pm::IterationDone();
  }
  sm::ShutdownEngine();
}
