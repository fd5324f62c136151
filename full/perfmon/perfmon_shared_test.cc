// The monitor as the full tier links it: over libstrata_base.so (//base:strata_base), which
// also provides the TSC and CPU clocks. A smoke test: no session.
#include "catch2/catch.hpp"
#include "full/perfmon/perfmon.h"
#include "platform/cpu_time.h"

namespace pm = strata::perfmon;

TEST_CASE("perfmon over libstrata_base.so: measure, commit, snapshot") {
  pm::EnableMonitoring();
  pm::IterationDone();
  pm::PerformanceGroup g("shared-lib-group");
  {
    pm::AutoStopwatch watch{&g};
    const strata::TimeDuration start = strata::CurrentThreadCpuTime();
    while (strata::CurrentThreadCpuTime() - start < strata::TimeDuration::FromMilliseconds(3)) {
    }
  }
  pm::IterationDone();
  const pm::GroupStats s = g.Stats();
  CHECK(s.iterations == 1);
  CHECK(s.cpu_time > strata::TimeDuration::FromMilliseconds(2));
  CHECK(s.jank[1] == 1);
  CHECK(pm::TakeSnapshot().ToJson().find("shared-lib-group") != std::string::npos);
}
