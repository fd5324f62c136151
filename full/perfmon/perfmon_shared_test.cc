// The monitor as programs get it: linked from libstrata_full.so (//full:strata_full), over
// libstrata_base.so. The C++ API and the C entry points (perfmon_c.h) measure, commit and
// snapshot; the symbols come from the shared library, not from this binary.
#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "catch2/catch.hpp"
#include "full/perfmon/perfmon.h"
#include "full/perfmon/perfmon_c.h"
#include "platform/cpu_time.h"
#include "rapidjson/document.h"

namespace pm = strata::perfmon;
using strata::TimeDuration;

namespace {
// Spins until the thread has used `target` of CPU time; returns what it used (the truth).
TimeDuration BurnCpu(TimeDuration target) {
  const TimeDuration start = strata::CurrentThreadCpuTime();
  TimeDuration now = start;
  while (now - start < target) now = strata::CurrentThreadCpuTime();
  return now - start;
}

bool Within10Percent(TimeDuration measured, TimeDuration truth) {
  const double ratio = measured.ToMilliseconds() / truth.ToMilliseconds();
  return ratio > 0.9 && ratio < 1.1;
}

// The shared object that defines `symbol` in this process.
std::string DefiningObject(void* symbol) {
  Dl_info info{};
  if (dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}
}  // namespace

TEST_CASE("The monitor comes from libstrata_full.so") {
  CHECK(DefiningObject(reinterpret_cast<void*>(&pm::IterationDone)).find("libstrata_full.so") !=
        std::string::npos);
  CHECK(DefiningObject(reinterpret_cast<void*>(&strata_perfmon_iteration_done))
            .find("libstrata_full.so") != std::string::npos);
  // dlopen users find the C entry points by name.
  void* full = dlopen("libstrata_full.so", RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(full != nullptr);
  CHECK(dlsym(full, "strata_perfmon_stopwatch_begin") ==
        reinterpret_cast<void*>(&strata_perfmon_stopwatch_begin));
  dlclose(full);
}

TEST_CASE("C++ API over libstrata_full.so: measure, commit, snapshot") {
  pm::EnableMonitoring();
  pm::IterationDone();
  pm::PerformanceGroup g("shared-lib-group");
  TimeDuration truth;
  {
    pm::AutoStopwatch watch{&g};
    truth = BurnCpu(TimeDuration::FromMilliseconds(3));
  }
  pm::IterationDone();
  const pm::GroupStats s = g.Stats();
  INFO("measured " << s.cpu_time.ToMilliseconds() << " ms, truth " << truth.ToMilliseconds());
  CHECK(s.iterations == 1);
  CHECK(Within10Percent(s.cpu_time, truth));
  CHECK(s.jank[1] == 1);
  CHECK(pm::TakeSnapshot().ToJson().find("shared-lib-group") != std::string::npos);
}

TEST_CASE("C entry points: nested stopwatches, per-item group, snapshot JSON") {
  strata_perfmon_enable();
  strata_perfmon_iteration_done();
  strata_perfmon_group* module = strata_perfmon_group_create("c-module", 0);
  strata_perfmon_group* item = strata_perfmon_group_create("c-item", 1);
  strata_perfmon_group* both[] = {module, item};
  TimeDuration truth;
  for (int i = 0; i < 3; ++i) {
    strata_perfmon_stopwatch outer;
    strata_perfmon_stopwatch_begin(&outer, &module, 1);
    truth = truth + BurnCpu(TimeDuration::FromMilliseconds(1));
    {
      strata_perfmon_stopwatch inner;  // module already held: not counted twice.
      strata_perfmon_stopwatch_begin(&inner, both, 2);
      truth = truth + BurnCpu(TimeDuration::FromMilliseconds(2));
      strata_perfmon_stopwatch_end(&inner);
    }
    strata_perfmon_stopwatch_end(&outer);
    strata_perfmon_iteration_done();
  }
  const TimeDuration module_cpu =
      TimeDuration::FromNanoseconds(strata_perfmon_group_cpu_time_ns(module));
  INFO("module " << module_cpu.ToMilliseconds() << " ms, truth " << truth.ToMilliseconds());
  CHECK(Within10Percent(module_cpu, truth));               // Once, not 1 + 2 + 2.
  CHECK(strata_perfmon_group_jank_count(module, 1) == 3);  // ~3 ms each: > 2 ms.
  CHECK(strata_perfmon_group_cpu_time_ns(item) == 0);      // Per-item: inactive.

  char* json = strata_perfmon_snapshot_json();
  REQUIRE(json != nullptr);
  rapidjson::Document doc;
  doc.Parse(json);
  std::free(json);
  REQUIRE_FALSE(doc.HasParseError());
  bool found = false;
  for (const auto& group : doc["groups"].GetArray()) {
    if (std::string(group["name"].GetString()) != "c-module") continue;
    found = true;
    CHECK(group["iterations"].GetUint64() == 3);
    CHECK(group["jank"][1].GetUint64() == 3);
  }
  CHECK(found);
  strata_perfmon_group_destroy(item);
  strata_perfmon_group_destroy(module);
}
